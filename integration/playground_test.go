package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/chromedp"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/internal/testutil"
)

// browser is a headless Debian chromium on one tab, and what its pages
// reported: uncaught exceptions, console errors, CSP violations.
type browser struct {
	t     *testing.T
	ctx   context.Context
	shots string
	log   *pageLog
}

// pageLog is what the pages reported.
type pageLog struct {
	mu     sync.Mutex
	errors []string
}

// on is b reporting to t (a subtest's).
func (b *browser) on(t *testing.T) *browser {
	c := *b
	c.t = t
	return &c
}

// newBrowser starts chromium (required when EXECBOX_REQUIRE names
// "chromium"); it is stopped at cleanup. Screenshots go to
// $EXECBOX_SCREENSHOTS, else a folder under $TMPDIR that the test names.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		testutil.SkipOrFail(t, "chromium", "no chromium to drive (apt-get install chromium)")
	}
	shots := os.Getenv("EXECBOX_SCREENSHOTS")
	if shots == "" {
		shots = filepath.Join(os.TempDir(), "execbox-playground-screenshots")
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.WindowSize(1400, 1000))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // chromium refuses to run as root with its own sandbox
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: ctx, shots: shots, log: &pageLog{}}
	done := make(chan struct{})
	t.Cleanup(func() {
		cancelB()
		cancelA()
		<-done
		b.log.mu.Lock()
		defer b.log.mu.Unlock()
		for _, e := range b.log.errors {
			t.Errorf("the page reported %s", e)
		}
	})
	messages := chromedp.Console(ctx)
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		close(done)
		t.Fatalf("starting %s: %v", path, err)
	}
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			// A refused request is the network's to report (the 401s of
			// the login case); any other error — an exception, a CSP
			// violation, a script that failed to load — is the page's.
			if (m.Type == chromedp.ConsoleError || m.IsException()) && m.Source != "network" {
				b.log.mu.Lock()
				b.log.errors = append(b.log.errors, m.String())
				b.log.mu.Unlock()
			}
		}
	}()
	return b
}

// ctxFor bounds one step.
func (b *browser) ctxFor() (context.Context, context.CancelFunc) {
	return context.WithTimeout(b.ctx, 60*time.Second)
}

// do runs steps in order; a failure saves a screenshot and ends the test.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := b.ctxFor()
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.failed(what, err)
	}
}

func (b *browser) failed(what string, err error) {
	b.t.Helper()
	b.screenshot("failed-" + strings.ReplaceAll(what, " ", "-"))
	b.t.Fatalf("%s: %v", what, err)
}

// screenshot saves the whole page as name.png.
func (b *browser) screenshot(name string) {
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	p := filepath.Join(b.shots, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Errorf("saving %s: %v", p, err)
		return
	}
	b.t.Logf("screenshot: %s", p)
}

// text is the visible text of the first element matching sel, waiting for it.
func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := b.ctxFor()
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.failed("reading "+sel, err)
	}
	return s
}

// evaluate evaluates a JavaScript expression in the page.
func evaluate[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := b.ctxFor()
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.failed("evaluating "+expr, err)
	}
	return v
}

// waitFor polls a JavaScript condition until it holds (60 s at most).
func (b *browser) waitFor(what, cond string) {
	b.t.Helper()
	ctx, cancel := b.ctxFor()
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(55*time.Second))); err != nil {
		b.failed("waiting for "+what, err)
	}
}

// typeCode replaces the editor's whole text with code, typed as a user's
// input (select all, then the text inserted at the caret).
func (b *browser) typeCode(code string) {
	b.t.Helper()
	b.do("typing code",
		chromedp.Click(chromedp.CSS(".cm-content")),
		chromedp.KeyEvent("a", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, input.InsertText, input.InsertTextParams{Text: code})
			return err
		}))
	got := evaluate[string](b, `[...document.querySelectorAll(".cm-content .cm-line")].map(l => l.textContent).join("\n")`)
	if want := strings.TrimSuffix(code, "\n"); strings.TrimSuffix(got, "\n") != want {
		b.t.Fatalf("the editor holds %q after typing %q", got, code)
	}
}

// TestPlayground drives the web playground of a real `execbox serve` on
// the default backend with Debian's chromium: the login prompt, lint
// squiggles while typing, a function call, a timeout, a streamed run, a
// session and the status page; a screenshot of each page.
func TestPlayground(t *testing.T) {
	testutil.RequiresRoot(t, "serve")
	b := newBrowser(t)
	const token = "playground-secret"
	// write_file is held for an admin's approval (the status page shows
	// it); the one token approves its own calls.
	s := startServer(t, []string{"EXECBOX_TOKEN=" + token, "EXECBOX_GUARD_RULES=[{name: ask-write, action: confirm, tools: [write_file]}]",
		"EXECBOX_GUARD_APPROVALS_SELF_APPROVE=true"})
	c := s.client(token)

	// A wrong token: the login prompt, over a page that is drawn.
	b.do("opening the playground", chromedp.Navigate(s.url+"/"), chromedp.WaitVisible(chromedp.CSS("#login")))
	b.do("a wrong token",
		chromedp.SendKeys(chromedp.CSS("#login-token"), "not-the-token"),
		chromedp.Click(chromedp.CSS("#login-submit")))
	b.waitFor("the prompt again, saying why", `document.getElementById("login").open && /unauthorized|token/i.test(document.getElementById("login-why")?.textContent)`)
	if !evaluate[bool](b, `!!document.querySelector("header nav") && document.querySelector("#editor .cm-editor") !== null`) {
		t.Error("behind the login prompt the page is blank: no navigation or editor")
	}
	b.screenshot("login")
	b.do("the right token",
		chromedp.SendKeys(chromedp.CSS("#login-token"), token),
		chromedp.Click(chromedp.CSS("#login-submit")))
	b.waitFor("the prompt to close and lint to answer", `!document.getElementById("login").open && document.getElementById("lint-state")?.textContent === "no problems"`)
	if stored := evaluate[string](b, `sessionStorage.getItem("execbox.token") + " " + location.href`); stored != token+" "+s.url+"/" {
		t.Errorf("token storage and URL: %q, want the token in session storage and no token in the URL", stored)
	}

	t.Run("lint squiggle", func(t *testing.T) {
		b := b.on(t)
		code := "def main(a, b):\n    total = a +\n    return total\n"
		b.typeCode(code)
		diags, err := c.Lint(context.Background(), &v1.FunctionRequest{Code: code})
		if err != nil || len(diags) == 0 {
			t.Fatalf("the API's lint of the code: %v %v, want a diagnostic", diags, err)
		}
		want := diags[0]
		if want.Line != 2 {
			t.Fatalf("the API puts the syntax error on line %d, want 2: %+v", want.Line, want)
		}
		b.waitFor("a squiggle", `document.querySelector(".cm-lintRange-error") !== null`)
		// Where the squiggle starts: its line among the editor's lines,
		// its column as the text before it on that line.
		at := evaluate[struct{ Line, Column int }](b, `(() => {
			const el = document.querySelector(".cm-lintRange-error");
			const line = el.closest(".cm-line");
			const r = document.createRange();
			r.setStart(line, 0);
			r.setEndBefore(el);
			return {Line: [...line.parentNode.children].indexOf(line) + 1, Column: r.toString().length};
		})()`)
		// A diagnostic past the line's last character is drawn under that
		// character.
		line := strings.Split(code, "\n")[want.Line-1]
		wantCol := min(want.Column, len(line)-1)
		if at.Line != want.Line || at.Column != wantCol {
			t.Errorf("squiggle at line %d column %d, want line %d column %d (%+v)", at.Line, at.Column, want.Line, wantCol, want)
		}
		if got := b.text("#problems li"); !strings.Contains(got, want.Message) || !strings.Contains(got, fmt.Sprintf("line %d, column %d", want.Line, want.Column+1)) {
			t.Errorf("problems list %q, want line %d and %q", got, want.Line, want.Message)
		}
		// Hovering the squiggle shows the message.
		box := evaluate[struct{ X, Y float64 }](b, `(() => { const r = document.querySelector(".cm-lintRange-error").getBoundingClientRect(); return {X: r.left + Math.max(r.width / 2, 1), Y: r.top + r.height / 2}; })()`)
		b.do("hovering the squiggle", chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, box.X, box.Y))
		b.waitFor("the hover message", `[...document.querySelectorAll(".cm-tooltip-lint")].some(e => e.textContent.includes(`+jsString(want.Message)+`))`)
		b.screenshot("functions-lint")
	})

	t.Run("javascript", func(t *testing.T) {
		b := b.on(t)
		// Its editor support loads when picked (a chunk of its own).
		pick := func(lang string) {
			b.do("picking "+lang, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				_, err := chromedp.Evaluate[bool](`(() => { const s = document.getElementById("fn-language"); s.value = `+jsString(lang)+`; return s.dispatchEvent(new Event("change")); })()`)(ctx, tg)
				return err
			}))
		}
		pick("javascript")
		b.waitFor("the JavaScript sample", `document.querySelector(".cm-content")?.textContent.startsWith("function main(a, b)")`)
		b.typeCode("function main(a, b) {\n  return a +;\n}\n")
		b.waitFor("a squiggle on line 2", `document.querySelector(".cm-lintRange-error")?.closest(".cm-line") === document.querySelectorAll(".cm-content .cm-line")[1]`)
		pick("python")
		b.waitFor("the Python sample", `document.querySelector(".cm-content")?.textContent.startsWith("def main(a, b)")`)
	})

	t.Run("function call", func(t *testing.T) {
		b := b.on(t)
		b.typeCode("def main(a, b):\n    print(\"adding\", a, b)\n    return a + b\n")
		b.waitFor("lint to clear", `document.getElementById("lint-state")?.textContent === "no problems"`)
		b.do("parameters and run",
			chromedp.SetValue(chromedp.CSS("#fn-params"), `{"a": 2, "b": 40}`),
			chromedp.Click(chromedp.CSS("#fn-run")),
			chromedp.WaitVisible(chromedp.CSS("#fn-value")))
		if got := strings.TrimSpace(b.text("#fn-value pre")); got != "42" {
			t.Errorf("value %q, want 42", got)
		}
		if got := b.text("#fn-prints pre"); !strings.Contains(got, "adding 2 40") {
			t.Errorf("prints %q, want adding 2 40", got)
		}
		if got := b.text("#fn-meta"); !strings.Contains(got, "ms") || !strings.Contains(got, "(") {
			t.Errorf("meta %q, want the duration, backend and isolation", got)
		}
		b.screenshot("functions-result")
	})

	t.Run("keyboard and share link", func(t *testing.T) {
		b := b.on(t)
		b.typeCode("def main(a, b):\n    return a * b\n")
		b.do("parameters, then Ctrl+Enter in the editor",
			chromedp.SetValue(chromedp.CSS("#fn-params"), `{"a": 6, "b": 7}`),
			chromedp.Click(chromedp.CSS(".cm-content")),
			chromedp.KeyEvent("\r", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
			chromedp.WaitVisible(chromedp.CSS("#fn-value")))
		if got := strings.TrimSpace(b.text("#fn-value pre")); got != "42" {
			t.Errorf("value %q after Ctrl+Enter, want 42", got)
		}
		b.do("a share link", chromedp.Click(chromedp.CSS("#fn-share")), chromedp.WaitVisible(chromedp.CSS("#fn-share-link")))
		link := evaluate[string](b, `document.getElementById("fn-share-link").value`)
		if !strings.HasPrefix(link, s.url+"/functions#share=") {
			t.Fatalf("share link %q, want the code in the fragment of %s/functions", link, s.url)
		}
		// Opened afresh: the editor and the parameters hold what was
		// shared, and nothing has run.
		b.do("opening the link", chromedp.Navigate("about:blank"), chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#fn-share")))
		b.waitFor("the shared code and parameters", `document.querySelector(".cm-content")?.textContent.includes("return a * b") && document.getElementById("fn-params")?.value === '{"a": 6, "b": 7}'`)
		if evaluate[bool](b, `document.getElementById("fn-value") !== null || document.getElementById("fn-error") !== null`) {
			t.Error("opening a share link ran the function")
		}
		// Another fragment is not a share: the page keeps its sample.
		b.do("a fragment that is no share", chromedp.Navigate("about:blank"), chromedp.Navigate(s.url+"/functions#share=!!"), chromedp.WaitVisible(chromedp.CSS("#fn-share")))
		b.waitFor("the sample", `document.querySelector(".cm-content")?.textContent.startsWith("def main(a, b):    print(")`)
	})

	t.Run("narrow header", func(t *testing.T) {
		b := b.on(t)
		b.do("a 420 px wide window", chromedp.EmulateViewport(420, 900))
		defer b.do("the wide window back", chromedp.EmulateViewport(1400, 1000))
		b.waitFor("the header laid out", `document.querySelector("header").getBoundingClientRect().width <= 420`)
		over := evaluate[[]string](b, `[...document.querySelectorAll("header a, header button")].filter(e => { const r = e.getBoundingClientRect(); return r.right > 420.5 && e.closest("nav") === null; }).map(e => e.textContent).concat(document.documentElement.scrollWidth > 420 ? ["the page: " + document.documentElement.scrollWidth + " px"] : [])`)
		if len(over) > 0 {
			t.Errorf("at 420 px, past the right edge: %q", over)
		}
		// The links the nav scrolls to are all in the page.
		if n := evaluate[int](b, `document.querySelectorAll("header nav a").length`); n != 5 {
			t.Errorf("%d links in the narrow header, want 5", n)
		}
		b.screenshot("narrow")
	})

	t.Run("infinite loop", func(t *testing.T) {
		b := b.on(t)
		b.typeCode("def main():\n    while True:\n        pass\n")
		b.do("a 1 s timeout and run",
			chromedp.SetValue(chromedp.CSS("#fn-params"), `{}`),
			chromedp.SetValue(chromedp.CSS("#fn-timeout"), "1"),
			chromedp.Click(chromedp.CSS("#fn-run")),
			chromedp.WaitVisible(chromedp.CSS("#fn-code")))
		if got := b.text("#fn-code"); got != "timeout" {
			t.Errorf("error code %q, want timeout (%s)", got, b.text("#fn-error"))
		}
		b.screenshot("functions-timeout")
	})

	t.Run("streamed run", func(t *testing.T) {
		b := b.on(t)
		b.do("the runs page", chromedp.Click(chromedp.CSS(`header nav a[href="/runs"]`)), chromedp.WaitVisible(chromedp.CSS("#run-form")))
		b.do("a run that prints a line a second",
			chromedp.SetValue(chromedp.CSS("#run-source"), `for i in 1 2 3; do echo line$i; sleep 1; done; echo kept > out.txt`),
			chromedp.Click(chromedp.CSS("#run-start")))
		// The first line is on the page while the run still runs: before
		// the last line and before the result.
		b.waitFor("the first line", `document.getElementById("run-output")?.textContent.includes("line1")`)
		early := evaluate[struct {
			Output string
			Ended  bool
		}](b, `({Output: document.getElementById("run-output")?.textContent, Ended: document.getElementById("run-reason") !== null})`)
		if early.Ended || strings.Contains(early.Output, "line3") {
			t.Errorf("when line1 showed: output %q, ended %v; want it shown while the run runs", early.Output, early.Ended)
		}
		b.waitFor("the result", `document.getElementById("run-reason") !== null`)
		if got := b.text("#run-reason"); got != "exited" {
			t.Errorf("reason %q, want exited (%s)", got, b.text("#run-status"))
		}
		if got := b.text("#run-output"); got != "line1\nline2\nline3\n" {
			t.Errorf("output %q", got)
		}
		if got := b.text("#run-artifacts a"); got != "out.txt" {
			t.Errorf("artifact link %q, want out.txt", got)
		}
		b.screenshot("runs")
		// The network choices are the server's: its API document's enum.
		_, _, doc := s.raw("GET", "/v1/openapi.json", "")
		var api struct {
			Components struct {
				Schemas map[string]struct {
					Properties map[string]struct{ Enum []string }
				}
			}
		}
		if err := json.Unmarshal([]byte(doc), &api); err != nil {
			t.Fatal(err)
		}
		want := []string{""} // none, the default
		for _, n := range api.Components.Schemas["RunRequest"].Properties["network"].Enum {
			if n != "none" {
				want = append(want, n)
			}
		}
		b.waitFor("the network choices", `document.querySelectorAll("#run-network option").length > 0`)
		if got := evaluate[[]string](b, `[...document.querySelectorAll("#run-network option")].map(o => o.value)`); !slices.Equal(got, want) {
			t.Errorf("network choices %q, want the server's %q", got, want)
		}
	})

	t.Run("tools", func(t *testing.T) {
		b := b.on(t)
		b.do("the tools page", chromedp.Click(chromedp.CSS(`header nav a[href="/tools"]`)), chromedp.WaitVisible(chromedp.CSS("#tool-form")))
		b.waitFor("the tools listed, python picked", `document.getElementById("tool-name")?.value === "python" && document.getElementById("tool-list")?.textContent.includes("http_fetch")`)
		input := `document.getElementById("tool-args").dispatchEvent(new Event("input"))`
		b.do("arguments that are not an object", chromedp.SetValue(chromedp.CSS("#tool-args"), `[1]`))
		evaluate[bool](b, input)
		if !evaluate[bool](b, `document.getElementById("tool-run").disabled`) {
			t.Error("Run is enabled with arguments that are not a JSON object")
		}
		ctrlEnter := chromedp.KeyEvent("\r", chromedp.KeyModifiers(chromedp.ModifierCtrl))
		b.do("Ctrl+Enter with them", chromedp.Focus(chromedp.CSS("#tool-args")), ctrlEnter)
		if got := b.text("#tool-status"); got != "" {
			t.Errorf("Ctrl+Enter with arguments that are not an object: status %q, want no call", got)
		}
		b.do("python arguments", chromedp.SetValue(chromedp.CSS("#tool-args"), `{"code": "print('hi')\n6 * 7"}`))
		evaluate[bool](b, input)
		b.do("a python call: Ctrl+Enter", chromedp.Focus(chromedp.CSS("#tool-args")), ctrlEnter)
		b.waitFor("its result", `document.getElementById("tool-outcome") !== null`)
		if got := b.text("#tool-outcome"); got != "ok" {
			t.Errorf("outcome %q (%s)", got, b.text("#tool-status"))
		}
		if got := b.text("#tool-result"); !strings.Contains(got, `"value": 42`) || !strings.Contains(got, `"stdout": "hi\n"`) {
			t.Errorf("result %q", got)
		}
		b.screenshot("tools")
	})

	t.Run("session", func(t *testing.T) {
		b := b.on(t)
		b.do("the sessions page", chromedp.Click(chromedp.CSS(`header nav a[href="/sessions"]`)), chromedp.WaitVisible(chromedp.CSS("#session-open")))
		b.do("opening a session", chromedp.Click(chromedp.CSS("#session-open")), chromedp.WaitVisible(chromedp.CSS("#session-command")))
		b.do("a command",
			chromedp.SetValue(chromedp.CSS("#session-command"), "echo hello > note.txt; cat note.txt"),
			chromedp.Click(chromedp.CSS("#session-run")))
		b.waitFor("its output and the file", `document.getElementById("session-output")?.textContent === "hello\n" && document.getElementById("files-list")?.textContent.includes("note.txt")`)
		list, err := c.Sessions(context.Background())
		if err != nil || len(list) != 1 {
			t.Fatalf("sessions after opening one in the page: %v %v", list, err)
		}
		id := list[0].ID

		// Upload: a file chosen in the page lands in the session.
		local := filepath.Join(t.TempDir(), "data.bin")
		data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
		if err := os.WriteFile(local, data, 0o644); err != nil {
			t.Fatal(err)
		}
		b.do("uploading a file", chromedp.SetUploadFiles(chromedp.CSS("#files-upload"), []string{local}))
		b.waitFor("the uploaded file in the list", `document.getElementById("files-list")?.textContent.includes("data.bin")`)
		got, _, err := c.ReadFile(context.Background(), id, "data.bin", 2<<20)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("the uploaded file in the session: %d bytes (%v), want the 1 MiB chosen", len(got), err)
		}

		// Download: a file clicked in the list is saved by the browser.
		downloads := t.TempDir()
		b.do("allowing downloads", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.CallBrowser(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
				Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads})
			return err
		}))
		b.do("downloading note.txt", chromedp.Click(chromedp.JSPath(`[...document.querySelectorAll("#files-list a")].find(a => a.textContent === "note.txt")`)))
		var saved []byte
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if saved, err = os.ReadFile(filepath.Join(downloads, "note.txt")); err == nil && len(saved) > 0 {
				break
			}
		}
		if string(saved) != "hello\n" {
			t.Errorf("downloaded note.txt holds %q (%v), want hello", saved, err)
		}
		// A terminal: what is typed runs in the session's shell.
		b.do("opening a terminal", chromedp.Click(chromedp.CSS("#terminal-open")))
		b.waitFor("the terminal", `document.getElementById("terminal-status")?.textContent === "terminal open" && document.querySelector("#terminal .xterm-rows") !== null`)
		// Inserted as text, then Enter: chromedp's SendKeys sends each
		// character twice over (a keydown with text, then a char event),
		// and xterm.js takes both.
		b.do("typing a command",
			chromedp.Focus(chromedp.CSS("#terminal .xterm-helper-textarea")),
			chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
				_, err := cdp.Call(ctx, t, input.InsertText, input.InsertTextParams{Text: "echo $((6*7))"})
				return err
			}),
			chromedp.KeyEvent("\r"))
		b.waitFor("its output on the screen", `document.querySelector("#terminal .xterm-rows").textContent.includes("42")`)
		if code, _, body := s.raw("GET", "/v1/sessions/"+id+"/terminals", "", "Authorization", "Bearer "+token); code != 200 || strings.Count(body, `"id"`) != 1 {
			t.Errorf("the session's terminals: %d %s, want the page's one", code, body)
		}
		// Code cells keep their state, as a notebook's: Ctrl+Enter runs.
		cell := func(code string) {
			b.do("a cell: "+code,
				chromedp.SetValue(chromedp.CSS("#cell-code"), code),
				chromedp.Focus(chromedp.CSS("#cell-code")),
				chromedp.KeyEvent("\r", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
		}
		cell("r = 2")
		b.waitFor("the first cell", `document.querySelectorAll("#cells .cell").length === 1`)
		cell("print('twice', r)\nr * 21")
		b.waitFor("the second cell", `document.querySelectorAll("#cells .cell").length === 2`)
		if got := b.text("#cells .cell:nth-child(2) .value"); !strings.HasSuffix(got, "42") {
			t.Errorf("the second cell's value %q, want 42 (its state kept)", got)
		}
		if got := b.text("#cells .cell:nth-child(2) pre.output"); got != "twice 2\n" {
			t.Errorf("the second cell printed %q", got)
		}
		b.screenshot("sessions")
		b.do("closing it", chromedp.Click(chromedp.CSS("#session-close")))
		b.waitFor("the panel to go", `document.getElementById("session-command") === null`)
		if list, err := c.Sessions(context.Background()); err != nil || len(list) != 0 {
			t.Errorf("sessions after closing it in the page: %v %v", list, err)
		}
	})

	t.Run("status", func(t *testing.T) {
		b := b.on(t)
		h, err := c.Health(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		b.do("the status page", chromedp.Click(chromedp.CSS(`header nav a[href="/status"]`)), chromedp.WaitVisible(chromedp.CSS("#status-choice")))
		if got := b.text("#status-choice"); !strings.Contains(got, "auto picks "+h.Backend) {
			t.Errorf("status says %q, want auto picks %s", got, h.Backend)
		}
		b.waitFor("audit rows", `document.querySelectorAll("#audit-list tr").length > 0`)
		// The page's live event stream is open before the activity.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			_, _, m := s.raw("GET", "/metrics", "", "Authorization", "Bearer "+token)
			if regexp.MustCompile(`(?m)^execbox_event_streams [1-9]`).MatchString(m) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the status page opened no event stream within 30s")
			}
		}
		// Activity while the page watches: the executions chart rises, the
		// events show.
		for range 5 {
			if _, err := c.Execute(context.Background(), &v1.FunctionRequest{Code: "def main():\n    return 1\n"}); err != nil {
				t.Fatal(err)
			}
		}
		b.waitFor("the executions chart to show them", `/max [1-9]|max 0\.[1-9]/.test(document.querySelector("#chart-runs figcaption")?.textContent)`)
		b.waitFor("their events in the live list", `[...document.querySelectorAll("#events-list tr")].filter(r => r.textContent.includes("execution.completed")).length >= 5`)

		// A held tool call shows up to be approved; Approve lets it run.
		held := make(chan error, 1)
		go func() {
			r, err := c.RunTool(context.Background(), "write_file", &v1.ToolRunRequest{Args: json.RawMessage(`{"path": "a.txt", "content": "hi"}`)})
			if err == nil && !r.OK {
				err = fmt.Errorf("write_file failed: %+v", r.Error)
			}
			held <- err
		}()
		b.waitFor("the held call", `document.getElementById("approvals-list")?.textContent.includes("ask-write")`)
		b.screenshot("status")
		b.do("approving it", chromedp.Click(chromedp.CSS("#approvals-list button.primary")))
		select {
		case err := <-held:
			if err != nil {
				t.Errorf("the approved call: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the approved call did not end within 30s")
		}
		b.waitFor("the list to empty", `document.getElementById("approvals-msg")?.textContent === "nothing is waiting"`)
	})
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
