package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/execbox/execbox/sandbox"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T, o Options) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sub", "audit.db")
	s, err := Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func entry(token, op string, at time.Time, code string) Entry {
	return Entry{Record: Record{Token: token, Operation: op, Time: at}, Code: code}
}

func TestRecordAndQuery(t *testing.T) {
	ctx := context.Background()
	s, path := open(t, Options{})
	exit := 3
	at := time.Unix(1_800_000_000, 123)
	lim := sandbox.Defaults
	rec, err := s.Record(ctx, Entry{Record: Record{
		ID: "run1", Time: at, RequestID: "req1", Token: "ci", Operation: "run", Backend: "native", Isolation: "process",
		Limits: &lim, Reason: "exited", ExitCode: &exit, Duration: 1500 * time.Millisecond,
		Usage: &sandbox.Usage{Wall: time.Second, CPU: 2 * time.Millisecond, PeakMemory: 1 << 20},
	}, Code: "print(1)"})
	if err != nil {
		t.Fatal(err)
	}
	if rec.CodeSHA256 != Hash("print(1)") || rec.Code != "" {
		t.Fatalf("without store_code: %+v", rec)
	}
	s.Record(ctx, entry("", "function", at.Add(time.Second), "def main(): pass"))
	recs, total, err := s.Query(ctx, Query{})
	if err != nil || total != 2 || len(recs) != 2 {
		t.Fatalf("%d %v %v", total, recs, err)
	}
	if recs[0].Token != "anonymous" || recs[0].Operation != "function" || recs[0].ID == "" || recs[0].ExitCode != nil || recs[0].Limits != nil {
		t.Errorf("newest first, anonymous by default: %+v", recs[0])
	}
	got := recs[1]
	if got.ID != "run1" || !got.Time.Equal(at) || got.RequestID != "req1" || got.Backend != "native" || got.Isolation != "process" ||
		*got.Limits != lim || got.Reason != "exited" || *got.ExitCode != 3 || got.Duration != 1500*time.Millisecond ||
		got.Usage.PeakMemory != 1<<20 || got.CodeSHA256 != Hash("print(1)") || got.Code != "" {
		t.Fatalf("round trip: %+v", got)
	}
	// The file is private.
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v (%v)", p, st.Mode().Perm(), want, err)
		}
	}
	// A duplicate id is an error, not a silent overwrite.
	if _, err := s.Record(ctx, Entry{Record: Record{ID: "run1", Operation: "run"}}); !errors.Is(err, sandbox.ErrInternal) {
		t.Errorf("duplicate id: %v", err)
	}
}

// TestLimitsColumn: the limits column keeps the form every row has had
// (durations in nanoseconds), whatever the API's JSON form of Limits, so
// older rows read back the same.
func TestLimitsColumn(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t, Options{})
	lim := sandbox.Limits{Wall: 1500 * time.Millisecond, Memory: 64 * sandbox.MiB, OutputLimitKill: true}
	if _, err := s.Record(ctx, Entry{Record: Record{ID: "new", Operation: "run", Limits: &lim}}); err != nil {
		t.Fatal(err)
	}
	var col string
	if err := s.db.QueryRowContext(ctx, "SELECT limits FROM executions WHERE id = 'new'").Scan(&col); err != nil {
		t.Fatal(err)
	}
	if col != `{"wall":1500000000,"memory":67108864,"output_limit_kill":true}` {
		t.Errorf("limits column %s", col)
	}
	// A row an earlier execbox wrote.
	if _, err := s.db.ExecContext(ctx, `INSERT INTO executions (id, time_ns, token, kind, limits) VALUES ('old', 1, 't', 'run',
		'{"wall":15000000000,"cpu_time":17000000000,"memory":268435456,"cpus":1,"pids":64}')`); err != nil {
		t.Fatal(err)
	}
	recs, _, err := s.Query(ctx, Query{})
	if err != nil || len(recs) != 2 {
		t.Fatalf("%+v %v", recs, err)
	}
	want := map[string]sandbox.Limits{"new": lim, "old": {Wall: 15 * time.Second, CPUTime: 17 * time.Second, Memory: 256 * sandbox.MiB, CPUs: 1, Pids: 64}}
	for _, r := range recs {
		if r.Limits == nil || *r.Limits != want[r.ID] {
			t.Errorf("%s: limits %+v, want %+v", r.ID, r.Limits, want[r.ID])
		}
	}
}

func TestStoreCode(t *testing.T) {
	s, _ := open(t, Options{StoreCode: true})
	rec, err := s.Record(context.Background(), entry("ci", "run", time.Time{}, "secret()"))
	if err != nil || rec.Code != "secret()" || rec.Time.IsZero() {
		t.Fatalf("%+v %v", rec, err)
	}
	recs, _, _ := s.Query(context.Background(), Query{})
	if recs[0].Code != "secret()" {
		t.Fatalf("%+v", recs[0])
	}
}

func TestFilters(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t, Options{})
	t0 := time.Unix(1_800_000_000, 0)
	for i := range 10 {
		e := entry([]string{"a", "b"}[i%2], []string{"run", "function", "lint"}[i%3], t0.Add(time.Duration(i)*time.Minute), "")
		if i == 7 {
			e.ErrorCode = "busy"
		}
		if _, err := s.Record(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		q           Query
		total, rows int
	}{
		{Query{}, 10, 10},
		{Query{Token: "a"}, 5, 5},
		{Query{Operation: "run"}, 4, 4},
		{Query{Token: "b", Operation: "function"}, 2, 2},
		{Query{ErrorCode: "busy"}, 1, 1},
		{Query{Since: t0.Add(5 * time.Minute)}, 5, 5},
		{Query{Until: t0.Add(5 * time.Minute)}, 5, 5},
		{Query{Since: t0.Add(2 * time.Minute), Until: t0.Add(4 * time.Minute)}, 2, 2},
		{Query{Limit: 3}, 10, 3},
		{Query{Token: "nobody"}, 0, 0},
	} {
		recs, total, err := s.Query(ctx, tc.q)
		if err != nil || total != tc.total || len(recs) != tc.rows {
			t.Errorf("%+v: total %d rows %d (%v), want %d and %d", tc.q, total, len(recs), err, tc.total, tc.rows)
		}
		for i := 1; i < len(recs); i++ {
			if recs[i].Time.After(recs[i-1].Time) {
				t.Errorf("%+v: not newest first", tc.q)
			}
		}
	}
}

func TestPrune(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	s, path := open(t, Options{MaxAge: time.Hour, MaxRows: 3})
	for _, age := range []time.Duration{2 * time.Hour, time.Hour + time.Nanosecond, time.Hour, 30 * time.Minute, 20 * time.Minute, 10 * time.Minute, 0} {
		if _, err := s.Record(ctx, entry("t", "run", now.Add(-age), fmt.Sprint(age))); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.Prune(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	// By age: the two older than an hour go (exactly an hour stays); by
	// size: of the five left, the two oldest go.
	recs, total, _ := s.Query(ctx, Query{})
	if n != 4 || total != 3 || recs[2].CodeSHA256 != Hash(fmt.Sprint(20*time.Minute)) {
		t.Fatalf("pruned %d, %d left: %+v", n, total, recs)
	}
	if n, _ := s.Prune(ctx, now); n != 0 {
		t.Fatalf("second prune deleted %d", n)
	}
	s.Close()

	// Opening prunes, by the wall clock; zero bounds keep everything.
	s2, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Time{time.Now().Add(-2 * time.Hour), time.Now()} {
		s2.Record(ctx, entry("t", "run", at, ""))
	}
	if n, _ := s2.Prune(ctx, time.Now()); n != 0 {
		t.Fatalf("zero bounds pruned %d", n)
	}
	s2.Close()
	s3, err := Open(path, Options{MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if _, total, _ := s3.Query(ctx, Query{Since: now.Add(-time.Hour)}); total != 3 {
		t.Fatalf("%d rows from the first store, want 3", total)
	}
	if _, total, _ := s3.Query(ctx, Query{Until: now.Add(-time.Hour)}); total != 1 {
		t.Fatalf("open did not prune: %d recent rows, want 1", total)
	}
}

func TestPruneLoop(t *testing.T) {
	s, _ := open(t, Options{MaxAge: time.Millisecond, PruneInterval: 10 * time.Millisecond})
	if _, err := s.Record(context.Background(), entry("t", "run", time.Now().Add(-time.Second), "")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, total, _ := s.Query(context.Background(), Query{}); total == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the prune loop never pruned")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestConcurrentWritersAndAReader(t *testing.T) {
	ctx := context.Background()
	s, path := open(t, Options{})
	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 50 {
				if _, err := s.Record(ctx, entry(fmt.Sprint("w", w), "function", time.Time{}, fmt.Sprint(i))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			if _, _, err := ro.Query(ctx, Query{}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	_, total, err := ro.Query(ctx, Query{})
	if err != nil || total != 400 {
		t.Fatalf("%d rows (%v), want 400", total, err)
	}
	if _, err := ro.Record(ctx, entry("x", "run", time.Time{}, "")); err == nil {
		t.Fatal("a read-only store wrote")
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open("", Options{}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("no path: %v", err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing.db"), Options{ReadOnly: true}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("read-only, missing: %v", err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "a.db"), Options{MaxRows: -1}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("negative max_rows: %v", err)
	}
	notDB := filepath.Join(t.TempDir(), "junk.db")
	os.WriteFile(notDB, []byte("this is not a database, it is long enough to have a header......................................................."), 0o600)
	if _, err := Open(notDB, Options{}); err == nil {
		t.Errorf("a file that is not a database opened")
	}
}

// The request hash covers every field, framed: moving bytes from one field
// to the next, or leaving a field out, changes it (issue 22: code_sha256
// covered only the command, not the files).
func TestRequestHash(t *testing.T) {
	sum := func(fields ...string) string {
		h := NewRequestHash("run")
		for i := 0; i+1 < len(fields); i += 2 {
			h.Field(fields[i], []byte(fields[i+1]))
		}
		return h.Sum()
	}
	base := sum("command", `["sh","x"]`, "file:a", "1")
	for _, other := range []string{
		sum("command", `["sh","x"]`, "file:a", "2"),
		sum("command", `["sh","x"]`, "file:a1", ""),
		sum("command", `["sh","x"]`),
		sum("command", `["sh","x"]`, "file:a", "1", "stdin", ""),
	} {
		if other == base {
			t.Errorf("two different requests hash alike")
		}
	}
	if base != sum("command", `["sh","x"]`, "file:a", "1") || len(base) != 64 {
		t.Errorf("not deterministic hex SHA-256: %s", base)
	}
	if NewRequestHash("run").Sum() == NewRequestHash("function").Sum() {
		t.Errorf("the operation is not hashed")
	}
}

// Stored code is bounded and cut visibly; the given hash is kept; a failed
// authentication's row keeps its empty token and the remote address.
func TestCodeBoundAndRemote(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t, Options{StoreCode: true})
	long := strings.Repeat("é", MaxCode) // 2 bytes each: cut inside one
	r, err := s.Record(ctx, Entry{Record: Record{Token: "t", Operation: "run", CodeSHA256: "feed", Remote: "192.0.2.1"}, Code: long})
	if err != nil {
		t.Fatal(err)
	}
	if r.CodeSHA256 != "feed" || len(r.Code) > MaxCode+100 || !utf8.ValidString(r.Code) || !strings.Contains(r.Code, "cut at 65536 of 131072 bytes") {
		t.Fatalf("record: sha %q, %d bytes of code ending %q", r.CodeSHA256, len(r.Code), r.Code[len(r.Code)-80:])
	}
	if _, err := s.Record(ctx, Entry{Record: Record{Operation: OpAuth, ErrorCode: "unauthenticated", Remote: "192.0.2.2"}}); err != nil {
		t.Fatal(err)
	}
	recs, _, err := s.Query(ctx, Query{})
	if err != nil || len(recs) != 2 || recs[0].Token != "" || recs[0].Remote != "192.0.2.2" || recs[1].Remote != "192.0.2.1" {
		t.Fatalf("%+v %v", recs, err)
	}
}

// A database an older execbox made (without the remote column) gains it.
func TestMigrateOldSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	old := strings.Replace(schema, ",\n\tremote      TEXT NOT NULL DEFAULT ''", "", 1)
	old = strings.Replace(old, ",\n\tterminal    TEXT NOT NULL DEFAULT '',\n\tinputs      TEXT NOT NULL DEFAULT ''", "", 1)
	if old == schema || strings.Contains(old, "inputs") {
		t.Fatal("the old schema still has the new columns")
	}
	if _, err := db.Exec(old); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO executions (id, time_ns, token, kind) VALUES ('old', 1, 'a', 'run')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Record(context.Background(), Entry{Record: Record{Token: "b", Operation: "run", Remote: "::1", Terminal: "t1",
		Inputs: []Input{{Size: 1, SHA256: "ab"}}}}); err != nil {
		t.Fatal(err)
	}
	recs, total, err := s.Query(context.Background(), Query{})
	if err != nil || total != 2 || recs[0].Remote != "::1" || recs[0].Terminal != "t1" || len(recs[0].Inputs) != 1 || recs[1].ID != "old" || recs[1].Inputs != nil {
		t.Fatalf("%+v %d %v", recs, total, err)
	}
}

// TestInputs: what a request brought into a session is kept by path, size
// and SHA-256, in order; a row without inputs has none.
func TestInputs(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t, Options{})
	in := []Input{{Path: "a/b.txt", Size: 5, SHA256: Hash("alpha")}, {Path: "c", Size: 0, SHA256: Hash("")}}
	if _, err := s.Record(ctx, Entry{Record: Record{ID: "up", Operation: "session_upload", Session: "s1", Inputs: in}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Record(ctx, Entry{Record: Record{ID: "typed", Operation: "session_terminal", Session: "s1", Terminal: "t1",
		Inputs: []Input{{Size: 3, SHA256: Hash("ls\n")}}}}); err != nil {
		t.Fatal(err)
	}
	recs, _, err := s.Query(ctx, Query{Session: "s1"})
	if err != nil || len(recs) != 2 {
		t.Fatalf("%+v %v", recs, err)
	}
	if r := recs[1]; r.ID != "up" || r.Terminal != "" || !slices.Equal(r.Inputs, in) {
		t.Errorf("the upload's row: %+v", r)
	}
	if r := recs[0]; r.ID != "typed" || r.Terminal != "t1" || len(r.Inputs) != 1 || r.Inputs[0] != (Input{Size: 3, SHA256: Hash("ls\n")}) {
		t.Errorf("the terminal input's row: %+v", r)
	}
}
