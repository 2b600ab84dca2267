package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// leftoversOf lists what the server with PID pid has on the host: its
// sandboxes' cgroups, its base directories under work (the work root)
// and the mounts in them.
func leftoversOf(t *testing.T, pid int, work string) []string {
	found := cgroupsOf(t, pid)
	bases, _ := filepath.Glob(filepath.Join(work, "*", fmt.Sprintf("%d.*", pid)))
	found = append(found, bases...)
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		for _, b := range bases {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], b+"/") && !strings.HasSuffix(f[4], "/.root") {
				found = append(found, "mount "+f[4])
			}
		}
	}
	return found
}

// TestSessionCLI: the session commands against a real server on the
// native backend, as a user would type them.
func TestSessionCLI(t *testing.T) {
	requireNative(t)
	s := startServer(t, []string{"EXECBOX_BACKEND=native"})
	env := []string{"EXECBOX_URL=" + s.url}
	r := execbox(t, env, "", "session", "create", "--label", "who=cli", "--idle-timeout", "2m")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || id == "" {
		t.Fatalf("create: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	// A bare number is seconds, as for run --timeout and the API.
	r = execbox(t, env, "", "session", "create", "--ttl", "90", "--idle-timeout", "75", "--json")
	var short v1.Session
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &short) != nil {
		t.Fatalf("create --ttl 90: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if ttl := short.Expires.Sub(short.Created); ttl < 89*time.Second || ttl > 91*time.Second || time.Duration(short.IdleTimeout) != 75*time.Second {
		t.Errorf("create --ttl 90 --idle-timeout 75: a ttl of %v and an idle timeout of %v", ttl, time.Duration(short.IdleTimeout))
	}
	if r = execbox(t, env, "", "session", "close", short.ID); r.code != 0 {
		t.Errorf("close: exit %d %q", r.code, r.stderr)
	}
	for i := 1; i <= 3; i++ {
		r = execbox(t, env, "", "session", "exec", id, "--", "sh", "-c", "echo x >> n; wc -l < n")
		if r.code != 0 || strings.TrimSpace(r.stdout) != fmt.Sprint(i) {
			t.Fatalf("exec %d: exit %d %q %q", i, r.code, r.stdout, r.stderr)
		}
	}
	r = execbox(t, env, "", "session", "exec", id, "--", "sh", "-c", "exit 7")
	if r.code != 7 {
		t.Fatalf("the exit code of a session exec: %d, want 7", r.code)
	}
	r = execbox(t, env, "", "session", "exec", id, "-c", "import sys; print(sys.stdin.read().upper())", "-i")
	if r.code != 0 {
		t.Fatalf("code: exit %d %q", r.code, r.stderr)
	}
	// As docker exec: the command's own flags are the command's, and piped
	// stdin reaches it without -i.
	if r = execbox(t, env, "", "session", "exec", id, "sh", "-c", "exit 5"); r.code != 5 {
		t.Fatalf("session exec sh -c 'exit 5': exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r = execbox(t, env, "piped\n", "session", "exec", "--timeout", "20s", id, "--", "sh", "-c", "cat"); r.code != 0 || r.stdout != "piped\n" {
		t.Fatalf("piped stdin to session exec: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = execbox(t, env, "data to upload", "session", "cp", "-", id+":up/in.txt")
	if r.code != 0 {
		t.Fatalf("cp in: exit %d %q", r.code, r.stderr)
	}
	out := filepath.Join(t.TempDir(), "out.txt")
	if r = execbox(t, env, "", "session", "cp", id+":up/in.txt", out); r.code != 0 {
		t.Fatalf("cp out: exit %d %q", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(out); string(b) != "data to upload" {
		t.Fatalf("copied out %q", b)
	}
	// Several local files into a directory: one multipart upload.
	local := t.TempDir()
	for _, n := range []string{"a.txt", "b.txt"} {
		if err := os.WriteFile(filepath.Join(local, n), []byte("file "+n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if r = execbox(t, env, "", "session", "cp", filepath.Join(local, "a.txt"), filepath.Join(local, "b.txt"), id+":up/many/"); r.code != 0 {
		t.Fatalf("cp of two files: exit %d %q", r.code, r.stderr)
	}
	if r = execbox(t, env, "", "session", "exec", id, "--", "cat", "up/many/a.txt", "up/many/b.txt"); r.code != 0 || r.stdout != "file a.txtfile b.txt" {
		t.Fatalf("the uploaded files: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r = execbox(t, env, "", "session", "ls", id, "up"); r.code != 0 || !strings.Contains(r.stdout, "up/in.txt") {
		t.Fatalf("ls: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r = execbox(t, env, "", "session", "list"); r.code != 0 || !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, "who=cli") {
		t.Fatalf("list: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	// A context that keeps its state, from the command line: calls without
	// --context share the session's first context of their language.
	r = execbox(t, env, "", "session", "run-code", id, "import math\nr = 2")
	ctxID, ok := strings.CutPrefix(strings.TrimSpace(r.stderr), "context: ")
	if r.code != 0 || !ok {
		t.Fatalf("run-code: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	for range 8 { // more calls than a session has contexts
		if r = execbox(t, env, "", "session", "run-code", id, "r = r + 1\nr"); r.code != 0 || r.stderr != "" {
			t.Fatalf("run-code without --context: exit %d %q %q", r.code, r.stdout, r.stderr)
		}
	}
	if r.stdout != "10\n" {
		t.Fatalf("run-code without --context forgot its state: %q, want 10", r.stdout)
	}
	if r = execbox(t, env, "", "session", "run-code", id, "--new", "r"); r.code != 1 || !strings.Contains(r.stderr, "NameError") || !strings.Contains(r.stderr, "context: ") {
		t.Fatalf("run-code --new: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r = execbox(t, env, "", "session", "run-code", id, "r = 2"); r.code != 0 {
		t.Fatalf("run-code: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r = execbox(t, env, "print('area')\nround(math.pi * r * r, 2)", "session", "run-code", id, "--context", ctxID, "-"); r.code != 0 || r.stdout != "area\n12.57\n" {
		t.Fatalf("run-code in the context: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r = execbox(t, env, "", "session", "run-code", id, "--context", ctxID, "1/0"); r.code != 1 || !strings.Contains(r.stderr, "ZeroDivisionError") {
		t.Fatalf("run-code that raises: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r = execbox(t, env, "", "session", "context", "list", id); r.code != 0 || !strings.Contains(r.stdout, ctxID) {
		t.Fatalf("context list: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	// attach with piped input: typed into python3 on a terminal, whose
	// end of input ends it; execbox exits with its exit code.
	if r = execbox(t, env, "print(6 * 7)\nimport sys; sys.exit(4)\n", "session", "attach", id, "--", "python3", "-q"); r.code != 4 || !strings.Contains(r.stdout, ">>> ") || !strings.Contains(r.stdout, "42") {
		t.Fatalf("attach: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	for range 2 {
		if r = execbox(t, env, "", "session", "close", id); r.code != 0 {
			t.Fatalf("close: exit %d %q", r.code, r.stderr)
		}
	}
	if r = execbox(t, env, "", "session", "exec", id, "--", "true"); r.code == 0 || !strings.Contains(r.stderr, "session_closed") {
		t.Fatalf("exec after close: exit %d %q", r.code, r.stderr)
	}
}

// sessionBackends are the backends with sessions the session tests run
// on: native, bwrap, gvisor and docker, each skipped where it is not ready
// (failed where EXECBOX_REQUIRE names it), and those of slow (microvm,
// kubernetes) that EXECBOX_REQUIRE names. A VM under emulation, or a Pod,
// per sandbox is too slow for every session test: they run the contexts
// test (an agent, a terminal, a reaped session), and microvm the kill -9
// one (kubernetes': backend/kubernetes TestKill9LeavesNoPods).
func sessionBackends(slow ...string) []string {
	backends := []string{"native", "bwrap", "gvisor", "docker"}
	for _, b := range slow {
		if testutil.Required(b) {
			backends = append(backends, b)
		}
	}
	return backends
}

// onBackend is the server environment for backend b (EXECBOX_BACKEND and
// what b needs here: microvm its VM init, kubernetes a namespace of the
// cluster KUBECONFIG names; neither keeps a warm VM or Pod, so that what
// is left is the sessions'), or skips the test (fails it when
// EXECBOX_REQUIRE names b) where b cannot be set up.
func onBackend(t *testing.T, b string) []string {
	t.Helper()
	env := []string{"EXECBOX_BACKEND=" + b}
	switch b {
	case "native":
		// Rootless, native bounds memory and pids per process and CPU
		// not at all (no cgroup), which the server refuses unless told.
		// As root it has its cgroups and is not told: CI sees a loss.
		if os.Geteuid() != 0 {
			env = append(env, "EXECBOX_ALLOW_WEAK_LIMITS=true")
		}
	case "microvm":
		env = append(env, requireMicroVM(t)...)
		env = append(env, "EXECBOX_MICROVM_WARM=0")
	case "kubernetes":
		env = append(env, kubernetesEnv(t)...)
	}
	return env
}

// requireReady skips the test (fails it when EXECBOX_REQUIRE names b)
// unless server s says backend b is ready (asked with token, an admin's
// if it has tokens: others are not told why).
func (s *server) requireReady(b, token string) {
	s.t.Helper()
	h, err := s.client(token).Health(context.Background())
	if err != nil {
		s.t.Fatalf("GET /v1/health: %v", err)
	}
	for _, c := range h.Candidates {
		if c.Name == b {
			if !c.Ready {
				testutil.SkipOrFail(s.t, b, "%s is not ready: %s", b, c.Reason)
			}
			// Ready, but the server may still refuse it (its limits
			// unenforceable here and weak limits not allowed).
			if h.Backend != b {
				testutil.SkipOrFail(s.t, b, "%s is ready, but the server does not run on it: %s", b, h.SelectedBecause)
			}
			return
		}
	}
	s.t.Fatalf("the server has no backend %s", b)
}

// startOn starts a server on backend b (onBackend's environment, then
// env) and requires b to be ready there.
func startOn(t *testing.T, b string, env ...string) *server {
	t.Helper()
	s := startServer(t, append(onBackend(t, b), env...))
	s.requireReady(b, "")
	return s
}

// hostVisible says whether a backend's programs are processes of this
// host's kernel (so alive finds them): gVisor's and a VM's run in a kernel
// of their own, a Pod's on its node (which need not be this host).
func hostVisible(backend string) bool {
	return !slices.Contains([]string{"gvisor", "microvm", "kubernetes"}, backend)
}

// TestSessionLifecycleOnBackends: on every isolating backend here, a
// session keeps its files across execs, an idle one is reaped and leaves
// nothing on the host, and 50 opened and closed at once leak nothing.
func TestSessionLifecycleOnBackends(t *testing.T) {
	requireNative(t)
	for _, b := range sessionBackends() {
		t.Run(b, func(t *testing.T) {
			// 50 execs at once wait for 2 run slots; under gVisor (a sandbox
			// start per exec) longer than the default queue_wait.
			// No pools: what is on the host is the sessions' alone.
			s := startOn(t, b, "EXECBOX_SESSIONS_PER_TOKEN=64", "EXECBOX_SERVER_QUEUE_WAIT=5m", "EXECBOX_POOLS_SIZE=0")
			c := s.client("")
			ctx := context.Background()
			pid := s.cmd.Process.Pid

			// State across execs.
			sess, err := c.CreateSession(ctx, &v1.SessionRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if sess.Backend != b {
				t.Fatalf("the session runs on %s", sess.Backend)
			}
			for i := 1; i <= 3; i++ {
				res, err := c.Exec(ctx, sess.ID, &v1.SessionExec{Command: []string{"sh", "-c", "echo x >> n; wc -l < n"}})
				if err != nil || strings.TrimSpace(res.Stdout) != fmt.Sprint(i) {
					t.Fatalf("exec %d: %+v, %v", i, res, err)
				}
			}
			// 50 MiB up and back through the API, byte-identical.
			const size = 50 * sandbox.MiB
			h := sha256.New()
			if fi, err := c.PutFile(ctx, sess.ID, "big.bin", io.TeeReader(io.LimitReader(pattern{}, size), h)); err != nil || fi.Size != size {
				t.Fatalf("PutFile of 50 MiB: %+v, %v", fi, err)
			}
			want := h.Sum(nil)
			h.Reset()
			if n, err := c.GetFile(ctx, sess.ID, "big.bin", h); err != nil || n != size || !bytes.Equal(h.Sum(nil), want) {
				t.Fatalf("GetFile of 50 MiB: %d bytes, %v, identical %v", n, err, bytes.Equal(h.Sum(nil), want))
			}
			if err := c.CloseSession(ctx, sess.ID); err != nil {
				t.Fatal(err)
			}

			// A session past its ttl is closed even while it runs a
			// program, and the program is gone from the host.
			marker := fmt.Sprint(time.Now().UnixNano()%90000000 + 10000000)
			short, err := c.CreateSession(ctx, &v1.SessionRequest{TTL: v1.Seconds(2 * time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			res, err := c.Exec(ctx, short.ID, &v1.SessionExec{Command: []string{"sleep", marker}})
			if took := time.Since(start); took > 30*time.Second {
				t.Fatalf("the exec of an expired session ran %v", took)
			}
			if err == nil && res.Reason != "canceled" {
				t.Fatalf("the exec of an expired session: %+v", res)
			}
			if hostVisible(b) {
				if left := alive("sleep " + marker); len(left) > 0 {
					t.Fatalf("the program of an expired session lives on: %v", left)
				}
			}
			if _, err := c.Session(ctx, short.ID); err == nil || !strings.Contains(err.Error(), "expired") {
				t.Fatalf("an expired session: %v", err)
			}

			// 50 at once: each made, used and closed.
			var wg sync.WaitGroup
			errs := make(chan error, 50)
			for i := range 50 {
				wg.Go(func() {
					s, err := c.CreateSession(ctx, &v1.SessionRequest{})
					if err != nil {
						errs <- err
						return
					}
					defer func() {
						if err := c.CloseSession(ctx, s.ID); err != nil {
							errs <- err
						}
					}()
					if _, err := c.PutFile(ctx, s.ID, "f", strings.NewReader(fmt.Sprint(i))); err != nil {
						errs <- err
						return
					}
					res, err := c.Exec(ctx, s.ID, &v1.SessionExec{Command: []string{"cat", "f"}})
					if err == nil && res.Stdout != fmt.Sprint(i) {
						err = fmt.Errorf("session %d read %q", i, res.Stdout)
					}
					if err != nil {
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if l, err := c.Sessions(ctx); err != nil || len(l) != 0 {
				t.Fatalf("open after closing all: %d, %v", len(l), err)
			}

			// An idle session is reaped (the reaper looks every 5 s) and
			// leaves nothing.
			idle, err := c.CreateSession(ctx, &v1.SessionRequest{IdleTimeout: v1.Seconds(time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				_, err := c.Session(ctx, idle.ID)
				var p *v1.Problem
				if errors.As(err, &p) && p.Code == "session_closed" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the idle session was not reaped: %v", err)
				}
				time.Sleep(200 * time.Millisecond)
			}
			// The session is closed (for callers) before its sandbox is
			// gone: what is left is waited for.
			noneLeft(t, "every session closed", func() []string { return append(sandboxLeftovers(s.work, true), cgroupsOf(t, pid)...) })
		})
	}
}

// TestSessionsAfterKill9: execbox serve killed with SIGKILL while its
// sessions are open (one running a program) leaves processes, cgroups,
// mounts, work dirs and containers behind; the next serve on the same work
// root removes them all.
func TestSessionsAfterKill9(t *testing.T) {
	requireNative(t)
	for _, b := range sessionBackends("microvm") {
		t.Run(b, func(t *testing.T) {
			work := filepath.Join(reachableTempDir(t), "work")
			state := t.TempDir()
			env := append(onBackend(t, b), "EXECBOX_STATE_DIR="+state, "EXECBOX_WORK_ROOT="+work)
			s := startServer(t, env)
			s.requireReady(b, "")
			c := s.client("")
			ctx := context.Background()
			marker := fmt.Sprint(time.Now().UnixNano()%90000000 + 10000000)
			var ids []string
			for range 3 {
				sess, err := c.CreateSession(ctx, &v1.SessionRequest{})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.PutFile(ctx, sess.ID, "data", io.LimitReader(zeros{}, sandbox.MiB)); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, sess.ID)
			}
			go c.Exec(context.Background(), ids[0], &v1.SessionExec{Command: []string{"sh", "-c", "touch started; exec sleep " + marker}})
			// A context whose program lives in the session's agent.
			cx, err := c.CreateContext(ctx, ids[1], "python")
			if err != nil {
				t.Fatal(err)
			}
			marker2 := fmt.Sprint(time.Now().UnixNano()%90000000 + 10000001)
			if res, err := c.RunCode(ctx, ids[1], cx.ID, &v1.CodeRequest{Code: "import subprocess\nsubprocess.Popen(['sleep', '" + marker2 + "']).pid"}); err != nil || !res.OK {
				t.Fatalf("starting a program from a context: %+v, %v", res, err)
			}
			for i := 0; ; i++ {
				if _, err := c.Stat(ctx, ids[0], "started"); err == nil {
					break
				}
				if i > 200 {
					t.Fatal("the session's program did not start")
				}
				time.Sleep(50 * time.Millisecond)
			}
			pid := s.cmd.Process.Pid
			// "started" is touched just before the sleep is exec'd: it is
			// looked for a moment.
			for i := 0; hostVisible(b) && (len(alive("sleep "+marker)) == 0 || len(alive("sleep "+marker2)) == 0); i++ {
				if i == 100 {
					t.Fatal("the sessions' programs are not seen on the host; the check is blind")
				}
				time.Sleep(50 * time.Millisecond)
			}
			if b != "docker" && len(leftoversOf(t, pid, work)) == 0 {
				t.Fatal("a live server with sessions shows nothing on the host; the check is blind")
			}
			if b == "docker" && len(containersOf(t, ids)) != len(ids) {
				t.Fatalf("the sessions' containers are not found (%v); the check is blind", containersOf(t, ids))
			}
			s.cmd.Process.Signal(syscall.SIGKILL)
			<-s.exited

			s2 := startServer(t, env)
			noneLeft(t, "after a restart, the killed server's sessions", func() []string {
				left := append(leftoversOf(t, pid, work), alive("sleep "+marker)...)
				left = append(left, alive("sleep "+marker2)...)
				if b == "docker" {
					left = append(left, containersOf(t, ids)...)
				}
				return left
			})
			if l, err := s2.client("").Sessions(ctx); err != nil || len(l) != 0 {
				t.Fatalf("the new server lists %d sessions (%v); none survive a restart", len(l), err)
			}
			_, err = s2.client("").Session(ctx, ids[1])
			var p *v1.Problem
			if !errors.As(err, &p) || p.Code != "session_not_found" {
				t.Fatalf("an old session after a restart: %v", err)
			}
		})
	}
}

// noneLeft waits up to a minute until left finds nothing, and fails the
// test with what it finds then.
func noneLeft(t *testing.T, what string, left func() []string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		l := left()
		if len(l) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s left: %v", what, l)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// containersOf lists the docker containers of the sandboxes ids (label
// execbox.run), with the docker CLI on DOCKER_HOST.
func containersOf(t *testing.T, ids []string) []string {
	t.Helper()
	var out []string
	for _, id := range ids {
		b, err := exec.Command("docker", "ps", "-aq", "--filter", "label=execbox.run="+id).Output()
		if err != nil {
			t.Fatalf("docker ps: %v", err)
		}
		for _, c := range strings.Fields(string(b)) {
			out = append(out, "container "+c+" of "+id)
		}
	}
	return out
}

// pattern is an endless reader of bytes that vary.
type pattern struct{}

func (pattern) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(i*7 + i>>8)
	}
	return len(p), nil
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestClientFindsTheServer: without --server, the client commands dial
// $EXECBOX_URL, else the server the configuration describes (its
// server.listen, a wildcard host on loopback); and a server starts with
// the clients' EXECBOX_URL exported.
func TestClientFindsTheServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	config := func(listen string) string {
		p := filepath.Join(t.TempDir(), "execbox.yaml")
		if err := os.WriteFile(p, []byte("server:\n  listen: "+listen+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg := config(fmt.Sprintf("127.0.0.1:%d", port))
	startServer(t, append(slices.Clone(localServe), "EXECBOX_CONFIG="+cfg, "EXECBOX_URL=http://127.0.0.1:1"), "--listen", fmt.Sprintf("127.0.0.1:%d", port))
	for _, c := range []string{cfg, config(fmt.Sprintf("0.0.0.0:%d", port))} {
		if r := execbox(t, []string{"EXECBOX_CONFIG=" + c}, "", "session", "list"); r.code != 0 {
			t.Errorf("session list with the server's configuration (%s): exit %d %q %q", c, r.code, r.stdout, r.stderr)
		}
	}
	if r := execbox(t, []string{"EXECBOX_CONFIG=" + cfg, "EXECBOX_URL=http://127.0.0.1:1"}, "", "session", "list"); r.code == 0 || !strings.Contains(r.stderr, "127.0.0.1:1") {
		t.Errorf("EXECBOX_URL is not dialed before the configuration: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := execbox(t, []string{"EXECBOX_CONFIG=" + cfg}, "", "session", "list", "--server", "http://127.0.0.1:1"); r.code == 0 {
		t.Errorf("--server is not dialed before the configuration: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
}
