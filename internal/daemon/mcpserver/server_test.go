package mcpserver

import (
	"strings"
	"testing"
)

// A stream is cut at MaxText bytes, never inside a character, and bytes
// that are not UTF-8 become U+FFFD.
func TestText(t *testing.T) {
	tl := &tools{o: Options{MaxText: 8}}
	for _, c := range []struct {
		in   string
		want string
		cut  bool
	}{
		{in: "12345678", want: "12345678"},
		{in: "123456789", want: "12345678", cut: true},
		{in: "1234567é", want: "1234567", cut: true}, // é is 2 bytes: 9 in all
		{in: "ab\xffcd", want: "ab\uFFFDcd"},
		{in: "ab\xff\xfe\xe2\x82cd", want: "ab\uFFFDcd"}, // one U+FFFD for a run
		{in: "", want: ""},
	} {
		got, cut := tl.text(c.in)
		if got != c.want || cut != c.cut {
			t.Errorf("text(%q) = %q, %v; want %q, %v", c.in, got, cut, c.want, c.cut)
		}
	}
	if got, _ := (&tools{o: Options{MaxText: DefaultMaxText}}).text(strings.Repeat("x", DefaultMaxText+1)); len(got) != DefaultMaxText {
		t.Errorf("default bound: %d bytes", len(got))
	}
}
