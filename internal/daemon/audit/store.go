package audit

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/execbox/execbox/sandbox"
)

// Options configure a Store.
type Options struct {
	// StoreCode keeps the code itself, not only its hash.
	StoreCode bool
	// MaxAge deletes rows older than this; 0 keeps them.
	MaxAge time.Duration
	// MaxRows keeps at most this many rows, deleting the oldest; 0: no bound.
	MaxRows int
	// PruneInterval is how often retention runs (default 1 minute).
	PruneInterval time.Duration
	// ReadOnly opens an existing database for queries only.
	ReadOnly bool
	Logger   *slog.Logger
}

// Store is an open audit log.
type Store struct {
	db   *sql.DB
	opts Options

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

const schema = `
CREATE TABLE IF NOT EXISTS executions (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT,
	id          TEXT NOT NULL UNIQUE,
	time_ns     INTEGER NOT NULL,
	request_id  TEXT NOT NULL DEFAULT '',
	token       TEXT NOT NULL,
	kind        TEXT NOT NULL,
	backend     TEXT NOT NULL DEFAULT '',
	isolation   TEXT NOT NULL DEFAULT '',
	limits      TEXT,
	reason      TEXT NOT NULL DEFAULT '',
	exit_code   INTEGER,
	duration_ns INTEGER NOT NULL DEFAULT 0,
	usage       TEXT,
	code_sha256 TEXT NOT NULL DEFAULT '',
	code        TEXT,
	error_code  TEXT NOT NULL DEFAULT '',
	remote      TEXT NOT NULL DEFAULT '',
	session     TEXT NOT NULL DEFAULT '',
	run_id      TEXT NOT NULL DEFAULT '',
	node_name   TEXT NOT NULL DEFAULT '',
	tool_call_id TEXT NOT NULL DEFAULT '',
	terminal    TEXT NOT NULL DEFAULT '',
	inputs      TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS executions_time ON executions(time_ns);
CREATE INDEX IF NOT EXISTS executions_token ON executions(token, time_ns);
`

// Open opens (creating if needed) the audit log at path.
func Open(path string, o Options) (*Store, error) {
	if path == "" {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "audit_path", "audit log: no path")
	}
	if o.PruneInterval <= 0 {
		o.PruneInterval = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxAge < 0 || o.MaxRows < 0 {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "audit_retention", "audit log: max_age and max_rows must not be negative")
	}
	mode := "rwc"
	if o.ReadOnly {
		mode = "ro"
		if _, err := os.Stat(path); err != nil {
			return nil, sandbox.Errorf(sandbox.ErrNotFound, "audit_not_found", "opening audit log: %w", err)
		}
	} else {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("creating audit log dir: %w", err)
		}
		// Create the file private before SQLite does with its 0644.
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("creating audit log: %w", err)
		}
		f.Close()
	}
	q := url.Values{}
	q.Add("mode", mode)
	q.Add("_pragma", "busy_timeout(5000)")
	if !o.ReadOnly {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
	}
	q.Add("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("opening audit log: %w", err)
	}
	// One connection: SQLite has one writer anyway, and this keeps the
	// pragmas and the WAL on a single handle.
	db.SetMaxOpenConns(1)
	s := &Store{db: db, opts: o, stop: make(chan struct{})}
	if !o.ReadOnly {
		if _, err := db.Exec(schema); err != nil {
			db.Close()
			return nil, fmt.Errorf("creating audit schema in %s: %w", path, err)
		}
		if err := migrate(db); err != nil {
			db.Close()
			return nil, fmt.Errorf("updating the audit schema in %s: %w", path, err)
		}
		if _, err := s.Prune(context.Background(), time.Now()); err != nil {
			db.Close()
			return nil, err
		}
		s.wg.Go(s.pruneLoop)
	} else if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening audit log %s: %w", path, err)
	}
	return s, nil
}

// migrate adds the columns a database made by an older execbox lacks.
func migrate(db *sql.DB) error {
	for _, col := range []string{"remote", "session", "run_id", "node_name", "tool_call_id", "terminal", "inputs"} {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM pragma_table_info('executions') WHERE name = ?`, col).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			if _, err := db.Exec(`ALTER TABLE executions ADD COLUMN ` + col + ` TEXT NOT NULL DEFAULT ''`); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Store) pruneLoop() {
	t := time.NewTicker(s.opts.PruneInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			if n, err := s.Prune(context.Background(), now); err != nil {
				s.opts.Logger.Error("pruning the audit log", "err", err)
			} else if n > 0 {
				s.opts.Logger.Debug("pruned the audit log", "rows", n)
			}
		}
	}
}

// Close stops retention and closes the database. Safe to call twice.
func (s *Store) Close() error {
	var err error
	s.once.Do(func() {
		close(s.stop)
		s.wg.Wait()
		err = s.db.Close()
	})
	return err
}

// Hash returns the hex SHA-256 of code.
func Hash(code string) string {
	h := sha256.Sum256([]byte(code))
	return hex.EncodeToString(h[:])
}

// RequestHash hashes a whole request, field by field, for code_sha256: the
// command and the code, and with them the files, the stdin and whatever
// else decides what runs. Each field is framed (its name, a NUL, its length
// as 8 bytes big-endian, its bytes), so no two different requests hash
// alike by moving bytes from one field to the next. Add fields in a fixed
// order; file paths in sorted order.
type RequestHash struct{ h hash.Hash }

// NewRequestHash starts a request hash for an operation (run, function, …),
// which is hashed first.
func NewRequestHash(op string) *RequestHash {
	r := &RequestHash{h: sha256.New()}
	r.Field("execbox/"+op, nil)
	return r
}

// Field adds one field.
func (r *RequestHash) Field(name string, data []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(data)))
	r.h.Write([]byte(name))
	r.h.Write([]byte{0})
	r.h.Write(n[:])
	r.h.Write(data)
}

// Sum is the hex SHA-256 of the fields added.
func (r *RequestHash) Sum() string { return hex.EncodeToString(r.h.Sum(nil)) }

// MaxCode bounds the code a row keeps (Options.StoreCode): past it the
// code is cut, at a character boundary, and says so; its hash always
// covers the whole request.
const MaxCode = 64 << 10

// Record is one row: one execution.
type Record struct {
	ID        string
	Time      time.Time
	RequestID string
	// Token is the name of the token that asked ("anonymous" when empty).
	Token string
	// Operation is what the execution was: run, function, lint or tool, or
	// OpAuth for a failed authentication
	// (the column "kind").
	Operation string
	// Backend and Isolation are where it ran; empty when nothing ran.
	Backend   string
	Isolation string
	Limits    *sandbox.Limits
	// Reason is a run's sandbox reason; for functions "ok" or the
	// response code.
	Reason   string
	ExitCode *int
	Duration time.Duration
	Usage    *sandbox.Usage
	// CodeSHA256 is the hex SHA-256 of the code; Code is the code itself,
	// kept only with Options.StoreCode.
	CodeSHA256 string
	Code       string
	// ErrorCode is the stable code of a refused or failed request.
	ErrorCode string
	// Remote is the caller's address (an IP address, no port), when known.
	Remote string
	// Session is the session an exec ran in, or whose start or end the
	// row records (kinds session_exec and session).
	Session string
	// RunID, NodeName and ToolCallID are what the caller named its
	// execution by (the X-Execbox-* headers), as its events carry them.
	RunID, NodeName, ToolCallID string
	// Terminal is the terminal a session_terminal row's input was typed
	// into (or its program started on).
	Terminal string
	// Inputs are what the request brought into the session besides code:
	// the files an upload wrote, the input typed into a terminal.
	Inputs []Input
}

// Input is something a request brought into a session: a file an upload
// wrote (its path in the work dir), or input typed into a terminal (no
// path). Its size and SHA-256 are kept, never its bytes.
type Input struct {
	Path   string `json:"path,omitempty"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Entry is what a caller records: the record plus the code, which the
// Store keeps only if configured.
type Entry struct {
	Record
	// Code is the code that ran; give it only for an execution that ran
	// (a refused request keeps only its hash). The Store keeps at most
	// MaxCode bytes of it, and only with Options.StoreCode. When
	// Record.CodeSHA256 is empty, it is the SHA-256 of Code.
	Code string
}

// storedLimits is the limits column's form: the contract's field names
// with durations in nanoseconds, as every row has held them. It has none of
// sandbox.Limits' methods, so the API's JSON form of Limits may change
// without changing what older rows mean.
type storedLimits sandbox.Limits

// Record commits one row. A zero ID gets a new one, a zero Time now.
// It returns the stored record.
func (s *Store) Record(ctx context.Context, e Entry) (Record, error) {
	r := e.Record
	if r.ID == "" {
		r.ID = sandbox.NewID()
	}
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	if r.Token == "" && r.Operation != OpAuth {
		r.Token = "anonymous"
	}
	if e.Code != "" {
		if r.CodeSHA256 == "" {
			r.CodeSHA256 = Hash(e.Code)
		}
		if s.opts.StoreCode {
			r.Code = clip(e.Code)
		}
	}
	var limits, usage, code any
	if r.Limits != nil {
		b, _ := json.Marshal((*storedLimits)(r.Limits))
		limits = string(b)
	}
	if r.Usage != nil {
		b, _ := json.Marshal(r.Usage)
		usage = string(b)
	}
	if r.Code != "" {
		code = r.Code
	}
	var exit any
	if r.ExitCode != nil {
		exit = *r.ExitCode
	}
	inputs := ""
	if len(r.Inputs) > 0 {
		b, _ := json.Marshal(r.Inputs)
		inputs = string(b)
	}
	_, err := s.db.ExecContext(context.WithoutCancel(ctx), `INSERT INTO executions
		(id, time_ns, request_id, token, kind, backend, isolation, limits, reason, exit_code, duration_ns, usage, code_sha256, code, error_code, remote, session,
		 run_id, node_name, tool_call_id, terminal, inputs)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.Time.UnixNano(), r.RequestID, r.Token, r.Operation, r.Backend, r.Isolation, limits, r.Reason, exit,
		int64(r.Duration), usage, r.CodeSHA256, code, r.ErrorCode, r.Remote, r.Session, r.RunID, r.NodeName, r.ToolCallID, r.Terminal, inputs)
	if err != nil {
		return r, sandbox.Errorf(sandbox.ErrInternal, "audit_failed", "writing the audit log: %w", err)
	}
	return r, nil
}

// OpAuth is the operation of a failed authentication's row: who tried
// (Remote), when, and the error code; its Token is empty.
const OpAuth = "auth"

// clip cuts code to MaxCode bytes at a character boundary, saying so.
func clip(code string) string {
	if len(code) <= MaxCode {
		return code
	}
	cut := MaxCode
	for cut > 0 && !utf8.RuneStart(code[cut]) {
		cut--
	}
	return code[:cut] + fmt.Sprintf("\n… [cut at %d of %d bytes; code_sha256 covers the whole request]", cut, len(code))
}

// Query filters the log; zero fields do not filter.
type Query struct {
	Token     string
	Operation string
	ErrorCode string
	Session   string
	// RunID: the rows of the executions a caller named by this run id.
	RunID string
	// Since and Until bound the time: Since included, Until excluded.
	Since time.Time
	Until time.Time
	// Limit bounds the records returned (newest first): 0 means
	// DefaultLimit, at most MaxLimit.
	Limit int
}

// Query bounds.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Query returns the records matching q, newest first, and how many match
// in all.
func (s *Store) Query(ctx context.Context, q Query) ([]Record, int, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		where = append(where, cond)
		args = append(args, v)
	}
	if q.Token != "" {
		add("token = ?", q.Token)
	}
	if q.Operation != "" {
		add("kind = ?", q.Operation)
	}
	if q.ErrorCode != "" {
		add("error_code = ?", q.ErrorCode)
	}
	if q.Session != "" {
		add("session = ?", q.Session)
	}
	if q.RunID != "" {
		add("run_id = ?", q.RunID)
	}
	if !q.Since.IsZero() {
		add("time_ns >= ?", q.Since.UnixNano())
	}
	if !q.Until.IsZero() {
		add("time_ns < ?", q.Until.UnixNano())
	}
	cond := ""
	if len(where) > 0 {
		cond = " WHERE " + strings.Join(where, " AND ")
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)

	var total int
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM executions"+cond, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("counting audit records: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, time_ns, request_id, token, kind, backend, isolation, limits, reason,
		exit_code, duration_ns, usage, code_sha256, code, error_code, remote, session, run_id, node_name, tool_call_id, terminal, inputs FROM executions`+cond+
		" ORDER BY time_ns DESC, seq DESC LIMIT ?", append(args, limit)...)
	if err != nil {
		return nil, 0, fmt.Errorf("querying audit records: %w", err)
	}
	defer rows.Close()
	out := []Record{}
	for rows.Next() {
		var r Record
		var t, dur int64
		var limits, usage, code sql.NullString
		var exit sql.NullInt64
		var inputs string
		if err := rows.Scan(&r.ID, &t, &r.RequestID, &r.Token, &r.Operation, &r.Backend, &r.Isolation, &limits, &r.Reason,
			&exit, &dur, &usage, &r.CodeSHA256, &code, &r.ErrorCode, &r.Remote, &r.Session, &r.RunID, &r.NodeName, &r.ToolCallID,
			&r.Terminal, &inputs); err != nil {
			return nil, 0, fmt.Errorf("reading audit records: %w", err)
		}
		r.Time, r.Duration, r.Code = time.Unix(0, t), time.Duration(dur), code.String
		if exit.Valid {
			n := int(exit.Int64)
			r.ExitCode = &n
		}
		if limits.Valid {
			r.Limits = &sandbox.Limits{}
			if err := json.Unmarshal([]byte(limits.String), (*storedLimits)(r.Limits)); err != nil {
				return nil, 0, fmt.Errorf("reading audit record %s: limits: %w", r.ID, err)
			}
		}
		if usage.Valid {
			r.Usage = &sandbox.Usage{}
			if err := json.Unmarshal([]byte(usage.String), r.Usage); err != nil {
				return nil, 0, fmt.Errorf("reading audit record %s: usage: %w", r.ID, err)
			}
		}
		if inputs != "" {
			if err := json.Unmarshal([]byte(inputs), &r.Inputs); err != nil {
				return nil, 0, fmt.Errorf("reading audit record %s: inputs: %w", r.ID, err)
			}
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("reading audit records: %w", err)
	}
	return out, total, nil
}

// Prune applies retention as of now and returns how many rows it deleted.
func (s *Store) Prune(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	if s.opts.MaxAge > 0 {
		res, err := s.db.ExecContext(ctx, "DELETE FROM executions WHERE time_ns < ?", now.Add(-s.opts.MaxAge).UnixNano())
		if err != nil {
			return n, fmt.Errorf("pruning the audit log by age: %w", err)
		}
		d, _ := res.RowsAffected()
		n += d
	}
	if s.opts.MaxRows > 0 {
		// seq grows with insertion; keep the newest MaxRows.
		res, err := s.db.ExecContext(ctx, `DELETE FROM executions WHERE seq <= (
			SELECT seq FROM executions ORDER BY seq DESC LIMIT 1 OFFSET ?)`, s.opts.MaxRows)
		if err != nil {
			return n, fmt.Errorf("pruning the audit log by size: %w", err)
		}
		d, _ := res.RowsAffected()
		n += d
	}
	return n, nil
}
