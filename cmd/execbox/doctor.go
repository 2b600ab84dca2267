package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/internal/server"
)

func newDoctorCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Probe every backend and say what auto would pick, and why",
		Long: `doctor really starts a sandbox on every backend and reports, for each,
whether it is available and ready (and why not), its isolation level and how
it enforces each limit; then what the configured backend resolves to.
It exits 1 when nothing can run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := g.loadConfig()
			if err != nil {
				return err
			}
			e, err := newEngine(cfg)
			if err != nil {
				return err
			}
			defer e.Close()
			e.ProbeAll(cmd.Context()) // fresh answers, never the cache's
			// The same shape as GET /v1/health.
			r := server.HealthToWire(e.Report(cmd.Context()))
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(r); err != nil {
					return err
				}
			} else {
				printReport(os.Stdout, r)
			}
			if r.Backend == "" {
				return exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

func printReport(w io.Writer, r v1.Health) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tISOLATION\tAVAILABLE\tREADY\tREASON")
	for _, c := range r.Candidates {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Name, c.Isolation, yesNo(c.Available), yesNo(c.Ready), c.Reason)
	}
	tw.Flush()
	for _, c := range r.Candidates {
		if !c.Available {
			continue
		}
		fmt.Fprintf(w, "\n%s enforces:\n", c.Name)
		keys := make([]string, 0, len(c.Enforcement))
		for k := range c.Enforcement {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "  %-10s %s\n", k, c.Enforcement[k])
		}
		if len(c.Details) > 0 {
			var ds []string
			for k, v := range c.Details {
				ds = append(ds, k+"="+v)
			}
			slices.Sort(ds)
			fmt.Fprintf(w, "  details:   %s\n", strings.Join(ds, ", "))
		}
	}
	fmt.Fprintf(w, "\nconfigured: %s\n", r.Configured)
	if r.Backend != "" {
		fmt.Fprintf(w, "selected:   %s (isolation %s)\n", r.Backend, r.Isolation)
	} else {
		fmt.Fprintln(w, "selected:   none")
	}
	fmt.Fprintf(w, "because:    %s\n", r.SelectedBecause)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
