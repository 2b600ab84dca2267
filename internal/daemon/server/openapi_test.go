package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"testing"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/internal/daemon/auth"
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
	if d.OpenAPI != "3.1.0" || len(d.Paths) != 35 {
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
		// A pattern's rest-of-path wildcard is a plain parameter in the
		// document, and a tool's verb is split off in its handler.
		p := strings.ReplaceAll(rt.path, "{path...}", "{path}")
		served[rt.method+" "+strings.ReplaceAll(p, "{call}", "{name}:run")] = rt.access
	}
	// Operations on a session's paths are tried on a real session, and a
	// real file and directory in it.
	var sess v1.Session
	if a := en.do("POST", "/v1/sessions", []byte(`{}`), "Authorization", "Bearer "+secret, "Content-Type", "application/json"); a.status != http.StatusCreated {
		t.Fatalf("creating a session: %d %s", a.status, a.body)
	} else if err := json.Unmarshal(a.body, &sess); err != nil {
		t.Fatal(err)
	}
	// And a real context and terminal (cat: it takes input until killed).
	var ctx v1.Context
	var term v1.Terminal
	for _, c := range []struct {
		path, body string
		v          any
	}{{"/contexts", `{"language":"python"}`, &ctx}, {"/terminals", `{"command":["cat"]}`, &term}} {
		a := en.do("POST", "/v1/sessions/"+sess.ID+c.path, []byte(c.body), "Authorization", "Bearer "+secret, "Content-Type", "application/json")
		if a.status != http.StatusCreated {
			t.Fatalf("POST %s: %d %s", c.path, a.status, a.body)
		}
		if err := json.Unmarshal(a.body, c.v); err != nil {
			t.Fatal(err)
		}
	}
	concrete := func(method, path string) string {
		file := "f.txt"
		if strings.Contains(path, "/list/") || strings.Contains(path, "/mkdir/") || strings.Contains(path, "/upload/") {
			file = "d"
		}
		path = strings.NewReplacer("{id}", sess.ID, "{context_id}", ctx.ID, "{terminal_id}", term.ID).Replace(path)
		return strings.ReplaceAll(path, "{path}", file)
	}
	for _, call := range []struct{ method, path, ct, body string }{
		{"PUT", "/files/f.txt", "application/octet-stream", "x"},
		{"POST", "/mkdir/d", "", ""},
	} {
		hdr := []string{"Authorization", "Bearer " + secret}
		if call.ct != "" {
			hdr = append(hdr, "Content-Type", call.ct)
		}
		if a := en.do(call.method, "/v1/sessions/"+sess.ID+call.path, []byte(call.body), hdr...); a.status != http.StatusCreated {
			t.Fatalf("%s %s: %d %s", call.method, call.path, a.status, a.body)
		}
	}
	documented := map[string]operation{}
	for path, ops := range d.Paths {
		for method, raw := range ops {
			if method == "parameters" {
				continue
			}
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
		var success string
		for _, c := range []string{"200", "201", "204"} {
			if _, ok := op.Responses[c]; ok && success == "" {
				success = c
			}
		}
		if success == "" {
			t.Errorf("%s documents no 2xx answer", k)
		}
		want := http.StatusOK
		fmt.Sscan(success, &want)
		if acc != public {
			if _, ok := op.Responses["401"]; !ok {
				t.Errorf("%s needs a token but documents no 401", k)
			}
		}
		method, path, _ := strings.Cut(k, " ")
		path = concrete(method, path)
		if k == "POST /v1/tools/{name}:run" {
			// This server has no tools (the local backend mounts no
			// tools dir): a call that parses is tool_not_found.
			// integration.TestTools runs them on every backend.
			want = http.StatusNotFound
			path = strings.ReplaceAll(path, "{name}", "python")
		}
		if k == "POST /v1/approvals/{id}" {
			// Nothing is held here: a decision that parses reaches the
			// guard, which knows no such approval (TestConfirmFlow decides
			// real ones).
			want = http.StatusNotFound
		}
		if k == "GET /v1/events" || k == "GET /v1/sessions/{id}/terminals/{terminal_id}/output" {
			// A stream that does not end: its status only.
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, method, en.http.URL+path, nil)
			req.Header.Set("Authorization", "Bearer "+secret)
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != want || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Errorf("%s: %v %v", k, resp, err)
			}
			cancel()
			if err == nil {
				resp.Body.Close()
			}
			continue
		}
		if method == "GET" {
			a := en.do(method, path, nil, "Authorization", "Bearer "+secret)
			if a.status != want {
				t.Errorf("%s: status %d: %s", k, a.status, a.body)
			}
			continue
		}
		if method == "DELETE" {
			continue // the file and the session: removed at the end
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
					body := []byte(ex.Value)
					switch ct {
					case "application/json":
					case "multipart/form-data":
						// An object of path: content, a part each, its
						// filename the path.
						var files map[string]string
						if err := json.Unmarshal(ex.Value, &files); err != nil {
							t.Fatalf("%s example %s: %v", k, name, err)
						}
						var b bytes.Buffer
						mw := multipart.NewWriter(&b)
						for _, p := range slices.Sorted(maps.Keys(files)) {
							fw, _ := mw.CreateFormFile("f", p)
							io.WriteString(fw, files[p])
						}
						mw.Close()
						body = b.Bytes()
						hdr[len(hdr)-1] = mw.FormDataContentType()
					default:
						var raw string
						json.Unmarshal(ex.Value, &raw) // a JSON string: the raw body
						body = []byte(raw)
					}
					a := en.do(method, path, body, hdr...)
					if a.status != want {
						t.Errorf("%s example %s: status %d: %s", k, name, a.status, a.body)
					}
				}
			}
		}
		if n == 0 && op.RequestBody != nil {
			t.Errorf("%s has no example request body", k)
		}
		// A documented path with the wrong method is a 405 problem, not a 404.
		if a := en.do("PATCH", path, nil); a.status != http.StatusMethodNotAllowed {
			t.Errorf("PATCH %s: status %d, want 405", path, a.status)
		}
	}
	for _, p := range []string{"/v1/sessions/{id}/files/{path}", "/v1/sessions/{id}/contexts/{context_id}", "/v1/sessions/{id}/terminals/{terminal_id}", "/v1/sessions/{id}"} {
		if _, ok := documented["DELETE "+p]; !ok {
			t.Errorf("DELETE %s is not documented", p)
		}
		if a := en.do("DELETE", concrete("DELETE", p), nil, "Authorization", "Bearer "+secret); a.status != http.StatusNoContent {
			t.Errorf("DELETE %s: %d %s", p, a.status, a.body)
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
