// Command execbox runs untrusted code in isolated, resource-limited
// sandboxes: `execbox run -- CMD`, `execbox doctor`, `execbox config print`.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	_ "github.com/execbox/execbox/backend/all"
	"github.com/execbox/execbox/errmap"
	"github.com/execbox/execbox/sandbox"
)

// exitError carries a process exit code out of a command.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func main() {
	os.Exit(execute(os.Args[1:]))
}

// execute runs the CLI with args and returns the process exit code.
func execute(args []string) int {
	root := newRoot()
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	default:
		// A command given --json answers a refusal as JSON on stdout too.
		if f := cmd.Flags().Lookup("json"); f != nil && f.Value.String() == "true" {
			writeJSONError(os.Stdout, err)
		}
		fmt.Fprintf(os.Stderr, "execbox: %v\n", err)
		if code := sandbox.CodeOf(err); code != "" && errors.Is(err, sandbox.KindOf(err)) {
			fmt.Fprintf(os.Stderr, "execbox: error code %s\n", code)
		}
		return errmap.ExitCode(err)
	}
}

// globals are the flags every command has.
type globals struct {
	configPath string
	set        []string // key=value, the flags layer of the configuration
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "execbox",
		Short:         "Run untrusted code in isolated, resource-limited sandboxes",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version, // --version, as docker has it
	}
	root.SetVersionTemplate("execbox {{.Version}}\n")
	root.PersistentFlags().StringVar(&g.configPath, "config", "", "configuration file (default $EXECBOX_CONFIG)")
	root.PersistentFlags().StringArrayVar(&g.set, "set", nil, "set a configuration key, e.g. --set limits.memory=512m (repeatable)")
	root.AddCommand(newRunCmd(g), newFnCmd(g), newLintCmd(g), newDoctorCmd(g), newConfigCmd(g), newImageCmd(g), newVersionCmd(), newServeCmd(g), newAuditCmd(g), newMCPCmd(g), newSessionCmd(g), newApprovalCmd(g), newToolCmd(g), newBenchCmd(g))
	// Added here rather than by Execute, so that strict sees it too.
	root.InitDefaultCompletionCmd()
	root.SetGlobalNormalizationFunc(normalizeFlag)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if c.Name() == "run" && (strings.Contains(err.Error(), "shorthand flag: 't'") || strings.Contains(err.Error(), "flag: --tty")) {
			return sandbox.Errorf(sandbox.ErrInvalid, "flag_invalid", "%w\nexecbox run gives the program no terminal: for an interactive shell, `execbox session create`, then `execbox session attach SESSION`", err)
		}
		return sandbox.Errorf(sandbox.ErrInvalid, "flag_invalid", "%w", err)
	})
	strict(root)
	return root
}

// strict makes every command under c refuse what it cannot do, as the top
// level refuses an unknown command (cobra would print a group's help and
// exit 0, so a mistyped subcommand read as success): a group, a command
// with subcommands and no action of its own, refuses an unknown
// subcommand (command_unknown, with cobra's suggestions) and flags without
// a subcommand (command_missing), and prints its help only when named
// bare; a failed argument check of any command is args_invalid.
func strict(c *cobra.Command) {
	switch {
	case c.HasSubCommands() && !c.Runnable():
		c.Args = knownSubcommand
		c.RunE = func(c *cobra.Command, _ []string) error {
			if c.Flags().NFlag() > 0 {
				var names []string
				for _, s := range c.Commands() {
					if s.IsAvailableCommand() {
						names = append(names, s.Name())
					}
				}
				return sandbox.Errorf(sandbox.ErrInvalid, "command_missing", "%s needs a command: %s", c.CommandPath(), strings.Join(names, ", "))
			}
			return c.Help()
		}
	case c.Args != nil:
		check := c.Args
		c.Args = func(c *cobra.Command, args []string) error {
			err := check(c, args)
			var typed *sandbox.Error
			if err != nil && !errors.As(err, &typed) {
				return sandbox.Errorf(sandbox.ErrInvalid, "args_invalid", "%w", err)
			}
			return err
		}
	}
	for _, s := range c.Commands() {
		strict(s)
	}
}

// knownSubcommand is a group's argument check: it runs only when no
// subcommand matched, so any argument is an unknown one.
func knownSubcommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	hint := "see " + c.CommandPath() + " --help"
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's default, which only its own message applies
	}
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		hint = "did you mean " + strings.Join(s, " or ") + "?"
	}
	return sandbox.Errorf(sandbox.ErrInvalid, "command_unknown", "unknown command %q for %q; %s", args[0], c.CommandPath(), hint)
}

// writeJSONError writes a refusal as {"error": {"code", "message"}} on w,
// so a caller reading --json output always gets a JSON document.
func writeJSONError(w io.Writer, err error) {
	type jsonError struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	json.NewEncoder(w).Encode(struct {
		Error jsonError `json:"error"`
	}{jsonError{Code: sandbox.CodeOf(err), Message: err.Error()}})
}
