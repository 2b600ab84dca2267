package sandbox

import (
	"fmt"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// Reason says why a process ended.
type Reason string

const (
	ReasonExited        Reason = "exited"          // the program exited by itself
	ReasonSignaled      Reason = "signaled"        // a signal not sent by execbox ended it
	ReasonTimeout       Reason = "timeout"         // the wall-clock limit passed; the tree was killed
	ReasonCanceled      Reason = "canceled"        // the caller cancelled; the tree was killed
	ReasonMemoryLimit   Reason = "memory_limit"    // killed by the memory limit (OOM)
	ReasonPidsLimit     Reason = "pids_limit"      // the process limit was hit and the program failed (ExitCode is its own); one that coped ends exited, with a Message naming the limit
	ReasonOutputLimit   Reason = "output_limit"    // output passed its cap with OutputLimitKill set
	ReasonCPULimit      Reason = "cpu_limit"       // the CPU-time limit (SIGXCPU / SIGKILL) ended it
	ReasonFileSizeLimit Reason = "file_size_limit" // a write passed the file-size limit (SIGXFSZ)
	ReasonSandboxError  Reason = "sandbox_error"   // the sandbox failed around the program
)

// Exit codes of a program that could not be started, as a POSIX shell and
// `docker run` report them. Exec returns them in a Result with reason
// "exited" and the cause in Message; the program did not run, so it wrote
// nothing.
const (
	// ExitNotExecutable: the program was found but cannot be executed: a
	// directory or other non-regular file, no execute permission (for the
	// sandbox's user, or a noexec mount), an exec format error.
	ExitNotExecutable = 126
	// ExitNotFound: there is no such program: not in the sandbox's PATH, no
	// file at the path given, or a script whose interpreter is missing.
	ExitNotFound = 127
)

// ReasonOf says why a program ended by itself with signal sig (0: it
// exited): the limit a signal stands for — SIGXCPU is the CPU-time rlimit,
// SIGXFSZ the file-size rlimit — or signaled.
func ReasonOf(sig syscall.Signal) Reason {
	switch sig {
	case 0:
		return ReasonExited
	case syscall.SIGXCPU:
		return ReasonCPULimit
	case syscall.SIGXFSZ:
		return ReasonFileSizeLimit
	default:
		return ReasonSignaled
	}
}

// Result is what came back from one Exec (and, through Run, the artifacts).
type Result struct {
	ID        string    `json:"id,omitempty"`
	Backend   string    `json:"backend"`   // the backend that really ran it
	Isolation Isolation `json:"isolation"` // its isolation level
	Reason    Reason    `json:"reason"`
	// ExitCode is the program's exit status; -1 when a signal ended it.
	ExitCode int `json:"exit_code"`
	// Signal names the signal that ended the program ("SIGKILL"), if any.
	Signal          string `json:"signal,omitempty"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	// StdoutBase64 and StderrBase64 carry a stream that is not valid
	// UTF-8, byte for byte; its text field is then empty (see WireForm).
	StdoutBase64 []byte `json:"stdout_base64,omitempty"`
	StderrBase64 []byte `json:"stderr_base64,omitempty"`
	Usage        Usage  `json:"usage"`
	// Artifacts are the regular files created or changed in the work dir.
	Artifacts []Artifact `json:"artifacts,omitempty"`
	// Skipped lists files not returned as artifacts, and why.
	Skipped []Skipped `json:"skipped,omitempty"`
	// Enforcement maps each limit ("memory", "pids", "wall", …) to the
	// mechanism that enforced it ("cgroup v2", "rlimit", "execbox timer", …),
	// or to "not enforced" with the reason.
	Enforcement map[string]string `json:"enforcement,omitempty"`
	// Message explains a sandbox_error or a limit that was hit, for people.
	Message string `json:"message,omitempty"`
	// Limits are the limits the run had, defaults applied; Sources says
	// where each came from, and where its backend and network did:
	// "call" (the request), "config" (the configuration) or "default"
	// (execbox's own). Set by the engine for a run it admitted.
	Limits  *Limits           `json:"limits,omitempty"`
	Sources map[string]string `json:"sources,omitempty"`
}

// Where a run's setting came from (Result.Sources).
const (
	FromCall    = "call"
	FromConfig  = "config"
	FromDefault = "default"
)

// Usage is what the process tree used, where the backend can measure it.
type Usage struct {
	Wall       time.Duration `json:"wall_ns"`
	CPU        time.Duration `json:"cpu_ns"`            // user + system
	PeakMemory int64         `json:"peak_memory_bytes"` // 0 when unknown
}

// Artifact is one file the program left in the work dir.
type Artifact struct {
	Path string `json:"path"` // relative to the work dir
	Size int64  `json:"size"`
	Mode uint32 `json:"mode"`
	Data []byte `json:"data"`
}

// Skipped is a file that was not returned as an artifact.
type Skipped struct {
	Path   string `json:"path"`
	Reason string `json:"reason"` // "symlink", "not a regular file", "file count limit", "byte limit", …
}

// Artifacts is the outcome of collecting a work dir.
type Artifacts struct {
	Files   []Artifact
	Skipped []Skipped
}

// WireForm readies r for a transport that encodes it as JSON, where a
// string must be UTF-8: a stream that is not moves, byte for byte, to its
// base64 field. Unless explain, the per-limit Enforcement prose is left
// out: it is the same for every run of a backend (its Capabilities and
// health say it) and only noise in an agent's context.
func (r *Result) WireForm(explain bool) {
	if !utf8.ValidString(r.Stdout) {
		r.StdoutBase64, r.Stdout = []byte(r.Stdout), ""
	}
	if !utf8.ValidString(r.Stderr) {
		r.StderrBase64, r.Stderr = []byte(r.Stderr), ""
	}
	if !explain {
		r.Enforcement = nil
	}
}

// Succeeded reports whether the program ran and exited 0.
func (r *Result) Succeeded() bool { return r.Reason == ReasonExited && r.ExitCode == 0 }

// Ending says how the program ended, for an error message: its exit status
// or its reason (and signal), the sandbox's message, and the last KiB of
// its stderr, where a language runner reports its own failures.
func (r *Result) Ending() string {
	parts := []string{string(r.Reason)}
	if r.Reason == ReasonExited {
		parts[0] = fmt.Sprintf("exit status %d", r.ExitCode)
	} else if r.Signal != "" {
		parts[0] += " (" + r.Signal + ")"
	}
	if r.Message != "" {
		parts = append(parts, r.Message)
	}
	if tail := strings.TrimSpace(r.Stderr); tail != "" {
		if len(tail) > 1024 {
			tail = "…" + strings.ToValidUTF8(tail[len(tail)-1024:], "")
		}
		parts = append(parts, tail)
	}
	return strings.Join(parts, ": ")
}
