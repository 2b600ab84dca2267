package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/cobra"
)

// The binary, built once for the tests that run it (go build, as a user
// gets it); removed by TestMain.
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

type cliResult struct {
	stdout, stderr string
	code           int
}

// runBinary runs the built execbox with args, no EXECBOX_* of the test's
// environment, and a server address where nothing listens.
func runBinary(t *testing.T, args ...string) cliResult {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "execbox-cli-test-"); built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "execbox")
		// The test's own build settings, so go build finds its packages
		// in the build cache.
		build := exec.Command("go", "build", "-o", built.path, ".")
		if out, err := build.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("building execbox: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	cmd := exec.Command(built.path, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "EXECBOX_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "EXECBOX_URL=http://127.0.0.1:1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := cliResult{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running execbox: %v", err)
	}
	return r
}

// groups is every command of the tree with subcommands, root first.
func groups(c *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	if c.HasAvailableSubCommands() {
		out = append(out, c)
	}
	for _, s := range c.Commands() {
		out = append(out, groups(s)...)
	}
	return out
}

// typo swaps two different neighbouring letters of name, as a hurried
// hand does ("build" → "biuld").
func typo(name string) string {
	b := []byte(name)
	for i := 1; i+1 < len(b); i++ {
		if b[i] != b[i+1] {
			b[i], b[i+1] = b[i+1], b[i]
			return string(b)
		}
	}
	return name + "x"
}

// short is the start of s, for a failure message.
func short(s string) string {
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}

// jsonError parses a refusal's JSON document.
func jsonError(s string) (code, message string, ok bool) {
	var doc struct {
		Error struct{ Code, Message string }
	}
	if json.Unmarshal([]byte(s), &doc) != nil || doc.Error.Code == "" || doc.Error.Message == "" {
		return "", "", false
	}
	return doc.Error.Code, doc.Error.Message, true
}

// TestEveryGroupRefusesAnUnknownSubcommand walks every command group of
// the tree (a group added later included): a mistyped subcommand is
// refused with 125 and a suggestion, as a JSON document on stdout too with
// --json where the group takes it; flags without a subcommand are refused
// too; the bare group, and --help, print its help and exit 0.
func TestEveryGroupRefusesAnUnknownSubcommand(t *testing.T) {
	gs := groups(newRoot())
	if len(gs) < 6 {
		t.Fatalf("found %d groups in the tree; the walk is broken", len(gs))
	}
	for _, g := range gs {
		path := strings.Fields(g.CommandPath())[1:]
		t.Run(strings.Join(append([]string{"execbox"}, path...), "_"), func(t *testing.T) {
			var sub string
			for _, s := range g.Commands() {
				if s.IsAvailableCommand() {
					sub = s.Name()
					break
				}
			}
			bad := typo(sub)
			if slices.ContainsFunc(g.Commands(), func(c *cobra.Command) bool { return c.Name() == bad || c.HasAlias(bad) }) {
				t.Fatalf("the typo %q of %q is a command", bad, sub)
			}
			args := append(append([]string{}, path...), bad, "ID")
			r := runBinary(t, args...)
			if r.code != 125 || r.stdout != "" || !strings.Contains(r.stderr, "command_unknown") ||
				!strings.Contains(r.stderr, "did you mean "+sub) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 1 {
				t.Errorf("%q: exit %d, want 125 with one message suggesting %q, the error code and nothing on stdout; stdout %q, stderr %q",
					strings.Join(args, " "), r.code, sub, short(r.stdout), r.stderr)
			}

			r = runBinary(t, append(args, "--json")...)
			if g.LocalFlags().Lookup("json") != nil || g.InheritedFlags().Lookup("json") != nil {
				code, msg, ok := jsonError(r.stdout)
				if r.code != 125 || !ok || code != "command_unknown" || !strings.Contains(msg, sub) {
					t.Errorf("%q --json: exit %d, stdout %q; want 125 and a JSON command_unknown suggesting %q", strings.Join(args, " "), r.code, short(r.stdout), sub)
				}
			} else if r.code != 125 || r.stdout != "" || !strings.Contains(r.stderr, "flag_invalid") {
				// No command here prints JSON: --json is an unknown flag.
				t.Errorf("%q --json: exit %d, stdout %q, stderr %q; want 125, flag_invalid", strings.Join(args, " "), r.code, short(r.stdout), r.stderr)
			}

			missing := append(append([]string{}, path...), "--config", "/nonexistent")
			r = runBinary(t, missing...)
			if r.code != 125 || r.stdout != "" || !strings.Contains(r.stderr, "command_missing") || !strings.Contains(r.stderr, sub) {
				t.Errorf("%q: exit %d, stdout %q, stderr %q; want 125, command_missing naming %q", strings.Join(missing, " "), r.code, short(r.stdout), r.stderr, sub)
			}

			for _, a := range [][]string{path, append(append([]string{}, path...), "--help")} {
				r = runBinary(t, a...)
				if r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, "Available Commands:") || !strings.Contains(r.stdout, sub) {
					t.Errorf("%q: exit %d, stderr %q; want its help on stdout, exit 0; stdout %q", strings.Join(a, " "), r.code, r.stderr, short(r.stdout))
				}
			}
		})
	}
}

// TestStrayArguments: a command given arguments it does not take, or too
// few, is refused with 125 and args_invalid before it does anything, as
// JSON on stdout too with --json.
func TestStrayArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code string
	}{
		{[]string{"session", "list", "extra"}, "args_invalid"},
		{[]string{"session", "list", "extra", "--json"}, "args_invalid"},
		{[]string{"session", "create", "extra", "--json"}, "args_invalid"},
		{[]string{"session", "context", "reset", "ID"}, "args_invalid"},
		{[]string{"session", "context", "list", "ID", "extra", "--json"}, "args_invalid"},
		{[]string{"image", "build"}, "args_invalid"},
		{[]string{"image", "build", "python", "extra"}, "args_invalid"},
		{[]string{"tool", "list", "extra", "--json"}, "args_invalid"},
		{[]string{"tool", "run"}, "args_invalid"},
		{[]string{"approval", "approve"}, "args_invalid"},
		{[]string{"approval", "list", "extra", "--json"}, "args_invalid"},
		{[]string{"config", "print", "extra", "--json"}, "args_invalid"},
		{[]string{"version", "extra"}, "args_invalid"},
		{[]string{"doctor", "extra", "--json"}, "args_invalid"},
		{[]string{"lint", "a.py", "b.py"}, "args_invalid"},
		{[]string{"fn", "extra"}, "args_invalid"},
		// run's own check keeps its code.
		{[]string{"run", "--json"}, "flag_invalid"},
		{[]string{"session", "list", "--json", "--nosuch"}, "flag_invalid"},
	} {
		r := runBinary(t, tc.args...)
		what := strings.Join(tc.args, " ")
		if r.code != 125 || !strings.Contains(r.stderr, "error code "+tc.code) {
			t.Errorf("%q: exit %d, stderr %q; want 125, %s", what, r.code, r.stderr, tc.code)
		}
		if !strings.Contains(what, "--json") {
			if r.stdout != "" {
				t.Errorf("%q: stdout %q, want nothing", what, short(r.stdout))
			}
		} else if code, _, ok := jsonError(r.stdout); !ok || code != tc.code {
			t.Errorf("%q: stdout %q, want a JSON %s", what, short(r.stdout), tc.code)
		}
	}
}

// TestEveryCommandChecksItsArgs: no command takes arguments unchecked
// (cobra's default for a command without Args takes any); only cobra's
// own help, whose arguments are topics, does.
func TestEveryCommandChecksItsArgs(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Args == nil && c.Name() != "help" {
			t.Errorf("%s takes any arguments: give it an Args check (cobra.NoArgs, ExactArgs, …)", c.CommandPath())
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRoot())
}

// TestEveryCommandHasAShortHelp: every command says in its parent's help
// what it does.
func TestEveryCommandHasAShortHelp(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Short == "" && c.Name() != "help" {
			t.Errorf("%s has no Short: its line in %s --help is empty", c.CommandPath(), c.Parent().CommandPath())
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRoot())
}

// TestFlagWords: what a user types out of habit is read as meant, or
// refused with the way to what they wanted.
func TestFlagWords(t *testing.T) {
	code := filepath.Join(t.TempDir(), "f.py")
	if err := os.WriteFile(code, []byte("def main(n):\n    return n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args      []string
		want      string // in stderr, or in stdout for fn
		forbidden string
	}{
		// docker run -it: run gives no terminal; say where one is.
		{[]string{"run", "-it", "sh"}, "execbox session attach SESSION", ""},
		{[]string{"run", "--tty", "sh"}, "execbox session attach SESSION", ""},
		// 0 is refused, and the message does not say it means no limit.
		{[]string{"run", "--timeout", "0", "--", "true"}, "--timeout: 0: must be more than 0", "is no limit"},
		{[]string{"run", "--memory", "0", "--", "true"}, "--memory: 0: must be more than 0", "is no limit"},
		// Params that are not JSON: JSON's words, not Go's types'.
		{[]string{"fn", "--code-file", code, "--params", "{n:1}"}, "invalid character 'n' looking for beginning of object key string (at byte 2)", "RawMessage"},
		{[]string{"fn", "--code-file", code, "--params", ""}, "empty (give {} for no params)", "RawMessage"},
	} {
		r := runBinary(t, tc.args...)
		out := r.stderr
		if tc.args[0] == "fn" {
			out = r.stdout
		}
		what := strings.Join(tc.args, " ")
		if r.code != 125 || !strings.Contains(out, tc.want) || (tc.forbidden != "" && strings.Contains(out, tc.forbidden)) {
			t.Errorf("%q: exit %d, %q; want 125 and %q", what, r.code, short(out), tc.want)
		}
	}
	// --ttl takes whole seconds as every duration does, and --remote is
	// --server: both parse, so the command goes on to dial the server
	// (nothing listens at runBinary's URL). (--language's aliases:
	// integration's TestDockerHabits, which runs the code.)
	for _, args := range [][]string{
		{"session", "create", "--ttl", "90"},
		{"doctor", "--remote", "http://127.0.0.1:1"},
		{"doctor", "--server", "http://127.0.0.1:1"},
	} {
		r := runBinary(t, args...)
		if r.code != 125 || strings.Contains(r.stderr, "flag_invalid") || !strings.Contains(r.stderr, "127.0.0.1:1") {
			t.Errorf("%q: exit %d, %q; want the flags read and the server dialled", strings.Join(args, " "), r.code, short(r.stderr))
		}
	}
}
