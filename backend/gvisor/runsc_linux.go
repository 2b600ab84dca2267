package gvisor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/execbox/execbox/internal/host/proc"
	"github.com/execbox/execbox/sandbox"
)

// runscTimeout bounds the short runsc commands (kill, delete, version).
const runscTimeout = 10 * time.Second

// runsc is the runsc binary and what it offers.
type runsc struct {
	path     string
	version  string // "0.0~20221219.0"
	platform string // "ptrace", "systrap"
	offered  []string
	flags    map[string]bool // the top-level flags it knows
}

// requiredFlags are the top-level flags the backend passes to every
// release; each means the same from runsc 2022 to today.
var requiredFlags = []string{"root", "platform", "network", "oci-seccomp", "log", "debug-log", "debug-command", "strace", "strace-syscalls"}

// lookRunsc resolves name in PATH.
func lookRunsc(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("finding runsc: %w", err)
	}
	return path, nil
}

// findRunsc asks the binary at path for its version, platforms and flags.
// Only flags every runsc release since 2022 knows are used.
func findRunsc(path string) (*runsc, error) {
	r := &runsc{path: path}
	out, err := r.output("--version")
	if err != nil {
		return nil, fmt.Errorf("running %s --version: %w", path, err)
	}
	for line := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "runsc version "); ok {
			r.version = v
		}
	}
	if r.version == "" {
		return nil, fmt.Errorf("%s --version printed no runsc version: %q", path, out)
	}
	out, err = r.output("help", "platforms")
	if err != nil {
		return nil, fmt.Errorf("listing runsc platforms: %w", err)
	}
	r.offered = strings.Fields(string(out))
	slices.Sort(r.offered)
	// `runsc flags` prints to stderr.
	cmd := exec.Command(r.path, "flags")
	cmd.Env = []string{}
	var flags bytes.Buffer
	cmd.Stdout, cmd.Stderr = &flags, &flags
	proc.PrivateStdio(cmd)
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("listing runsc's flags: %w: %s", err, flags.Bytes())
	}
	r.flags = parseFlags(flags.Bytes())
	if err := r.check(); err != nil {
		return nil, err
	}
	return r, nil
}

// check picks the platform and checks the flags execbox passes: what runsc
// said about itself must be enough to run it.
func (r *runsc) check() error {
	r.platform = pickPlatform(r.offered)
	if r.platform == "" {
		return fmt.Errorf("runsc %s offers neither systrap nor ptrace (platforms: %v)", r.version, r.offered)
	}
	for _, f := range requiredFlags {
		if !r.flags[f] {
			return fmt.Errorf("runsc %s does not know the flag --%s", r.version, f)
		}
	}
	return nil
}

// parseFlags returns the flag names `runsc flags` lists, one per
// "  -name ..." line.
func parseFlags(out []byte) map[string]bool {
	flags := map[string]bool{}
	for line := range strings.Lines(string(out)) {
		rest, ok := strings.CutPrefix(line, "  -")
		if !ok {
			continue
		}
		if f := strings.Fields(rest); len(f) > 0 {
			flags[f[0]] = true
		}
	}
	return flags
}

// syscalls returns runsc's syscall table for goarch, number to name: the
// names its OCI seccomp support resolves.
func (r *runsc) syscalls(goarch string) (map[int]string, error) {
	out, err := r.output("help", "syscalls", "-format", "csv", "-os", "linux", "-arch", goarch)
	if err != nil {
		return nil, fmt.Errorf("listing runsc's syscall table: %w", err)
	}
	rows, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("reading runsc's syscall table: %w", err)
	}
	table := map[int]string{}
	for i, row := range rows {
		if i == 0 || len(row) < 4 {
			continue // the header: OS,Arch,Num,Name,Support,Note
		}
		nr, err := strconv.Atoi(row[2])
		if err != nil || row[3] == "" {
			return nil, fmt.Errorf("reading runsc's syscall table: row %q", row)
		}
		table[nr] = row[3]
	}
	if len(table) < 100 {
		return nil, fmt.Errorf("runsc %s lists %d syscalls for linux/%s", r.version, len(table), goarch)
	}
	return table, nil
}

// pickPlatform prefers systrap (fast, no virtualisation needed), then
// ptrace. kvm is never picked on its own (see the package doc).
func pickPlatform(offered []string) string {
	for _, p := range []string{"systrap", "ptrace"} {
		if slices.Contains(offered, p) {
			return p
		}
	}
	return ""
}

// output runs a short runsc command with an empty environment.
func (r *runsc) output(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), runscTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.path, args...)
	cmd.Env = []string{}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	proc.PrivateStdio(cmd)
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// dirs are one sandbox's runsc paths.
type dirs struct {
	bundle string // holds config.json; the root is bundle/rootfs
	state  string // runsc --root
	logs   string // runsc's error log and the run command's log
}

func (d dirs) errorLog() string { return d.logs + "/error.log" }
func (d dirs) runLog() string   { return d.logs + "/run.log" } // a FIFO (runlog_linux.go)

// global are runsc's flags for one sandbox. The log of the run and boot
// commands (info level only, not debug) carries the program's wait status
// and the sentry's strace of the fork family (runlog_linux.go); the error
// log carries runsc's own failures.
func (r *runsc) global(d dirs, network sandbox.Network) []string {
	net := "none"
	if network == sandbox.NetworkHost {
		net = "host"
	}
	args := []string{
		"--root=" + d.state,
		"--platform=" + r.platform,
		"--network=" + net,
		"--oci-seccomp",
		"--log=" + d.errorLog(),
		"--debug-log=" + d.runLog(),
		"--debug-command=run,boot",
		"--strace",
		"--strace-syscalls=" + stracedSyscalls,
	}
	if r.flags["gofer-network-namespace"] {
		// Newer releases pin the gofer's empty network namespace with a
		// bind mount in --root (null-netns) for the next sandbox of that
		// root to join; a root is one sandbox's here, so nothing would
		// join it. A new empty namespace per gofer isolates the same and
		// leaves no mount behind.
		args = append(args, "--gofer-network-namespace=new")
	}
	return args
}

// runCmd is `runsc run` of container cid from the bundle.
func (r *runsc) runCmd(d dirs, network sandbox.Network, cid string) *exec.Cmd {
	args := append(r.global(d, network), "run", "--bundle", d.bundle, cid)
	cmd := exec.Command(r.path, args...)
	cmd.Env = []string{}
	// runsc starts the sentry "attached": it dies with this process. This
	// process dies with execbox.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// short runs `runsc <cmd> …` for the sandbox within runscTimeout.
func (r *runsc) short(d dirs, args ...string) error {
	_, err := r.output(append([]string{"--root=" + d.state, "--platform=" + r.platform, "--log=" + d.errorLog()}, args...)...)
	return err
}

// kill sends SIGKILL to every process of container cid.
func (r *runsc) kill(d dirs, cid string) error {
	return r.short(d, "kill", "--all", cid, "KILL")
}

// delete removes container cid and whatever of it is left.
func (r *runsc) delete(d dirs, cid string) error {
	return r.short(d, "delete", "--force", cid)
}

// runscErrors returns the messages of runsc's JSON error log, in order.
// runsc prints each of them to its stderr too, which is the program's.
func runscErrors(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var msgs []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var e struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Msg != "" {
			line = e.Msg
		}
		msgs = append(msgs, line)
	}
	return msgs
}

// withoutRunsc is the program's stderr without the lines runsc printed
// to it last (its error messages msgs, each on a line of its own).
func withoutRunsc(stderr string, msgs []string) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		rest, ok := strings.CutSuffix(stderr, msgs[i]+"\n")
		if !ok || rest != "" && !strings.HasSuffix(rest, "\n") {
			break
		}
		stderr = rest
	}
	return stderr
}

// stderrHold is how long the last line of the program's live stderr is
// held back: runsc prints its own error there right before it exits.
const stderrHold = 100 * time.Millisecond

// liveStderr passes the program's stderr on to a live reader (the
// Process's Stderr) as it comes, except the last complete line of each
// write, which it holds for up to stderrHold, or until the next write or
// the run's end: at the end, a held line that is one of runsc's error
// messages is dropped (withoutRunsc does the same for the captured
// stderr). Writes come from one goroutine; the hold's timer is another.
type liveStderr struct {
	mu    sync.Mutex
	w     io.Writer
	held  []byte
	timer *time.Timer
	ended bool
}

func newLiveStderr(w io.Writer) *liveStderr {
	l := &liveStderr{w: w}
	l.timer = time.AfterFunc(time.Hour, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.flushLocked()
	})
	l.timer.Stop()
	return l
}

func (l *liveStderr) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.flushLocked(); err != nil || l.ended {
		if err == nil {
			_, err = l.w.Write(b)
		}
		return len(b), err
	}
	pass := b
	if n := len(b); n > 0 && b[n-1] == '\n' {
		i := bytes.LastIndexByte(b[:n-1], '\n') + 1
		pass, l.held = b[:i], append(l.held[:0], b[i:]...)
		l.timer.Reset(stderrHold)
	}
	if len(pass) > 0 {
		if _, err := l.w.Write(pass); err != nil {
			return len(b), err
		}
	}
	return len(b), nil
}

func (l *liveStderr) flushLocked() error {
	if len(l.held) == 0 {
		return nil
	}
	held := l.held
	l.held = nil
	_, err := l.w.Write(held)
	return err
}

// end passes on what is held unless it is one of msgs, runsc's error
// messages; later writes pass straight through.
func (l *liveStderr) end(msgs []string) {
	l.timer.Stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return
	}
	l.ended = true
	for _, m := range msgs {
		if string(l.held) == m+"\n" {
			l.held = nil
		}
	}
	l.flushLocked()
}

// Exit codes of a program that could not be started, as a shell and
// `docker run` give them.
const (
	exitNotFound      = 127 // no such program
	exitNotExecutable = 126 // there, but it cannot be executed
)

// startFailure reads runsc's error for a program that could not be
// started in the sandbox (not found, not executable): the exit code a
// shell would give and what happened, in execbox's words. ok is false for
// any other error.
func startFailure(program, msg string) (code int, why string, ok bool) {
	// runsc 2022 to today: `error finding executable "x" in PATH [/usr/local/bin …]: <errno>`
	// for a bare name, `failed to load /x: <errno>` for a path.
	_, inPath, found := strings.Cut(msg, "error finding executable ")
	if !found {
		_, inPath, found = strings.Cut(msg, "failed to load ")
	}
	if !found {
		return 0, "", false
	}
	i := strings.LastIndex(inPath, ": ")
	if i < 0 {
		return 0, "", false
	}
	errno := inPath[i+2:]
	where := "in the sandbox"
	if strings.Contains(inPath[:i], " in PATH [") {
		where = "in the sandbox's PATH"
	}
	switch errno {
	case "no such file or directory", "not a directory":
		return exitNotFound, fmt.Sprintf("program %q not found %s (%s)", program, where, errno), true
	}
	return exitNotExecutable, fmt.Sprintf("program %q cannot be executed %s (%s)", program, where, errno), true
}
