package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/internal/daemon/auth"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/tool"
)

// A tools dir is a host path: GET /v1/tools, a tool call's answer and a
// broken dir's problem show it to admin tokens only; a plain token gets
// the same tools with "<path>" for their source.
func TestToolsHidesHostPaths(t *testing.T) {
	testutil.RequiresRoot(t, "native")
	dir := filepath.Join(t.TempDir(), "site-tools")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]string{
		"greet.py":  "SPEC = {\"name\": \"greet\", \"description\": \"greets\", \"parameters\": {\"type\": \"object\"}}\n\ndef execute(args, ctx):\n    return 'hi'\n",
		"broken.py": "SPEC = {\"name\": \"broken\", \"description\": \"fails to load\"}\nraise RuntimeError('broken at import')\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gone := filepath.Join(t.TempDir(), "gone-tools")
	if err := os.Mkdir(gone, 0o755); err != nil {
		t.Fatal(err)
	}
	envFor := func(dirs ...string) *env {
		tools, err := tool.New(tool.Options{Dirs: dirs, RuntimeDir: filepath.Join(t.TempDir(), "rt")})
		if err != nil {
			t.Fatal(err)
		}
		user, _ := auth.ParseToken("user:" + auth.HashSecret("user-secret"))
		return newEnv(t, setup{tokens: []auth.Token{user, auth.FromSecret("admin-secret")}, backends: []string{"native"},
			options: func(o *Options) { o.Tools = tools }})
	}
	en := envFor(dir)
	list := func(as string) (v1.Tools, string) {
		t.Helper()
		a := en.do("GET", "/v1/tools?backend=native", nil, "Authorization", as)
		var out v1.Tools
		if a.status != 200 || json.Unmarshal(a.body, &out) != nil {
			t.Fatalf("GET /v1/tools as %s: %d %s", as, a.status, a.body)
		}
		return out, string(a.body)
	}
	source := func(l v1.Tools, name string) string {
		for _, tl := range l.Tools {
			if tl.Name == name {
				return tl.Source
			}
		}
		for _, p := range l.Problems {
			if p.Name == name {
				return "problem " + p.Source
			}
		}
		return "missing"
	}

	admin, _ := list(asAdmin)
	user, body := list(asUser)
	if source(admin, "greet") != dir || source(admin, "broken") != "problem "+dir || source(admin, "python") != tool.Builtin {
		t.Fatalf("an admin's list: %+v", admin)
	}
	if strings.Contains(body, "site-tools") || source(user, "greet") != "<path>" || source(user, "broken") != "problem <path>" ||
		source(user, "python") != tool.Builtin || len(user.Tools) != len(admin.Tools) || len(user.Problems) != len(admin.Problems) {
		t.Errorf("a plain token's list: %s", body)
	}
	for as, want := range map[string]string{asAdmin: dir, asUser: "<path>"} {
		a := en.do("POST", "/v1/tools/greet:run", `{"backend":"native"}`, "Authorization", as)
		var res v1.ToolResult
		if a.status != 200 || json.Unmarshal(a.body, &res) != nil || !res.OK || res.Source != want {
			t.Errorf("greet as %s: %d %s, want source %s", as, a.status, a.body, want)
		}
	}

	// A dir gone from the host: the operator's problem, named to admins.
	en = envFor(gone)
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	for as, shows := range map[string]bool{asAdmin: true, asUser: false} {
		for _, a := range []answer{
			en.do("GET", "/v1/tools?backend=native", nil, "Authorization", as),
			en.do("POST", "/v1/tools/python:run", `{"args":{"code":"1"},"backend":"native"}`, "Authorization", as),
		} {
			if p := a.problem(t); p.Code != tool.CodeDirInvalid || strings.Contains(p.Detail, "gone-tools") != shows {
				t.Errorf("a gone tools dir as %s: %d %+v", as, a.status, p)
			}
		}
	}
}
