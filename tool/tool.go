package tool

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// RunFunc runs one sandboxed process to its end: choosing the backend,
// admitting the run, Create → WriteFiles (spec.Files) → Exec → Artifacts →
// Close. A process that fails, times out or is killed is a Result with a
// Reason; an error means it could not be run. The engine supplies it.
type RunFunc func(ctx context.Context, spec sandbox.Spec, p *sandbox.Process) (*sandbox.Result, error)

// Options configure a Set. Only Dirs usually needs setting.
type Options struct {
	// Dirs are the tools dirs, absolute host paths, in override order: a
	// tool of a later dir replaces a built-in or a tool of an earlier dir
	// of the same name. Each is mounted read-only into every sandbox.
	Dirs []string
	// RuntimeDir is the host directory the embedded runtime is written
	// to (in a subdirectory named by its content hash) and mounted
	// read-only from. It must be owned by the current user and not
	// writable by others; it is created 0755 when missing (its parent
	// must exist). Empty means os.TempDir()/execbox-tool-runtime-<uid>.
	RuntimeDir string
	// ArgsMax is the size up to which arguments travel in the environment
	// (EXECBOX_TOOL_ARGS); larger ones go through a file of the work dir.
	// 0 means 60000 bytes; at most 100000.
	ArgsMax int
	// MaxArgs bounds the arguments of a call; 0 means 1 MiB, at most
	// 16 MiB. More is ErrLimit "tool_args_too_large".
	MaxArgs int
	// Timeout is a call's (and a discovery's) time limit when the call
	// sets none; 0 means 30 s, at most 10 min.
	Timeout time.Duration
	// Python names the interpreter inside the sandbox, looked up in its
	// PATH; empty means "python3".
	Python string
}

// Defaults and bounds of Options.
const (
	DefaultArgsMax = 60000
	maxArgsMax     = 100000
	DefaultMaxArgs = 1 * sandbox.MiB
	maxMaxArgs     = 16 * sandbox.MiB
	DefaultTimeout = 30 * time.Second
	MaxTimeout     = 10 * time.Minute
	maxDirs        = 16
)

// Where the runtime and the tools dirs appear inside a sandbox.
const (
	RuntimeTarget = "/execbox/tool"
	DirsTarget    = "/execbox/tools" // the i-th dir is DirsTarget/i
	// ArgsFile is the work-dir file large arguments travel through.
	ArgsFile = ".execbox-tool-args.json"
	// Builtin is the Source of the built-in tools.
	Builtin = "builtin"
)

// Spec describes one tool.
type Spec struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Parameters is the JSON Schema of the tool's arguments (an object).
	Parameters json.RawMessage `json:"parameters"`
	// Source is Builtin or the tools dir (a host path, as in Options.Dirs)
	// the tool comes from.
	Source string `json:"source"`
}

// Problem is a tool that was found but cannot be used: its module fails to
// load, its SPEC is malformed or its schema does not resolve. It shadows
// any tool of the same name from an earlier source; Run refuses it with
// ErrInvalid "tool_invalid" and Message.
type Problem struct {
	Name    string `json:"name"` // empty when it concerns a whole dir
	Source  string `json:"source"`
	Message string `json:"message"`
}

// Catalog is what a discovery found, sorted by name.
type Catalog struct {
	Tools    []Spec    `json:"tools"`
	Problems []Problem `json:"problems"`
}

// Call is one tool invocation.
type Call struct {
	// Name names the tool.
	Name string
	// Args is a JSON object; empty means {}.
	Args json.RawMessage
	// Files are written into the work dir before the tool runs (relative
	// path → content), e.g. for read_file.
	Files map[string][]byte
	// Network is the sandbox's network mode; the tool sees it as
	// ctx.network (http_fetch refuses to run under none).
	Network sandbox.Network
	// Limits bound the sandbox; zero fields are left to the engine. Wall
	// is the call's timeout and Output the protocol's bound: both are set
	// by Run.
	Limits sandbox.Limits
	// Timeout is the call's time limit; 0 means Options.Timeout.
	Timeout time.Duration
}

// Response is a call that ran: the tool's result, or its own failure
// (OK false with Error). A failure to run it at all is Run's error.
type Response struct {
	OK bool `json:"ok"`
	// Result is the tool's return value as JSON (present when OK).
	Result json.RawMessage `json:"result,omitempty"`
	// Error is the tool's failure (when not OK).
	Error *Error `json:"error,omitempty"`
	// Output is what the tool printed, to fd 1 or 2 alike (at most
	// MaxOutput bytes; OutputTruncated says more was dropped).
	Output          string `json:"output,omitempty"`
	OutputTruncated bool   `json:"output_truncated,omitempty"`
	// Artifacts are the files the tool created or changed in the work dir.
	Artifacts []sandbox.Artifact `json:"artifacts,omitempty"`
	// Source is where the tool came from (Spec.Source).
	Source string `json:"source"`
	// Backend and Isolation say what really ran the tool.
	Backend   string `json:"backend"`
	Isolation string `json:"isolation"`
	// Duration is how long the run took, sandbox set-up included.
	Duration time.Duration `json:"duration_ns"`
	Usage    sandbox.Usage `json:"usage"`
}

// Error is a tool's own failure.
type Error struct {
	// Code is stable and snake_case: tool_error (an exception), the code
	// of an execbox_tool.ToolError the tool raised (network_disabled,
	// file_not_found, path_invalid, …), result_invalid or result_too_large.
	Code string `json:"code"`
	// Type is the exception's class ("ZeroDivisionError"); empty for a
	// failure the runtime found in the result.
	Type      string `json:"type,omitempty"`
	Message   string `json:"message"`
	Traceback string `json:"traceback,omitempty"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Set is the tools of a configuration: the built-ins and those of
// Options.Dirs. It is safe for concurrent use.
type Set struct {
	opts    Options
	dirs    []string // Options.Dirs, symlinks resolved: the mount sources
	runtime string   // the materialised runtime dir
	disc    discovery
	// backstop is how long past a run's timeout Set waits for a RunFunc
	// that does not end the run itself.
	backstop time.Duration
}

// New checks o, writes the runtime into o.RuntimeDir and returns the Set.
// Errors: ErrInvalid "tool_options_invalid", "tool_dir_invalid",
// "tool_runtime_unsafe"; ErrInternal "tool_runtime_failed".
func New(o Options) (*Set, error) {
	if o.ArgsMax == 0 {
		o.ArgsMax = DefaultArgsMax
	}
	if o.MaxArgs == 0 {
		o.MaxArgs = DefaultMaxArgs
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Python == "" {
		o.Python = "python3"
	}
	if o.RuntimeDir == "" {
		o.RuntimeDir = filepath.Join(os.TempDir(), "execbox-tool-runtime-"+strconv.Itoa(os.Geteuid()))
	}
	switch {
	case o.ArgsMax < 0 || o.ArgsMax > maxArgsMax:
		return nil, sandbox.Errorf(sandbox.ErrInvalid, CodeOptionsInvalid, "tool options: args max %d is out of range (0 to %d bytes)", o.ArgsMax, maxArgsMax)
	case o.MaxArgs < 0 || o.MaxArgs > maxMaxArgs:
		return nil, sandbox.Errorf(sandbox.ErrInvalid, CodeOptionsInvalid, "tool options: max args %d is out of range (0 to %d bytes)", o.MaxArgs, maxMaxArgs)
	case o.Timeout < 0 || o.Timeout > MaxTimeout:
		return nil, sandbox.Errorf(sandbox.ErrInvalid, CodeOptionsInvalid, "tool options: timeout %v is out of range (0 to %v)", o.Timeout, MaxTimeout)
	case len(o.Dirs) > maxDirs:
		return nil, sandbox.Errorf(sandbox.ErrInvalid, CodeOptionsInvalid, "tool options: %d tools dirs, at most %d", len(o.Dirs), maxDirs)
	case !filepath.IsAbs(o.RuntimeDir):
		return nil, sandbox.Errorf(sandbox.ErrInvalid, CodeOptionsInvalid, "tool options: runtime dir %q is not an absolute path", o.RuntimeDir)
	}
	o.Dirs = append([]string(nil), o.Dirs...)
	s := &Set{opts: o, disc: newDiscovery(), backstop: backstop}
	for _, d := range o.Dirs {
		real, err := checkDir(d)
		if err != nil {
			return nil, err
		}
		s.dirs = append(s.dirs, real)
	}
	rt, err := materialise(o.RuntimeDir)
	if err != nil {
		return nil, err
	}
	s.runtime = rt
	return s, nil
}

// checkDir validates a tools dir and returns it with symlinks resolved.
func checkDir(d string) (string, error) {
	if !filepath.IsAbs(d) {
		return "", sandbox.Errorf(sandbox.ErrInvalid, CodeDirInvalid, "tools dir %q is not an absolute path", d)
	}
	real, err := filepath.EvalSymlinks(d)
	if err != nil {
		return "", sandbox.Errorf(sandbox.ErrInvalid, CodeDirInvalid, "checking tools dir %s: %w", d, err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", sandbox.Errorf(sandbox.ErrInvalid, CodeDirInvalid, "checking tools dir %s: %w", d, err)
	}
	if !st.IsDir() {
		return "", sandbox.Errorf(sandbox.ErrInvalid, CodeDirInvalid, "tools dir %s is not a directory", d)
	}
	return real, nil
}

// template is the sandbox spec and process of every runtime invocation:
// the runtime and the tools dirs mounted read-only, the protocol's output
// bound, the timeout as the wall limit; env selects the action.
func (s *Set) template(limits sandbox.Limits, network sandbox.Network, timeout time.Duration, env map[string]string) (sandbox.Spec, *sandbox.Process) {
	mounts := []sandbox.Mount{{Source: s.runtime, Target: RuntimeTarget}}
	var targets string
	for i, d := range s.dirs {
		t := DirsTarget + "/" + strconv.Itoa(i)
		mounts = append(mounts, sandbox.Mount{Source: d, Target: t})
		if i > 0 {
			targets += ":"
		}
		targets += t
	}
	limits.Wall = timeout
	limits.Output = protocolOutput
	limits.OutputLimitKill = false
	e := map[string]string{
		"EXECBOX_TOOL_DIRS":    targets,
		"EXECBOX_TOOL_NETWORK": network.String(),
	}
	for k, v := range env {
		e[k] = v
	}
	spec := sandbox.Spec{Limits: limits, Policy: sandbox.Policy{Network: network, Mounts: mounts}}
	p := &sandbox.Process{
		Args:    []string{s.opts.Python, "-I", "-B", "-X", "utf8", RuntimeTarget + "/entry.py"},
		Env:     e,
		Timeout: timeout,
	}
	return spec, p
}

// source maps a source the runtime reports to the one callers see.
func (s *Set) source(inSandbox string) (string, bool) {
	if inSandbox == Builtin {
		return Builtin, true
	}
	for i := range s.dirs {
		if inSandbox == DirsTarget+"/"+strconv.Itoa(i) {
			return s.opts.Dirs[i], true
		}
	}
	return "", false
}
