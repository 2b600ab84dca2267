package cgroups

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/testutil"
	"golang.org/x/sys/unix"
)

const mib = 1 << 20

// required reports whether EXECBOX_REQUIRE names the native backend, which
// needs cgroups: then a missing prerequisite fails instead of skipping.
func required() bool {
	for _, f := range strings.FieldsFunc(os.Getenv("EXECBOX_REQUIRE"), func(r rune) bool { return r == ',' || r == ' ' }) {
		if f == "native" || f == "cgroups" {
			return true
		}
	}
	return false
}

func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if required() {
		t.Fatalf("EXECBOX_REQUIRE=%s but: %s", os.Getenv("EXECBOX_REQUIRE"), fmt.Sprintf(format, args...))
	}
	t.Skipf(format, args...)
}

// requireCgroups returns the host's Manager, or skips (fails when
// required) where cgroups cannot be used.
func requireCgroups(t *testing.T) *Manager {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOrFail(t, "cgroup tests need root")
	}
	m, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	if m.Version() == None {
		skipOrFail(t, "no usable cgroups: %s", m.Reason())
	}
	return m
}

func requireBinary(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		skipOrFail(t, "%s not found", name)
	}
	return p
}

var idSeq struct {
	sync.Mutex
	n int
}

// newCgroup creates a cgroup for the test and closes it at the end,
// checking its directories are gone.
func newCgroup(t *testing.T, m *Manager, l Limits) *Cgroup {
	t.Helper()
	idSeq.Lock()
	idSeq.n++
	id := fmt.Sprintf("test%d", idSeq.n)
	idSeq.Unlock()
	c, err := m.Create(id, l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		for _, d := range c.Dirs() {
			if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s still there after Close: %v", d, err)
			}
		}
	})
	return c
}

// output is a process's stdout and stderr in a file: a file, unlike a
// pipe, does not make Wait wait for background children holding it.
type output struct{ f *os.File }

func (o output) String() string {
	data, _ := os.ReadFile(o.f.Name())
	return string(data)
}

// start runs script with sh inside c. The shell waits on stdin until it is
// in the cgroup (v1 Add, or clone3 into the v2 fd), so nothing forks
// outside it. The process is killed and reaped at the end of the test.
func start(t *testing.T, c *Cgroup, script string) (*exec.Cmd, output) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", `read -r _ && exec /bin/sh -c "$1"`, "sh", script)
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	out := output{f}
	cmd.Stdout, cmd.Stderr = f, f
	if fd, ok := c.FD(); ok {
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	if _, ok := c.FD(); !ok {
		if err := c.Add(cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	_ = stdin.Close()
	waits.Store(cmd, done)
	return cmd, out
}

// waits maps a started command to the channel closed when it was reaped.
var waits sync.Map

// wait waits up to d for cmd (from start) to end and returns its state.
func wait(t *testing.T, cmd *exec.Cmd, d time.Duration) *os.ProcessState {
	t.Helper()
	done, _ := waits.Load(cmd)
	select {
	case <-done.(chan struct{}):
		return cmd.ProcessState
	case <-time.After(d):
		t.Fatalf("process %d still running after %v", cmd.Process.Pid, d)
		return nil
	}
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// procs is how many processes c holds.
func procs(t *testing.T, c *Cgroup) int {
	t.Helper()
	pids, err := c.Procs()
	if err != nil {
		t.Fatal(err)
	}
	return len(pids)
}

// counted are a cgroup's stats and how many processes it holds now.
type counted struct {
	Stats
	Current int
}

func stats(t *testing.T, c *Cgroup) counted {
	t.Helper()
	st, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return counted{st, procs(t, c)}
}

func TestOpenReportsHost(t *testing.T) {
	m := requireCgroups(t)
	t.Logf("version %s: %s", m.Version(), m.Reason())
	mech := m.Mechanisms()
	for _, k := range []string{"memory", "pids", "cpu"} {
		if !strings.Contains(mech[k], "cgroup "+m.Version()) {
			t.Errorf("Mechanisms()[%q] = %q, want a cgroup %s mechanism", k, mech[k], m.Version())
		}
	}
	if m.Version() == V1 {
		swap := fileExists(filepath.Join(m.v1Dir("memory", ""), "memory.memsw.limit_in_bytes"))
		if got := strings.Contains(mech["memory"], "+memsw"); got != swap {
			t.Errorf("memory mechanism %q, but memsw files exist = %v", mech["memory"], swap)
		}
	}
	mech["memory"] = "changed"
	if m.Mechanisms()["memory"] == "changed" {
		t.Error("Mechanisms returns the Manager's own map")
	}
}

// On a hybrid host the cgroup2 mount has no memory/pids/cpu: Open must not
// pick it. Where v2 has them, Open must pick it.
func TestOpenChoosesV2OnlyWithControllers(t *testing.T) {
	mounts, err := readMountinfo("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	mnt, ok := findV2Mount(mounts)
	if !ok {
		testutil.SkipOrFail(t, "cgroup2", "no cgroup2 mount")
	}
	self, err := readSelfCgroup("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	base, err := v2Base(mnt, self)
	if err != nil {
		testutil.SkipOrFail(t, "cgroup2", "own v2 cgroup not visible: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(base, "cgroup.controllers"))
	if err != nil {
		t.Fatal(err)
	}
	have := strings.Fields(string(data))
	full := slices.Contains(have, "memory") && slices.Contains(have, "pids") && slices.Contains(have, "cpu")
	m, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s controllers %q → %s: %s", base, have, m.Version(), m.Reason())
	if !full {
		if m.Version() == V2 {
			t.Fatalf("Open picked v2 although %s only has %q", base, have)
		}
		if !strings.Contains(m.Reason(), "lacks controllers") {
			t.Errorf("reason %q does not say why v2 was not used", m.Reason())
		}
		// And the decision itself, on the real mount.
		if _, err := openV2(base); err == nil || !strings.Contains(err.Error(), "memory") {
			t.Errorf("openV2(%s) = %v, want an error naming the missing memory controller", base, err)
		}
	} else if os.Geteuid() == 0 && m.Version() != V2 {
		t.Errorf("v2 has all controllers but Open picked %s: %s", m.Version(), m.Reason())
	}
}

// The v2 decision on a directory laid out like a delegated v2 cgroup: all
// three controllers make it usable, one missing does not.
func TestOpenV2Decision(t *testing.T) {
	for _, tc := range []struct {
		controllers string
		ok          bool
	}{
		{"cpuset cpu io memory hugetlb pids rdma misc", true},
		{"cpuset cpu io hugetlb pids", false},
		{"hugetlb", false},
	} {
		dir := t.TempDir()
		for name, content := range map[string]string{
			"cgroup.controllers":     tc.controllers + "\n",
			"cgroup.subtree_control": "\n",
		} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// ensureParentV2 makes execbox/ as a plain dir; give it the file
		// the kernel would.
		if err := os.MkdirAll(filepath.Join(dir, parentName), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, parentName, "cgroup.subtree_control"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := openV2(dir)
		if (err == nil) != tc.ok {
			t.Errorf("controllers %q: openV2 err = %v, want ok=%v", tc.controllers, err, tc.ok)
			continue
		}
		if tc.ok {
			sc, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
			if string(sc) != "+memory +pids +cpu" {
				t.Errorf("subtree_control written %q", sc)
			}
			if m.Version() != V2 || !strings.Contains(m.Mechanisms()["memory"], "swap not limited") {
				t.Errorf("got %s %v", m.Version(), m.Mechanisms())
			}
		}
	}
}

// Add and AddProgramThread refuse 0 (the caller itself) and 1 (the host's
// init) and leave both where they are; a real child moves.
func TestAddRefusesInitAndSelf(t *testing.T) {
	m := requireCgroups(t)
	c := newCgroup(t, m, Limits{Pids: 8, ProgramPids: 4})
	initBefore, _ := os.ReadFile("/proc/1/cgroup")
	selfBefore, _ := os.ReadFile("/proc/self/cgroup")
	for _, pid := range []int{0, 1} {
		if err := c.Add(pid); err == nil {
			t.Errorf("Add(%d) succeeded", pid)
		}
		if err := c.AddProgramThread(pid); err == nil {
			t.Errorf("AddProgramThread(%d) succeeded", pid)
		}
	}
	if now, _ := os.ReadFile("/proc/1/cgroup"); !bytes.Equal(now, initBefore) {
		t.Fatalf("PID 1 moved:\n%s", now)
	}
	if now, _ := os.ReadFile("/proc/self/cgroup"); !bytes.Equal(now, selfBefore) {
		t.Fatalf("the test process moved:\n%s", now)
	}
	sleeper := exec.Command("sleep", "30")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	if err := c.Add(sleeper.Process.Pid); err != nil {
		t.Fatalf("Add(a child): %v", err)
	}
	if procs, err := c.Procs(); err != nil || !slices.Contains(procs, sleeper.Process.Pid) {
		t.Errorf("Procs after Add = %v, %v", procs, err)
	}
}

func TestCreateValidates(t *testing.T) {
	m := requireCgroups(t)
	for _, id := range []string{"", ".", "..", "a/b", "a b", strings.Repeat("x", 129)} {
		if c, err := m.Create(id, Limits{}); err == nil {
			_ = c.Close()
			t.Errorf("Create(%q) succeeded", id)
		}
	}
	for _, l := range []Limits{{Memory: -1}, {Pids: -1}, {CPUs: -0.5}} {
		if c, err := m.Create("bad", l); err == nil {
			_ = c.Close()
			t.Errorf("Create with %+v succeeded", l)
		}
	}
	// A second Create with the same id must fail and leave the first alone.
	c := newCgroup(t, m, Limits{})
	id := strings.TrimPrefix(c.Name(), leafName(os.Getpid(), ""))
	if c2, err := m.Create(id, Limits{}); err == nil {
		_ = c2.Close()
		t.Errorf("Create(%q) twice succeeded", id)
	}
	for _, d := range c.Dirs() {
		if !fileExists(d) {
			t.Errorf("failed duplicate Create removed %s", d)
		}
	}
	if stale(c.Name(), os.Getpid()) {
		t.Error("failed duplicate Create unregistered the live cgroup")
	}
	none := &Manager{version: None, reason: "test"}
	if _, err := none.Create("x", Limits{}); err == nil {
		t.Error("Create on a none Manager succeeded")
	}
}

func TestPidsLimitBlocksForks(t *testing.T) {
	m := requireCgroups(t)
	c := newCgroup(t, m, Limits{Pids: 8})
	cmd, out := start(t, c, `for i in $(seq 20); do sleep 5 & done; echo looped; wait`)
	st := wait(t, cmd, 5*time.Second) // dash exits when a fork fails
	s := stats(t, c)
	t.Logf("exit %v, output %q, stats %+v", st, out.String(), s)
	if !strings.Contains(out.String(), "fork") {
		t.Errorf("no fork failure in output %q", out.String())
	}
	if s.PidsLimitHits == 0 {
		t.Error("PidsLimitHits = 0")
	}
	if n := procs(t, c); n > 8 {
		t.Errorf("%d processes in a cgroup limited to 8", n)
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if n := procs(t, c); n != 0 {
		t.Errorf("%d processes left after Kill", n)
	}
}

func TestPidsLimitAllows(t *testing.T) {
	m := requireCgroups(t)
	c := newCgroup(t, m, Limits{Pids: 20})
	cmd, out := start(t, c, `for i in $(seq 10); do sleep 30 & done; echo looped; wait`)
	eventually(t, 5*time.Second, "the loop", func() bool { return strings.Contains(out.String(), "looped") })
	eventually(t, 2*time.Second, "11 processes", func() bool { return procs(t, c) == 11 })
	s := stats(t, c)
	if s.PidsLimitHits != 0 || strings.Contains(out.String(), "fork") {
		t.Errorf("pids limit hit with 11 of 20: %+v, output %q", s, out.String())
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if st := wait(t, cmd, 2*time.Second); st.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("shell ended with %v, want SIGKILL", st)
	}
	if n := procs(t, c); n != 0 {
		t.Errorf("%d processes left after Kill", n)
	}
}

// hog writes 200 MiB, so every page is really charged.
const hog = `b = b"x" * (200 << 20); print("allocated")`

func TestMemoryLimitOOMKills(t *testing.T) {
	m := requireCgroups(t)
	py := requireBinary(t, "python3")
	c := newCgroup(t, m, Limits{Memory: 64 * mib})
	cmd, out := start(t, c, py+` -c '`+hog+`'`)
	st := wait(t, cmd, 10*time.Second)
	s := stats(t, c)
	t.Logf("exit %v, output %q, stats %+v", st, out.String(), s)
	if st.Success() || strings.Contains(out.String(), "allocated") {
		t.Errorf("200 MiB fit in a 64 MiB cgroup: %v %q", st, out.String())
	}
	if s.OOMKills < 1 {
		t.Errorf("OOMKills = %d, want >= 1", s.OOMKills)
	}
	if s.PeakMemory <= 0 || s.PeakMemory > 64*mib {
		t.Errorf("PeakMemory = %d, want in (0, 64 MiB]", s.PeakMemory)
	}
}

func TestMemoryLimitAllows(t *testing.T) {
	m := requireCgroups(t)
	py := requireBinary(t, "python3")
	c := newCgroup(t, m, Limits{Memory: 512 * mib})
	cmd, out := start(t, c, py+` -c '`+hog+`'`)
	st := wait(t, cmd, 10*time.Second)
	s := stats(t, c)
	t.Logf("exit %v, output %q, stats %+v", st, out.String(), s)
	if !st.Success() || !strings.Contains(out.String(), "allocated") {
		t.Errorf("200 MiB did not fit in 512 MiB: %v %q", st, out.String())
	}
	if s.OOMKills != 0 {
		t.Errorf("OOMKills = %d, want 0", s.OOMKills)
	}
	if s.PeakMemory < 200*mib || s.PeakMemory > 512*mib {
		t.Errorf("PeakMemory = %d MiB, want 200..512", s.PeakMemory/mib)
	}
}

func TestKillForkingTree(t *testing.T) {
	m := requireCgroups(t)
	c := newCgroup(t, m, Limits{Pids: 200})
	// Every round forks a subshell that forks an orphan and exits, so the
	// tree keeps changing under Kill.
	cmd, _ := start(t, c, `while :; do (sleep 100 &); done`)
	eventually(t, 5*time.Second, "the tree to grow", func() bool { return procs(t, c) >= 20 })
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if n := procs(t, c); n != 0 {
		t.Fatalf("%d processes left after Kill", n)
	}
	for _, d := range c.Dirs() {
		data, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil || len(data) != 0 {
			t.Errorf("%s/cgroup.procs = %q, %v after Kill", d, data, err)
		}
	}
	wait(t, cmd, 2*time.Second)
	if err := c.Kill(); err != nil { // empty: a no-op
		t.Error(err)
	}
}

func TestCloseRemovesDirs(t *testing.T) {
	m := requireCgroups(t)
	c, err := m.Create("close", Limits{Memory: 64 * mib, Pids: 10, CPUs: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	want := map[string]int{V1: len(m.v1), V2: 1}[m.Version()]
	if len(c.Dirs()) != want {
		t.Fatalf("Dirs = %v, want %d", c.Dirs(), want)
	}
	for _, d := range c.Dirs() {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			t.Fatalf("leaf %s: %v", d, err)
		}
		if !strings.HasSuffix(d, fmt.Sprintf("/execbox/execbox-%d-close", os.Getpid())) {
			t.Errorf("leaf %s not named execbox/execbox-<pid>-<id>", d)
		}
	}
	// exec: dash does not always exec the last command of -c itself.
	start(t, c, "exec sleep 30")
	eventually(t, 2*time.Second, "the process", func() bool { return stats(t, c).Current == 1 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range c.Dirs() {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there: %v", d, err)
		}
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, ok := c.FD(); ok {
		t.Error("FD ok after Close")
	}
	if _, err := c.Stats(); err == nil {
		t.Error("Stats after Close succeeded")
	}
}

// A leaf's Path is its directory relative to its hierarchy's mount point,
// in every hierarchy; on v1 Hierarchies lists every mounted one.
func TestPathAndHierarchies(t *testing.T) {
	m := requireCgroups(t)
	c := newCgroup(t, m, Limits{})
	mounts, err := readMountinfo("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range c.Dirs() {
		found := false
		for _, e := range mounts {
			if filepath.Join(e.Point, c.Path()) == d {
				found = true
			}
		}
		if !found {
			t.Errorf("leaf %s is not a mount point joined with Path %s", d, c.Path())
		}
	}
	h := m.Hierarchies()
	if m.Version() != V1 {
		if h != nil {
			t.Errorf("Hierarchies on %s = %v, want nil", m.Version(), h)
		}
		return
	}
	for _, hr := range m.v1 {
		if !slices.Contains(h, hr.mount) {
			t.Errorf("Hierarchies %v lack the used hierarchy %s", h, hr.mount)
		}
	}
	if len(h) < len(m.v1) {
		t.Errorf("Hierarchies %v: fewer than the %d used", h, len(m.v1))
	}
}

// deadPID returns the PID of a process that has ended.
func deadPID(t *testing.T) int {
	for range 10 {
		cmd := exec.Command("/bin/true")
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		if err := unix.Kill(cmd.Process.Pid, 0); errors.Is(err, unix.ESRCH) {
			return cmd.Process.Pid
		}
	}
	t.Fatal("no dead PID found")
	return 0
}

func TestReconcile(t *testing.T) {
	m := requireCgroups(t)
	testReconcile(t, m)
}

func testReconcile(t *testing.T, m *Manager) {
	sleeper := exec.Command("sleep", "30")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })

	dead := leafName(deadPID(t), "left")
	alive := leafName(sleeper.Process.Pid, "running")
	ownStale := leafName(os.Getpid(), "stale") // a previous daemon with our PID
	var made []*Cgroup
	for _, name := range []string{dead, alive, ownStale} {
		c, err := m.create(name, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, c)
	}
	t.Cleanup(func() {
		for _, c := range made {
			_ = c.Close()
		}
	})
	setLive(ownStale, false) // as if this process had not made it
	// A leftover still has a process running in it.
	cmd, _ := start(t, made[0], "sleep 30")
	mine := newCgroup(t, m, Limits{}) // this process's own, live one

	removed, err := m.Reconcile()
	if err != nil {
		t.Fatal(err)
	}
	// Other processes' leftovers may be removed too; ours must be exact.
	for _, name := range []string{dead, ownStale} {
		if !slices.Contains(removed, name) {
			t.Errorf("Reconcile removed %v, not the leftover %s", removed, name)
		}
	}
	for _, name := range []string{alive, mine.Name()} {
		if slices.Contains(removed, name) {
			t.Errorf("Reconcile removed the live %s", name)
		}
	}
	for _, c := range []*Cgroup{made[0], made[2]} {
		for _, d := range c.Dirs() {
			if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s still there: %v", d, err)
			}
		}
	}
	for _, c := range []*Cgroup{made[1], mine} {
		for _, d := range c.Dirs() {
			if _, err := os.Stat(d); err != nil {
				t.Errorf("Reconcile removed a live leaf: %v", err)
			}
		}
	}
	if st := wait(t, cmd, 2*time.Second); st.Success() {
		t.Error("the process in the leftover was not killed")
	}
}

func TestStatsCPU(t *testing.T) {
	m := requireCgroups(t)
	c := newCgroup(t, m, Limits{})
	if s := stats(t, c); s.CPU != 0 || s.Current != 0 {
		t.Errorf("fresh cgroup stats %+v", s)
	}
	cmd, _ := start(t, c, `i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done`)
	if st := wait(t, cmd, 20*time.Second); !st.Success() {
		t.Fatalf("busy loop: %v", st)
	}
	s := stats(t, c)
	t.Logf("busy loop stats %+v", s)
	if s.CPU <= 0 {
		t.Errorf("CPU = %v after a busy loop", s.CPU)
	}
}

// The CPU quota on both sides: a spinning loop gets about its share, not
// a whole core; without a quota it gets much more.
func TestCPULimit(t *testing.T) {
	m := requireCgroups(t)
	// Both spin at once, so a loaded machine takes from both alike: the
	// limited one is held to its quota, the free one only by the load.
	limited, free := newCgroup(t, m, Limits{CPUs: 0.1}), newCgroup(t, m, Limits{CPUs: 2})
	lcmd, _ := start(t, limited, `while :; do :; done`)
	fcmd, _ := start(t, free, `while :; do :; done`)
	time.Sleep(2 * time.Second)
	ls, fs := stats(t, limited), stats(t, free)
	for _, c := range []*Cgroup{limited, free} {
		if err := c.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	wait(t, lcmd, 2*time.Second)
	wait(t, fcmd, 2*time.Second)
	t.Logf("2s of spinning side by side: %v with 0.1 CPUs, %v with 2 CPUs", ls.CPU, fs.CPU)
	if ls.CPU > 500*time.Millisecond {
		t.Errorf("0.1 CPUs used %v in 2s", ls.CPU)
	}
	if fs.CPU < 2*ls.CPU {
		t.Errorf("2 CPUs used %v, not clearly more than 0.1 CPUs' %v", fs.CPU, ls.CPU)
	}
}

// The v2 code path on a real cgroup2 mount even when it has no
// controllers (a hybrid host): leaf, clone3 into its fd, cgroup.kill,
// cpu.stat, removal and Reconcile are all core v2 features.
func TestV2CoreOnRealMount(t *testing.T) {
	if os.Geteuid() != 0 {
		skipOrFail(t, "needs root")
	}
	mounts, err := readMountinfo("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	mnt, ok := findV2Mount(mounts)
	if !ok {
		testutil.SkipOrFail(t, "cgroup2", "no cgroup2 mount")
	}
	self, err := readSelfCgroup("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	base, err := v2Base(mnt, self)
	if err != nil {
		testutil.SkipOrFail(t, "cgroup2", "own v2 cgroup not visible: %v", err)
	}
	m := &Manager{version: V2, v2base: base}
	parent := filepath.Join(base, parentName)
	if !fileExists(parent) {
		madeParents = append(madeParents, parent)
	}
	if err := m.ensureParentV2(); err != nil {
		testutil.SkipOrFail(t, "cgroup2", "cannot use %s: %v", base, err)
	}
	v2Parents = append(v2Parents, parent)

	if _, err := m.Create("nomem", Limits{Memory: 64 * mib}); err == nil {
		t.Error("Create with a memory limit succeeded without the memory controller")
	}
	c := newCgroup(t, m, Limits{})
	fd, ok := c.FD()
	if !ok || fd < 0 {
		t.Fatal("no v2 fd")
	}
	cmd, out := start(t, c, `i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; echo spun; exec sleep 30`)
	eventually(t, 20*time.Second, "the loop", func() bool { return strings.Contains(out.String(), "spun") })
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(mnt.Point, c.Dirs()[0])
	if !strings.Contains(string(data), "0::"+filepath.Join(mnt.Root, rel)+"\n") {
		t.Errorf("process cgroups %q, want v2 leaf %s", data, rel)
	}
	s := stats(t, c)
	if s.CPU <= 0 || s.Current != 1 {
		t.Errorf("stats %+v, want CPU > 0 and 1 process", s)
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if st := wait(t, cmd, 2*time.Second); st.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("ended with %v, want SIGKILL", st)
	}
	if n := procs(t, c); n != 0 {
		t.Errorf("%d left after cgroup.kill", n)
	}

	// A forking tree, killed by cgroup.kill.
	c2 := newCgroup(t, m, Limits{})
	start(t, c2, `while :; do (sleep 100 &); sleep 0.001; done`)
	eventually(t, 5*time.Second, "the tree to grow", func() bool { return stats(t, c2).Current >= 10 })
	if err := c2.Kill(); err != nil {
		t.Fatal(err)
	}
	if n := stats(t, c2).Current; n != 0 {
		t.Errorf("%d left after cgroup.kill", n)
	}

	// The program's threaded leaf: a shell's thread moved there forks
	// there; Procs and cgroup.kill cover it, Close removes it. (This
	// hierarchy has no pids controller, so the leaf has no limit here.)
	c3 := newCgroup(t, m, Limits{})
	if err := c3.makeLeafV2(0); err != nil {
		t.Fatal(err)
	}
	sh := exec.Command("/bin/sh", "-c", `read -r _; sleep 30 & echo started; wait`)
	sh.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: func() int { fd, _ := c3.FD(); return fd }()}
	in, _ := sh.StdinPipe()
	var buf strings.Builder
	sh.Stdout = &syncWriter{w: &buf}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Process.Kill(); sh.Wait() })
	if err := c3.AddProgramThread(sh.Process.Pid); err != nil {
		t.Fatal(err)
	}
	io.WriteString(in, "go\n")
	eventually(t, 10*time.Second, "the child", func() bool {
		pids, _ := c3.Procs()
		return len(pids) == 2
	})
	pids, _ := c3.Procs()
	for _, p := range pids {
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p))
		if !strings.HasSuffix(strings.TrimSpace(string(data)), "/"+ProgramLeaf) {
			t.Errorf("process %d is in %q, want the program leaf", p, data)
		}
	}
	if err := c3.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := c3.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c3.ProgramLeafDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leaf still there: %v", err)
	}

	testReconcile(t, m)
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// v2Parents are v2 parents tests used outside Open, for TestMain's check;
// madeParents those of them that did not exist before.
var v2Parents, madeParents []string

func TestMain(m *testing.M) {
	var parents []string
	if mg, err := Open(); err == nil {
		parents = mg.parents()
	}
	existed := map[string]bool{}
	for _, p := range parents {
		existed[p] = fileExists(p)
	}
	code := m.Run()
	// No leftovers: no leaf of this process in any parent; remove parents
	// this run created if they are empty (others may be using them).
	prefix := leafName(os.Getpid(), "")
	for _, p := range append(parents, v2Parents...) {
		ents, _ := os.ReadDir(p)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), prefix) {
				fmt.Fprintf(os.Stderr, "leftover cgroup %s/%s\n", p, e.Name())
				code = 1
			}
		}
		if ok, seen := existed[p]; (seen && !ok) || slices.Contains(madeParents, p) {
			_ = unix.Rmdir(p)
		}
	}
	os.Exit(code)
}

func TestParseProc(t *testing.T) {
	for _, tc := range []struct {
		root, own, want string
		ok              bool
	}{
		{"/", "/", "/sys/fs/cgroup", true},
		{"/", "/system.slice/x.service", "/sys/fs/cgroup/system.slice/x.service", true},
		{"/", "/x.service/" + daemonLeaf, "/sys/fs/cgroup/x.service", true},
		{"/docker/c1", "/docker/c1/sub", "/sys/fs/cgroup/sub", true},
		{"/docker/c1", "/docker/c10", "", false},
		{"/", "/../outside", "", false},
	} {
		got, err := v2Base(mountEntry{Root: tc.root, Point: "/sys/fs/cgroup", FSType: "cgroup2"}, map[string]string{"": tc.own})
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("v2Base(root %s, own %s) = %q, %v; want %q", tc.root, tc.own, got, err, tc.want)
		}
	}
	self, err := readSelfCgroup("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := self[""]; !ok {
		t.Logf("no v2 entry in /proc/self/cgroup: %v", self)
	}
}

// The program's pids leaf (v1 here; v2 in TestV2ProgramLeafOnRealMount):
// a shell whose one thread is moved into the leaf forks there, and the
// leaf's limit, not the cgroup's, stops it; the hit is counted, Procs and
// Kill cover the leaf, Close removes it.
func TestProgramLeaf(t *testing.T) {
	m := requireCgroups(t)
	if m.Version() != V1 {
		t.Skipf("cgroup %s: TestV2ProgramLeafOnRealMount covers v2's threaded leaf", m.Version())
	}
	c := newCgroup(t, m, Limits{Pids: 20, ProgramPids: 4})
	leaf := c.ProgramLeafDir()
	if b, err := os.ReadFile(filepath.Join(leaf, "pids.max")); err != nil || strings.TrimSpace(string(b)) != "4" {
		t.Fatalf("leaf pids.max = %q, %v", b, err)
	}
	// The shell waits on stdin until its thread is in the leaf.
	cmd := exec.Command("/bin/sh", "-c", `read -r _; for i in 1 2 3 4 5 6; do sleep 30 & done 2>/dev/null; echo looped; wait`)
	stdin, _ := cmd.StdinPipe()
	outf, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = outf, outf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	if err := c.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if err := c.AddProgramThread(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	io.WriteString(stdin, "go\n")
	// dash gives up at the first fork that fails: the shell and 3 sleeps
	// fill the leaf's 4, and the shell exits, leaving the 3 sleeps.
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the shell did not end")
	}
	cur, _ := os.ReadFile(filepath.Join(leaf, "pids.current"))
	if n, _ := strconv.Atoi(strings.TrimSpace(string(cur))); n != 3 {
		b, _ := os.ReadFile(outf.Name())
		t.Errorf("leaf pids.current = %q after the shell ended, want 3 sleeps (output %q)", cur, b)
	}
	s := stats(t, c)
	if s.PidsLimitHits == 0 || s.Current != 3 {
		t.Errorf("stats %+v, want limit hits and 3 processes", s)
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if n := procs(t, c); n != 0 {
		t.Errorf("%d left after Kill", n)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(leaf); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leaf %s still there: %v", leaf, err)
	}
	if err := (&Cgroup{m: m, name: "x"}).AddProgramThread(1); err == nil {
		t.Error("AddProgramThread without a leaf succeeded")
	}
	if _, err := m.Create("badleaf", Limits{Pids: 3, ProgramPids: 4}); err == nil {
		t.Error("Create with Pids below ProgramPids succeeded")
	}
}
