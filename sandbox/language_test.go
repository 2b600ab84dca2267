package sandbox

import (
	"slices"
	"testing"
)

// The table: "" is python; each language's argv as a file and inline; the
// runtime languages are those with a function runner and a context kernel.
func TestLanguages(t *testing.T) {
	l, ok := LookupLanguage("")
	if !ok || l.Name != "python" || !slices.Equal(l.FileArgs(), []string{"python3", "-B", "main.py"}) ||
		!slices.Equal(l.InlineArgs("x", "-u"), []string{"python3", "-B", "-u", "-c", "x"}) {
		t.Errorf("the default language: %+v %v", l, ok)
	}
	for name, want := range map[string][2][]string{
		"javascript": {{"node", "main.js"}, {"node", "-e", "x"}},
		"sh":         {{"sh", "main.sh"}, {"sh", "-c", "x"}},
		"bash":       {{"bash", "main.sh"}, {"bash", "-c", "x"}},
	} {
		l, ok := LookupLanguage(name)
		if !ok || !slices.Equal(l.FileArgs(), want[0]) || !slices.Equal(l.InlineArgs("x"), want[1]) {
			t.Errorf("%s: %+v %v: file %q inline %q", name, l, ok, l.FileArgs(), l.InlineArgs("x"))
		}
	}
	if _, ok := LookupLanguage("ruby"); ok {
		t.Error("ruby is a language")
	}
	if got := Languages(true); !slices.Equal(got, []string{"python", "javascript"}) {
		t.Errorf("runtime languages %q", got)
	}
	if got := LanguageList(false); got != "python, javascript, sh, bash" {
		t.Errorf("all languages %q", got)
	}
	// The table's slices are not the caller's to change.
	l, _ = LookupLanguage("python")
	args := l.FileArgs()
	args[0] = "changed"
	if l2, _ := LookupLanguage("python"); l2.FileArgs()[0] != "python3" {
		t.Error("a caller changed the table through FileArgs")
	}
}
