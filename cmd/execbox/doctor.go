package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/internal/daemon/wire"
	"github.com/execbox/execbox/sandbox"
)

func newDoctorCmd(g *globals) *cobra.Command {
	var asJSON bool
	var remote string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Probe every backend and say what auto would pick, and why",
		Long: `doctor really starts a sandbox on every backend and reports, for each,
whether it is available and ready (and why not), its isolation level and how
it enforces each limit; then what the configured backend resolves to.
It exits 1 when nothing can run. With --server it shows the report of a
running execbox serve instead (GET /v1/health), its warm pools' live
counters included.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if remote != "" {
				c, err := remoteClient(remote)
				if err != nil {
					return err
				}
				h, err := c.Health(cmd.Context())
				if err != nil {
					return err
				}
				return printHealth(*h, asJSON)
			}
			cfg, _, err := g.loadConfig()
			if err != nil {
				return err
			}
			// With the pools serve would keep, which doctor reports; its own
			// engine is not started, so it keeps none.
			e, err := newEngine(cfg, func(o *engine.Options) { o.Pools = poolOptions(cfg) })
			if err != nil {
				return err
			}
			defer e.Close()
			// Fresh answers, never the cache's; each said on stderr as it
			// comes in, since a VM's boot under emulation takes seconds.
			fmt.Fprintln(os.Stderr, "execbox: probing every backend side by side…")
			e.ProbeAll(cmd.Context(), func(name string, h sandbox.Health, took time.Duration) {
				state := "unavailable"
				switch {
				case h.Ready:
					state = "ready"
				case h.Available:
					state = "available, not ready"
				}
				fmt.Fprintf(os.Stderr, "execbox:   %-10s %-20s %6.1f s\n", name, state, took.Seconds())
			})
			// The same shape as GET /v1/health.
			return printHealth(wire.Health(e.Report(cmd.Context())), asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().StringVar(&remote, "server", "", "show the report of the execbox server at this URL (token from EXECBOX_TOKEN; --remote is the same flag)")
	return cmd
}

// printHealth prints a report, and exits 1 when nothing can run.
func printHealth(r v1.Health, asJSON bool) error {
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
}

// maxReason is how much of a reason the table shows; --json has it whole.
const maxReason = 110

// printReport writes the report for people: a line per backend, then the
// facts of the host they share (said once), then how each available
// backend enforces each limit, then what auto selects and why.
func printReport(w io.Writer, r v1.Health) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tISOLATION\tAVAILABLE\tREADY\tREASON")
	for _, c := range r.Candidates {
		reason := c.Reason
		if len(reason) > maxReason {
			reason = reason[:maxReason] + "…"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Name, c.Isolation, yesNo(c.Available), yesNo(c.Ready), reason)
	}
	tw.Flush()
	shared := sharedDetails(r.Candidates)
	if len(shared) > 0 {
		fmt.Fprintln(w, "\nhost:")
		for _, k := range slices.Sorted(maps.Keys(shared)) {
			fmt.Fprintf(w, "  %-10s %s\n", k, shared[k])
		}
	}
	for _, c := range r.Candidates {
		if !c.Available {
			continue
		}
		fmt.Fprintf(w, "\n%s enforces:\n", c.Name)
		for _, k := range slices.Sorted(maps.Keys(c.Enforcement)) {
			fmt.Fprintf(w, "  %-10s %s\n", k, c.Enforcement[k])
		}
		var ds []string
		for k, v := range c.Details {
			if _, same := shared[k]; !same {
				ds = append(ds, k+"="+v)
			}
		}
		if len(ds) > 0 {
			slices.Sort(ds)
			fmt.Fprintf(w, "  details:   %s\n", strings.Join(ds, ", "))
		}
		if l := c.Capacity; l != nil {
			fmt.Fprintf(w, "  capacity:  %d runs at once, lane %s (%s)\n", l.Slots, l.Lane, l.Source)
		}
	}
	fmt.Fprintf(w, "\nconfigured: %s\n", r.Configured)
	if r.Backend != "" {
		fmt.Fprintf(w, "selected:   %s (isolation %s)\n", r.Backend, r.Isolation)
	} else {
		fmt.Fprintln(w, "selected:   none")
	}
	fmt.Fprintf(w, "because:    %s\n", r.SelectedBecause)
	printPools(w, r)
}

// printPools says what the warm pools are (execbox serve's, through
// /v1/health), or what serve would keep (doctor's own engine keeps none).
func printPools(w io.Writer, r v1.Health) {
	p := r.Pools
	switch {
	case p.Size == 0:
		fmt.Fprintln(w, "pools:      off (pools.size 0): every function call starts a sandbox")
		return
	case len(p.Pools) == 0 && p.Reason != "":
		fmt.Fprintf(w, "pools:      none: %s\n", p.Reason)
		return
	case len(p.Pools) == 0:
		fmt.Fprintf(w, "pools:      execbox serve keeps %d ready sandboxes per function runner on %s\n", p.Size, orNone(r.Backend))
		return
	}
	fmt.Fprintln(w, "pools:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  BACKEND\tLANGUAGE\tREADY\tHITS\tMISSES\tMADE\tFAILED\tLOST\tIDLE MEMORY\tLAST REFILL\tERROR")
	for _, x := range p.Pools {
		fmt.Fprintf(tw, "  %s\t%s\t%d/%d\t%d\t%d\t%d\t%d\t%d\t%s\t%.1f ms\t%s\n", x.Backend, x.Language, x.Ready, x.Size,
			x.Hits, x.Misses, x.Made, x.Failed, x.Lost, sandbox.FormatSize(x.IdleMemory), float64(x.LastRefill)/float64(time.Millisecond), x.Error)
	}
	tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "no backend (none is ready)"
	}
	return s
}

// sharedDetails are the details that two or more backends report with
// the same value: facts of the host (the cgroups), said once.
func sharedDetails(cs []v1.Backend) map[string]string {
	seen := map[string]string{}
	count := map[string]int{}
	for _, c := range cs {
		for k, v := range c.Details {
			if old, ok := seen[k]; ok && old != v {
				count[k] = -1 << 30 // differs between backends: not the host's
				continue
			}
			seen[k] = v
			count[k]++
		}
	}
	out := map[string]string{}
	for k, n := range count {
		if n >= 2 {
			out[k] = seen[k]
		}
	}
	return out
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
