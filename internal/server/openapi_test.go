package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/internal/auth"
)

// doc is the parts of the OpenAPI document the tests read.
type doc struct {
	OpenAPI string                                `json:"openapi"`
	Paths   map[string]map[string]json.RawMessage `json:"paths"`
}

type operation struct {
	Security    *[]any `json:"security"`
	RequestBody *struct {
		Content map[string]struct {
			Examples map[string]struct {
				Value json.RawMessage `json:"value"`
			} `json:"examples"`
		} `json:"content"`
	} `json:"requestBody"`
	Responses map[string]json.RawMessage `json:"responses"`
}

func loadDoc(t *testing.T) (doc, map[string]any) {
	t.Helper()
	b, err := OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var d doc
	var raw map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	return d, raw
}

// TestOpenAPIIsJSON: the YAML document converts to JSON.
func TestOpenAPIIsJSON(t *testing.T) {
	d, _ := loadDoc(t)
	if d.OpenAPI != "3.1.0" || len(d.Paths) != 11 {
		t.Fatalf("openapi %q, %d paths", d.OpenAPI, len(d.Paths))
	}
}

// TestOpenAPIMatchesHandlers: every route the handler serves is
// documented, every documented operation is served by the real handler
// (not 404 or 405), public routes are documented as needing no token and
// the others as needing one, and every example request body is accepted.
func TestOpenAPIMatchesHandlers(t *testing.T) {
	requirePython(t)
	secret := "admin-secret"
	en := newEnv(t, setup{tokens: []auth.Token{auth.FromSecret(secret)}})
	d, _ := loadDoc(t)
	if d.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q, want 3.1.0", d.OpenAPI)
	}
	served := map[string]access{}
	for _, rt := range en.srv.routes {
		served[rt.method+" "+rt.path] = rt.access
	}
	documented := map[string]operation{}
	for path, ops := range d.Paths {
		for method, raw := range ops {
			var op operation
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			documented[strings.ToUpper(method)+" "+path] = op
		}
	}
	for k := range served {
		if _, ok := documented[k]; !ok {
			t.Errorf("route %s is served but not documented", k)
		}
	}
	for k, op := range documented {
		acc, ok := served[k]
		if !ok {
			t.Errorf("operation %s is documented but not served", k)
			continue
		}
		open := op.Security != nil && len(*op.Security) == 0
		if open != (acc == public) {
			t.Errorf("%s: documented public=%v, served with access %d", k, open, acc)
		}
		if _, ok := op.Responses["200"]; !ok {
			t.Errorf("%s documents no 200 answer", k)
		}
		if acc != public {
			if _, ok := op.Responses["401"]; !ok {
				t.Errorf("%s needs a token but documents no 401", k)
			}
		}
		method, path, _ := strings.Cut(k, " ")
		if method == "GET" {
			a := en.do(method, path, nil, "Authorization", "Bearer "+secret)
			if a.status != http.StatusOK {
				t.Errorf("%s: status %d: %s", k, a.status, a.body)
			}
			continue
		}
		// Every example request body is accepted by the real handler.
		n := 0
		if op.RequestBody != nil {
			for ct, c := range op.RequestBody.Content {
				for name, ex := range c.Examples {
					n++
					hdr := []string{"Authorization", "Bearer " + secret, "Content-Type", ct}
					if path == "/mcp" {
						// MCP clients must accept both answers.
						hdr = append(hdr, "Accept", "application/json, text/event-stream")
					}
					a := en.do(method, path, []byte(ex.Value), hdr...)
					if a.status != http.StatusOK {
						t.Errorf("%s example %s: status %d: %s", k, name, a.status, a.body)
					}
				}
			}
		}
		if n == 0 {
			t.Errorf("%s has no example request body", k)
		}
		// A documented path with the wrong method is a 405 problem, not a 404.
		if a := en.do("DELETE", path, nil); a.status != http.StatusMethodNotAllowed {
			t.Errorf("DELETE %s: status %d, want 405", path, a.status)
		}
	}
}

// TestOpenAPIRefsResolve: every $ref in the document points at something,
// and no value is null (in YAML, an unquoted ", " inside a flow mapping
// starts a key without a value).
func TestOpenAPIRefsResolve(t *testing.T) {
	_, raw := loadDoc(t)
	var refs []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case nil:
			t.Errorf("%s is null", path)
		case map[string]any:
			for k, c := range x {
				if k == "$ref" {
					refs = append(refs, c.(string))
				}
				walk(path+"/"+k, c)
			}
		case []any:
			for i, c := range x {
				walk(fmt.Sprintf("%s/%d", path, i), c)
			}
		}
	}
	walk("#", raw)
	if len(refs) < 20 {
		t.Fatalf("only %d refs found; the walk is broken", len(refs))
	}
	for _, ref := range refs {
		parts := strings.Split(strings.TrimPrefix(ref, "#/"), "/")
		var cur any = raw
		for _, p := range parts {
			m, ok := cur.(map[string]any)
			if !ok {
				cur = nil
				break
			}
			cur = m[p]
		}
		if cur == nil {
			t.Errorf("$ref %s does not resolve", ref)
		}
	}
	// Every error response the document names is a problem document.
	for _, name := range []string{"BadRequest", "Unauthorized", "Forbidden", "NotFound", "SlowBody", "TooLarge", "UnsupportedMedia", "Busy", "Internal", "Unavailable"} {
		resp := raw["components"].(map[string]any)["responses"].(map[string]any)[name]
		content, _ := resp.(map[string]any)["content"].(map[string]any)
		if _, ok := content[v1.ContentTypeProblem]; !ok {
			t.Errorf("response %s is not %s", name, v1.ContentTypeProblem)
		}
	}
}
