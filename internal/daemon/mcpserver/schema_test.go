package mcpserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSchemasAsAModelReadsThem: every tool's input, as an MCP client
// lists it, describes every field; the fields the API gives enums to have
// the API's enums (plus "" where the field may be left out); a list or
// an object is never typed nullable.
func TestSchemasAsAModelReadsThem(t *testing.T) {
	s := New(Options{API: http.NotFoundHandler()})
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	lt, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	type prop struct {
		Type        any    `json:"type"`
		Description string `json:"description"`
		Enum        []any  `json:"enum"`
	}
	props := map[string]map[string]prop{}
	for _, tool := range lt.Tools {
		b, _ := json.Marshal(tool.InputSchema)
		var s struct{ Properties map[string]prop }
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		props[tool.Name] = s.Properties
		for name, p := range s.Properties {
			if p.Description == "" {
				t.Errorf("%s.%s has no description", tool.Name, name)
			}
			if _, ok := p.Type.(string); !ok {
				t.Errorf("%s.%s is typed %v, want one type", tool.Name, name, p.Type)
			}
		}
	}
	for _, c := range []struct {
		tool, field string
		enum        []any
	}{
		{"run_code", "language", []any{"python", "javascript", "sh", "bash", ""}},
		{"session_exec", "language", []any{"python", "javascript", "sh", "bash", ""}},
		{"session_run_code", "language", []any{"python", "javascript", ""}},
		{"execute_function", "language", []any{"python", "javascript", ""}},
		{"run_command", "tier", []any{"strict", "standard", "fast", ""}},
		{"session_open", "min_isolation", []any{"none", "process", "kernel", "vm", ""}},
	} {
		if got := props[c.tool][c.field].Enum; !slices.Equal(got, c.enum) {
			t.Errorf("%s.%s: enum %v, want %v", c.tool, c.field, got, c.enum)
		}
	}
	if typ := fmt.Sprint(props["run_command"]["command"].Type); typ != "array" {
		t.Errorf("run_command.command is typed %s, want array", typ)
	}
}
