package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/execbox/execbox/errmap"
	"github.com/execbox/execbox/internal/config"
	"github.com/execbox/execbox/sandbox"
)

// maxInputFiles bounds what --file may read from the host in one run.
const maxInputFiles = 64 * sandbox.MiB

type runFlags struct {
	sel                         sandbox.Selection
	memory, timeout, output     string
	cpus                        float64
	pids                        int
	network                     string
	env, files                  []string
	artifacts                   string
	jsonOut, interactive, oKill bool
}

func newRunCmd(g *globals) *cobra.Command {
	f := &runFlags{}
	var remote string
	cmd := &cobra.Command{
		Use:   "run [flags] -- CMD [ARGS...]",
		Short: "Run a command in a sandbox",
		Long: `Run a command in a one-shot sandbox and exit with its exit code:
124 when it timed out, 125 when execbox itself failed or refused, 128+N when
signal N ended it.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runAt(cmd.Context(), g, f, remote, args) },
	}
	fl := cmd.Flags()
	addRemoteFlag(fl, &remote)
	fl.StringVar(&f.sel.Backend, "backend", "", "backend to use (default: the configured one, auto)")
	fl.StringVar(&f.sel.Tier, "tier", "", "isolation tier: strict, standard or fast")
	fl.StringVar(&f.sel.MinIsolation, "min-isolation", "", "weakest isolation allowed: process, kernel or vm")
	fl.StringVar(&f.memory, "memory", "", "memory limit, swap included (e.g. 256m)")
	fl.Float64Var(&f.cpus, "cpus", 0, "CPU quota in cores")
	fl.IntVar(&f.pids, "pids", 0, "process and thread limit")
	fl.StringVar(&f.timeout, "timeout", "", "wall-clock limit (e.g. 15s)")
	fl.StringVar(&f.output, "output-limit", "", "bytes kept per output stream (e.g. 1m)")
	fl.BoolVar(&f.oKill, "output-limit-kill", false, "end the run when an output stream passes its limit")
	fl.StringVar(&f.network, "network", "none", "network: none or host")
	fl.StringArrayVarP(&f.env, "env", "e", nil, "set an environment variable K=V (repeatable)")
	fl.StringArrayVar(&f.files, "file", nil, "copy a host file in: HOST_PATH[:SANDBOX_PATH] (repeatable)")
	fl.StringVar(&f.artifacts, "artifacts", "", "write the files the program created or changed into this directory")
	fl.BoolVar(&f.jsonOut, "json", false, "print the whole result as JSON instead of streaming the output")
	fl.BoolVarP(&f.interactive, "interactive", "i", false, "pass stdin even when it is a terminal")
	return cmd
}

func runRun(ctx context.Context, g *globals, f *runFlags, args []string) error {
	cfg, _, err := g.loadConfig()
	if err != nil {
		return err
	}
	spec, err := f.spec(cfg)
	if err != nil {
		return err
	}
	p := &sandbox.Process{Args: args}
	if f.interactive || !isTerminal(os.Stdin) {
		p.Stdin = os.Stdin
	}
	if !f.jsonOut {
		p.Stdout, p.Stderr = os.Stdout, os.Stderr
	}
	e, err := newEngine(cfg)
	if err != nil {
		return err
	}
	defer e.Close()

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := e.Run(ctx, f.sel, spec, p)
	if err != nil {
		return err
	}
	if f.artifacts != "" {
		if err := writeArtifacts(f.artifacts, res.Artifacts); err != nil {
			return err
		}
	}
	if f.jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		reportTruncation(res)
	}
	return exitError{errmap.ResultExitCode(res)}
}

func (f *runFlags) spec(cfg *config.Config) (sandbox.Spec, error) {
	spec := sandbox.Spec{Env: map[string]string{}, Files: map[string][]byte{}}
	var err error
	if f.memory != "" {
		if spec.Limits.Memory, err = sandbox.ParseSize(f.memory); err != nil {
			return spec, sandbox.Errorf(sandbox.ErrInvalid, "flag_invalid", "--memory: %w", err)
		}
	}
	if f.output != "" {
		if spec.Limits.Output, err = sandbox.ParseSize(f.output); err != nil {
			return spec, sandbox.Errorf(sandbox.ErrInvalid, "flag_invalid", "--output-limit: %w", err)
		}
	}
	if f.timeout != "" {
		if spec.Limits.Wall, err = sandbox.ParseDuration(f.timeout); err != nil {
			return spec, sandbox.Errorf(sandbox.ErrInvalid, "flag_invalid", "--timeout: %w", err)
		}
	}
	spec.Limits.CPUs, spec.Limits.Pids, spec.Limits.OutputLimitKill = f.cpus, f.pids, f.oKill
	switch f.network {
	case "none", "":
	case "host":
		spec.Policy.Network = sandbox.NetworkHost
	default:
		return spec, sandbox.Errorf(sandbox.ErrInvalid, "flag_invalid", "--network %q: want none or host", f.network)
	}
	for _, kv := range f.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			// docker's convention: a bare name passes the host's value.
			v, ok = os.LookupEnv(k)
			if !ok {
				continue
			}
		}
		spec.Env[k] = v
	}
	var total int64
	for _, hf := range f.files {
		host, inside, ok := strings.Cut(hf, ":")
		if !ok {
			inside = filepath.Base(host)
		}
		data, err := readBounded(host, maxInputFiles-total)
		if errors.Is(err, errTooLarge) {
			return spec, sandbox.Errorf(sandbox.ErrLimit, "input_too_large", "--file %s: input files exceed %d MiB in all", hf, maxInputFiles/sandbox.MiB)
		}
		if err != nil {
			return spec, sandbox.Errorf(sandbox.ErrInvalid, "file_invalid", "--file %s: %w", hf, err)
		}
		total += int64(len(data))
		spec.Files[inside] = data
	}
	return spec, nil
}

var errTooLarge = errors.New("file too large")

// readBounded reads at most room bytes of path; past that it returns what it
// read and errTooLarge.
func readBounded(path string, room int64) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, room+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > room {
		return data[:room], errTooLarge
	}
	return data, nil
}

// writeArtifacts writes artifacts below dir without ever leaving it.
func writeArtifacts(dir string, arts []sandbox.Artifact) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating artifacts dir: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("opening artifacts dir: %w", err)
	}
	defer root.Close()
	for _, a := range arts {
		if err := sandbox.CheckPath(a.Path); err != nil {
			return err
		}
		if d := filepath.Dir(a.Path); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("writing artifact %s: %w", a.Path, err)
			}
		}
		if err := root.WriteFile(a.Path, a.Data, 0o644); err != nil {
			return fmt.Errorf("writing artifact %s: %w", a.Path, err)
		}
	}
	return nil
}

func reportTruncation(res *sandbox.Result) {
	if res.StdoutTruncated {
		fmt.Fprintln(os.Stderr, "execbox: stdout was truncated at the output limit")
	}
	if res.StderrTruncated {
		fmt.Fprintln(os.Stderr, "execbox: stderr was truncated at the output limit")
	}
	switch res.Reason {
	case sandbox.ReasonExited, sandbox.ReasonSignaled:
	default:
		msg := res.Message
		if msg != "" {
			msg = ": " + msg
		}
		fmt.Fprintf(os.Stderr, "execbox: run ended: %s%s\n", res.Reason, msg)
	}
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
