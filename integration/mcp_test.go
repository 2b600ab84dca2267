package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/internal/daemon/mcpserver"
)

// TestMCPStdio drives `execbox mcp` with the MCP SDK's own client:
// initialize, list the tools, call each, an execbox error as a tool error
// with its code, and a cancelled call whose run ends.
func TestMCPStdio(t *testing.T) {
	requirePython(t)
	cmd := exec.Command(binary, "mcp")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "EXECBOX_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	auditDB := filepath.Join(t.TempDir(), "audit.db")
	cmd.Env = append(append(cmd.Env, localServe...), "EXECBOX_WORK_ROOT="+workRoot(t), "EXECBOX_AUDIT_PATH="+auditDB)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	progress := make(chan string, 16)
	c := mcp.NewClient(&mcp.Implementation{Name: "execbox-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			select {
			case progress <- r.Params.Message:
			default:
			}
		}})
	cs, err := c.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to execbox mcp: %v\n%s", err, stderr.String())
	}
	defer cs.Close()
	if got := cs.InitializeResult().ServerInfo.Name; got != "execbox" {
		t.Errorf("server name %q", got)
	}
	checkMCPTools(t, cs)

	// A call that runs a while reports progress when asked to.
	p := &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": []string{"sleep", "2.5"}}}
	p.SetProgressToken("sleeping")
	if res, err := cs.CallTool(t.Context(), p); err != nil || res.IsError {
		t.Fatalf("a slow call: %v %+v", err, res)
	}
	select {
	case m := <-progress:
		if !strings.HasPrefix(m, "running for ") {
			t.Errorf("progress message %q", m)
		}
	default:
		t.Error("no progress notification during a 2.5 s call")
	}

	// Cancelled: the call returns at once and its program is killed.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": []string{"sleep", "31.25"}}})
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(alive("31.25")) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if len(alive("31.25")) == 0 {
		t.Fatal("the run never started")
	}
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a cancelled call returned no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled call did not return")
	}
	for deadline := time.Now().Add(10 * time.Second); len(alive("31.25")) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the cancelled call's program lives on: %v", alive("31.25"))
		}
	}
	// The calls went through the API: they are in the audit log.
	cs.Close()
	r := execbox(t, []string{"EXECBOX_AUDIT_PATH=" + auditDB}, "", "audit", "--json")
	if r.code != 0 || strings.Count(r.stdout, `"kind": "run"`) < 3 {
		t.Errorf("audit log after the MCP calls: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestMCPHTTP: POST /mcp of a real `execbox serve` needs the API's token,
// and with it serves the same tools.
func TestMCPHTTP(t *testing.T) {
	requirePython(t)
	s := startServer(t, append(localServe, "EXECBOX_TOKEN=mcp-secret"))
	connect := func(token string) (*mcp.ClientSession, error) {
		if token != "" {
			token = "Bearer " + token
		}
		return mcpDial(t, s, token)
	}
	if cs, err := connect(""); err == nil {
		cs.Close()
		t.Fatal("connected to /mcp without a token")
	} else if !strings.Contains(err.Error(), "401") && !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
		t.Errorf("without a token: %v", err)
	}
	cs, err := connect("mcp-secret")
	if err != nil {
		t.Fatalf("connecting with the token: %v", err)
	}
	defer cs.Close()
	checkMCPTools(t, cs)
	a, err := s.client("mcp-secret").Audit(t.Context(), v1.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	for _, e := range a.Records {
		if e.Operation == "run" {
			runs++
		}
	}
	if runs < 3 {
		t.Errorf("%d runs in the audit log after the MCP calls: %+v", runs, a.Records)
	}
}

// mcpDial connects an MCP client to the server's /mcp, sending the
// Authorization header authz (none when empty).
func mcpDial(t *testing.T, s *server, authz string) (*mcp.ClientSession, error) {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: authorization{authz, tr}}
	c := mcp.NewClient(&mcp.Implementation{Name: "execbox-test", Version: "1"}, nil)
	return c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: s.url + "/mcp", HTTPClient: hc, MaxRetries: -1}, nil)
}

// mcpConnect is mcpDial that must succeed; the session closes at cleanup.
func mcpConnect(t *testing.T, s *server, authz string) *mcp.ClientSession {
	t.Helper()
	cs, err := mcpDial(t, s, authz)
	if err != nil {
		t.Fatalf("connecting to /mcp: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// authorization sets each request's Authorization header (none when
// empty).
type authorization struct {
	value string
	next  http.RoundTripper
}

func (a authorization) RoundTrip(r *http.Request) (*http.Response, error) {
	if a.value != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", a.value)
	}
	return a.next.RoundTrip(r)
}

// mcpCall calls a tool; out, when set, gets its structured result.
func mcpCall(t *testing.T, cs *mcp.ClientSession, name string, args, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if out != nil && res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %v: %s", name, err, b)
		}
	}
	return res
}

// checkMCPTools lists the tools and calls each.
func checkMCPTools(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	ctx := t.Context()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range lt.Tools {
		names = append(names, tool.Name)
		if tool.InputSchema == nil || tool.Description == "" {
			t.Errorf("tool %s lacks a schema or a description", tool.Name)
		}
		// The backend field names every backend of the binary.
		b, _ := json.Marshal(tool.InputSchema)
		var in struct {
			Properties map[string]struct{ Description string } `json:"properties"`
		}
		json.Unmarshal(b, &in)
		if p, ok := in.Properties["backend"]; ok && !strings.Contains(p.Description, "bwrap, docker, gvisor, kubernetes, local, microvm, native") {
			t.Errorf("%s.backend: %q does not name every backend", tool.Name, p.Description)
		}
	}
	slices.Sort(names)
	if want := []string{"execute_function", "lint", "list_tools", "run_code", "run_command", "run_tool", "session_close", "session_exec",
		"session_list_files", "session_open", "session_read_file", "session_run_code", "session_write_file"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	call := func(name string, args map[string]any, out any) *mcp.CallToolResult {
		t.Helper()
		return mcpCall(t, cs, name, args, out)
	}
	var run mcpserver.RunOutput
	res := call("run_command", map[string]any{"command": []string{"sh", "-c", "echo hi; echo err >&2; exit 3"}}, &run)
	if res.IsError || run.ExitCode != 3 || run.Reason != "exited" || run.Stdout != "hi\n" || run.Stderr != "err\n" || run.Backend != "local" {
		t.Errorf("run_command: %+v %+v", res, run)
	}
	run = mcpserver.RunOutput{}
	res = call("run_code", map[string]any{"language": "python", "code": "print(6 * 7)"}, &run)
	if res.IsError || run.ExitCode != 0 || run.Stdout != "42\n" {
		t.Errorf("run_code: %+v %+v", res, run)
	}
	var fn mcpserver.FunctionOutput
	res = call("execute_function", map[string]any{"code": "def main(a, b):\n    print('adding')\n    return a + b\n", "params": map[string]any{"a": 2, "b": 40}}, &fn)
	if res.IsError || !fn.OK || fn.Data != float64(42) || fn.Stdout != "adding\n" {
		t.Errorf("execute_function: %+v %+v", res, fn)
	}
	fn = mcpserver.FunctionOutput{}
	res = call("execute_function", map[string]any{"code": "def main():\n    return 1 / 0\n"}, &fn)
	if !res.IsError || fn.OK || fn.Code != "user_error" || fn.Type != "ZeroDivisionError" || !strings.Contains(fn.Traceback, "main") {
		t.Errorf("execute_function raising: %+v %+v", res, fn)
	}
	var lint mcpserver.LintOutput
	res = call("lint", map[string]any{"code": "def f(:\n    pass\n"}, &lint)
	if res.IsError || len(lint.Diagnostics) == 0 || lint.Diagnostics[0].Line != 1 {
		t.Errorf("lint: %+v %+v", res, lint)
	}
	// The server's tools: on the local backend (which mounts no tools
	// dir) a tool error with the code; on native they run.
	if res := call("list_tools", nil, nil); !res.IsError || !strings.HasPrefix(toolText(res), "mounts_unsupported: ") {
		t.Errorf("list_tools on local: %v %q", res.IsError, toolText(res))
	}
	if os.Geteuid() == 0 {
		var tr mcpserver.RunToolOutput
		res = call("run_tool", map[string]any{"name": "python", "args": map[string]any{"code": "6 * 7"}, "backend": "native"}, &tr)
		if res.IsError || !tr.OK || tr.Backend != "native" || fmt.Sprint(tr.Result.(map[string]any)["value"]) != "42" {
			t.Errorf("run_tool: %+v %+v", res, tr)
		}
		tr = mcpserver.RunToolOutput{}
		res = call("run_tool", map[string]any{"name": "http_fetch", "args": map[string]any{"url": "http://127.0.0.1:9/"}, "backend": "native"}, &tr)
		if !res.IsError || tr.OK || tr.Error == nil || tr.Error.Code != "network_disabled" {
			t.Errorf("run_tool http_fetch: %+v %+v", res, tr)
		}
	}
	// An execbox error: a tool error whose text starts with the code.
	res = call("run_command", map[string]any{"command": []string{"true"}, "min_isolation": "vm"}, nil)
	if text := toolText(res); !res.IsError || !strings.HasPrefix(text, "isolation_too_weak: ") {
		t.Errorf("an impossible isolation: %v %q", res.IsError, text)
	}
	// A schema-invalid call is refused before anything runs.
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": "not a list"}}); err == nil && !res.IsError {
		t.Errorf("a schema-invalid call: %+v", res)
	}

	// A session: files kept across calls.
	var sess mcpserver.SessionOutput
	if res = call("session_open", map[string]any{"idle_timeout": 60, "files": map[string]string{"a.txt": "first"}}, &sess); res.IsError || sess.SessionID == "" {
		t.Fatalf("session_open: %+v %+v", res, sess)
	}
	id := sess.SessionID
	var fo mcpserver.FileOutput
	if res = call("session_write_file", map[string]any{"session_id": id, "path": "d/b.txt", "content": "second"}, &fo); res.IsError || fo.Size != 6 {
		t.Errorf("session_write_file: %+v %+v", res, fo)
	}
	run = mcpserver.RunOutput{}
	res = call("session_exec", map[string]any{"session_id": id, "command": []string{"sh", "-c", "cat a.txt d/b.txt > c.txt; cat c.txt"}}, &run)
	if res.IsError || run.Stdout != "firstsecond" {
		t.Errorf("session_exec: %+v %+v", res, run)
	}
	fo = mcpserver.FileOutput{}
	if res = call("session_read_file", map[string]any{"session_id": id, "path": "c.txt"}, &fo); res.IsError || fo.Content != "firstsecond" || fo.Truncated {
		t.Errorf("session_read_file: %+v %+v", res, fo)
	}
	call("session_exec", map[string]any{"session_id": id, "command": []string{"sh", "-c", "head -c 40000 /dev/zero | tr '\\0' y > big.txt"}}, nil)
	fo = mcpserver.FileOutput{}
	if res = call("session_read_file", map[string]any{"session_id": id, "path": "big.txt"}, &fo); res.IsError || !fo.Truncated || len(fo.Content) != 32*1024 || fo.Size != 40000 {
		t.Errorf("session_read_file of 40000 bytes: truncated %v, %d bytes, size %d", fo.Truncated, len(fo.Content), fo.Size)
	}
	// State kept across session_run_code calls (the session's context).
	var code mcpserver.CodeOutput
	call("session_run_code", map[string]any{"session_id": id, "code": "import os\nseen = sorted(os.listdir('.'))"}, &code)
	first := code.ContextID
	code = mcpserver.CodeOutput{}
	if res = call("session_run_code", map[string]any{"session_id": id, "code": "len(seen)"}, &code); res.IsError || !code.OK || fmt.Sprint(code.Value) != "4" || code.ContextID != first {
		t.Errorf("session_run_code: %+v %+v (first context %s)", res, code, first)
	}
	var ls mcpserver.ListOutput
	if res = call("session_list_files", map[string]any{"session_id": id}, &ls); res.IsError || len(ls.Entries) != 4 {
		t.Errorf("session_list_files: %+v %+v", res, ls)
	}
	var closed mcpserver.ClosedOutput
	if res = call("session_close", map[string]any{"session_id": id}, &closed); res.IsError || !closed.Closed {
		t.Errorf("session_close: %+v %+v", res, closed)
	}
	res = call("session_exec", map[string]any{"session_id": id, "command": []string{"true"}}, nil)
	if text := toolText(res); !res.IsError || !strings.HasPrefix(text, "session_closed: ") {
		t.Errorf("session_exec after close: %v %q", res.IsError, text)
	}
}

// toolText is the text of a tool result's first content.
func toolText(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}
