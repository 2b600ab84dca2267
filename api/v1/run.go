package v1

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/execbox/execbox/sandbox"
)

// RunRequest is the body of POST /v1/runs: a command, or code in a
// language, with its input, limits and where it may run.
type RunRequest struct {
	// Command is the program and its arguments (argv, no shell).
	Command []string `json:"command,omitempty"`
	// Code is a program's source, written to main.py, main.js or main.sh
	// in the work dir and run with Language's interpreter (python3 -B,
	// node, sh, bash). Give Command or Code, not both.
	Code string `json:"code,omitempty"`
	// Language is python (default), javascript, sh or bash.
	Language string `json:"language,omitempty"`
	// Stdin is text fed to the program; StdinBase64 is the same for bytes.
	// Give at most one.
	Stdin       string `json:"stdin,omitempty"`
	StdinBase64 []byte `json:"stdin_base64,omitempty"`
	// Files are written into the work dir first: relative path → content
	// (base64 in JSON).
	Files map[string][]byte `json:"files,omitempty"`
	// Env sets variables on top of the sandbox's allowlisted environment.
	Env map[string]string `json:"env,omitempty"`
	// Dir is the working directory relative to the work dir.
	Dir string `json:"dir,omitempty"`
	// Limits bound the run; zero fields take the server's defaults. In
	// JSON, durations are seconds or text ("1500ms"), sizes bytes or text
	// ("256m").
	Limits sandbox.Limits `json:"limits,omitzero"`
	// Network is "none" (default). The API offers no relaxation of it.
	Network string `json:"network,omitempty"`
	// Backend, Tier and MinIsolation say where the run may go; the engine
	// decides and never goes below the configured floor.
	Backend      string `json:"backend,omitempty"`
	Tier         string `json:"tier,omitempty"`
	MinIsolation string `json:"min_isolation,omitempty"`
	// Image names the root filesystem: an image of execbox's store
	// (execbox image pull; on a backend that mounts them, native), or on
	// docker one the configuration lists (images). Empty is the backend's
	// default: the host's view, or docker's configured image.
	Image string `json:"image,omitempty"`
	// TmpExec lets programs run from /tmp, mounted noexec by default.
	TmpExec bool `json:"tmp_exec,omitempty"`
	// Scope names a group of runs that may share a reused environment
	// (docker's reuse_container); the server keeps each token's scopes
	// apart. Empty shares nothing.
	Scope string `json:"scope,omitempty"`
}

// RunResult is the answer to POST /v1/runs: the sandbox's Result,
// unchanged, with ID set to the run's id (the audit log's id).
type RunResult = sandbox.Result

// CodeProgram returns where code in language goes in the work dir and the
// argv that runs it; ok is false for a language that is not one of
// sandbox.Languages (python is the default for ""). The CLI's --code uses
// it too.
func CodeProgram(language string) (file string, args []string, ok bool) {
	l, ok := sandbox.LookupLanguage(language)
	return l.File, l.FileArgs(), ok
}

// Bounds of a RunRequest's shape (the body as a whole is bounded by the
// server's max_body).
const (
	MaxCommandArgs = 4096
	MaxArgLen      = 128 * sandbox.KiB // Linux's MAX_ARG_STRLEN
)

// checkCommand checks a request's command (given, not empty) against the
// bounds of argv; language must be empty with a command.
func checkCommand(cmd []string, language string) error {
	if language != "" {
		return invalid("language", "applies to code, not to a command")
	}
	if len(cmd) > MaxCommandArgs {
		return invalid("command", "more than %d arguments", MaxCommandArgs)
	}
	for i, a := range cmd {
		if len(a) > MaxArgLen {
			return invalid(fmt.Sprintf("command[%d]", i), "longer than %d KiB", MaxArgLen/sandbox.KiB)
		}
	}
	if cmd[0] == "" {
		return invalid("command[0]", "the program must not be empty")
	}
	return nil
}

// Build checks the request's shape and turns it into a Spec and a Process.
// base is the configured policy every run gets; the request cannot relax
// it. Errors are ErrInvalid (a *FieldError naming the field) or the
// sandbox package's own checks (which name the path or limit).
func (r *RunRequest) Build(base sandbox.Policy) (sandbox.Spec, *sandbox.Process, error) {
	spec := sandbox.Spec{Policy: base, Env: r.Env, Limits: r.Limits}
	p := &sandbox.Process{Dir: r.Dir}
	switch {
	case len(r.Command) > 0 && r.Code != "":
		return spec, nil, invalid("command", "give command or code, not both")
	case len(r.Command) > 0:
		if err := checkCommand(r.Command, r.Language); err != nil {
			return spec, nil, err
		}
		p.Args = r.Command
	case r.Code != "":
		file, args, ok := CodeProgram(r.Language)
		if !ok {
			return spec, nil, invalid("language", "%q is not one of python, javascript, sh, bash", r.Language)
		}
		if _, dup := r.Files[file]; dup {
			return spec, nil, invalid("files", "%s is where code goes; give code or that file, not both", file)
		}
		files := make(map[string][]byte, len(r.Files)+1)
		for k, v := range r.Files {
			files[k] = v
		}
		files[file] = []byte(r.Code)
		spec.Files = files
		p.Args = args
	default:
		return spec, nil, invalid("command", "give a command or code")
	}
	if spec.Files == nil && len(r.Files) > 0 {
		spec.Files = r.Files
	}
	for path := range r.Files {
		if err := sandbox.CheckPath(path); err != nil {
			return spec, nil, &FieldError{Field: "files", Err: err}
		}
	}
	switch r.Network {
	case "", "none":
	case "host":
		return spec, nil, &FieldError{Field: "network", Err: sandbox.Errorf(sandbox.ErrDenied, "network_denied",
			"network: host networking is not offered over the API; runs get no network")}
	default:
		return spec, nil, invalid("network", "%q is not none", r.Network)
	}
	switch {
	case r.Stdin != "" && len(r.StdinBase64) > 0:
		return spec, nil, invalid("stdin", "give stdin or stdin_base64, not both")
	case r.Stdin != "":
		p.Stdin = strings.NewReader(r.Stdin)
	case len(r.StdinBase64) > 0:
		p.Stdin = bytes.NewReader(r.StdinBase64)
	}
	if err := checkName(r.Image, 255, "/:@"); err != nil {
		return spec, nil, invalid("image", "%v", err)
	}
	if err := checkName(r.Scope, 64, ""); err != nil {
		return spec, nil, invalid("scope", "%v", err)
	}
	spec.Image, spec.Scope = r.Image, r.Scope
	spec.Policy.TmpExec = spec.Policy.TmpExec || r.TmpExec
	// The limits are the engine's to check (engine.Engine.Plan), once.
	if err := sandbox.CheckEnv(spec.Env); err != nil {
		return spec, nil, &FieldError{Field: "env", Err: err}
	}
	if err := p.Validate(); err != nil {
		return spec, nil, err
	}
	return spec, p, nil
}

// checkName checks a name a caller gives (an image, a scope): at most max
// bytes of letters, digits, ".", "_", "-" and the given extra characters.
func checkName(s string, max int, extra string) error {
	if len(s) > max {
		return fmt.Errorf("longer than %d bytes", max)
	}
	for _, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-"+extra, c)
		if !ok {
			return fmt.Errorf("%q: only letters, digits and ._-%s", s, extra)
		}
	}
	return nil
}
