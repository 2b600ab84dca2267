package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/execbox/execbox/internal/daemon/auth"
	"github.com/execbox/execbox/internal/daemon/mcpserver"
	"github.com/execbox/execbox/sandbox"
)

// Issue 33, "Trust first", over MCP: an adapter adds no policy and loses
// none of the API's.

// TestMCPMemoryBounded: six concurrent session_exec calls each printing
// 16 MiB of NULs (96 MiB of JSON each) grow `execbox serve` by no more than
// REST's bound (TestServeMemoryBounded: 2 × the result memory reserved +
// 64 MiB). The model sees MaxText of each; the rest is never held. Before
// the fix the in-process answers were buffered whole and decoded again:
// the server peaked at 1.4 GB from 52 MiB (REST, the same calls: 250 MiB).
func TestMCPMemoryBounded(t *testing.T) {
	requirePython(t)
	const calls, output = 6, 16 << 20
	s := startServer(t, append(slices.Clone(localServe), "EXECBOX_LIMITS_OUTPUT=16m",
		"EXECBOX_SERVER_MAX_RUNS=8", "EXECBOX_SERVER_MAX_RESULT_MEMORY=512m"))
	cs := mcpConnect(t, s, "")
	var ids []string
	for range calls {
		var sess mcpserver.SessionOutput
		if res := mcpCall(t, cs, "session_open", map[string]any{}, &sess); res.IsError {
			t.Fatalf("session_open: %s", toolText(res))
		}
		ids = append(ids, sess.SessionID)
	}
	base, _ := memStatus(t, s.cmd.Process.Pid)
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			var out mcpserver.RunOutput
			res := mcpCall(t, cs, "session_exec", map[string]any{"session_id": id, "command": []string{"head", "-c", "16777216", "/dev/zero"}}, &out)
			if res.IsError || out.Reason != "exited" || out.ExitCode != 0 || !out.StdoutTruncated || out.Stdout != strings.Repeat("\x00", mcpserver.DefaultMaxText) {
				t.Errorf("session_exec: %s: %s, exit %d, %d bytes, truncated %v", toolText(res), out.Reason, out.ExitCode, len(out.Stdout), out.StdoutTruncated)
			}
		})
	}
	wg.Wait()
	hwm, rss := memStatus(t, s.cmd.Process.Pid)
	reserved := int64(calls * (2*output + sandbox.Defaults.ArtifactBytes))
	bound := base + 2*reserved + 64<<20
	t.Logf("VmHWM %d MiB (VmRSS %d MiB) from a baseline of %d MiB; bound %d MiB (%d MiB reserved)", hwm>>20, rss>>20, base>>20, bound>>20, reserved>>20)
	if hwm > bound {
		t.Errorf("the server's memory peaked at %d MiB, over the bound of %d MiB", hwm>>20, bound>>20)
	}
}

// TestMCPBearerScheme: an Authorization scheme in any case is accepted
// over MCP as over the API (HTTP's schemes are case-insensitive): the tool
// call's own request to the API carries the header as it came.
func TestMCPBearerScheme(t *testing.T) {
	s := startServer(t, append(slices.Clone(localServe), "EXECBOX_TOKEN=mcp-secret"))
	for _, scheme := range []string{"bearer", "BEARER", "bEaReR"} {
		if st, _, body := s.raw("GET", "/v1/sessions", "", "Authorization", scheme+" mcp-secret"); st != 200 {
			t.Fatalf("the API with %q: %d %s", scheme, st, body)
		}
		cs := mcpConnect(t, s, scheme+" mcp-secret")
		var out mcpserver.RunOutput
		if res := mcpCall(t, cs, "run_command", map[string]any{"command": []string{"echo", "hi"}}, &out); res.IsError || out.Stdout != "hi\n" {
			t.Errorf("run_command with %q: %s %+v", scheme, toolText(res), out)
		}
	}
	if cs, err := mcpDial(t, s, "bearer wrong"); err == nil {
		cs.Close()
		t.Error("connected with a wrong token")
	}
}

// TestMCPDuplicateKeys: tool arguments that give a key twice are refused
// before anything runs, naming the key as the API does for such a body
// (whose decoder would keep one of them); without the second key the same
// call runs.
func TestMCPDuplicateKeys(t *testing.T) {
	s := startServer(t, localServe)
	cs := mcpConnect(t, s, "")
	marker := filepath.Join(t.TempDir(), "ran")
	touch := `["sh","-c","touch ` + marker + `"]`
	for _, c := range []struct{ tool, args, field string }{
		{"run_command", `{"command":["true"],"command":` + touch + `}`, "command"},
		{"run_command", `{"command":` + touch + `,"files":{"a":"1","a":"2"}}`, "files.a"},
		{"run_code", `{"language":"sh","code":"true","code":"touch ` + marker + `"}`, "code"},
	} {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: c.tool, Arguments: json.RawMessage(c.args)})
		if err != nil {
			t.Fatal(err)
		}
		want := "invalid_request: " + c.field + ": the key is given twice (keys must be unique)"
		if !res.IsError || toolText(res) != want {
			t.Errorf("%s %s: error %v, %q; want %q", c.tool, c.args, res.IsError, toolText(res), want)
		}
		if c.tool == "run_command" {
			if st, _, body := s.raw("POST", "/v1/runs", c.args); st != 400 || !strings.Contains(body, `"detail":"`+c.field+`: the key is given twice (keys must be unique)"`) {
				t.Errorf("the API: %d %s", st, body)
			}
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a call with a key given twice ran")
	}
	// At the bound: each key once.
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "run_command", Arguments: json.RawMessage(`{"command":` + touch + `,"files":{"a":"1"}}`)})
	if err != nil || res.IsError {
		t.Fatalf("each key once: %v %s", err, toolText(res))
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("the call with each key once did not run")
	}
}

// TestMCPOtherToken: token B calls every session tool on token A's
// session: each fails exactly as for a session that does not exist, and
// A's session is as it was — open, its files, its context's state, its
// exec count.
func TestMCPOtherToken(t *testing.T) {
	requirePython(t)
	s := startServer(t, append(slices.Clone(localServe),
		"EXECBOX_AUTH_TOKENS=alice:"+auth.HashSecret("alice-secret")+",bob:"+auth.HashSecret("bob-secret")))
	alice, bob := mcpConnect(t, s, "Bearer alice-secret"), mcpConnect(t, s, "Bearer bob-secret")
	var sess mcpserver.SessionOutput
	if res := mcpCall(t, alice, "session_open", map[string]any{"files": map[string]string{"a.txt": "alice"}}, &sess); res.IsError {
		t.Fatalf("session_open: %s", toolText(res))
	}
	id := sess.SessionID
	var code mcpserver.CodeOutput
	if res := mcpCall(t, alice, "session_run_code", map[string]any{"session_id": id, "code": "secret = 42"}, &code); res.IsError || !code.OK {
		t.Fatalf("session_run_code: %s %+v", toolText(res), code)
	}
	if res := mcpCall(t, alice, "session_exec", map[string]any{"session_id": id, "command": []string{"true"}}, nil); res.IsError {
		t.Fatalf("session_exec: %s", toolText(res))
	}
	execs := func() int {
		t.Helper()
		info, err := s.client("alice-secret").Session(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		return info.Execs
	}
	before := execs()

	missing := strings.TrimSuffix(id, id[len(id)-4:]) + "0000"
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"session_exec", map[string]any{"command": []string{"sh", "-c", "echo bob > bob.txt"}}},
		{"session_run_code", map[string]any{"code": "secret = 0"}},
		{"session_run_code", map[string]any{"code": "secret = 0", "context_id": code.ContextID}},
		{"session_write_file", map[string]any{"path": "a.txt", "content": "bob"}},
		{"session_write_file", map[string]any{"path": "bob.txt", "content": "bob"}},
		{"session_read_file", map[string]any{"path": "a.txt"}},
		{"session_list_files", map[string]any{}},
		{"session_close", map[string]any{}},
	} {
		c.args["session_id"] = id
		got := mcpCall(t, bob, c.tool, c.args, nil)
		c.args["session_id"] = missing
		want := mcpCall(t, bob, c.tool, c.args, nil)
		if !got.IsError || !strings.HasPrefix(toolText(got), "session_not_found: ") ||
			strings.ReplaceAll(toolText(got), id, "ID") != strings.ReplaceAll(toolText(want), missing, "ID") {
			t.Errorf("token B's %s %v on A's session: error %v, %q; for no session: %q", c.tool, c.args, got.IsError, toolText(got), toolText(want))
		}
	}

	// A's session is untouched.
	if n := execs(); n != before {
		t.Errorf("A's session has %d execs after B's calls, %d before", n, before)
	}
	var ls mcpserver.ListOutput
	if res := mcpCall(t, alice, "session_list_files", map[string]any{"session_id": id}, &ls); res.IsError || len(ls.Entries) != 1 || ls.Entries[0].Path != "a.txt" {
		t.Errorf("A's files after B's calls: %s %+v", toolText(res), ls)
	}
	var fo mcpserver.FileOutput
	if res := mcpCall(t, alice, "session_read_file", map[string]any{"session_id": id, "path": "a.txt"}, &fo); res.IsError || fo.Content != "alice" {
		t.Errorf("A's a.txt after B's calls: %s %+v", toolText(res), fo)
	}
	code = mcpserver.CodeOutput{}
	if res := mcpCall(t, alice, "session_run_code", map[string]any{"session_id": id, "code": "secret"}, &code); res.IsError || string(mustJSON(t, code.Value)) != "42" {
		t.Errorf("A's context after B's calls: %s %+v", toolText(res), code)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMCPGuardDenies: a guard rule that denies a token's session execs
// and code refuses, over MCP, session_exec, session_run_code in an
// existing context and session_run_code that would make one, naming the
// rule, before anything runs; what the rule does not name (opening a
// session, a run, another token's code) runs.
func TestMCPGuardDenies(t *testing.T) {
	requirePython(t)
	s := startServer(t, append(slices.Clone(localServe), "EXECBOX_TOKEN=admin-secret", "EXECBOX_AUTH_TOKENS=user:"+auth.HashSecret("user-secret"),
		"EXECBOX_GUARD_RULES=[{name: no-session-code, action: deny, tokens: [user], operations: [session_exec, session_code]}]"))
	cs := mcpConnect(t, s, "Bearer user-secret")
	var sess mcpserver.SessionOutput
	if res := mcpCall(t, cs, "session_open", map[string]any{}, &sess); res.IsError {
		t.Fatalf("session_open: %s", toolText(res))
	}
	id := sess.SessionID
	// The admin token, which the rule does not name, makes a context in
	// the user's session: the user's code would run in it.
	admin := s.client("admin-secret")
	cx, err := admin.CreateContext(t.Context(), id, "python")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"session_exec", map[string]any{"command": []string{"sh", "-c", "echo ran > ran.txt"}}},
		{"session_run_code", map[string]any{"code": "open('ran.txt', 'w').write('ran')"}},
		{"session_run_code", map[string]any{"code": "open('ran.txt', 'w').write('ran')", "context_id": cx.ID}},
		{"session_run_code", map[string]any{"code": "require('fs').writeFileSync('ran.txt', 'ran')", "language": "javascript"}},
	} {
		c.args["session_id"] = id
		res := mcpCall(t, cs, c.tool, c.args, nil)
		if text := toolText(res); !res.IsError || !strings.HasPrefix(text, "guard_denied: ") || !strings.Contains(text, "no-session-code") {
			t.Errorf("%s %v under a deny rule: error %v, %q", c.tool, c.args, res.IsError, text)
		}
	}
	if list, err := admin.List(t.Context(), id, ""); err != nil || len(list.Entries) != 0 {
		t.Errorf("the session's files after the denied calls: %v %+v", err, list)
	}
	if cxs, err := admin.Contexts(t.Context(), id); err != nil || len(cxs) != 1 {
		t.Errorf("the session's contexts after the denied calls: %v %+v", err, cxs)
	}
	var out mcpserver.RunOutput
	if res := mcpCall(t, cs, "run_command", map[string]any{"command": []string{"echo", "ran"}}, &out); res.IsError || out.Stdout != "ran\n" {
		t.Errorf("a run, which the rule does not name: %s %+v", toolText(res), out)
	}
}
