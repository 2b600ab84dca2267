package function

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// Seed 004's example, in both languages, through Execute and the wire format.
func TestSeedExample(t *testing.T) {
	e, _ := newExecutor(t, Options{})
	for _, lang := range languages {
		t.Run(string(lang), func(t *testing.T) {
			t.Parallel()
			code := pick(lang, "def main(a, b):\n    return a + b", "function main(a, b) { return a + b }")
			r := execute(t, e, lang, code, `{"a": 2, "b": 40}`)
			wantOK(t, r, `42`)
			if r.Backend != "local" || r.Isolation != "none" {
				t.Errorf("backend/isolation = %q/%q, want local/none", r.Backend, r.Isolation)
			}
			var sb strings.Builder
			if err := WriteResponse(&sb, r); err != nil {
				t.Fatal(err)
			}
			line := sb.String()
			if !strings.HasPrefix(line, `{"ok":true,"data":42,`) || !strings.HasSuffix(line, "}\n") || strings.Contains(line, `"error"`) {
				t.Errorf("wire response = %s", line)
			}
		})
	}
}

// The function's prints, raw fd writes and child processes' output never
// reach the protocol channel; they land in stdout.
func TestOutputDoesNotCorruptProtocol(t *testing.T) {
	e, _ := newExecutor(t, Options{})
	for _, lang := range languages {
		t.Run(string(lang), func(t *testing.T) {
			t.Parallel()
			code := pick(lang, `
import os, sys, subprocess
def main():
    print('{"ok": false, "error": "forged by print"}')
    os.write(1, b'{"ok":false}')
    os.write(2, b'[raw2]')
    sys.stderr.write('[stderr]')
    subprocess.run(['echo', '[child]'])
    return {"x": 1}
`, `
const fs = require('fs'), cp = require('child_process');
function main() {
  console.log('{"ok": false, "error": "forged by console.log"}');
  fs.writeSync(1, '{"ok":false}');
  fs.writeSync(2, '[raw2]');
  console.error('[stderr]');
  cp.execSync('echo [child]', {stdio: 'inherit'});
  return {x: 1};
}`)
			r := execute(t, e, lang, code, "")
			wantOK(t, r, `{"x":1}`)
			for _, s := range []string{`"error": "forged by`, `{"ok":false}`, "[raw2]", "[stderr]", "[child]"} {
				if !strings.Contains(r.Stdout, s) {
					t.Errorf("stdout %q lacks %q", r.Stdout, s)
				}
			}
			if r.StdoutTruncated {
				t.Error("stdout_truncated set for a short output")
			}
		})
	}
}

// stdout keeps exactly 8 KiB: at the bound nothing is cut, one byte more is.
func TestStdoutBound(t *testing.T) {
	e, _ := newExecutor(t, Options{})
	for _, lang := range languages {
		for _, tc := range []struct {
			n         int
			truncated bool
		}{{MaxStdout, false}, {MaxStdout + 1, true}, {100 * 1024, true}} {
			t.Run(fmt.Sprintf("%s/%d", lang, tc.n), func(t *testing.T) {
				t.Parallel()
				code := pick(lang,
					fmt.Sprintf("import sys\ndef main():\n    sys.stdout.write('x' * %d)\n    return 1", tc.n),
					fmt.Sprintf("function main() { process.stdout.write('x'.repeat(%d)); return 1 }", tc.n))
				r := execute(t, e, lang, code, "")
				wantOK(t, r, `1`)
				if len(r.Stdout) != MaxStdout || r.StdoutTruncated != tc.truncated {
					t.Errorf("stdout: %d bytes, truncated=%v; want %d bytes, truncated=%v", len(r.Stdout), r.StdoutTruncated, MaxStdout, tc.truncated)
				}
			})
		}
		t.Run(string(lang)+"/utf8", func(t *testing.T) {
			t.Parallel()
			code := pick(lang, "def main():\n    print('€' * 3000)\n    return 1",
				"function main() { console.log('€'.repeat(3000)); return 1 }")
			r := execute(t, e, lang, code, "")
			wantOK(t, r, `1`)
			if !utf8.ValidString(r.Stdout) || len(r.Stdout) > MaxStdout || !r.StdoutTruncated {
				t.Errorf("stdout: %d bytes, valid UTF-8 %v, truncated %v", len(r.Stdout), utf8.ValidString(r.Stdout), r.StdoutTruncated)
			}
		})
	}
}

func TestNameIsNotMain(t *testing.T) {
	e, _ := newExecutor(t, Options{})
	for _, lang := range languages {
		t.Run(string(lang), func(t *testing.T) {
			t.Parallel()
			code := pick(lang, `
def main():
    return __name__
if __name__ == "__main__":
    raise SystemExit("the main block ran")
`, `
function main() { return require.main === module }
if (require.main === module) { throw new Error('the main block ran') }
`)
			wantOK(t, execute(t, e, lang, code, ""), pick(lang, `"execbox_function"`, `false`))
		})
	}
}

func TestStrictJSON(t *testing.T) {
	e, _ := newExecutor(t, Options{})
	cases := []struct {
		lang       Language
		ret, names string
	}{
		{Python, "float('nan')", "NaN"},
		{Python, "[1, float('inf')]", "Infinity"},
		{Python, "{'a': {1, 2}}", "type set"},
		{Python, "object()", "type object"},
		{Python, "b'bytes'", "type bytes"},
		{JavaScript, "NaN", "NaN"},
		{JavaScript, "[1, -Infinity]", "Infinity"},
		{JavaScript, "{a: new Map()}", "type Map"},
		{JavaScript, "1n", "type bigint"},
		{JavaScript, "{a: undefined}", "type undefined"},
		{JavaScript, "{f() {}}.f", "type function"},
		{JavaScript, "(() => { const o = {}; o.o = o; return o })()", "circular"},
	}
	for _, tc := range cases {
		t.Run(string(tc.lang)+"/"+tc.ret, func(t *testing.T) {
			t.Parallel()
			code := pick(tc.lang, "def main():\n    return "+tc.ret, "function main() { return "+tc.ret+" }")
			r := execute(t, e, tc.lang, code, "")
			wantCode(t, r, CodeResultInvalid)
			if !strings.Contains(r.Error, tc.names) {
				t.Errorf("error %q does not name %q", r.Error, tc.names)
			}
		})
	}
	// What strict JSON has passes through untouched.
	for _, lang := range languages {
		t.Run(string(lang)+"/valid", func(t *testing.T) {
			t.Parallel()
			code := pick(lang, "def main():\n    return {'s': 'é\\u2028', 'n': None, 'l': [1.5, True], 'big': 12345678901234567890}",
				"function main() { return {s: 'é\\u2028', n: null, l: [1.5, true], d: new Date(0), big: 1234567890123456789} }")
			r := execute(t, e, lang, code, "")
			wantOK(t, r, pick(lang, `{"s":"é\u2028","n":null,"l":[1.5,true],"big":12345678901234567890}`,
				`{"s":"é\u2028","n":null,"l":[1.5,true],"d":"1970-01-01T00:00:00.000Z","big":1234567890123456800}`))
		})
	}
}

// A result of exactly 256 KiB serialised passes; one byte more is the error.
func TestResultBound(t *testing.T) {
	e, _ := newExecutor(t, Options{})
	for _, lang := range languages {
		for _, n := range []int{MaxResult - 2, MaxResult - 1} { // +2 for the quotes
			t.Run(fmt.Sprintf("%s/%d", lang, n+2), func(t *testing.T) {
				t.Parallel()
				code := pick(lang, fmt.Sprintf("def main():\n    return 'x' * %d", n),
					fmt.Sprintf("function main() { return 'x'.repeat(%d) }", n))
				r := execute(t, e, lang, code, "")
				if n+2 <= MaxResult {
					if !r.OK || len(r.Data) != MaxResult {
						t.Fatalf("ok=%v code=%s error=%q, data %d bytes", r.OK, r.Code, r.Error, len(r.Data))
					}
					return
				}
				wantCode(t, r, CodeResultTooLarge)
				if r.Error != "result exceeds 256 KiB" {
					t.Errorf("error = %q", r.Error)
				}
			})
		}
	}
}

func TestUserException(t *testing.T) {
	e, _ := newExecutor(t, Options{})
	cases := []struct {
		lang                   Language
		code, msg, typ, inUser string
	}{
		{Python, "def main():\n    return 1/0", "division by zero", "ZeroDivisionError", `File "function.py", line 2, in main`},
		{Python, "import json\ndef helper():\n    return json.loads('x')\ndef main():\n    return helper()",
			"Expecting value: line 1 column 1 (char 0)", "JSONDecodeError", `File "function.py", line 3, in helper`},
		{Python, "def main():\n    raise ValueError()", "ValueError", "ValueError", "line 2, in main"},
		{Python, "import sys\ndef main():\n    sys.exit(4)", "4", "SystemExit", "line 3, in main"},
		{JavaScript, "function main() {\n  throw new RangeError('bad range')\n}", "bad range", "RangeError", "at main (function.js:2:9)"},
		{JavaScript, "function main() {\n  return null.x\n}", "Cannot read properties of null (reading 'x')", "TypeError", "function.js:2"},
		{JavaScript, "async function main() {\n  await null\n  throw new Error('later')\n}", "later", "Error", "function.js:3"},
		{JavaScript, "function main() { throw 'a string' }", "a string", "string", ""},
	}
	for _, tc := range cases {
		t.Run(string(tc.lang)+"/"+tc.typ, func(t *testing.T) {
			t.Parallel()
			r := execute(t, e, tc.lang, tc.code, "")
			wantCode(t, r, CodeUserError)
			if r.Error != tc.msg || r.Type != tc.typ {
				t.Errorf("error, type = %q, %q; want %q, %q", r.Error, r.Type, tc.msg, tc.typ)
			}
			if !strings.Contains(r.Traceback, tc.inUser) {
				t.Errorf("traceback lacks %q:\n%s", tc.inUser, r.Traceback)
			}
			// Limited to the user's code: no runner, library or Node frames.
			for _, s := range []string{"<string>", "json/decoder.py", "[eval]", "node:", "runner"} {
				if strings.Contains(r.Traceback, s) {
					t.Errorf("traceback shows %q:\n%s", s, r.Traceback)
				}
			}
		})
	}
}

func TestEntrypoint(t *testing.T) {
	e, _ := newExecutor(t, Options{})
	py := "def first():\n    return 'first'\n\nasync def second():\n    return 'second'\n\nthird = lambda: 'third'\n"
	// Declarations hidden in comments, strings, regexes, templates and
	// nested scopes, and a function expression, must not count.
	js := `
// function fake1() {}
/* function fake2() {} */
const s = "function fake3() {}" + 'function fake4() {}';
const re = /function fake5\(\) {"/g;
const t = ` + "`${(function fake6() { return '{' })()} function fake7() {}`" + `;
function first(a) { function inner() {} return 'first' }
x = 1
async function second() { return 'second' }
var expr = function notDecl() { return 'expr' };
const third = () => 'third';
if (true) { function nested() {} }
`
	cases := []struct {
		lang             Language
		code, entry, out string
		fails            string
	}{
		{Python, py, "", `"second"`, ""},
		{Python, py, "first", `"first"`, ""},
		{Python, py, "third", `"third"`, ""},
		{Python, py, "missing", "", `"missing"`},
		{Python, "x = 1", "", "", "no top-level function"},
		{Python, "x = 1", "x", "", "not a function"},
		{JavaScript, js, "", `"second"`, ""},
		{JavaScript, js, "first", `"first"`, ""},
		{JavaScript, js, "third", `"third"`, ""},
		{JavaScript, js, "expr", `"expr"`, ""},
		{JavaScript, js, "missing", "", `"missing"`},
		{JavaScript, "const x = 1", "", "", "no top-level function"},
		{JavaScript, "const x = 1", "x", "", "not a function"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/%q", tc.lang, tc.entry), func(t *testing.T) {
			t.Parallel()
			requireInterpreter(t, tc.lang)
			r := e.Execute(context.Background(), &Request{Code: tc.code, Entrypoint: tc.entry, Language: tc.lang})
			if tc.fails != "" {
				wantCode(t, r, CodeEntrypointNotFound)
				if !strings.Contains(r.Error, tc.fails) {
					t.Errorf("error %q lacks %q", r.Error, tc.fails)
				}
				return
			}
			wantOK(t, r, tc.out)
		})
	}
}

func TestTopLevelFunctionsScan(t *testing.T) {
	requireInterpreter(t, JavaScript)
	// The JavaScript scanner is tested through the runner with tricky code.
	e, _ := newExecutor(t, Options{})
	cases := map[string]string{
		"function a(){}\nfunction b(){ return 'b' }":                              `"b"`,
		"function b(){ return 'b' }\nconst r = 4 / 2 / 1; function c(){}":         "", // c returns undefined → null
		"function last(){ return 'ok' }\nconst o = {function: 1, f() {}}":         `"ok"`,
		"function g(){ return 'g' }\nconst x = a => { function h(){} }":           `"g"`,
		"function* gen(){}\nfunction z(){ return 'z' }":                           `"z"`,
		"function k(){ return 'k' }\nlet re = /[/]function q(){}/; let d = 1 / 2": `"k"`,
	}
	for code, want := range cases {
		r := e.Execute(context.Background(), &Request{Code: code, Language: JavaScript})
		if want == "" {
			want = "null"
		}
		wantOK(t, r, want)
	}
}

func TestAsync(t *testing.T) {
	e, _ := newExecutor(t, Options{})
	for _, lang := range languages {
		t.Run(string(lang), func(t *testing.T) {
			t.Parallel()
			code := pick(lang, "import asyncio\nasync def main(n):\n    await asyncio.sleep(0.01)\n    return n * 2",
				"async function main(n) { await new Promise(r => setTimeout(r, 10)); return n * 2 }")
			wantOK(t, execute(t, e, lang, code, `{"n": 21}`), `42`)
		})
	}
	t.Run("javascript/never-settles", func(t *testing.T) {
		t.Parallel()
		r := execute(t, e, JavaScript, "function main() { return new Promise(() => {}) }", "")
		wantCode(t, r, CodeUserError)
		if !strings.Contains(r.Error, "never settled") {
			t.Errorf("error = %q", r.Error)
		}
	})
}

func TestJavaScriptParams(t *testing.T) {
	e, _ := newExecutor(t, Options{})
	cases := []struct {
		code, params, out, fails string
	}{
		{"function main({a, b}) { return a - b }", `{"a": 5, "b": 3}`, `2`, ""},
		{"function main(a, b = 10) { return a + b }", `{"a": 1}`, `11`, ""},
		{"function main(a, /* c, */ b) { return [a, b === undefined] }", `{"a": 1}`, `[1,true]`, ""},
		{"const main = async (x, y) => x * y", `{"x": 6, "y": 7}`, `42`, ""},
		{"function main() { return arguments.length }", `{}`, `0`, ""},
		{"function main(a) { return a }", `{"a": 1, "b": 2}`, "", "unexpected argument 'b'"},
		{"function main({a}, b) { return a }", `{"a": 1}`, "", "cannot take params"},
	}
	for _, tc := range cases {
		t.Run(tc.code, func(t *testing.T) {
			t.Parallel()
			requireInterpreter(t, JavaScript)
			r := e.Execute(context.Background(), &Request{Code: tc.code, Params: json.RawMessage(tc.params), Entrypoint: "main", Language: JavaScript})
			if tc.fails != "" {
				wantCode(t, r, CodeUserError)
				if !strings.Contains(r.Error, tc.fails) || r.Type != "TypeError" {
					t.Errorf("error %q (%s) lacks %q", r.Error, r.Type, tc.fails)
				}
				return
			}
			wantOK(t, r, tc.out)
		})
	}
}

func TestSyntaxErrorOnExecute(t *testing.T) {
	e, _ := newExecutor(t, Options{})
	for _, lang := range languages {
		t.Run(string(lang), func(t *testing.T) {
			t.Parallel()
			r := execute(t, e, lang, pick(lang, "def f(:", "function f( {"), "")
			wantCode(t, r, CodeSyntaxError)
			if r.Type != "SyntaxError" || !strings.Contains(r.Error, "line 1") {
				t.Errorf("type %q, error %q", r.Type, r.Error)
			}
		})
	}
}

// Threads, timers and child processes the function leaves behind (some
// holding its stdout) do not hold up the answer.
func TestLeftoversDoNotBlock(t *testing.T) {
	e, _ := newExecutor(t, Options{})
	for _, lang := range languages {
		t.Run(string(lang), func(t *testing.T) {
			t.Parallel()
			code := pick(lang, `
import subprocess, threading, time
def main():
    threading.Thread(target=time.sleep, args=(100,)).start()
    subprocess.Popen(['sleep', '100'])
    print('left')
    return 1
`, `
const cp = require('child_process');
function main() {
  setInterval(() => {}, 1000);
  cp.spawn('sleep', ['100'], {stdio: 'inherit'});
  console.log('left');
  return 1;
}`)
			start := time.Now()
			r := execute(t, e, lang, code, "")
			wantOK(t, r, "1")
			if took := time.Since(start); took > 3*time.Second || !strings.Contains(r.Stdout, "left") {
				t.Errorf("took %v, stdout %q", took, r.Stdout)
			}
		})
	}
}

// The runner writes no script file: the work dir the function sees is empty.
func TestNoScriptFile(t *testing.T) {
	e, _ := newExecutor(t, Options{})
	for _, lang := range languages {
		t.Run(string(lang), func(t *testing.T) {
			t.Parallel()
			code := pick(lang, "import os, tempfile\ndef main():\n    return [os.listdir('.'), os.listdir(tempfile.gettempdir())]",
				"function main() { const fs = require('fs'); return [fs.readdirSync('.'), fs.readdirSync(require('os').tmpdir())] }")
			wantOK(t, execute(t, e, lang, code, ""), `[[],[]]`)
		})
	}
}

// Lone surrogates in a message, an output or a result do not break the protocol.
func TestLoneSurrogates(t *testing.T) {
	e, _ := newExecutor(t, Options{})
	for _, lang := range languages {
		t.Run(string(lang), func(t *testing.T) {
			t.Parallel()
			r := execute(t, e, lang, pick(lang, "def main():\n    print('\\ud800')\n    raise ValueError('bad \\ud800')",
				"function main() { console.log('\\ud800'); throw new Error('bad \\ud800') }"), "")
			wantCode(t, r, CodeUserError)
			if !strings.HasPrefix(r.Error, "bad ") {
				t.Errorf("error = %q", r.Error)
			}
			wantOK(t, execute(t, e, lang, pick(lang, "def main():\n    return '\\ud800'", "function main() { return '\\ud800' }"), ""), `"\ufffd"`)
		})
	}
}
