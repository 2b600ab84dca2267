package main

import (
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func newApprovalCmd(g *globals) *cobra.Command {
	f := &sessionFlags{g: g}
	cmd := &cobra.Command{
		Use:   "approval",
		Short: "List and decide the executions a guard rule holds for confirmation",
		Long: `A guard rule with action confirm (guard.rules in the configuration) holds each
call it matches, before anything runs, until an admin approves or denies it
here, or guard.approvals.timeout passes. These commands need an admin token
(EXECBOX_TOKEN); the server is --server, or $EXECBOX_URL, or the
configuration's server.listen (by default http://127.0.0.1:8080).

  execbox approval list
  execbox approval approve 3f9c…
  execbox approval deny 3f9c… --reason "not during the freeze"`,
	}
	cmd.PersistentFlags().StringVar(&f.remote, "server", "", serverFlagHelp)
	cmd.PersistentFlags().BoolVar(&f.asJSON, "json", false, "print the approvals, and a refusal, as JSON")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the held executions, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			held, err := c.Approvals(cmd.Context())
			if err != nil {
				return err
			}
			if f.asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(held)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tRULE\tTOKEN\tOPERATION\tTOOL\tLANGUAGE\tBACKEND\tWAITS")
			for _, a := range held {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.Rule, a.Token, a.Operation, a.Tool, a.Language, a.Backend,
					time.Until(a.Expires).Round(time.Second))
			}
			return tw.Flush()
		},
	}
	decide := func(use, short string, approve bool) *cobra.Command {
		var reason string
		c := &cobra.Command{
			Use:   use + " ID",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := f.client()
				if err != nil {
					return err
				}
				return c.Decide(cmd.Context(), args[0], approve, reason)
			},
		}
		c.Flags().StringVar(&reason, "reason", "", "told to the caller")
		return c
	}
	cmd.AddCommand(list, decide("approve", "Let a held execution run", true), decide("deny", "Refuse a held execution (approval_denied)", false))
	return cmd
}
