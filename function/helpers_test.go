package function

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"go.uber.org/goleak"

	"github.com/execbox/execbox/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var interpreters = map[Language]string{Python: "python3", JavaScript: "node"}

var languages = []Language{Python, JavaScript}

// requireInterpreter skips without lang's interpreter, or fails when
// EXECBOX_REQUIRE names it or "function" (every interpreter).
func requireInterpreter(t testing.TB, lang Language) {
	t.Helper()
	feature := interpreters[lang]
	if testutil.Required("function") {
		feature = "function"
	}
	testutil.RequiresBinary(t, feature, interpreters[lang])
}

func newExecutor(t testing.TB, o Options) (*Executor, *hostRunner) {
	t.Helper()
	h := newHostRunner(t)
	e, err := New(h, o)
	if err != nil {
		t.Fatal(err)
	}
	return e, h
}

// execute runs code in lang with params (a JSON object or "").
func execute(t testing.TB, e *Executor, lang Language, code, params string) *Response {
	t.Helper()
	requireInterpreter(t, lang)
	req := &Request{Code: code, Language: lang}
	if params != "" {
		req.Params = json.RawMessage(params)
	}
	return e.Execute(context.Background(), req)
}

func wantOK(t testing.TB, r *Response, data string) {
	t.Helper()
	if !r.OK {
		t.Fatalf("want ok, got %s: %s (type %q)\ntraceback: %s\nstdout: %q", r.Code, r.Error, r.Type, r.Traceback, r.Stdout)
	}
	if got, want := decode(t, r.Data), decode(t, []byte(data)); !reflect.DeepEqual(got, want) {
		t.Fatalf("data = %s, want %s", r.Data, data)
	}
}

func wantCode(t testing.TB, r *Response, code string) {
	t.Helper()
	if r.OK || r.Code != code {
		t.Fatalf("want failure %s, got ok=%v code=%q error=%q data=%s", code, r.OK, r.Code, r.Error, r.Data)
	}
	if r.Error == "" {
		t.Fatalf("failure %s has no error message", code)
	}
}

// decode reads JSON keeping numbers exact, so escapes and spacing do not matter.
func decode(t testing.TB, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON: %q: %v", b, err)
	}
	return v
}

// pick returns the code for lang.
func pick(lang Language, python, javascript string) string {
	if lang == JavaScript {
		return javascript
	}
	return python
}
