// Command execbox runs untrusted code in isolated, resource-limited
// sandboxes: `execbox run -- CMD`, `execbox doctor`, `execbox config print`.
package main

import (
	"errors"
	"fmt"
	"os"

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
	err := root.Execute()
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	default:
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
	root.AddCommand(newRunCmd(g), newFnCmd(g), newLintCmd(g), newDoctorCmd(g), newConfigCmd(g), newImageCmd(g), newVersionCmd(), newServeCmd(g), newAuditCmd(g), newMCPCmd(g), newSessionCmd(), newApprovalCmd(), newToolCmd(g), newBenchCmd(g))
	return root
}
