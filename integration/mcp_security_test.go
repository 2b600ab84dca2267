package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/execbox/execbox/internal/mcpserver"
)

// Issue 33, "Trust first", over MCP: an adapter adds no policy and loses
// none of the API's.

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
