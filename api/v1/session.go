package v1

import (
	"bytes"
	"strings"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// SessionRequest is the body of POST /v1/sessions: a sandbox that lives
// across execs, keeping its files, until it is closed, its ttl passes or
// it stays unused for its idle timeout.
type SessionRequest struct {
	// Limits bound the session: memory, pids, cpus and the work dir's
	// size hold for the whole session, the wall-clock and output limits
	// for each exec. Zero fields take the server's defaults.
	Limits sandbox.Limits `json:"limits,omitzero"`
	// Env sets variables on top of the allowlisted environment, for every
	// exec (an exec's env adds to it).
	Env map[string]string `json:"env,omitempty"`
	// Files are written into the work dir first (small ones; upload large
	// ones with PUT …/files/{path}).
	Files map[string][]byte `json:"files,omitempty"`
	// TTL is the session's hard lifetime, IdleTimeout how long it may go
	// unused; zero takes the server's (30 min and 10 min by default).
	TTL         Seconds `json:"ttl,omitzero"`
	IdleTimeout Seconds `json:"idle_timeout,omitzero"`
	// Labels are the caller's own, shown when sessions are listed (at
	// most 16).
	Labels map[string]string `json:"labels,omitempty"`
	// Backend, Tier and MinIsolation say where it may run, as for a run.
	Backend      string `json:"backend,omitempty"`
	Tier         string `json:"tier,omitempty"`
	MinIsolation string `json:"min_isolation,omitempty"`
	// Image names the session's root filesystem, as for a run.
	Image string `json:"image,omitempty"`
}

// Build checks the request's shape and turns it into a Spec. base is the
// configured policy.
func (r *SessionRequest) Build(base sandbox.Policy) (sandbox.Spec, error) {
	spec := sandbox.Spec{Policy: base, Env: r.Env, Limits: r.Limits, Files: r.Files}
	for path := range r.Files {
		if err := sandbox.CheckPath(path); err != nil {
			return spec, &FieldError{Field: "files", Err: err}
		}
	}
	if err := checkName(r.Image, 255, "/:@"); err != nil {
		return spec, invalid("image", "%v", err)
	}
	spec.Image = r.Image
	// The limits are the engine's to check (OpenSession), once.
	if err := sandbox.CheckEnv(spec.Env); err != nil {
		return spec, &FieldError{Field: "env", Err: err}
	}
	if r.TTL < 0 {
		return spec, invalid("ttl", "must not be negative")
	}
	if r.IdleTimeout < 0 {
		return spec, invalid("idle_timeout", "must not be negative")
	}
	return spec, nil
}

// Session describes an open session (POST /v1/sessions, GET
// /v1/sessions/{id}).
type Session struct {
	ID string `json:"id"`
	// Owner is the name of the token that created it ("" without tokens).
	Owner     string            `json:"owner,omitempty"`
	Backend   string            `json:"backend"`
	Isolation string            `json:"isolation"`
	Labels    map[string]string `json:"labels,omitempty"`
	Limits    sandbox.Limits    `json:"limits"`
	Created   time.Time         `json:"created"`
	// Expires is when the ttl ends the session, whatever it is doing.
	Expires  time.Time `json:"expires"`
	LastUsed time.Time `json:"last_used"`
	// IdleTimeout is how long after LastUsed the session is closed.
	IdleTimeout Seconds `json:"idle_timeout"`
	Execs       int     `json:"execs"`
}

// Sessions is GET /v1/sessions: the caller's open sessions (all of them
// for an admin token), oldest first.
type Sessions struct {
	Sessions []Session `json:"sessions"`
}

// SessionExec is the body of POST /v1/sessions/{id}/exec: one command, or
// code, run in the session's work dir. Its result is a RunResult; with
// ?stream=1 the output comes as events, as for a run.
type SessionExec struct {
	// Command is the program and its arguments (argv, no shell).
	Command []string `json:"command,omitempty"`
	// Code is source run with Language's interpreter (python3 -c, node
	// -e, sh -c, bash -c); give Command or Code.
	Code     string `json:"code,omitempty"`
	Language string `json:"language,omitempty"`
	// Stdin is text fed to the program; StdinBase64 the same for bytes.
	Stdin       string `json:"stdin,omitempty"`
	StdinBase64 []byte `json:"stdin_base64,omitempty"`
	// Env adds to the session's environment for this exec.
	Env map[string]string `json:"env,omitempty"`
	// Dir is the working directory relative to the work dir.
	Dir string `json:"dir,omitempty"`
	// Timeout shortens the session's wall-clock limit for this exec.
	Timeout Seconds `json:"timeout,omitzero"`
}

// Build checks the exec's shape and turns it into a Process.
func (r *SessionExec) Build() (*sandbox.Process, error) {
	p := &sandbox.Process{Dir: r.Dir, Env: r.Env, Timeout: time.Duration(r.Timeout)}
	switch {
	case len(r.Command) > 0 && r.Code != "":
		return nil, invalid("command", "give command or code, not both")
	case len(r.Command) > 0:
		if err := checkCommand(r.Command, r.Language); err != nil {
			return nil, err
		}
		p.Args = r.Command
	case r.Code != "":
		lang, ok := sandbox.LookupLanguage(r.Language)
		if !ok {
			return nil, invalid("language", "%q is not one of %s", r.Language, sandbox.LanguageList(false))
		}
		if len(r.Code) > MaxArgLen {
			return nil, invalid("code", "longer than %d KiB; put a longer program in a file and run it", MaxArgLen/sandbox.KiB)
		}
		p.Args = lang.InlineArgs(r.Code)
	default:
		return nil, invalid("command", "give a command or code")
	}
	switch {
	case r.Stdin != "" && len(r.StdinBase64) > 0:
		return nil, invalid("stdin", "give stdin or stdin_base64, not both")
	case r.Stdin != "":
		p.Stdin = strings.NewReader(r.Stdin)
	case len(r.StdinBase64) > 0:
		p.Stdin = bytes.NewReader(r.StdinBase64)
	}
	if r.Timeout < 0 {
		return nil, invalid("timeout", "must not be negative")
	}
	if err := sandbox.CheckEnv(r.Env); err != nil {
		return nil, &FieldError{Field: "env", Err: err}
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// FileInfo describes one entry of a session's work dir (GET
// /v1/sessions/{id}/stat/{path}, PUT …/files/{path}).
type FileInfo = sandbox.FileInfo

// Uploaded is POST /v1/sessions/{id}/upload[/{dir}]: the files a
// multipart upload wrote, in the order of its parts.
type Uploaded struct {
	Files []FileInfo `json:"files"`
}

// FileList is GET /v1/sessions/{id}/list[/{dir}]: the directory's entries
// sorted by name; Truncated says there were more than the server lists.
type FileList struct {
	Entries   []FileInfo `json:"entries"`
	Truncated bool       `json:"truncated,omitempty"`
}
