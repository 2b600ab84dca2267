package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/execbox/execbox/internal/daemon/config"
)

func newConfigCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Inspect the configuration"}
	var asJSON bool
	print := &cobra.Command{
		Use:   "print",
		Short: "Show the effective configuration and where each value came from",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			cfg, prov, err := g.loadConfig()
			if err != nil {
				return err
			}
			return config.Print(os.Stdout, cfg, prov, asJSON)
		},
	}
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print as JSON")
	cmd.AddCommand(print)
	return cmd
}
