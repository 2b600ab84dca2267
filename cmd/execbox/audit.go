package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/internal/daemon/audit"
	"github.com/execbox/execbox/internal/daemon/wire"
	"github.com/execbox/execbox/sandbox"
)

type auditFlags struct {
	db, remote, since, until, kind string
	q                              v1.AuditQuery
	asJSON, count                  bool
}

func newAuditCmd(g *globals) *cobra.Command {
	f := &auditFlags{}
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "List the audit log of executions",
		Long: `audit lists the executions execbox serve recorded, newest first: time, id,
token, kind (run, function, lint, tool, session, session_exec, or auth: a failed authentication), backend, reason, exit code,
duration and the error code of a refusal or failure.

It reads the database at audit.path (or --db) directly, or with --server
asks a server's GET /v1/audit with the admin token in EXECBOX_TOKEN.
--since and --until take an RFC 3339 time or a duration before now (24h).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runAudit(cmd.Context(), g, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.db, "db", "", "the audit database (default audit.path)")
	fl.StringVar(&f.remote, "server", "", "query the execbox server at this URL instead (token from EXECBOX_TOKEN; --remote is the same flag)")
	fl.StringVar(&f.q.Token, "token", "", "only this token's executions")
	fl.StringVar(&f.kind, "kind", "", "only this kind: run, function, lint, tool, session, session_exec or auth")
	fl.StringVar(&f.q.ErrorCode, "error-code", "", "only executions that failed with this code")
	fl.StringVar(&f.q.Session, "session", "", "only this session's rows (its start, execs and end)")
	fl.StringVar(&f.since, "since", "", "only executions at or after this time")
	fl.StringVar(&f.until, "until", "", "only executions before this time")
	fl.IntVar(&f.q.Limit, "limit", v1.DefaultAuditLimit, fmt.Sprintf("list at most this many (up to %d)", v1.MaxAuditLimit))
	fl.BoolVar(&f.asJSON, "json", false, "print {records, total} as JSON")
	fl.BoolVar(&f.count, "count", false, "print only how many executions match")
	return cmd
}

func runAudit(ctx context.Context, g *globals, f *auditFlags) error {
	now := time.Now()
	f.q.Operation = v1.Operation(f.kind)
	var err error
	if f.q.Since, err = parseWhen("--since", f.since, now); err != nil {
		return err
	}
	if f.q.Until, err = parseWhen("--until", f.until, now); err != nil {
		return err
	}
	// The same checks the server makes.
	if _, err := v1.ParseAuditQuery(f.q.Values()); err != nil {
		return err
	}
	var out *v1.Audit
	if f.remote != "" {
		c, err := remoteClient(f.remote)
		if err != nil {
			return err
		}
		if out, err = c.Audit(ctx, f.q); err != nil {
			return err
		}
	} else {
		path := f.db
		if path == "" {
			cfg, _, err := g.loadConfig()
			if err != nil {
				return err
			}
			path = cfg.Audit.Path
		}
		if path == "" {
			return sandbox.Errorf(sandbox.ErrInvalid, "audit_path", "no audit log: set audit.path or give --db")
		}
		st, err := audit.Open(path, audit.Options{ReadOnly: true})
		if err != nil {
			return err
		}
		defer st.Close()
		recs, total, err := st.Query(ctx, wire.AuditQueryOf(f.q))
		if err != nil {
			return err
		}
		a := wire.Audit(recs, total)
		out = &a
	}
	switch {
	case f.count:
		fmt.Println(out.Total)
	case f.asJSON:
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	default:
		printAudit(os.Stdout, out)
	}
	return nil
}

// parseWhen reads an RFC 3339 time or a duration before now.
func parseWhen(flag, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := sandbox.ParseDuration(s)
	if err != nil {
		return time.Time{}, sandbox.Errorf(sandbox.ErrInvalid, "flag_invalid", "%s %q: want an RFC 3339 time or a duration such as 24h", flag, s)
	}
	return now.Add(-d), nil
}

func printAudit(w io.Writer, a *v1.Audit) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tID\tTOKEN\tKIND\tBACKEND\tREASON\tEXIT\tDURATION\tERROR")
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	for _, r := range a.Records {
		exit := "-"
		if r.ExitCode != nil {
			exit = strconv.Itoa(*r.ExitCode)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Time.Local().Format(time.RFC3339), r.ID, r.Token, r.Operation,
			dash(r.Backend), dash(r.Reason), exit, r.Duration.Round(time.Millisecond), dash(r.ErrorCode))
	}
	tw.Flush()
	if a.Total > len(a.Records) {
		fmt.Fprintf(w, "(%d of %d; use --limit or filters)\n", len(a.Records), a.Total)
	}
}
