package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Issue 33, "Trust first", over MCP: an adapter adds no policy and loses
// none of the API's.

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
