package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/internal/daemon/wire"
	"github.com/execbox/execbox/sandbox"
	"github.com/execbox/execbox/tool"
)

func newToolCmd(g *globals) *cobra.Command {
	var remote string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "tool",
		Short: "List tools and run one with JSON arguments, each call in a sandbox of its own",
		Long: `A tool is a Python module with a spec (name, description, JSON Schema of its
arguments) and an execute function. execbox ships python, read_file,
write_file and http_fetch; the modules of tools.dirs override them by name
(see "go doc github.com/execbox/execbox/tool" for how to write one).

  execbox tool list
  execbox tool run python --args '{"code": "import math; math.pi"}'
  execbox tool run read_file --args '{"path": "notes.txt"}' --file notes.txt

Arguments are checked against the tool's schema before anything runs. A
tool's result is printed as JSON; a tool that failed prints its error and
exits 1. With --server the server at that URL runs it (token from
EXECBOX_TOKEN).`,
	}
	cmd.PersistentFlags().StringVar(&remote, "server", "", "use the execbox server at this URL (token from EXECBOX_TOKEN; --remote is the same flag)")
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print the whole answer as JSON")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the tools (and those found broken)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out *v1.Tools
			if remote != "" {
				c, err := remoteClient(remote)
				if err != nil {
					return err
				}
				if out, err = c.Tools(cmd.Context()); err != nil {
					return err
				}
			} else {
				err := withTools(g, func(set *tool.Set, run func(sandbox.Selection) tool.RunFunc) error {
					cat, err := set.List(cmd.Context(), run(sandbox.Selection{}))
					if err != nil {
						return err
					}
					out = &v1.Tools{Tools: []v1.Tool{}, Problems: []v1.ToolProblem{}}
					for _, t := range cat.Tools {
						out.Tools = append(out.Tools, v1.Tool(t))
					}
					for _, p := range cat.Problems {
						out.Problems = append(out.Problems, v1.ToolProblem(p))
					}
					return nil
				})
				if err != nil {
					return err
				}
			}
			if asJSON {
				return printJSON(out)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSOURCE\tDESCRIPTION")
			for _, t := range out.Tools {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, t.Source, firstLine(t.Description))
			}
			for _, p := range out.Problems {
				fmt.Fprintf(tw, "%s\t%s\tBROKEN: %s\n", p.Name, p.Source, firstLine(p.Message))
			}
			return tw.Flush()
		},
	}
	cmd.AddCommand(list, newToolRunCmd(g, &remote, &asJSON))
	return cmd
}

func newToolRunCmd(g *globals, remote *string, asJSON *bool) *cobra.Command {
	var args, network string
	var files []string
	var timeout time.Duration
	var sel sandbox.Selection
	cmd := &cobra.Command{
		Use:   "run NAME",
		Short: "Run a tool",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			req := &v1.ToolRunRequest{Args: json.RawMessage(args), Timeout: v1.Seconds(timeout),
				Backend: sel.Backend, Tier: sel.Tier, MinIsolation: sel.MinIsolation}
			if len(files) > 0 {
				req.Files = map[string][]byte{}
				in := &inputFiles{files: req.Files}
				for _, f := range files {
					if err := in.add(f, filepath.Base(f)); err != nil {
						return err
					}
				}
			}
			var res *v1.ToolResult
			var err error
			if *remote != "" {
				if network != "none" {
					return sandbox.Errorf(sandbox.ErrInvalid, "flag_invalid", "--network: the API offers no network to a tool call")
				}
				c, err := remoteClient(*remote)
				if err != nil {
					return err
				}
				res, err = c.RunTool(cmd.Context(), a[0], req)
				if err != nil {
					return err
				}
			} else {
				res, err = runToolHere(cmd.Context(), g, a[0], req, network)
				if err != nil {
					return err
				}
			}
			return finishTool(res, *asJSON)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&args, "args", "{}", "the arguments, a JSON object")
	fl.StringArrayVar(&files, "file", nil, "copy a host file into the work dir, under its base name (repeatable)")
	durationVar(fl, &timeout, "timeout", 0, "time limit (default tools.timeout)")
	fl.StringVar(&network, "network", "none", "network: none or host (http_fetch needs host)")
	fl.StringVar(&sel.Backend, "backend", "", "backend to use (default: the configured one, auto)")
	fl.StringVar(&sel.Tier, "tier", "", "isolation tier: strict, standard or fast")
	fl.StringVar(&sel.MinIsolation, "min-isolation", "", "weakest isolation allowed: process, kernel or vm")
	return cmd
}

// runToolHere runs a tool call on this host's engine.
func runToolHere(ctx context.Context, g *globals, name string, req *v1.ToolRunRequest, network string) (*v1.ToolResult, error) {
	var net sandbox.Network
	switch network {
	case "none", "":
	case "host":
		net = sandbox.NetworkHost
	default:
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "flag_invalid", "--network %q: want none or host", network)
	}
	var out *v1.ToolResult
	err := withTools(g, func(set *tool.Set, run func(sandbox.Selection) tool.RunFunc) error {
		sel := sandbox.Selection{Backend: req.Backend, Tier: req.Tier, MinIsolation: req.MinIsolation}
		resp, err := set.Run(ctx, run(sel), tool.Call{Name: name, Args: req.Args, Files: req.Files, Network: net, Timeout: time.Duration(req.Timeout)})
		if err != nil {
			return err
		}
		out = wire.ToolResult(resp, "")
		return nil
	})
	return out, err
}

// withTools calls f with the configured tools and a RunFunc on a fresh
// engine, closed afterwards.
func withTools(g *globals, f func(*tool.Set, func(sandbox.Selection) tool.RunFunc) error) error {
	cfg, _, err := g.loadConfig()
	if err != nil {
		return err
	}
	set, err := newTools(cfg)
	if err != nil {
		return err
	}
	e, err := newEngine(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	return f(set, func(sel sandbox.Selection) tool.RunFunc {
		return func(ctx context.Context, spec sandbox.Spec, p *sandbox.Process) (*sandbox.Result, error) {
			return e.Run(ctx, sel, spec, p)
		}
	})
}

// finishTool prints a tool's answer: its result, or its error (exit 1).
func finishTool(res *v1.ToolResult, asJSON bool) error {
	if asJSON {
		if err := printJSON(res); err != nil {
			return err
		}
	} else {
		if res.Output != "" {
			fmt.Fprint(os.Stderr, res.Output)
			if !strings.HasSuffix(res.Output, "\n") {
				fmt.Fprintln(os.Stderr)
			}
		}
		if res.OK {
			var v any
			if json.Unmarshal(res.Result, &v) == nil {
				if err := printJSON(v); err != nil {
					return err
				}
			}
		} else {
			fmt.Fprintf(os.Stderr, "tool failed: %s: %s\n", res.Error.Code, res.Error.Message)
			if res.Error.Traceback != "" {
				fmt.Fprint(os.Stderr, res.Error.Traceback)
			}
		}
	}
	if !res.OK {
		return exitError{1}
	}
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
