package function

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"
)

func lint(t *testing.T, e *Executor, lang Language, code string) []Diagnostic {
	t.Helper()
	requireInterpreter(t, lang)
	d, err := e.Lint(context.Background(), &Request{Code: code, Language: lang})
	if err != nil {
		t.Fatalf("lint: %v", err)
	}
	return d
}

func TestLintSyntaxError(t *testing.T) {
	e, _ := newExecutor(t, Options{})
	cases := []struct {
		lang Language
		code string
		want Diagnostic
	}{
		{Python, "def f(:", Diagnostic{1, 6, 1, 7, "invalid syntax", "error"}},
		{Python, "def f():\n    return 1\n  x = 2", Diagnostic{3, 7, 3, 8, "unindent does not match any outer indentation level", "error"}},
		{Python, "return 5", Diagnostic{1, 0, 1, 8, "'return' outside function", "error"}},
		{JavaScript, "function f( {", Diagnostic{1, 13, 1, 14, "Unexpected end of input", "error"}},
		{JavaScript, "let x = 1;\nlet y = ;", Diagnostic{2, 8, 2, 9, "Unexpected token ';'", "error"}},
		{JavaScript, "\tfoo bar", Diagnostic{1, 5, 1, 8, "Unexpected identifier 'bar'", "error"}},
	}
	for _, tc := range cases {
		t.Run(string(tc.lang)+"/"+tc.code, func(t *testing.T) {
			t.Parallel()
			d := lint(t, e, tc.lang, tc.code)
			if len(d) != 1 || d[0] != tc.want {
				t.Fatalf("diagnostics = %+v, want [%+v]", d, tc.want)
			}
		})
	}
}

// Columns count UTF-16 code units from 0 in both languages: the same
// error on a line with non-ASCII text has the same column.
func TestLintColumnsAgree(t *testing.T) {
	e, _ := newExecutor(t, Options{})
	code := "x = 'é€😀'; y = = 2"
	prefix := code[:strings.LastIndex(code, "=")]
	want := len(utf16.Encode([]rune(prefix)))
	for _, lang := range languages {
		t.Run(string(lang), func(t *testing.T) {
			t.Parallel()
			d := lint(t, e, lang, code)
			if len(d) != 1 || d[0].Line != 1 || d[0].Column != want || d[0].EndColumn != want+1 {
				t.Fatalf("diagnostics = %+v, want line 1 column %d..%d", d, want, want+1)
			}
		})
	}
}

func TestLintValid(t *testing.T) {
	e, _ := newExecutor(t, Options{})
	for _, lang := range languages {
		t.Run(string(lang), func(t *testing.T) {
			t.Parallel()
			requireInterpreter(t, lang)
			code := pick(lang, "def main(a, b):\n    return a + b", "function main(a, b) { return a + b }")
			r := e.Execute(context.Background(), &Request{Code: code, Language: lang, Mode: ModeLint})
			if !r.OK || r.Diagnostics == nil || len(r.Diagnostics) != 0 {
				t.Fatalf("response = %+v", r)
			}
			var sb strings.Builder
			if err := WriteResponse(&sb, r); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(sb.String(), `"data":[]`) || !strings.Contains(sb.String(), `"diagnostics":[]`) {
				t.Errorf("wire = %s, want data and diagnostics []", sb.String())
			}
		})
	}
}

// Lint parses only: a statement that writes a file leaves no file. The
// same code executed does write it, so the probe itself works.
func TestLintNeverRuns(t *testing.T) {
	e, _ := newExecutor(t, Options{})
	for _, lang := range languages {
		t.Run(string(lang), func(t *testing.T) {
			t.Parallel()
			requireInterpreter(t, lang)
			path := filepath.Join(t.TempDir(), "ran")
			code := pick(lang,
				"open("+quote(path)+", 'w').write('ran')\ndef main():\n    open("+quote(path)+", 'w').write('ran')\n    return 1",
				"require('fs').writeFileSync("+quote(path)+", 'ran')\nfunction main() { require('fs').writeFileSync("+quote(path)+", 'ran'); return 1 }")
			if d := lint(t, e, lang, code); len(d) != 0 {
				t.Fatalf("diagnostics = %+v", d)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Fatalf("lint ran the code: %s exists (%v)", path, err)
			}
			wantOK(t, e.Execute(context.Background(), &Request{Code: code, Language: lang}), `1`)
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("execute did not write %s: %v", path, err)
			}
		})
	}
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }
