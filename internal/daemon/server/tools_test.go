package server

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	_ "github.com/execbox/execbox/backend/native"
	"github.com/execbox/execbox/internal/daemon/auth"
	"github.com/execbox/execbox/internal/daemon/guard"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/tool"
)

// Tool calls through the API on the native backend, behind the guard: a
// tool's arguments are checked before the guard is asked (a bad call is
// never held for an operator), a rule names tools, and a held call runs
// once approved.
func TestToolsBehindGuard(t *testing.T) {
	testutil.RequiresRoot(t, "native")
	tools, err := tool.New(tool.Options{RuntimeDir: filepath.Join(t.TempDir(), "rt")})
	if err != nil {
		t.Fatal(err)
	}
	g, err := guard.New(guard.Config{Rules: []guard.Rule{
		{Name: "no-fetch", Action: guard.Deny, Tools: []string{"http_fetch"}},
		{Name: "ask-write", Action: guard.Confirm, Tools: []string{"write_file"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	user, _ := auth.ParseToken("user:" + auth.HashSecret("user-secret"))
	en := newEnv(t, setup{tokens: []auth.Token{user, auth.FromSecret("admin-secret")}, backends: []string{"native"},
		options: func(o *Options) { o.Tools, o.Guard = tools, g }})
	call := func(name, body string) answer {
		return en.do("POST", "/v1/tools/"+name+":run", body, "Authorization", asUser)
	}

	a := call("python", `{"args":{"code":"x = 6\nx * 7"},"backend":"native"}`)
	var res v1.ToolResult
	if err := json.Unmarshal(a.body, &res); a.status != 200 || err != nil || !res.OK || !strings.Contains(string(res.Result), `"value": 42`) && !strings.Contains(string(res.Result), `"value":42`) ||
		res.Backend != "native" || res.Source != "builtin" || res.ID == "" {
		t.Fatalf("python: %d %s", a.status, a.body)
	}
	if a := call("nope", `{"backend":"native"}`); a.status != 404 || a.problem(t).Code != tool.CodeNotFound {
		t.Errorf("an unknown tool: %d %s", a.status, a.body)
	}
	if a := call("http_fetch", `{"args":{"url":"http://127.0.0.1/"},"backend":"native"}`); a.status != 403 || a.problem(t).Code != guard.CodeDenied {
		t.Errorf("a denied tool: %d %s", a.status, a.body)
	}
	// Bad arguments to a held tool: refused at once, no approval asked.
	if a := call("write_file", `{"args":{"path":"a.txt"},"backend":"native"}`); a.status != 400 || a.problem(t).Code != tool.CodeArgsInvalid {
		t.Errorf("write_file without content: %d %s", a.status, a.body)
	}
	if p := g.Pending(); len(p) != 0 {
		t.Errorf("pending after a refused call: %+v", p)
	}
	done := make(chan answer, 1)
	go func() { done <- call("write_file", `{"args":{"path":"a.txt","content":"hi"},"backend":"native"}`) }()
	var held []guard.Approval
	for deadline := time.Now().Add(10 * time.Second); len(held) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		held = g.Pending()
	}
	if len(held) != 1 || held[0].Call.Tool != "write_file" || held[0].Call.Operation != "tool" || held[0].Call.Backend != "native" {
		t.Fatalf("held %+v", held)
	}
	if a := en.do("POST", "/v1/approvals/"+held[0].ID, `{"approve":true}`, "Authorization", asAdmin); a.status != 204 {
		t.Fatalf("approve: %d %s", a.status, a.body)
	}
	a = <-done
	if err := json.Unmarshal(a.body, &res); a.status != 200 || err != nil || !res.OK || len(res.Artifacts) != 1 || string(res.Artifacts[0].Data) != "hi" {
		t.Errorf("the approved write_file: %d %s", a.status, a.body)
	}
}
