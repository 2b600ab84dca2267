package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at release time with -ldflags "-X main.version=…".
var version = "dev"

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			v, rev := version, ""
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" {
						rev = " (" + s.Value + ")"
					}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "execbox %s%s %s\n", v, rev, bi.GoVersion)
				return
			}
			fmt.Fprintf(cmd.OutOrStdout(), "execbox %s\n", v)
		},
	}
}
