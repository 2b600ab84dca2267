package tool

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// The tests below run the runtime in real native sandboxes.

func TestListBuiltins(t *testing.T) {
	sb := newSandboxes(t)
	s := newSet(t)
	c, err := s.List(t.Context(), sb.run)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sp := range c.Tools {
		names = append(names, sp.Name)
		if sp.Source != Builtin || sp.Description == "" {
			t.Errorf("%s: source %q, description %q", sp.Name, sp.Source, sp.Description)
		}
		var schema struct {
			Type     string         `json:"type"`
			Props    map[string]any `json:"properties"`
			Required []string       `json:"required"`
		}
		if err := json.Unmarshal(sp.Parameters, &schema); err != nil || schema.Type != "object" || len(schema.Props) == 0 || len(schema.Required) == 0 {
			t.Errorf("%s: parameters %s: %v", sp.Name, sp.Parameters, err)
		}
	}
	if want := []string{"http_fetch", "python", "read_file", "write_file"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	if len(c.Problems) != 0 {
		t.Fatalf("problems: %+v", c.Problems)
	}
	if _, err := s.List(t.Context(), sb.run); err != nil || sb.started.Load() != 1 {
		t.Fatalf("a second List started a sandbox (%d started): %v", sb.started.Load(), err)
	}
}

// TestConcurrentListsDiscoverOnce: Lists racing on a fresh Set share one
// discovery.
func TestConcurrentListsDiscoverOnce(t *testing.T) {
	sb := newSandboxes(t)
	s := newSet(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			_, err := s.List(t.Context(), sb.run)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := sb.started.Load(); n != 1 {
		t.Fatalf("%d discoveries, want 1", n)
	}
}

const customReadFile = `
SPEC = {"name": "read_file", "description": "custom read_file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}

def execute(args, ctx):
    return {"custom": True, "path": args["path"], "source": ctx.source}
`

func greet(who string) string {
	return fmt.Sprintf(`
SPEC = {"name": "greet", "description": "greets", "parameters": {"type": "object"}}

def execute(args, ctx):
    return %q
`, who)
}

func TestCustomToolOverridesBuiltin(t *testing.T) {
	sb := newSandboxes(t)
	first := toolsDir(t, map[string]string{"read_file.py": customReadFile, "greet.py": greet("first"), "_helper.py": "raise SystemExit('not a tool')"})
	second := toolsDir(t, map[string]string{"greet.py": greet("second")})
	s := newSet(t, first, second)
	c, err := s.List(t.Context(), sb.run)
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]string{}
	for _, sp := range c.Tools {
		sources[sp.Name] = sp.Source
	}
	want := map[string]string{"http_fetch": Builtin, "python": Builtin, "write_file": Builtin, "read_file": first, "greet": second}
	if fmt.Sprint(sources) != fmt.Sprint(want) || len(c.Problems) != 0 {
		t.Fatalf("sources %v, want %v; problems %+v", sources, want, c.Problems)
	}
	var got struct {
		Custom bool   `json:"custom"`
		Path   string `json:"path"`
		Source string `json:"source"`
	}
	r := call(t, s, sb, Call{Name: "read_file", Args: json.RawMessage(`{"path": "x.txt"}`)})
	result(t, r, &got)
	if !got.Custom || got.Path != "x.txt" || got.Source != DirsTarget+"/0" || r.Source != first {
		t.Fatalf("the built-in ran, not the custom read_file: %s (source %s)", r.Result, r.Source)
	}
	var who string
	result(t, call(t, s, sb, Call{Name: "greet"}), &who)
	if who != "second" {
		t.Fatalf("greet = %q, want the later dir's", who)
	}
}

const argsProbe = `
import hashlib, os

SPEC = {"name": "probe", "description": "reports how its arguments arrived",
        "parameters": {"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]}}

def execute(args, ctx):
    f = os.environ.get("EXECBOX_TOOL_ARGS_FILE", "")
    return {"len": len(args["s"]), "sha256": hashlib.sha256(args["s"].encode()).hexdigest(),
            "args_file": f, "in_env": "EXECBOX_TOOL_ARGS" in os.environ,
            "file_left": bool(f) and os.path.exists(f), "cwd": os.getcwd() == ctx.work_dir}
`

func TestLargeArgsThroughFile(t *testing.T) {
	sb := newSandboxes(t)
	s := newSet(t, toolsDir(t, map[string]string{"probe.py": argsProbe}))
	for _, n := range []int{10, 100 * 1000} {
		text := strings.Repeat("abcdefghij", n/10-1) + "é€😀"
		args, _ := json.Marshal(map[string]string{"s": text})
		var got struct {
			Len      int    `json:"len"`
			SHA256   string `json:"sha256"`
			ArgsFile string `json:"args_file"`
			InEnv    bool   `json:"in_env"`
			FileLeft bool   `json:"file_left"`
			Cwd      bool   `json:"cwd"`
		}
		r := call(t, s, sb, Call{Name: "probe", Args: args})
		result(t, r, &got)
		sum := sha256.Sum256([]byte(text))
		if got.Len != len([]rune(text)) || got.SHA256 != hex.EncodeToString(sum[:]) || !got.Cwd {
			t.Fatalf("%d bytes: the tool saw %+v", len(args), got)
		}
		if large := len(args) > DefaultArgsMax; large {
			if got.ArgsFile != ArgsFile || got.InEnv || got.FileLeft {
				t.Fatalf("%d bytes: want them in %s, got %+v", len(args), ArgsFile, got)
			}
		} else if got.ArgsFile != "" || !got.InEnv {
			t.Fatalf("%d bytes: want them in the environment, got %+v", len(args), got)
		}
		if len(r.Artifacts) != 0 {
			t.Fatalf("artifacts: %+v", r.Artifacts)
		}
	}
}

// TestRefusedCallsStartNoSandbox: every refusal is decided on the host.
func TestRefusedCallsStartNoSandbox(t *testing.T) {
	sb := newSandboxes(t)
	s := newSet(t)
	if _, err := s.Run(t.Context(), sb.run, Call{Name: "python", Args: bytes.Repeat([]byte(" "), DefaultMaxArgs+1)}); sandbox.CodeOf(err) != CodeArgsTooLarge || sb.started.Load() != 0 {
		t.Fatalf("too large: %v (%d sandboxes)", err, sb.started.Load())
	}
	wantErr(t, func() error {
		_, err := s.Run(t.Context(), sb.run, Call{Name: "python", Args: bytes.Repeat([]byte(" "), DefaultMaxArgs+1)})
		return err
	}(), sandbox.ErrLimit, CodeArgsTooLarge)
	if _, err := s.List(t.Context(), sb.run); err != nil {
		t.Fatal(err)
	}
	before := sb.started.Load()
	for _, c := range []struct {
		call Call
		kind *sandbox.Kind
		code string
		msg  string
	}{
		{Call{Name: "python", Args: json.RawMessage(`{"code": 1}`)}, sandbox.ErrInvalid, CodeArgsInvalid, "code"},
		{Call{Name: "python", Args: json.RawMessage(`{}`)}, sandbox.ErrInvalid, CodeArgsInvalid, "code"},
		{Call{Name: "python", Args: json.RawMessage(`{"code": "1", "extra": true}`)}, sandbox.ErrInvalid, CodeArgsInvalid, "extra"},
		{Call{Name: "read_file", Args: json.RawMessage(`{"path": "a", "max_bytes": 0}`)}, sandbox.ErrInvalid, CodeArgsInvalid, "max_bytes"},
		{Call{Name: "http_fetch", Args: json.RawMessage(`{"url": "file:///etc/passwd"}`)}, sandbox.ErrInvalid, CodeArgsInvalid, "url"},
		{Call{Name: "python", Args: json.RawMessage(`[1]`)}, sandbox.ErrInvalid, CodeArgsInvalid, "object"},
		{Call{Name: "python", Args: json.RawMessage(`{"code": `)}, sandbox.ErrInvalid, CodeArgsInvalid, "JSON"},
		{Call{Name: "python", Args: json.RawMessage("{\"code\": \"\xff\"}")}, sandbox.ErrInvalid, CodeArgsInvalid, "UTF-8"},
		{Call{Name: "no_such_tool"}, sandbox.ErrNotFound, CodeNotFound, "no_such_tool"},
		{Call{Name: "python", Args: json.RawMessage(`{"code": "1"}`), Files: map[string][]byte{ArgsFile: nil}}, sandbox.ErrInvalid, CodeFilesInvalid, ArgsFile},
		{Call{Name: "python", Args: json.RawMessage(`{"code": "1"}`), Timeout: time.Hour}, sandbox.ErrInvalid, CodeOptionsInvalid, "timeout"},
	} {
		_, err := s.Run(t.Context(), sb.run, c.call)
		wantErr(t, err, c.kind, c.code)
		if !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s %s: message %q does not mention %q", c.call.Name, c.call.Args, err, c.msg)
		}
	}
	if n := sb.started.Load(); n != before {
		t.Fatalf("refused calls started %d sandboxes", n-before)
	}
}

func TestPythonBuiltin(t *testing.T) {
	sb := newSandboxes(t)
	s := newSet(t)
	py := func(code string) *Response {
		args, _ := json.Marshal(map[string]string{"code": code})
		return call(t, s, sb, Call{Name: "python", Args: args})
	}
	type value struct {
		Value  any    `json:"value"`
		Repr   string `json:"repr"`
		Type   string `json:"type"`
		Stdout string `json:"stdout"`
	}
	var v value
	result(t, py("x = 41\nprint('side', x)\n{'answer': x + 1, 'list': [1, 2]}"), &v)
	if fmt.Sprint(v.Value) != "map[answer:42 list:[1 2]]" || v.Repr != "{'answer': 42, 'list': [1, 2]}" || v.Type != "dict" || v.Stdout != "side 41\n" {
		t.Fatalf("got %+v", v)
	}
	v = value{}
	result(t, py("import datetime\ndatetime.date(2024, 5, 17)"), &v)
	if v.Value != nil || v.Repr != "datetime.date(2024, 5, 17)" || v.Type != "date" {
		t.Fatalf("a value JSON cannot hold: got %+v", v)
	}
	v = value{}
	result(t, py("y = 1"), &v)
	if v.Value != nil || v.Repr != "None" || v.Type != "NoneType" {
		t.Fatalf("no last expression: got %+v", v)
	}
	// Each call is a fresh interpreter: x from the first call is gone.
	r := py("x")
	if r.OK || r.Error.Code != CodeToolError || r.Error.Type != "NameError" || !strings.Contains(r.Error.Message, "'x'") {
		t.Fatalf("want NameError, got %+v %s", r.Error, r.Result)
	}
	if !strings.Contains(r.Error.Traceback, `File "<python>", line 1`) || strings.Contains(r.Error.Traceback, "entry.py") {
		t.Fatalf("traceback:\n%s", r.Error.Traceback)
	}
}

func TestReadWriteFile(t *testing.T) {
	sb := newSandboxes(t)
	s := newSet(t)
	r := call(t, s, sb, Call{Name: "write_file", Args: json.RawMessage(`{"path": "out/notes.txt", "content": "héllo"}`)})
	var w struct {
		Path  string `json:"path"`
		Bytes int    `json:"bytes"`
	}
	result(t, r, &w)
	if w.Path != "out/notes.txt" || w.Bytes != len("héllo") {
		t.Fatalf("write_file: %+v", w)
	}
	if len(r.Artifacts) != 1 || r.Artifacts[0].Path != "out/notes.txt" || string(r.Artifacts[0].Data) != "héllo" {
		t.Fatalf("artifacts: %+v", r.Artifacts)
	}

	files := map[string][]byte{"in/data.txt": []byte("line 1\nline 2\n"), "bin": {0, 1, 2, 255}}
	var rd struct {
		Content   string `json:"content"`
		Bytes     int    `json:"bytes"`
		Truncated bool   `json:"truncated"`
	}
	result(t, call(t, s, sb, Call{Name: "read_file", Args: json.RawMessage(`{"path": "in/data.txt"}`), Files: files}), &rd)
	if rd.Content != "line 1\nline 2\n" || rd.Bytes != 14 || rd.Truncated {
		t.Fatalf("read_file: %+v", rd)
	}
	result(t, call(t, s, sb, Call{Name: "read_file", Args: json.RawMessage(`{"path": "in/data.txt", "max_bytes": 4}`), Files: files}), &rd)
	if rd.Content != "line" || !rd.Truncated {
		t.Fatalf("read_file max_bytes 4: %+v", rd)
	}
	result(t, call(t, s, sb, Call{Name: "read_file", Args: json.RawMessage(`{"path": "bin", "encoding": "base64"}`), Files: files}), &rd)
	if rd.Content != "AAEC/w==" {
		t.Fatalf("read_file base64: %+v", rd)
	}
	for path, code := range map[string]string{
		"../etc/passwd": "path_invalid", "/etc/passwd": "path_invalid", "a/./b": "path_invalid",
		"missing.txt": "file_not_found", "in": "not_a_file",
	} {
		args, _ := json.Marshal(map[string]string{"path": path})
		r := call(t, s, sb, Call{Name: "read_file", Args: args, Files: files})
		if r.OK || r.Error.Code != code {
			t.Errorf("read_file %q: want %s, got %+v %s", path, code, r.Error, r.Result)
		}
	}
}

// TestSymlinksNeverFollowed: the file helpers refuse a symlink anywhere on
// the way, whether it escapes the work dir or not.
func TestSymlinksNeverFollowed(t *testing.T) {
	sb := newSandboxes(t)
	s := newSet(t, toolsDir(t, map[string]string{"links.py": `
import os
from execbox_tool import ToolError, open_file

SPEC = {"name": "links", "description": "plants symlinks and opens through them"}

def execute(args, ctx):
    os.mkdir("d")
    open("d/f", "w").write("x")
    os.symlink("/etc/passwd", "out")
    os.symlink("d", "dlink")
    os.symlink("d/f", "flink")
    got = {}
    for p, write in (("out", False), ("dlink/f", False), ("flink", False), ("out", True), ("dlink/new", True), ("d/f", False)):
        try:
            with open_file(p, write) as f:
                got[p + (" w" if write else "")] = "ok"
        except ToolError as e:
            got[p + (" w" if write else "")] = e.code
    return got
`}))
	var got map[string]string
	result(t, call(t, s, sb, Call{Name: "links"}), &got)
	want := map[string]string{"out": "path_invalid", "dlink/f": "path_invalid", "flink": "path_invalid",
		"out w": "path_invalid", "dlink/new w": "path_invalid", "d/f": "ok"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestHTTPFetch(t *testing.T) {
	sb := newSandboxes(t)
	s := newSet(t)
	port := testutil.Listen(t, "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello")
	args := json.RawMessage(fmt.Sprintf(`{"url": "http://127.0.0.1:%d/x"}`, port))
	r := call(t, s, sb, Call{Name: "http_fetch", Args: args})
	if r.OK || r.Error.Code != CodeNetworkDisabled || !strings.Contains(r.Error.Message, "network") {
		t.Fatalf("network none: want network_disabled, got %+v %s", r.Error, r.Result)
	}
	if !slices.Contains(sb.b.Capabilities().Networks, sandbox.NetworkHost) {
		t.Skip("the backend has no host network")
	}
	var got struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	}
	result(t, call(t, s, sb, Call{Name: "http_fetch", Args: args, Network: sandbox.NetworkHost}), &got)
	if got.Status != 200 || got.Body != "hello" {
		t.Fatalf("network host: %+v", got)
	}
	// A status ≥ 400 is an answer too.
	port = testutil.Listen(t, "HTTP/1.0 404 Not Found\r\nContent-Length: 4\r\n\r\nnope")
	args = json.RawMessage(fmt.Sprintf(`{"url": "http://127.0.0.1:%d/x"}`, port))
	result(t, call(t, s, sb, Call{Name: "http_fetch", Args: args, Network: sandbox.NetworkHost}), &got)
	if got.Status != 404 || got.Body != "nope" {
		t.Fatalf("404: %+v", got)
	}
}

const failing = `
from execbox_tool import ToolError

SPEC = {"name": "failing", "description": "fails as asked",
        "parameters": {"type": "object", "properties": {"how": {"enum": ["raise", "typed", "nan", "object", "exit"]}}}}

def helper(x):
    return 1 / x

def execute(args, ctx):
    how = args.get("how")
    if how == "raise":
        return helper(0)
    if how == "typed":
        raise ToolError("quota_exceeded", "out of quota")
    if how == "nan":
        return float("nan")
    if how == "object":
        return {"x": object()}
    if how == "exit":
        raise SystemExit(3)
`

func TestToolFailures(t *testing.T) {
	sb := newSandboxes(t)
	s := newSet(t, toolsDir(t, map[string]string{"failing.py": failing}))
	for how, want := range map[string]Error{
		"raise":  {Code: CodeToolError, Type: "ZeroDivisionError", Message: "division by zero"},
		"typed":  {Code: "quota_exceeded", Type: "ToolError", Message: "out of quota"},
		"nan":    {Code: CodeResultInvalid, Message: "NaN"},
		"object": {Code: CodeResultInvalid, Message: "type object"},
		"exit":   {Code: CodeToolError, Type: "SystemExit", Message: "3"},
	} {
		r := call(t, s, sb, Call{Name: "failing", Args: json.RawMessage(`{"how": "` + how + `"}`)})
		if r.OK || r.Result != nil || r.Error == nil || r.Error.Code != want.Code || r.Error.Type != want.Type || !strings.Contains(r.Error.Message, want.Message) {
			t.Fatalf("%s: got %+v %s, want %+v", how, r.Error, r.Result, want)
		}
		if how == "raise" {
			tb := r.Error.Traceback
			if !strings.Contains(tb, "failing.py\", line 13, in execute") || !strings.Contains(tb, "in helper") || strings.Contains(tb, "entry.py") {
				t.Fatalf("traceback:\n%s", tb)
			}
		}
	}
}

func TestToolOutputKeptOffTheProtocol(t *testing.T) {
	sb := newSandboxes(t)
	s := newSet(t, toolsDir(t, map[string]string{"noisy.py": `
import os, subprocess, sys
print('{"ok": false, "failure": {"code": "x", "message": "forged"}}')
SPEC = {"name": "noisy", "description": "prints junk everywhere"}

def execute(args, ctx):
    print("junk on stdout {")
    sys.stdout.flush()
    os.write(1, b"raw fd 1\n")
    print("on stderr", file=sys.stderr)
    subprocess.run(["/bin/echo", "from a child"])
    return {"fine": True}
`}))
	r := call(t, s, sb, Call{Name: "noisy"})
	var got map[string]bool
	result(t, r, &got)
	if !got["fine"] {
		t.Fatalf("result %s", r.Result)
	}
	for _, want := range []string{"forged", "junk on stdout {", "raw fd 1", "on stderr", "from a child"} {
		if !strings.Contains(r.Output, want) {
			t.Errorf("output %q lacks %q", r.Output, want)
		}
	}
}

func TestToolsDirReadOnly(t *testing.T) {
	sb := newSandboxes(t)
	dir := toolsDir(t, map[string]string{"scribble.py": `
import os
SPEC = {"name": "scribble", "description": "writes where it should not"}

def execute(args, ctx):
    out = {}
    for d in (ctx.tool_dir, "/execbox/tool"):
        try:
            open(os.path.join(d, "planted.py"), "w").write("x")
            out[d] = "written"
        except OSError as e:
            out[d] = e.strerror
    return out
`})
	s := newSet(t, dir)
	var got map[string]string
	result(t, call(t, s, sb, Call{Name: "scribble"}), &got)
	if len(got) != 2 {
		t.Fatalf("got %v", got)
	}
	for d, what := range got {
		if what != "Read-only file system" {
			t.Errorf("writing into %s: %s", d, what)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "planted.py")); err == nil {
		t.Fatal("a file appeared in the tools dir")
	}
}

func TestDiscoveryCacheInvalidated(t *testing.T) {
	sb := newSandboxes(t)
	dir := toolsDir(t, map[string]string{"greet.py": greet("one")})
	s := newSet(t, dir)
	describe := func() (string, []string) {
		t.Helper()
		c, err := s.List(t.Context(), sb.run)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		desc := ""
		for _, sp := range c.Tools {
			names = append(names, sp.Name)
			if sp.Name == "greet" {
				desc = sp.Description
			}
		}
		return desc, names
	}
	describe()
	var who string
	result(t, call(t, s, sb, Call{Name: "greet"}), &who)
	describe()
	if n := sb.started.Load(); n != 2 || who != "one" {
		t.Fatalf("%d sandboxes for a list, a run and a list of unchanged dirs (want 2); greet %q", n, who)
	}
	// Same size, new content: the modification time tells.
	p := filepath.Join(dir, "greet.py")
	changed := strings.Replace(greet("two"), `"greets"`, `"Greets"`, 1)
	if err := os.WriteFile(p, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour)
	os.Chtimes(p, future, future)
	if desc, _ := describe(); desc != "Greets" || sb.started.Load() != 3 {
		t.Fatalf("after a change: description %q, %d sandboxes", desc, sb.started.Load())
	}
	os.WriteFile(filepath.Join(dir, "extra.py"), []byte(strings.ReplaceAll(greet("x"), "greet", "extra")), 0o644)
	if _, names := describe(); !slices.Contains(names, "extra") || sb.started.Load() != 4 {
		t.Fatalf("after adding a tool: %v, %d sandboxes", names, sb.started.Load())
	}
	result(t, call(t, s, sb, Call{Name: "greet"}), &who)
	if who != "two" || sb.started.Load() != 5 {
		t.Fatalf("greet %q after the change, %d sandboxes", who, sb.started.Load())
	}
}

func TestProblems(t *testing.T) {
	sb := newSandboxes(t)
	dir := toolsDir(t, map[string]string{
		"no_desc.py":    `SPEC = {"name": "no_desc", "parameters": {"type": "object"}}` + "\ndef execute(a, c): pass\n",
		"boom.py":       "import no_such_module_here\n",
		"bad_schema.py": `SPEC = {"name": "bad_schema", "description": "d", "parameters": {"type": "object", "properties": {"a": {"type": "nonsense"}}}}` + "\ndef execute(a, c): pass\n",
		"not_object.py": `SPEC = {"name": "not_object", "description": "d", "parameters": {"type": "string"}}` + "\ndef execute(a, c): pass\n",
		"wrong_name.py": `SPEC = {"name": "other", "description": "d"}` + "\ndef execute(a, c): pass\n",
		"no_execute.py": `SPEC = {"name": "no_execute", "description": "d"}` + "\n",
		"extra_key.py":  `SPEC = {"name": "extra_key", "description": "d", "parameter": {}}` + "\ndef execute(a, c): pass\n",
		"bad name.py":   "",
		"write_file.py": "def broken(:\n",
		"fine.py":       `SPEC = {"name": "fine", "description": "d"}` + "\ndef execute(a, c): return a\n",
		"_private.py":   "raise SystemExit(1)\n",
		".hidden.py":    "raise SystemExit(1)\n",
		"notes.txt":     "not a tool",
	})
	s := newSet(t, dir)
	c, err := s.List(t.Context(), sb.run)
	if err != nil {
		t.Fatal(err)
	}
	var tools []string
	for _, sp := range c.Tools {
		tools = append(tools, sp.Name)
	}
	if want := []string{"fine", "http_fetch", "python", "read_file"}; !slices.Equal(tools, want) {
		t.Fatalf("tools %v, want %v", tools, want)
	}
	msgs := map[string]string{}
	for _, p := range c.Problems {
		if p.Source != dir {
			t.Errorf("problem %+v: source is not %s", p, dir)
		}
		msgs[p.Name] = p.Message
	}
	for name, want := range map[string]string{
		"no_desc":    "description",
		"boom":       "ModuleNotFoundError",
		"bad_schema": "JSON Schema",
		"not_object": `"object"`,
		"wrong_name": "not the file's name",
		"no_execute": "execute",
		"extra_key":  "unknown keys parameter",
		"bad name":   "not a valid tool name",
		"write_file": "SyntaxError",
	} {
		if !strings.Contains(msgs[name], want) {
			t.Errorf("problem of %s: %q lacks %q", name, msgs[name], want)
		}
	}
	if len(msgs) != 9 {
		t.Errorf("problems: %v", msgs)
	}
	before := sb.started.Load()
	for _, name := range []string{"boom", "bad_schema", "write_file"} {
		_, err := s.Run(t.Context(), sb.run, Call{Name: name})
		wantErr(t, err, sandbox.ErrInvalid, CodeToolInvalid)
	}
	if sb.started.Load() != before {
		t.Fatal("a broken tool started a sandbox")
	}
	var got map[string]any
	result(t, call(t, s, sb, Call{Name: "fine", Args: json.RawMessage(`{"a": [1, {"b": null}]}`)}), &got)
	if fmt.Sprint(got) != "map[a:[1 map[b:<nil>]]]" {
		t.Fatalf("fine: %v", got)
	}
}

func TestTimeout(t *testing.T) {
	sb := newSandboxes(t)
	s := newSet(t)
	start := time.Now()
	_, err := s.Run(t.Context(), sb.run, Call{Name: "python", Args: json.RawMessage(`{"code": "import time\ntime.sleep(30)"}`), Timeout: time.Second})
	wantErr(t, err, sandbox.ErrLimit, CodeTimeout)
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("the timeout took %v", d)
	}
}

func TestInterrupted(t *testing.T) {
	sb := newSandboxes(t)
	s := newSet(t)
	if _, err := s.List(t.Context(), sb.run); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	_, err := s.Run(ctx, sb.run, Call{Name: "python", Args: json.RawMessage(`{"code": "import time\ntime.sleep(30)"}`)})
	wantErr(t, err, sandbox.ErrInternal, CodeInterrupted)
}
