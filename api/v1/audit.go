package v1

import (
	"net/url"
	"strconv"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// Operation is what an execution was: a run, a function call, a lint or a
// tool call; in the audit log also a failed authentication. The audit log
// and the metrics call it "kind" (the JSON field, the query parameter and
// the metrics label).
type Operation string

// Operations.
const (
	OpRun      Operation = "run"
	OpFunction Operation = "function"
	OpLint     Operation = "lint"
	OpTool     Operation = "tool"
	// OpSession is a session's creation and its end: the reason is
	// created, closed, expired, idle or shutdown.
	OpSession Operation = "session"
	// OpSessionExec is an exec in a session.
	OpSessionExec Operation = "session_exec"
	// OpSessionCode is a call in an interpreter context of a session.
	OpSessionCode Operation = "session_code"
	// OpSessionTerminal is a program started on a terminal of a session
	// (reason started), or input typed into it (reason input).
	OpSessionTerminal Operation = "session_terminal"
	// OpSessionUpload is files written into a session: PUT
	// …/files/{path} or a multipart upload.
	OpSessionUpload Operation = "session_upload"
	// OpAuth is the audit row of a failed authentication: its token is
	// empty, its remote address and error code say who and why.
	OpAuth Operation = "auth"
)

// AuditRecord is one execution in the audit log (GET /v1/audit).
type AuditRecord struct {
	ID        string    `json:"id"`
	Time      time.Time `json:"time"`
	RequestID string    `json:"request_id,omitempty"`
	// Token is the name of the token that asked ("anonymous" without auth).
	Token string `json:"token"`
	// Operation is run, function, lint, tool, session, session_exec,
	// session_code, session_terminal, session_upload or auth.
	Operation Operation       `json:"kind"`
	Backend   string          `json:"backend,omitempty"`
	Isolation string          `json:"isolation,omitempty"`
	Limits    *sandbox.Limits `json:"limits,omitempty"`
	// Reason is the sandbox reason of a run; for functions "ok" or the
	// response code.
	Reason   string         `json:"reason,omitempty"`
	ExitCode *int           `json:"exit_code,omitempty"`
	Duration time.Duration  `json:"duration_ns"`
	Usage    *sandbox.Usage `json:"usage,omitempty"`
	// CodeSHA256 is the hex SHA-256 of the whole request (command or code,
	// files, stdin, …; see internal/daemon/audit.RequestHash); Code is the code
	// that ran (a run's command as a JSON array), at most 64 KiB of it, when
	// audit.store_code is set.
	CodeSHA256 string `json:"code_sha256,omitempty"`
	Code       string `json:"code,omitempty"`
	// ErrorCode is the stable code of a refused or failed request.
	ErrorCode string `json:"error_code,omitempty"`
	// Remote is the caller's IP address.
	Remote string `json:"remote,omitempty"`
	// Session is the session of a session or session_exec row.
	Session string `json:"session,omitempty"`
	// The caller's names for the execution (X-Execbox-Run-Id, …), as its
	// events carry them.
	Caller
	// Terminal is the terminal of a session_terminal row.
	Terminal string `json:"terminal,omitempty"`
	// Inputs are what the request brought into the session: an upload's
	// files, a terminal's input.
	Inputs []AuditInput `json:"inputs,omitempty"`
}

// AuditInput is something a request brought into a session: a file an
// upload wrote (its path), or input typed into a terminal (no path), by
// its size and SHA-256 (hex); its bytes are never kept.
type AuditInput struct {
	Path   string `json:"path,omitempty"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Audit is GET /v1/audit.
type Audit struct {
	Records []AuditRecord `json:"records"`
	// Total counts every record matching the filter, beyond Limit.
	Total int `json:"total"`
}

// AuditQuery filters the audit log; zero fields do not filter.
type AuditQuery struct {
	Token string
	// Operation is the query parameter "kind".
	Operation Operation
	ErrorCode string
	// Session is the query parameter "session": a session's rows.
	Session string
	// RunID is the query parameter "run_id": the rows of a caller's run.
	RunID string
	Since time.Time
	Until time.Time
	// Limit bounds the records returned (newest first): 0 means
	// DefaultAuditLimit, at most MaxAuditLimit.
	Limit int
}

// Audit query bounds.
const (
	DefaultAuditLimit = 100
	MaxAuditLimit     = 1000
)

// Values encodes q as query parameters.
func (q AuditQuery) Values() url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("token", q.Token)
	set("kind", string(q.Operation))
	set("error_code", q.ErrorCode)
	set("session", q.Session)
	set("run_id", q.RunID)
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.UTC().Format(time.RFC3339Nano))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// ParseAuditQuery decodes query parameters; an error is ErrInvalid naming
// the parameter.
func ParseAuditQuery(v url.Values) (AuditQuery, error) {
	q := AuditQuery{Token: v.Get("token"), Operation: Operation(v.Get("kind")), ErrorCode: v.Get("error_code"), Session: v.Get("session"), RunID: v.Get("run_id")}
	for k := range v {
		switch k {
		case "token", "kind", "error_code", "session", "run_id", "since", "until", "limit":
		default:
			return q, invalid(k, "unknown query parameter (want token, kind, error_code, session, run_id, since, until, limit)")
		}
	}
	var err error
	for _, t := range []struct {
		name string
		dst  *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if s := v.Get(t.name); s != "" {
			if *t.dst, err = time.Parse(time.RFC3339Nano, s); err != nil {
				return q, invalid(t.name, "%q is not an RFC 3339 time", s)
			}
		}
	}
	if s := v.Get("limit"); s != "" {
		if q.Limit, err = strconv.Atoi(s); err != nil || q.Limit < 0 || q.Limit > MaxAuditLimit {
			return q, invalid("limit", "%q is not a number from 0 to %d", s, MaxAuditLimit)
		}
	}
	switch q.Operation {
	case "", OpRun, OpFunction, OpLint, OpTool, OpAuth:
	default:
		return q, invalid("kind", "%q is not run, function, lint, tool or auth", q.Operation)
	}
	return q, nil
}
