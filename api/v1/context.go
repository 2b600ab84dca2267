package v1

import (
	"encoding/json"
	"time"
)

// ContextRequest is the body of POST /v1/sessions/{id}/contexts: a new
// interpreter context that keeps its state (variables, imports,
// definitions) from one call to the next, like a notebook kernel.
type ContextRequest struct {
	// Language is python (the default) or javascript.
	Language string `json:"language,omitempty"`
}

// Context describes an interpreter context of a session.
type Context struct {
	ID       string    `json:"id"`
	Language string    `json:"language"`
	Created  time.Time `json:"created"`
	Calls    int       `json:"calls"`
	// Lost says why the context did not survive (its interpreter exited,
	// did not stop at a timeout, or the session's agent ended); reset it.
	Lost string `json:"lost,omitempty"`
}

// Contexts is GET /v1/sessions/{id}/contexts, oldest first.
type Contexts struct {
	Contexts []Context `json:"contexts"`
}

// CodeRequest is the body of POST /v1/sessions/{id}/contexts/{ctx}/run.
type CodeRequest struct {
	Code string `json:"code"`
	// Timeout bounds the call (default and most: the session's wall
	// limit). At the timeout the call is interrupted — a KeyboardInterrupt
	// in Python — and the context keeps its state.
	Timeout Seconds `json:"timeout,omitzero"`
}

// CodeResult is how a call in a context ended. A call whose code raised
// is 200 with ok false and the error; a context that did not survive
// says lost.
type CodeResult struct {
	OK bool `json:"ok"`
	// Value is the last expression's value when JSON can carry it; Repr is
	// its printed form and Type its type's name (both also when Value
	// cannot be given).
	Value           json.RawMessage `json:"value,omitempty"`
	Repr            string          `json:"repr,omitempty"`
	Type            string          `json:"type,omitempty"`
	Stdout          string          `json:"stdout"`
	Stderr          string          `json:"stderr"`
	StdoutTruncated bool            `json:"stdout_truncated,omitempty"`
	StderrTruncated bool            `json:"stderr_truncated,omitempty"`
	Error           *CodeError      `json:"error,omitempty"`
	// Interrupted: the timeout interrupted the call; the context lives on.
	Interrupted bool `json:"interrupted,omitempty"`
	// Lost: the context did not survive the call; reset it.
	Lost       bool    `json:"lost,omitempty"`
	DurationMS float64 `json:"duration_ms"`
}

// CodeError is what a call raised.
type CodeError struct {
	Type      string `json:"type"`
	Message   string `json:"message"`
	Traceback string `json:"traceback,omitempty"`
}

// TerminalRequest is the body of POST /v1/sessions/{id}/terminals: a
// program to run on a new terminal (a PTY in the sandbox).
type TerminalRequest struct {
	// Command is the program and its arguments (default /bin/sh).
	Command []string          `json:"command,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Dir     string            `json:"dir,omitempty"`
	// Rows and Cols are the terminal's size (default 24 × 80).
	Rows int `json:"rows,omitempty"`
	Cols int `json:"cols,omitempty"`
}

// Terminal describes a program on a terminal of a session.
type Terminal struct {
	ID      string    `json:"id"`
	Command []string  `json:"command"`
	Created time.Time `json:"created"`
	// Exit is how the program ended; absent while it runs.
	Exit *TerminalExit `json:"exit,omitempty"`
}

// Terminals is GET /v1/sessions/{id}/terminals, oldest first.
type Terminals struct {
	Terminals []Terminal `json:"terminals"`
}

// TerminalExit is how a terminal's program ended.
type TerminalExit struct {
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	// Error says why the program could not be started.
	Error string `json:"error,omitempty"`
}

// TerminalResize is the body of POST …/terminals/{term}/resize.
type TerminalResize struct {
	Rows int `json:"rows"`
	Cols int `json:"cols"`
}

// TerminalOutput is the data of an "output" event of GET
// …/terminals/{term}/output: what the terminal showed, and how many bytes
// were dropped before it because nobody read them in time.
type TerminalOutput struct {
	Data    []byte `json:"data"`
	Dropped int64  `json:"dropped,omitempty"`
}

// Terminal output events (server-sent events of GET …/output).
const (
	TerminalEventOutput = "output"
	TerminalEventExit   = "exit"
)

// MaxTerminalInput bounds the body of one POST …/terminals/{term}/input.
const MaxTerminalInput = 64 * 1024
