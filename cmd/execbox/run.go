package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/errmap"
	"github.com/execbox/execbox/internal/daemon/config"
	"github.com/execbox/execbox/sandbox"
)

// maxInputFiles bounds what --file may read from the host in one run.
const maxInputFiles = 64 * sandbox.MiB

type runFlags struct {
	sel                         sandbox.Selection
	memory, timeout, output     string
	cpus                        float64
	pids                        int
	network, image              string
	tmpExec                     bool
	env, files                  []string
	artifacts                   string
	workdir                     string
	code, language              string
	jsonOut, interactive, oKill bool
	explain                     bool
	rm                          bool
	set                         func(name string) bool // whether a flag was given
}

func newRunCmd(g *globals) *cobra.Command {
	f := &runFlags{}
	var remote string
	cmd := &cobra.Command{
		Use:   "run [flags] CMD [ARGS...]",
		Short: "Run a command (or code, with -c) in a sandbox",
		Long: `Run a command in a one-shot sandbox and exit with its exit code: 124 when
it timed out, 125 when execbox itself failed or refused, 126 when the program
cannot be executed, 127 when it is not found, 128+N when signal N ended it
(a limit's kill is SIGKILL: 137), 130 when interrupted.

As with docker run, execbox's flags end at the command: everything after it
belongs to the command (execbox run python3 -c 'print(1)'); "--" is
optional. With -c CODE the code runs with --language's interpreter
(python, javascript, sh or bash) and no command is given.

A limit flag left out takes the configured default (execbox config print);
a limit flag given must be above zero.`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case f.code == "" && len(args) == 0:
				return sandbox.Errorf(sandbox.ErrInvalid, "flag_invalid", "give a command to run, or code with -c")
			case f.code != "" && len(args) > 0:
				return sandbox.Errorf(sandbox.ErrInvalid, "flag_invalid", "give a command or -c CODE, not both (command %q)", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAt(cmd.Context(), g, f, remote, args)
		},
	}
	f.set = func(name string) bool { return cmd.Flags().Changed(name) }
	fl := cmd.Flags()
	fl.SetInterspersed(false) // flags end at the command, as with docker run
	addRemoteFlag(fl, &remote)
	fl.StringVar(&f.sel.Backend, "backend", "", "backend to use (default: the configured one, auto)")
	fl.StringVar(&f.sel.Tier, "tier", "", "isolation tier: strict, standard or fast")
	fl.StringVar(&f.sel.MinIsolation, "min-isolation", "", "weakest isolation allowed: process, kernel or vm")
	fl.StringVarP(&f.memory, "memory", "m", "", "memory limit, swap included (e.g. 256m)")
	fl.Float64Var(&f.cpus, "cpus", 0, "CPU quota in cores")
	fl.IntVar(&f.pids, "pids", 0, "process and thread limit")
	fl.StringVar(&f.timeout, "timeout", "", "wall-clock limit (e.g. 15s)")
	fl.StringVar(&f.output, "output-limit", "", "bytes kept per output stream (e.g. 1m)")
	fl.BoolVar(&f.oKill, "output-limit-kill", false, "end the run when an output stream passes its limit")
	fl.StringVar(&f.network, "network", "none", "network: none or host")
	fl.StringVar(&f.image, "image", "", "root filesystem image: one of execbox's store (execbox image pull; mounted by native), or for docker one the configuration lists in images")
	fl.BoolVar(&f.tmpExec, "tmp-exec", false, "let programs run from /tmp (mounted noexec by default)")
	fl.StringArrayVarP(&f.env, "env", "e", nil, "set an environment variable K=V (repeatable)")
	fl.StringArrayVar(&f.files, "file", nil, "copy a host file or directory in: HOST_PATH[:SANDBOX_PATH], SANDBOX_PATH relative to or inside /work (repeatable)")
	fl.StringVarP(&f.workdir, "workdir", "w", "", "working directory, relative to or inside /work")
	fl.StringVarP(&f.code, "code", "c", "", "run this code instead of a command (see --language)")
	languageVar(fl, &f.language, "python", "the language of -c: python, javascript, sh or bash")
	fl.BoolVar(&f.rm, "rm", true, "remove the sandbox afterwards (always: a run's sandbox never outlives it)")
	fl.StringVar(&f.artifacts, "artifacts", "", "write the files the program created or changed into this directory")
	fl.BoolVar(&f.jsonOut, "json", false, "print the whole result as JSON instead of streaming the output")
	fl.BoolVar(&f.explain, "explain", false, "with --json, say in the result how each limit is enforced (its enforcement field)")
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
	p, err := f.process(spec, args)
	if err != nil {
		return err
	}
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
	warnWeak(e, res.Backend)
	return f.finish(res)
}

// finish writes the artifacts, the result (or the truncation and end
// notices) and returns the run's exit code; for a local and a remote run
// alike.
func (f *runFlags) finish(res *sandbox.Result) error {
	if f.artifacts != "" {
		if err := writeArtifacts(f.artifacts, res.Artifacts); err != nil {
			return err
		}
		if !f.jsonOut {
			for _, sk := range res.Skipped {
				fmt.Fprintf(os.Stderr, "execbox: artifact %s not written: %s\n", sk.Path, sk.Reason)
			}
		}
	}
	if f.jsonOut {
		// What the API answers: non-UTF-8 output in base64, the
		// enforcement prose only when asked for.
		res.WireForm(f.explain)
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

// process is the program to run: args, or -c's code with its
// interpreter (the code goes into the spec's files).
func (f *runFlags) process(spec sandbox.Spec, args []string) (*sandbox.Process, error) {
	p := &sandbox.Process{Args: args}
	if f.workdir != "" {
		dir, err := insideWork(f.workdir)
		if err != nil {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "flag_invalid", "--workdir: %w", err)
		}
		p.Dir = dir
	}
	if f.code == "" {
		return p, nil
	}
	file, argv, ok := v1.CodeProgram(f.language)
	if !ok {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "flag_invalid", "--language %q: want python, javascript, sh or bash", f.language)
	}
	if _, dup := spec.Files[file]; dup {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "flag_invalid", "-c writes %s; a --file may not name it too", file)
	}
	spec.Files[file] = []byte(f.code)
	p.Args = argv
	return p, nil
}

// workDir is where the work dir appears inside every sandbox.
const workDir = "/work"

// insideWork turns a sandbox path the user gave — relative to the work
// dir, or absolute inside it — into the work-dir relative path the
// contract takes.
func insideWork(p string) (string, error) {
	if rest, ok := strings.CutPrefix(p, workDir+"/"); ok {
		p = rest
	} else if p == workDir || p == workDir+"/" {
		return ".", nil
	} else if strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("%s is outside the work dir %s", p, workDir)
	}
	p = strings.TrimRight(p, "/")
	return p, sandbox.CheckPath(p)
}

func (f *runFlags) spec(cfg *config.Config) (sandbox.Spec, error) {
	spec := sandbox.Spec{Env: map[string]string{}, Files: map[string][]byte{}, Image: f.image, Policy: sandbox.Policy{TmpExec: f.tmpExec}}
	if err := f.limits(&spec.Limits); err != nil {
		return spec, err
	}
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
	in := &inputFiles{files: spec.Files}
	for _, hf := range f.files {
		host, inside, named := strings.Cut(hf, ":")
		if !named {
			inside = filepath.Base(host)
		}
		dst, err := insideWork(inside)
		if err != nil {
			return spec, sandbox.Errorf(sandbox.ErrInvalid, "path_invalid", "--file %s: %w", hf, err)
		}
		if err := in.add(host, dst); err != nil {
			return spec, err
		}
	}
	return spec, nil
}

// limits sets the limits the flags give. A flag left out means the
// configured default; a flag given must mean a limit, so zero and
// negative values, and more CPUs than the host has, are refused.
func (f *runFlags) limits(l *sandbox.Limits) error {
	bad := func(flag, format string, args ...any) error {
		return sandbox.Errorf(sandbox.ErrInvalid, "flag_invalid", "--%s: %s", flag, fmt.Sprintf(format, args...))
	}
	size := func(flag, v string, dst *int64) error {
		if !f.set(flag) {
			return nil
		}
		n, err := sandbox.ParseSize(v)
		if err != nil {
			return bad(flag, "%v", err)
		}
		if n <= 0 {
			return bad(flag, "%s: must be more than 0 (every run has a limit; leave the flag out for the configured default)", v)
		}
		*dst = n
		return nil
	}
	if err := size("memory", f.memory, &l.Memory); err != nil {
		return err
	}
	if err := size("output-limit", f.output, &l.Output); err != nil {
		return err
	}
	if f.set("timeout") {
		d, err := sandbox.ParseDuration(f.timeout)
		if err != nil {
			return bad("timeout", "%v", err)
		}
		if d <= 0 {
			return bad("timeout", "%s: must be more than 0 (every run has a limit; leave the flag out for the configured default)", f.timeout)
		}
		l.Wall = d
	}
	if f.set("cpus") {
		if f.cpus <= 0 || math.IsNaN(f.cpus) {
			return bad("cpus", "%v: must be more than 0 (leave the flag out for the configured default)", f.cpus)
		}
		if n := runtime.NumCPU(); f.cpus > float64(n) {
			return bad("cpus", "%v is more than this host's %d CPUs", f.cpus, n)
		}
		l.CPUs = f.cpus
	}
	if f.set("pids") {
		if f.pids <= 0 {
			return bad("pids", "%d: must be more than 0 (every run has a limit; leave the flag out for the configured default)", f.pids)
		}
		l.Pids = f.pids
	}
	l.OutputLimitKill = f.oKill
	return nil
}

// Bounds of what --file reads from the host in one run.
const maxInputCount = 10000

// inputFiles gathers --file contents within maxInputFiles bytes and
// maxInputCount files.
type inputFiles struct {
	files map[string][]byte
	total int64
}

// add reads host (a file, or a directory tree: its regular files, every
// path checked as a single file's is) into the work dir at dst.
func (in *inputFiles) add(host, dst string) error {
	st, err := os.Stat(host)
	if err != nil {
		return sandbox.Errorf(sandbox.ErrInvalid, "file_invalid", "--file %s: %w", host, err)
	}
	if !st.IsDir() {
		return in.addFile(host, dst)
	}
	return filepath.WalkDir(host, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return sandbox.Errorf(sandbox.ErrInvalid, "file_invalid", "--file %s: %w", host, err)
		}
		rel, _ := filepath.Rel(host, path)
		switch {
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			// A symlink could lead anywhere on the host; a device or FIFO
			// is no file to copy. Said, not silently dropped.
			fmt.Fprintf(os.Stderr, "execbox: --file %s: %s skipped: not a regular file\n", host, rel)
			return nil
		}
		return in.addFile(path, filepath.ToSlash(filepath.Join(dst, rel)))
	})
}

func (in *inputFiles) addFile(host, dst string) error {
	dst = strings.TrimPrefix(dst, "./")
	if err := sandbox.CheckPath(dst); err != nil {
		return err
	}
	if len(in.files) >= maxInputCount {
		return sandbox.Errorf(sandbox.ErrLimit, "input_too_large", "--file %s: more than %d input files", host, maxInputCount)
	}
	data, err := readBounded(host, maxInputFiles-in.total)
	if errors.Is(err, errTooLarge) {
		return sandbox.Errorf(sandbox.ErrLimit, "input_too_large", "--file %s: input files exceed %d MiB in all", host, maxInputFiles/sandbox.MiB)
	}
	if err != nil {
		return sandbox.Errorf(sandbox.ErrInvalid, "file_invalid", "--file %s: %w", host, err)
	}
	in.total += int64(len(data))
	in.files[dst] = data
	return nil
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
		if res.Message != "" { // the program could not be started (126, 127)
			fmt.Fprintf(os.Stderr, "execbox: %s\n", res.Message)
		}
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

// warnWeak says on stderr, in one line, when the run's backend bounded it
// more weakly than asked (allow_weak_limits let it run): a memory overrun
// is then a MemoryError, not a kill.
func warnWeak(e *engine.Engine, backend string) {
	b, ok := e.Backend(backend)
	if !ok {
		return
	}
	if caps := b.Capabilities(); len(caps.Weak) > 0 && caps.Isolation != sandbox.IsolationNone {
		fmt.Fprintf(os.Stderr, "execbox: warning: limits weaker than asked (allow_weak_limits): %s; execbox doctor says why\n", engine.WeakLimits(caps))
	}
}
