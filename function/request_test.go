package function

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// Seed 004 §3: the bootstrap is shell-safe and decodes back to the runner.
func TestBootstrap(t *testing.T) {
	for _, tc := range []struct {
		name, boot, runner, prefix, suffix string
	}{
		{"python", pythonBootstrap, pythonRunner, "exec(__import__('base64').b64decode('", "').decode())"},
		{"javascript", javascriptBootstrap, javascriptRunner, "eval(Buffer.from('", "','base64').toString())"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.ContainsAny(tc.boot, "$`\\\" \t\n") {
				t.Errorf("bootstrap holds a character a shell or argv parser may rewrite")
			}
			if !regexp.MustCompile(`^[A-Za-z0-9_().,'+/=]+$`).MatchString(tc.boot) {
				t.Errorf("bootstrap holds characters outside base64, quotes and punctuation")
			}
			if len(tc.boot) > 128*1024-1 { // MAX_ARG_STRLEN
				t.Errorf("bootstrap is %d bytes, too long for one argument", len(tc.boot))
			}
			enc, ok := strings.CutPrefix(tc.boot, tc.prefix)
			enc, ok2 := strings.CutSuffix(enc, tc.suffix)
			if !ok || !ok2 {
				t.Fatalf("bootstrap shape: %.60s…", tc.boot)
			}
			src, err := base64.StdEncoding.DecodeString(enc)
			if err != nil || string(src) != tc.runner || len(tc.runner) < 1000 {
				t.Fatalf("bootstrap does not decode to the runner (%v)", err)
			}
		})
	}
}

func TestReadRequest(t *testing.T) {
	// Seed 004's request, byte for byte, and the shapes Java clients send.
	for _, in := range []string{
		`{"code": "def main(a, b):\n    return a + b", "params": {"a": 2, "b": 40}, "entrypoint": "main", "mode": "execute"}`,
		`{"code":"def main(): pass","params":null,"entrypoint":null,"mode":null}`,
		`{"code":"def main(): pass","timeout":"1500ms","language":"python","backend":"native","tier":"fast","min_isolation":"process"}`,
		`{"code":"def main(): pass","timeout":2.5}`,
	} {
		if _, err := ReadRequest(strings.NewReader(in)); err != nil {
			t.Errorf("%s: %v", in, err)
		}
	}
	req, _ := ReadRequest(strings.NewReader(`{"code":"x","timeout":"1500ms"}`))
	if time.Duration(req.Timeout) != 1500*time.Millisecond {
		t.Errorf("timeout = %v", time.Duration(req.Timeout))
	}
	for in, code := range map[string]string{
		``:                                      CodeInvalidRequest,
		`[]`:                                    CodeInvalidRequest,
		`{"code":"x","entry_point":"main"}`:     CodeInvalidRequest, // unknown field
		`{"code":"x"} {"code":"y"}`:             CodeInvalidRequest, // trailing data
		`{"code":"x","timeout":0.5}`:            CodeInvalidRequest,
		`{"code":"x","timeout":"61s"}`:          CodeInvalidRequest,
		`{"code":"x","timeout":"soon"}`:         CodeInvalidRequest,
		`{"code":"x","timeout":1e300}`:          CodeInvalidRequest,
		`{"code":"x","params":"a=1"}`:           CodeInvalidRequest,
		`{"code":""}`:                           CodeInvalidCode,
		`{"code":"x","mode":"run"}`:             CodeInvalidRequest,
		`{"code":"x","language":"javascript "}`: CodeInvalidRequest,
	} {
		_, err := ReadRequest(strings.NewReader(in))
		if sandbox.CodeOf(err) != code {
			t.Errorf("%s: error %v (code %s), want code %s", in, err, sandbox.CodeOf(err), code)
		}
	}
}

// countingReader is an endless reader that counts what was taken from it.
type countingReader struct{ n int64 }

func (c *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	c.n += int64(len(p))
	return len(p), nil
}

// The decoder reads at most 128 KiB + 1 bytes, whatever the reader holds;
// exactly 128 KiB is accepted.
func TestReadRequestBounded(t *testing.T) {
	cr := &countingReader{}
	_, err := ReadRequest(cr)
	if !errors.Is(err, sandbox.ErrLimit) || sandbox.CodeOf(err) != CodeInputTooLarge {
		t.Fatalf("endless input: %v", err)
	}
	if cr.n > MaxInput+1+64*1024 { // LimitReader passes at most MaxInput+1 on; bufio may over-ask once
		t.Errorf("read %d bytes from an endless reader", cr.n)
	}
	lr := &io.LimitedReader{R: cr, N: 1 << 30}
	_, _ = ReadRequest(lr)
	if taken := 1<<30 - lr.N; taken != MaxInput+1 {
		t.Errorf("took %d bytes, want %d", taken, MaxInput+1)
	}
	body := `{"code":"def main(p):\n    return p","params":{"p":"`
	tail := `"},"entrypoint":"","mode":"execute"}`
	exact := body + strings.Repeat("x", MaxInput-len(body)-len(tail)) + tail
	if _, err := ReadRequest(strings.NewReader(exact)); err != nil {
		t.Errorf("exactly 128 KiB: %v", err)
	}
	if _, err := ReadRequest(strings.NewReader(exact + " ")); sandbox.CodeOf(err) != CodeInputTooLarge {
		t.Errorf("128 KiB + 1: %v", err)
	}
}

func TestResponseWire(t *testing.T) {
	for _, tc := range []struct {
		r    *Response
		want string
	}{
		{&Response{OK: true, Data: json.RawMessage(`42`)}, `{"ok":true,"data":42,"duration_ms":0}`},
		{&Response{OK: true, Data: json.RawMessage(`null`)}, `{"ok":true,"data":null,"duration_ms":0}`},
		{&Response{OK: true, Data: json.RawMessage(`"<&>"`)}, `{"ok":true,"data":"<&>","duration_ms":0}`},
		{fail(CodeUserError, "division by zero"), `{"ok":false,"error":"division by zero","code":"user_error","duration_ms":0}`},
	} {
		var b bytes.Buffer
		if err := WriteResponse(&b, tc.r); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want+"\n" {
			t.Errorf("got %s want %s", b.String(), tc.want)
		}
	}
	// Every code has a kind, and Err carries it.
	for _, c := range Codes() {
		err := fail(c, "m").Err()
		if sandbox.CodeOf(err) != c || !errors.Is(err, KindOf(c)) {
			t.Errorf("%s: Err() = %v", c, err)
		}
	}
	if (&Response{OK: true}).Err() != nil {
		t.Error("a success has an error")
	}
	if r := ErrorResponse(errors.New("plain")); r.Code != CodeSandboxFailed || r.OK {
		t.Errorf("ErrorResponse(plain) = %+v", r)
	}
}

func TestDurationJSON(t *testing.T) {
	b, _ := json.Marshal(Request{Code: "x", Timeout: Duration(2500 * time.Millisecond)})
	if !strings.Contains(string(b), `"timeout":2.5`) {
		t.Errorf("%s", b)
	}
	b, _ = json.Marshal(Request{Code: "x"})
	if strings.Contains(string(b), "timeout") {
		t.Errorf("zero timeout encoded: %s", b)
	}
}

func TestLanguageFor(t *testing.T) {
	for path, want := range map[string]Language{"f.py": Python, "a/B.PY": Python, "f.js": JavaScript, "f.cjs": JavaScript, "f.mjs": "", "f": "", "f.rb": ""} {
		got, ok := LanguageFor(path)
		if got != want || ok != (want != "") {
			t.Errorf("LanguageFor(%q) = %q, %v", path, got, ok)
		}
	}
}
