package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/sandbox"
)

func newSessionRunCodeCmd(f *sessionFlags) *cobra.Command {
	var ctxID, language string
	var fresh bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "run-code SESSION [CODE | -]",
		Short: "Run code in an interpreter context of a session, which keeps its state across calls; the last expression's value is printed",
		Long: `Run Python (or JavaScript) code in an interpreter context of a session: its
variables, imports and definitions stay for the next call, like a notebook
kernel. Without --context the code runs in the session's first live
context of its language, as the Python client and MCP do (one is made, and
its id printed on stderr, when there is none): consecutive calls share
their state. --new makes a fresh context. The code is the argument,
or stdin when it is - or absent. What the code prints comes first, then the
value of its last expression (its repr; with --json the whole answer).
A call that raised prints the traceback and exits 1.

  id=$(execbox session create)
  execbox session run-code $id 'import math; r = 2'    # "context: ctx_…" on stderr
  execbox session run-code $id 'math.pi * r**2'       # the same context: 12.566…
  execbox session run-code $id --new 'r'              # a fresh one: NameError`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			code := "-"
			if len(args) == 2 {
				code = args[1]
			}
			if code == "-" {
				b, err := io.ReadAll(io.LimitReader(os.Stdin, sandbox.MiB+1))
				if err != nil {
					return err
				}
				if len(b) > sandbox.MiB {
					return sandbox.Errorf(sandbox.ErrLimit, "code_too_large", "the code on stdin is over 1 MiB")
				}
				code = string(b)
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if ctxID == "" && !fresh {
				if ctxID, err = defaultContext(ctx, c, id, language); err != nil {
					return err
				}
			}
			if ctxID == "" {
				cx, err := c.CreateContext(ctx, id, language)
				if err != nil {
					return err
				}
				ctxID = cx.ID
				fmt.Fprintf(os.Stderr, "context: %s\n", ctxID)
			}
			res, err := c.RunCode(ctx, id, ctxID, &v1.CodeRequest{Code: code, Timeout: v1.Seconds(timeout)})
			if err != nil {
				return err
			}
			if f.asJSON {
				if err := printJSON(res); err != nil {
					return err
				}
			} else {
				os.Stdout.WriteString(res.Stdout)
				os.Stderr.WriteString(res.Stderr)
				if res.OK && res.Repr != "" {
					fmt.Println(res.Repr)
				}
				if res.Error != nil {
					if res.Error.Traceback != "" {
						fmt.Fprint(os.Stderr, strings.TrimRight(res.Error.Traceback, "\n")+"\n")
					} else {
						fmt.Fprintf(os.Stderr, "%s: %s\n", res.Error.Type, res.Error.Message)
					}
				}
				if res.Lost {
					fmt.Fprintf(os.Stderr, "execbox: context %s was lost; reset it with execbox session context reset %s %s\n", ctxID, id, ctxID)
				}
			}
			if !res.OK {
				return exitError{1}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&ctxID, "context", "", "the context to run in (default: the session's first live one of the language)")
	fl.BoolVar(&fresh, "new", false, "run in a new context")
	cmd.MarkFlagsMutuallyExclusive("context", "new")
	languageVar(fl, &language, "python", "the context's language: python or javascript")
	durationVar(fl, &timeout, "timeout", 0, "interrupt the call after this long (default and most: the session's wall limit)")
	return cmd
}

// defaultContext is the id of session id's first live context of
// language, or "" when it has none. The CLI keeps nothing between calls,
// so the session's own list is what makes consecutive calls share state.
func defaultContext(ctx context.Context, c *client.Client, id, language string) (string, error) {
	list, err := c.Contexts(ctx, id)
	if err != nil {
		return "", err
	}
	for _, x := range list {
		if x.Language == language && x.Lost == "" {
			return x.ID, nil
		}
	}
	return "", nil
}

func newSessionContextCmd(f *sessionFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "context",
		Short: "List, reset or delete a session's interpreter contexts",
	}
	list := &cobra.Command{
		Use:   "list SESSION",
		Short: "List a session's contexts: id, language, calls, age, and why one was lost",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			list, err := c.Contexts(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if f.asJSON {
				return printJSON(v1.Contexts{Contexts: list})
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tLANGUAGE\tCALLS\tAGE\tLOST")
			for _, x := range list {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", x.ID, x.Language, x.Calls, time.Since(x.Created).Round(time.Second), x.Lost)
			}
			return tw.Flush()
		},
	}
	reset := &cobra.Command{
		Use:   "reset SESSION CONTEXT",
		Short: "Start a context afresh (its state is gone)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			_, err = c.ResetContext(cmd.Context(), args[0], args[1])
			return err
		},
	}
	del := &cobra.Command{
		Use:   "delete SESSION CONTEXT",
		Short: "End a context",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			return c.DeleteContext(cmd.Context(), args[0], args[1])
		},
	}
	cmd.AddCommand(list, reset, del)
	return cmd
}

func newSessionAttachCmd(f *sessionFlags) *cobra.Command {
	var term string
	cmd := &cobra.Command{
		Use:   "attach SESSION [--terminal ID | -- COMMAND [ARG...]]",
		Short: "Run a program on a terminal in a session (default /bin/sh) and attach to it: a REPL, top, a shell",
		Long: `Run a program on a new terminal (a PTY in the session's sandbox) and connect
this terminal to it: what you type goes to it, what it shows comes here,
and the window size follows this one. With --terminal, attach to a
terminal opened before instead. execbox exits with the program's exit code
when it ends; detach with Ctrl-] (the program keeps running).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			c, err := f.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			rows, cols := windowSize()
			if term == "" {
				t, err := c.OpenTerminal(ctx, id, &v1.TerminalRequest{Command: args[1:], Rows: rows, Cols: cols})
				if err != nil {
					return err
				}
				term = t.ID
				fmt.Fprintf(os.Stderr, "execbox: terminal %s (detach with Ctrl-])\r\n", term)
			} else if rows > 0 {
				c.ResizeTerminal(ctx, id, term, rows, cols)
			}
			restore := rawMode()
			defer restore()
			go forwardResizes(ctx, c, id, term)
			go forwardInput(ctx, cancel, c, id, term)
			exit, err := c.TerminalOutput(ctx, id, term, os.Stdout)
			restore()
			if err != nil {
				if ctx.Err() != nil && cmd.Context().Err() == nil {
					fmt.Fprintf(os.Stderr, "\nexecbox: detached from terminal %s\n", term)
					return nil
				}
				return err
			}
			if exit.Error != "" {
				return sandbox.Errorf(sandbox.ErrInvalid, "start_failed", "the program could not be started: %s", exit.Error)
			}
			if exit.Signal != "" {
				return exitError{128 + int(unix.SignalNum(exit.Signal))}
			}
			return exitError{exit.ExitCode}
		},
	}
	cmd.Flags().StringVar(&term, "terminal", "", "attach to this terminal instead of opening one")
	return cmd
}

// detachKey is Ctrl-], as telnet's.
const detachKey = 0x1d

// forwardInput types what is read from stdin into the terminal until
// stdin ends or the detach key is typed (then cancel).
func forwardInput(ctx context.Context, cancel func(), c *client.Client, id, term string) {
	buf := make([]byte, 4096)
	for ctx.Err() == nil {
		n, err := os.Stdin.Read(buf)
		if n > 0 {
			data := buf[:n]
			if i := strings.IndexByte(string(data), detachKey); i >= 0 {
				if i > 0 {
					c.TerminalInput(ctx, id, term, data[:i])
				}
				cancel()
				return
			}
			if c.TerminalInput(ctx, id, term, data) != nil {
				return
			}
		}
		if err != nil {
			if _, terr := unix.IoctlGetTermios(int(os.Stdin.Fd()), unix.TCGETS); terr != nil {
				// Piped input ended: end of file, as a terminal types it.
				c.TerminalInput(ctx, id, term, []byte{4})
			}
			return
		}
	}
}

// forwardResizes tells the terminal this one's size whenever it changes.
func forwardResizes(ctx context.Context, c *client.Client, id, term string) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGWINCH)
	defer signal.Stop(ch)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
			if rows, cols := windowSize(); rows > 0 {
				c.ResizeTerminal(ctx, id, term, rows, cols)
			}
		}
	}
}

// windowSize is stdout's terminal size, or 0, 0 when it is no terminal.
func windowSize() (rows, cols int) {
	ws, err := unix.IoctlGetWinsize(int(os.Stdout.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0, 0
	}
	return int(ws.Row), int(ws.Col)
}

// rawMode puts stdin's terminal in raw mode (keys go through as typed:
// the remote terminal echoes and edits) and returns what undoes it; when
// stdin is no terminal it does nothing.
func rawMode() (restore func()) {
	fd := int(os.Stdin.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return func() {}
	}
	raw := *old
	// As cfmakeraw(3).
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if unix.IoctlSetTermios(fd, unix.TCSETS, &raw) != nil {
		return func() {}
	}
	done := false
	return func() {
		if !done {
			done = true
			unix.IoctlSetTermios(fd, unix.TCSETS, old)
		}
	}
}
