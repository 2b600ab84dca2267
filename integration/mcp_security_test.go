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

	"github.com/execbox/execbox/internal/mcpserver"
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
