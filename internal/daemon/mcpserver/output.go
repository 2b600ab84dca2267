package mcpserver

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"unicode/utf16"
	"unicode/utf8"
)

// A run's answer may carry tens of MiB of output (and six times that in
// JSON: a NUL is \u0000), of which the model sees MaxText per stream. So
// a run's answer is not decoded whole: lean takes the output out of it as
// it streams from the handler, keeping what the model sees in an output,
// and passes the small rest on to the client.

// output is a run's stdout and stderr as the model sees them.
type output struct{ stdout, stderr text }

func newOutput(max int) *output { return &output{stdout: text{max: max}, stderr: text{max: max}} }

// text is a stream as text for the model, built as its bytes come: valid
// UTF-8 (each run of bytes that are not becomes one U+FFFD, as
// strings.ToValidUTF8 makes it), at most max bytes of it, never ending
// inside a character. cut says there was more.
type text struct {
	max     int
	b       []byte
	cut     bool
	invalid bool              // the last byte was in a run of invalid ones
	carry   [utf8.UTFMax]byte // the start of a character not yet whole
	nc      int
}

const replacement = "\uFFFD"

func (t *text) Write(p []byte) (int, error) {
	n := len(p)
	if t.nc > 0 {
		// The carried start and p's first bytes: enough to end the
		// character the carry begins.
		var tmp [2 * utf8.UTFMax]byte
		k := copy(tmp[:], t.carry[:t.nc])
		m := copy(tmp[k:], p)
		used := t.step(tmp[:k+m], false)
		if used < k {
			// Still not whole: then all of p is in tmp.
			t.nc = copy(t.carry[:], tmp[used:k+m])
			return n, nil
		}
		p = p[used-k:]
		t.nc = 0
	}
	used := t.step(p, false)
	t.nc = copy(t.carry[:], p[used:])
	return n, nil
}

// step takes the characters of b and returns how many bytes it took: all
// but, unless final, the start of a character not yet whole.
func (t *text) step(b []byte, final bool) int {
	for i := 0; i < len(b) && !t.cut; {
		if b[i] < utf8.RuneSelf {
			t.put(b[i : i+1])
			t.invalid = false
			i++
			continue
		}
		if !final && !utf8.FullRune(b[i:]) {
			return i
		}
		_, size := utf8.DecodeRune(b[i:])
		if size == 1 {
			if !t.invalid {
				t.put([]byte(replacement))
			}
			t.invalid = true
			i++
			continue
		}
		t.put(b[i : i+size])
		t.invalid = false
		i += size
	}
	return len(b)
}

func (t *text) put(s []byte) {
	if len(t.b)+len(s) > t.max {
		t.cut = true
		return
	}
	t.b = append(t.b, s...)
}

// end takes the carried bytes: the stream ended.
func (t *text) end() {
	t.step(t.carry[:t.nc], true)
	t.nc = 0
}

// String is the text, and whether it was cut; the stream has ended.
func (t *text) String() (string, bool) {
	t.end()
	return string(t.b), t.cut
}

// lean passes a JSON object (a run's result) through to w without the
// values of its top-level keys stdout, stderr, stdout_base64 and
// stderr_base64: each string value goes to its stream in out as it comes
// (unescaped as encoding/json does, and base64-decoded for the _base64
// ones) and is written as "". What reaches w is the small rest.
type lean struct {
	w     io.Writer
	out   *output
	state int
	depth int
	str   bool // in a string of the rest…
	esc   bool // …after a backslash
	// keyAt: the string being read is a top-level key, whose first bytes
	// are key.
	keyAt, wantKey bool
	key            []byte
	val            value // the value routed to out
	err            error
}

// lean's states: passing the rest on, after a routed key (its colon
// next), before its value, in its value.
const (
	leanRest = iota
	leanColon
	leanValue
	leanRouted
)

// maxKey bounds the bytes of a key kept to compare: the routed ones are
// shorter.
const maxKey = 16

func newLean(w io.Writer, out *output) *lean { return &lean{w: w, out: out} }

func (l *lean) Write(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	start := 0 // p[start:i] is passed on
	flush := func(i int) {
		if l.err == nil && i > start {
			_, l.err = l.w.Write(p[start:i])
		}
		start = i
	}
	for i := 0; i < len(p) && l.err == nil; {
		c := p[i]
		switch l.state {
		case leanRouted:
			n, end, err := l.val.content(p[i:])
			if err != nil {
				l.err = err
				return 0, err
			}
			i += n
			start = i
			if end {
				l.state = leanRest
				start = i - 1 // the closing quote
			}
			continue
		case leanColon:
			if c == ':' {
				l.state = leanValue
			} else if !isSpace(c) {
				l.state = leanRest
				continue
			}
			i++
			continue
		case leanValue:
			if c == '"' {
				i++
				flush(i) // the opening quote
				l.state = leanRouted
			} else if isSpace(c) {
				i++
			} else {
				l.state = leanRest // not a string (null): passed on
			}
			continue
		}
		i++
		if l.str {
			switch {
			case l.esc:
				l.esc = false
			case c == '\\':
				l.esc = true
			case c == '"':
				l.str = false
				if l.keyAt {
					l.keyAt = false
					l.route()
				}
				continue
			}
			if l.keyAt && len(l.key) < maxKey {
				l.key = append(l.key, c)
			}
			continue
		}
		switch c {
		case '"':
			l.str = true
			if l.depth == 1 && l.wantKey {
				l.keyAt, l.wantKey, l.key = true, false, l.key[:0]
			}
		case '{', '[':
			l.depth++
			l.wantKey = l.depth == 1 && c == '{'
		case '}', ']':
			l.depth--
		case ',':
			l.wantKey = l.depth == 1
		}
	}
	flush(len(p))
	if l.err != nil {
		return 0, l.err
	}
	return len(p), nil
}

// route sets the value after the key just read to go to its stream.
func (l *lean) route() {
	var t *text
	switch string(l.key) {
	case "stdout", "stdout_base64":
		t = &l.out.stdout
	case "stderr", "stderr_base64":
		t = &l.out.stderr
	default:
		return
	}
	l.state = leanColon
	l.val = value{t: t, b64: bytes.HasSuffix(l.key, []byte("_base64"))}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

var errAnswer = errors.New("a run's answer is not valid JSON")

// value decodes a JSON string's content as it comes, into t.
type value struct {
	t   *text
	b64 bool
	esc bool // after a backslash
	hex int  // hex digits of a \u escape still to read
	u   rune // the \u escape's digits so far
	hi  rune // a high surrogate, waiting for its low half
	// quad holds base64 characters not yet decoded.
	quad [4]byte
	nq   int
}

// content takes p up to the string's closing quote (included); it returns
// how many bytes it took and whether the string ended.
func (v *value) content(p []byte) (int, bool, error) {
	for i := 0; i < len(p); {
		c := p[i]
		switch {
		case v.hex > 0:
			d, ok := unhex(c)
			if !ok {
				return 0, false, errAnswer
			}
			i++
			v.u = v.u<<4 | d
			if v.hex--; v.hex == 0 {
				if err := v.rune(v.u); err != nil {
					return 0, false, err
				}
			}
		case v.esc:
			v.esc = false
			i++
			if c == 'u' {
				v.hex, v.u = 4, 0
				continue
			}
			e, ok := unescape(c)
			if !ok {
				return 0, false, errAnswer
			}
			if err := v.rune(rune(e)); err != nil {
				return 0, false, err
			}
		default:
			j := bytes.IndexAny(p[i:], `"\`)
			if j < 0 {
				j = len(p) - i
			}
			if err := v.emit(p[i : i+j]); err != nil {
				return 0, false, err
			}
			i += j
			if i == len(p) {
				break
			}
			i++
			if p[i-1] == '"' {
				return i, true, v.end()
			}
			v.esc = true
		}
	}
	return len(p), false, nil
}

// rune takes a character given by an escape, pairing surrogates as
// encoding/json does: a half without its other is U+FFFD.
func (v *value) rune(r rune) error {
	if v.hi != 0 {
		hi := v.hi
		v.hi = 0
		if pair := utf16.DecodeRune(hi, r); pair != utf8.RuneError {
			return v.emit(utf8.AppendRune(nil, pair))
		}
		if err := v.emit([]byte(replacement)); err != nil {
			return err
		}
	}
	switch {
	case 0xD800 <= r && r < 0xDC00:
		v.hi = r
		return nil
	case utf16.IsSurrogate(r):
		r = utf8.RuneError
	}
	return v.emit(utf8.AppendRune(nil, r))
}

// emit takes decoded bytes of the string (base64 characters, for a
// _base64 value).
func (v *value) emit(b []byte) error {
	if v.hi != 0 && len(b) > 0 {
		v.hi = 0
		if err := v.emit([]byte(replacement)); err != nil {
			return err
		}
	}
	if v.t.cut {
		return nil // the model sees no more of it
	}
	if !v.b64 {
		v.t.Write(b)
		return nil
	}
	for _, c := range b {
		v.quad[v.nq] = c
		if v.nq++; v.nq == len(v.quad) {
			v.nq = 0
			var out [3]byte
			n, err := base64.StdEncoding.Decode(out[:], v.quad[:])
			if err != nil {
				return errAnswer
			}
			v.t.Write(out[:n])
		}
	}
	return nil
}

// end ends the string.
func (v *value) end() error {
	if v.hi != 0 {
		v.hi = 0
		if err := v.emit([]byte(replacement)); err != nil {
			return err
		}
	}
	v.t.end()
	if v.nq != 0 && !v.t.cut {
		return errAnswer
	}
	return nil
}

func unhex(c byte) (rune, bool) {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0'), true
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10), true
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10), true
	}
	return 0, false
}

func unescape(c byte) (byte, bool) {
	switch c {
	case '"', '\\', '/':
		return c, true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	}
	return 0, false
}
