package server

import (
	"strings"
	"testing"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/internal/daemon/auth"
)

// The playground answers page paths with its index, without a token, under
// the server's site checks; every API path stays the API's, JSON 404
// included; the playground off answers JSON 404 everywhere.
func TestPlaygroundRouting(t *testing.T) {
	en := newEnv(t, setup{tokens: []auth.Token{auth.FromSecret("s")}, options: func(o *Options) { o.Playground = true }})
	page := func(method, path string, header ...string) {
		t.Helper()
		a := en.do(method, path, nil, header...)
		if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "text/html") ||
			(method == "GET" && !strings.Contains(string(a.body), `<main id="page">`)) {
			t.Errorf("%s %s: %d %s, want the playground's index", method, path, a.status, a.header.Get("Content-Type"))
		}
		if !strings.Contains(a.header.Get("Content-Security-Policy"), "script-src 'self'") || a.header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s %s: headers %v", method, path, a.header)
		}
	}
	problem := func(method, path string, status int, code string, header ...string) {
		t.Helper()
		a := en.do(method, path, nil, header...)
		if a.status != status || a.problem(t).Code != code {
			t.Errorf("%s %s: %d %s, want %d %s", method, path, a.status, a.body, status, code)
		}
	}
	page("GET", "/")
	page("GET", "/functions")
	page("GET", "/sessions/abc")
	page("HEAD", "/status")
	page("GET", "/v1x") // not under /v1/
	// The API's own paths: JSON, with or without the playground.
	problem("GET", "/v1/nope", 404, v1.CodeNotFound)
	problem("GET", "/v1", 404, v1.CodeNotFound)
	problem("GET", "/healthz/x", 404, v1.CodeNotFound)
	problem("GET", "/metrics/x", 404, v1.CodeNotFound)
	problem("GET", "/v1/health", 401, "unauthenticated")
	problem("POST", "/functions", 404, v1.CodeNotFound)
	problem("DELETE", "/", 404, v1.CodeNotFound)
	// A page is no way around the site checks.
	problem("GET", "/", 403, CodeHostNotAllowed, "Host", "rebind.attacker.example")

	off := newEnv(t, setup{})
	if a := off.do("GET", "/functions", nil); a.status != 404 || a.problem(t).Code != v1.CodeNotFound {
		t.Errorf("playground off: GET /functions %d %s, want a JSON 404", a.status, a.body)
	}
}
