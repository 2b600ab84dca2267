package mcpserver

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/sandbox"
)

// wholeText is what the model saw of a stream when the answer was decoded
// whole: the text made valid, then cut at max inside no character.
func wholeText(s string, raw []byte, max int) (string, bool) {
	if raw != nil {
		s = strings.ToValidUTF8(string(raw), "\uFFFD")
	}
	if len(s) <= max {
		return s, false
	}
	s = s[:max]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s, true
}

// TestLean: a run's answer, written to lean in pieces of any size, gives
// the model what decoding it whole gave (output, truncation, every other
// field), for output of every kind — NULs, quotes, backslashes, HTML
// characters, U+2028, multi-byte characters, bytes that are not UTF-8 —
// cut at any MaxText; and a "stdout" key that is not the result's own (in
// a nested object) stays where it is.
func TestLean(t *testing.T) {
	pieces := []string{"\x00", "a", "<", "&", "\"", "\\", "\n", "\xff", "\xe2\x82", "\xac", "€", "😀", "\u2028", "\uFFFD", "/", "\x1f", "\x7f"}
	r := rand.New(rand.NewPCG(1, 2))
	gen := func() string {
		var b strings.Builder
		for range r.IntN(40) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		return b.String()
	}
	for i := range 3000 {
		res := sandbox.Result{Backend: "local", Reason: sandbox.ReasonExited, ExitCode: 3, Message: "m\"\\",
			Stdout: gen(), Stderr: gen(), StdoutTruncated: i%3 == 0, Usage: sandbox.Usage{Wall: 5 * time.Millisecond},
			Enforcement: map[string]string{"stdout": gen(), "stderr_base64": "x"}}
		if i%7 == 0 {
			res.Stdout = strings.Repeat("\x00", 1000+r.IntN(100)) // long: many writes
		}
		res.WireForm(true)
		var answer bytes.Buffer
		enc := json.NewEncoder(&answer)
		enc.SetEscapeHTML(i%2 == 0)
		if err := enc.Encode(&res); err != nil {
			t.Fatal(err)
		}
		max := []int{1, 2, 3, 4, 5, 8, 64, 1 << 20}[i%8]

		var whole v1.RunResult
		if err := json.Unmarshal(answer.Bytes(), &whole); err != nil {
			t.Fatal(err)
		}
		want := RunOutput{ExitCode: whole.ExitCode, Reason: string(whole.Reason), Message: whole.Message, DurationMS: 5, Backend: "local", Isolation: whole.Isolation.String()}
		var cut bool
		want.Stdout, cut = wholeText(whole.Stdout, whole.StdoutBase64, max)
		want.StdoutTruncated = whole.StdoutTruncated || cut
		want.Stderr, cut = wholeText(whole.Stderr, whole.StderrBase64, max)
		want.StderrTruncated = whole.StderrTruncated || cut

		out := newOutput(max)
		var rest bytes.Buffer
		l := newLean(&rest, out)
		for b := answer.Bytes(); len(b) > 0; {
			n := min(len(b), 1+r.IntN(17))
			if i%5 == 0 {
				n = len(b)
			}
			if k, err := l.Write(b[:n]); err != nil || k != n {
				t.Fatalf("writing %q: %d, %v", b[:n], k, err)
			}
			b = b[n:]
		}
		var lean v1.RunResult
		dec := json.NewDecoder(&rest)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&lean); err != nil {
			t.Fatalf("the rest %q: %v", rest.String(), err)
		}
		if got := runOutput(&lean, out); got != want {
			t.Fatalf("answer %q, MaxText %d:\n got %+v\nwant %+v", answer.String(), max, got, want)
		}
		if rest.Len() > 512+answer.Len()-len(res.Stdout)-len(res.Stderr)-len(res.StdoutBase64)-len(res.StderrBase64) {
			t.Fatalf("the rest holds the output: %q", rest.String())
		}
		if !reflect.DeepEqual(lean.Enforcement, whole.Enforcement) {
			t.Fatalf("a nested stdout key: %q, want %q", lean.Enforcement, whole.Enforcement)
		}
	}
}

// Escapes encoding/json decodes but does not write: surrogate pairs, a
// half alone (U+FFFD, as encoding/json makes it), \/ and \b.
func TestLeanEscapes(t *testing.T) {
	for _, s := range []string{`\ud83d\ude00`, `\ud83d`, `\ude00x`, `\ud83d\u0041`, `\ud83d\ud83d\ude00`, `\ud83dA`, `\ud83d\n`, `a\/b\b\f\r\t`, `\u00e9\u20AC`} {
		answer := `{"stdout":"` + s + `","stderr":""}`
		var whole v1.RunResult
		if err := json.Unmarshal([]byte(answer), &whole); err != nil {
			t.Fatal(err)
		}
		out := newOutput(DefaultMaxText)
		var rest bytes.Buffer
		if _, err := newLean(&rest, out).Write([]byte(answer)); err != nil {
			t.Fatal(err)
		}
		if got, _ := out.stdout.String(); got != whole.Stdout {
			t.Errorf("%s: %q, want %q", s, got, whole.Stdout)
		}
		if rest.String() != `{"stdout":"","stderr":""}` {
			t.Errorf("%s: the rest %q", s, rest.String())
		}
	}
	// What is not JSON fails, as decoding it would.
	for _, bad := range []string{`{"stdout":"\x"}`, `{"stdout":"\u00zz"}`, `{"stdout_base64":"!!!!"}`, `{"stdout_base64":"QUJ"}`} {
		if _, err := newLean(&bytes.Buffer{}, newOutput(DefaultMaxText)).Write([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// Past MaxText a stream's bytes are dropped as they come.
func TestTextBounded(t *testing.T) {
	x := text{max: 10}
	for range 1000 {
		x.Write(bytes.Repeat([]byte("é"), 1000))
	}
	if s, cut := x.String(); s != "ééééé" || !cut || cap(x.b) > 64 {
		t.Errorf("%q %v, %d bytes held", s, cut, cap(x.b))
	}
}
