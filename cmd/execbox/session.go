package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/errmap"
	"github.com/execbox/execbox/sandbox"
)

// sessionFlags are what every session subcommand shares.
type sessionFlags struct {
	g      *globals
	remote string
	asJSON bool
}

func (f *sessionFlags) client() (*client.Client, error) {
	url := f.remote
	if url == "" {
		var err error
		if url, err = f.g.server(); err != nil {
			return nil, err
		}
	}
	return remoteClient(url)
}

// serverFlagHelp is the help of the --server flag of the commands that
// talk to a server.
const serverFlagHelp = "the execbox server's URL (default: $EXECBOX_URL, else the configuration's server.listen)"

// server is the URL of the server the client commands talk to without
// --server: $EXECBOX_URL, else the server this configuration describes
// (server.listen; a wildcard host is dialed on loopback).
func (g *globals) server() (string, error) {
	if u := os.Getenv("EXECBOX_URL"); u != "" {
		return u, nil
	}
	cfg, _, err := g.loadConfig()
	if err != nil {
		return "", err
	}
	host, port, err := net.SplitHostPort(cfg.Server.Listen)
	if err != nil {
		return "", sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "server.listen %q: %v", cfg.Server.Listen, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

func newSessionCmd(g *globals) *cobra.Command {
	f := &sessionFlags{g: g}
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Open sessions on an execbox server, run commands in them, move files in and out",
		Long: `A session is a sandbox on an execbox server (execbox serve) that lives across
commands: files written by one command are there for the next. It ends when
it is closed, when its ttl passes (30 min by default) or when it goes unused
for its idle timeout (10 min). Nothing of it survives a restart of the server.

The server is --server, or $EXECBOX_URL, or the configuration's server.listen
(by default http://127.0.0.1:8080); the token
comes from EXECBOX_TOKEN. A remote path in cp is SESSION:PATH.

  id=$(execbox session create)
  execbox session exec $id -- sh -c 'echo hi > greeting'
  execbox session cp $id:greeting -
  execbox session run-code $id 'x = 41; x + 1'     # a context that keeps x
  execbox session attach $id -- python3             # an interactive REPL
  execbox session close $id`,
	}
	cmd.PersistentFlags().StringVar(&f.remote, "server", "", serverFlagHelp)
	cmd.PersistentFlags().BoolVar(&f.asJSON, "json", false, "print the answers as JSON")
	cmd.AddCommand(newSessionCreateCmd(f), newSessionListCmd(f), newSessionExecCmd(f), newSessionCpCmd(f),
		newSessionLsCmd(f), newSessionCloseCmd(f), newSessionRunCodeCmd(f), newSessionContextCmd(f), newSessionAttachCmd(f))
	return cmd
}

func newSessionCreateCmd(f *sessionFlags) *cobra.Command {
	var req v1.SessionRequest
	var ttl, idle time.Duration
	var labels []string
	var memory string
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Open a session and print its id",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req.TTL, req.IdleTimeout = v1.Seconds(ttl), v1.Seconds(idle)
			for _, l := range labels {
				k, v, ok := strings.Cut(l, "=")
				if !ok {
					return sandbox.Errorf(sandbox.ErrInvalid, "flag_invalid", "--label %q: want key=value", l)
				}
				if req.Labels == nil {
					req.Labels = map[string]string{}
				}
				req.Labels[k] = v
			}
			if memory != "" {
				n, err := sandbox.ParseSize(memory)
				if err != nil {
					return sandbox.Errorf(sandbox.ErrInvalid, "flag_invalid", "--memory: %v", err)
				}
				req.Limits.Memory = n
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			s, err := c.CreateSession(cmd.Context(), &req)
			if err != nil {
				return err
			}
			if f.asJSON {
				return printJSON(s)
			}
			fmt.Println(s.ID)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&req.Backend, "backend", "", "where it runs: a backend name (default: the server's choice)")
	fl.StringVar(&req.Tier, "tier", "", "strict, standard or fast")
	fl.StringVar(&req.MinIsolation, "min-isolation", "", "process, kernel or vm")
	fl.StringVar(&req.Image, "image", "", "root filesystem: an image of the store (execbox image pull), as for run --image")
	durationVar(fl, &ttl, "ttl", 0, "its lifetime, e.g. 90 (seconds) or 2h (default: the server's, 30m)")
	durationVar(fl, &idle, "idle-timeout", 0, "how long it may go unused (default: the server's, 10m)")
	fl.StringArrayVar(&labels, "label", nil, "a label key=value (repeatable)")
	fl.StringVar(&memory, "memory", "", "its memory limit, e.g. 512m")
	return cmd
}

func newSessionListCmd(f *sessionFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List your open sessions (every one, with an admin token)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			list, err := c.Sessions(cmd.Context())
			if err != nil {
				return err
			}
			if f.asJSON {
				return printJSON(v1.Sessions{Sessions: list})
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tBACKEND\tOWNER\tEXECS\tIDLE\tEXPIRES IN\tLABELS")
			now := time.Now()
			for _, s := range list {
				var ls []string
				for k, v := range s.Labels {
					ls = append(ls, k+"="+v)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", s.ID, s.Backend, s.Owner, s.Execs,
					now.Sub(s.LastUsed).Round(time.Second), s.Expires.Sub(now).Round(time.Second), strings.Join(ls, ","))
			}
			return tw.Flush()
		},
	}
}

func newSessionExecCmd(f *sessionFlags) *cobra.Command {
	var req v1.SessionExec
	var timeout time.Duration
	var stdin bool
	cmd := &cobra.Command{
		Use:   "exec [flags] SESSION [flags] [-c CODE | COMMAND [ARG...]]",
		Short: "Run a command, or code, in a session; its output as it comes, its exit code as execbox's",
		Long: `Run a command, or code, in a session, as docker exec does in a container:
execbox's flags come before the command (before or after SESSION), and
everything from the command on is the command's. Piped stdin is passed to
the command, as with run; -i passes a terminal's too.

  execbox session exec $id sh -c 'exit 5'; echo $?      # 5
  echo hi | execbox session exec $id -- tr a-z A-Z       # HI
  execbox session exec $id -c 'print(6 * 7)'            # code, python by default`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, rest := args[0], args[1:]
			// Flags right after SESSION are execbox's too, up to the
			// command (or a -- there): parse them as run parses its own.
			// After a -- before SESSION, everything is the command's.
			if len(rest) > 0 && strings.HasPrefix(rest[0], "-") && cmd.ArgsLenAtDash() < 0 {
				if err := cmd.Flags().Parse(rest); err != nil {
					return sandbox.Errorf(sandbox.ErrInvalid, "flag_invalid", "%v", err)
				}
				if help, _ := cmd.Flags().GetBool("help"); help {
					return cmd.Help()
				}
				rest = cmd.Flags().Args()
			}
			req.Command = rest
			req.Timeout = v1.Seconds(timeout)
			if stdin || !isTerminal(os.Stdin) {
				b, err := io.ReadAll(io.LimitReader(os.Stdin, maxRemoteStdin+1))
				if err != nil {
					return err
				}
				if len(b) > maxRemoteStdin {
					return sandbox.Errorf(sandbox.ErrLimit, "input_too_large", "stdin is over %s", sandbox.HumanSize(maxRemoteStdin))
				}
				req.StdinBase64 = b
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var res *v1.RunResult
			if f.asJSON {
				res, err = c.Exec(ctx, id, &req)
			} else {
				res, err = c.ExecStream(ctx, id, &req, os.Stdout, os.Stderr)
			}
			if err != nil {
				return err
			}
			if f.asJSON {
				if err := printJSON(res); err != nil {
					return err
				}
			} else {
				reportTruncation(res)
			}
			return exitError{errmap.ResultExitCode(res)}
		},
	}
	fl := cmd.Flags()
	fl.SetInterspersed(false) // flags end at the command, as with docker exec
	fl.StringVarP(&req.Code, "code", "c", "", "run this code instead of a command")
	languageVar(fl, &req.Language, "", "the code's language: python (default), javascript, sh, bash")
	fl.StringVar(&req.Dir, "workdir", "", "the working directory, relative to the work dir")
	durationVar(fl, &timeout, "timeout", 0, "shorten the session's wall-clock limit for this command")
	fl.BoolVarP(&stdin, "interactive", "i", false, "pass execbox's stdin to the command even when it is a terminal (piped stdin always is)")
	return cmd
}

func newSessionCpCmd(f *sessionFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "cp SRC DST | cp LOCAL... SESSION:DIR",
		Short: "Copy a file into a session (LOCAL SESSION:PATH) or out of one (SESSION:PATH LOCAL), or several local files into a session's directory with one upload; - is stdin or stdout",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			if len(args) > 2 {
				return uploadMany(cmd.Context(), c, f.asJSON, args[:len(args)-1], args[len(args)-1])
			}
			srcID, srcPath, srcRemote := splitRemote(args[0])
			dstID, dstPath, dstRemote := splitRemote(args[1])
			ctx := cmd.Context()
			switch {
			case srcRemote == dstRemote:
				return sandbox.Errorf(sandbox.ErrInvalid, "args_invalid", "give one local path and one SESSION:PATH")
			case dstRemote:
				in := io.Reader(os.Stdin)
				if srcPath != "-" {
					file, err := os.Open(srcPath)
					if err != nil {
						return sandbox.Errorf(sandbox.ErrInvalid, "file_invalid", "%v", err)
					}
					defer file.Close()
					in = file
				}
				fi, err := c.PutFile(ctx, dstID, dstPath, in)
				if err != nil {
					return err
				}
				if f.asJSON {
					return printJSON(fi)
				}
				return nil
			default:
				if dstPath == "-" {
					_, err := c.GetFile(ctx, srcID, srcPath, os.Stdout)
					return err
				}
				// Into a temporary file first: a failed download leaves no
				// partial file under the name asked for.
				tmp, err := os.CreateTemp(filepath.Dir(dstPath), ".execbox-cp-*")
				if err != nil {
					return sandbox.Errorf(sandbox.ErrInvalid, "file_invalid", "%v", err)
				}
				defer os.Remove(tmp.Name())
				_, err = c.GetFile(ctx, srcID, srcPath, tmp)
				if cerr := tmp.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					return err
				}
				return os.Rename(tmp.Name(), dstPath)
			}
		},
	}
}

// uploadMany copies the local files srcs into the directory SESSION:DIR
// dst with one multipart upload, each under its own base name.
func uploadMany(ctx context.Context, c *client.Client, asJSON bool, srcs []string, dst string) error {
	id, dir, remote := splitRemote(dst)
	if !remote {
		return sandbox.Errorf(sandbox.ErrInvalid, "args_invalid", "copying several files: the last argument is SESSION:DIR")
	}
	var files []client.UploadFile
	for _, src := range srcs {
		if _, _, r := splitRemote(src); r || src == "-" {
			return sandbox.Errorf(sandbox.ErrInvalid, "args_invalid", "copying several files: %s is not a local file", src)
		}
		file, err := os.Open(src)
		if err != nil {
			return sandbox.Errorf(sandbox.ErrInvalid, "file_invalid", "%v", err)
		}
		defer file.Close()
		files = append(files, client.UploadFile{Path: filepath.Base(src), Content: file})
	}
	fis, err := c.Upload(ctx, id, strings.TrimSuffix(dir, "/"), files...)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(fis)
	}
	return nil
}

// splitRemote splits SESSION:PATH; a path without a colon (or starting
// with . or /) is local.
func splitRemote(arg string) (id, path string, remote bool) {
	if strings.HasPrefix(arg, "/") || strings.HasPrefix(arg, ".") {
		return "", arg, false
	}
	id, path, remote = strings.Cut(arg, ":")
	if !remote {
		return "", arg, false
	}
	return id, path, true
}

func newSessionLsCmd(f *sessionFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "ls SESSION [DIR]",
		Short: "List a directory of a session's work dir",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			dir := ""
			if len(args) == 2 {
				dir = strings.Trim(args[1], "/")
			}
			l, err := c.List(cmd.Context(), args[0], dir)
			if err != nil {
				return err
			}
			if f.asJSON {
				return printJSON(l)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			for _, e := range l.Entries {
				fmt.Fprintf(tw, "%s\t%04o\t%d\t%s\t%s\n", e.Type, e.Mode, e.Size, e.ModTime.Format(time.DateTime), e.Path)
			}
			if l.Truncated {
				fmt.Fprintln(tw, "… (more entries left out)")
			}
			return tw.Flush()
		},
	}
}

func newSessionCloseCmd(f *sessionFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "close SESSION...",
		Short: "Close sessions (closing a closed one succeeds)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
			defer cancel()
			for _, id := range args {
				if err := c.CloseSession(ctx, id); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// printJSON prints v indented.
func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
