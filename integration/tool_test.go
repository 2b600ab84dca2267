package integration

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/event"
	"github.com/execbox/execbox/sandbox"
)

// A workspace's tools: read_file overrides the built-in of that name;
// digest reports how its arguments reached it.
var workspaceTools = map[string]string{
	"read_file.py": `SPEC = {"name": "read_file", "description": "The workspace's own read_file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}

def execute(args, ctx):
    return {"custom": True, "path": args["path"], "source": ctx.source}
`,
	"digest.py": `import hashlib, os

SPEC = {"name": "digest", "description": "Hash a text.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string", "maxLength": 200000}},
                       "required": ["text"], "additionalProperties": False}}

def execute(args, ctx):
    return {"sha256": hashlib.sha256(args["text"].encode()).hexdigest(), "length": len(args["text"]),
            "via_file": os.environ.get("EXECBOX_TOOL_ARGS_FILE", ""), "via_env": "EXECBOX_TOOL_ARGS" in os.environ}
`,
}

// Tools on every backend that runs here, through the real server: the
// discovery lists the built-ins and a workspace dir's tools (one of them
// overriding a built-in); a 100 KB argument reaches the tool through a
// file; a call whose arguments do not match the schema is refused before
// any sandbox starts (no execution event); a tool's events are of kind
// tool.
func TestTools(t *testing.T) {
	dir := filepath.Join(reachableTempDir(t), "tools")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, src := range workspaceTools {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range sessionBackends() {
		t.Run(b, func(t *testing.T) {
			s := startOn(t, b, "EXECBOX_TOOLS_DIRS="+dir, "EXECBOX_DOCKER_POOL_SIZE=0")
			c := s.client("")
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()

			list, err := c.Tools(ctx)
			if err != nil {
				t.Fatal(err)
			}
			sources := map[string]string{}
			for _, tl := range list.Tools {
				sources[tl.Name] = tl.Source
			}
			// Without a token the dir's host path is not shown (an admin
			// token's to see).
			want := map[string]string{"python": "builtin", "write_file": "builtin", "http_fetch": "builtin", "read_file": "<path>", "digest": "<path>"}
			if fmt.Sprint(sources) != fmt.Sprint(want) || len(list.Problems) != 0 {
				t.Fatalf("tools %v (problems %v), want %v", sources, list.Problems, want)
			}

			// The override ran, in the workspace's read-only dir.
			r, err := c.RunTool(ctx, "read_file", &v1.ToolRunRequest{Args: json.RawMessage(`{"path":"x"}`)})
			if err != nil || !r.OK || !strings.Contains(string(r.Result), `"custom": true`) && !strings.Contains(string(r.Result), `"custom":true`) || r.Backend != b {
				t.Fatalf("the overriding read_file: %+v %v", r, err)
			}

			// 100 KB through a file.
			text := strings.Repeat("0123456789", 10_000)
			args, _ := json.Marshal(map[string]string{"text": text})
			r, err = c.RunTool(ctx, "digest", &v1.ToolRunRequest{Args: args})
			var got struct {
				SHA256  string `json:"sha256"`
				Length  int
				ViaFile string `json:"via_file"`
				ViaEnv  bool   `json:"via_env"`
			}
			if err != nil || !r.OK || json.Unmarshal(r.Result, &got) != nil {
				t.Fatalf("digest of 100 KB: %+v %v", r, err)
			}
			sum := sha256.Sum256([]byte(text))
			if got.SHA256 != hex.EncodeToString(sum[:]) || got.Length != len(text) || got.ViaFile == "" || got.ViaEnv {
				t.Errorf("100 KB argument: %+v", got)
			}

			// Refused before any sandbox: the only events of this caller are
			// the next, valid call's. The stream is open (its answer's
			// header came) before the calls are made.
			sctx, stop := context.WithCancel(ctx)
			defer stop()
			req, _ := http.NewRequestWithContext(sctx, "GET", s.url+"/v1/events?tool_call_id=schema-"+b, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("GET /v1/events: %v %v", resp, err)
			}
			defer resp.Body.Close()
			events := make(chan v1.Event, 16)
			go func() {
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					var e v1.Event
					if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && json.Unmarshal([]byte(data), &e) == nil {
						events <- e
					}
				}
			}()
			cctx := client.WithCaller(ctx, v1.Caller{ToolCallID: "schema-" + b})
			_, err = c.RunTool(cctx, "digest", &v1.ToolRunRequest{Args: json.RawMessage(`{"text": 5}`)})
			var p *v1.Problem
			if !errors.As(err, &p) || p.Status != 400 || sandbox.CodeOf(err) != "tool_args_invalid" {
				t.Fatalf("schema-invalid: %v", err)
			}
			if _, err := c.RunTool(cctx, "digest", &v1.ToolRunRequest{Args: json.RawMessage(`{"text": "ok"}`)}); err != nil {
				t.Fatal(err)
			}
			var seen []string
			for len(seen) < 2 {
				select {
				case e := <-events:
					if e.Type == event.Dropped {
						continue
					}
					if e.Kind != event.KindTool || e.Tool != "digest" {
						t.Errorf("event %+v, want a tool event of digest", e)
					}
					seen = append(seen, e.Type)
				case <-time.After(30 * time.Second):
					t.Fatalf("events so far %v", seen)
				}
			}
			if strings.Join(seen, " ") != event.Started+" "+event.Completed {
				t.Errorf("events %v: the refused call started something", seen)
			}
		})
	}
}

// The CLI runs tools on this host's engine: a result is printed as JSON, a
// tool's failure exits 1 with its code, a schema-invalid call 125.
func TestToolCLI(t *testing.T) {
	requireNative(t)
	r := execbox(t, nil, "", "tool", "run", "python", "--args", `{"code": "x = 20\nx * 2 + 2"}`)
	if r.code != 0 || !strings.Contains(r.stdout, `"value": 42`) {
		t.Fatalf("python: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = execbox(t, nil, "", "tool", "run", "http_fetch", "--args", `{"url": "http://127.0.0.1:9/"}`)
	if r.code != 1 || !strings.Contains(r.stderr, "network_disabled") {
		t.Fatalf("http_fetch under network none: exit %d, stderr %q", r.code, r.stderr)
	}
	r = execbox(t, nil, "", "tool", "run", "python", "--args", `{"code": 3}`)
	if r.code != 125 || !strings.Contains(r.stderr, "tool_args_invalid") {
		t.Fatalf("schema-invalid: exit %d, stderr %q", r.code, r.stderr)
	}
	r = execbox(t, nil, "", "tool", "list")
	for _, name := range []string{"python", "read_file", "write_file", "http_fetch"} {
		if !strings.Contains(r.stdout, name+" ") {
			t.Errorf("tool list lacks %s: %q", name, r.stdout)
		}
	}
}
