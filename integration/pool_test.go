package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
)

// poolState waits until s's python pool on backend has want ready
// sandboxes and none being made, and returns it.
func (s *server) poolState(backend string, want int) v1.Pool {
	s.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var last v1.Pools
	for {
		h := s.health()
		last = h.Pools
		for _, p := range h.Pools.Pools {
			if p.Backend == backend && p.Language == "python" && p.Ready == want && p.Filling == 0 {
				return p
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the python pool on %s did not reach %d ready: %+v\n%s", backend, want, last, s.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// health is GET /v1/health, over the one keep-alive connection of
// http.DefaultClient (a client per poll would leave a connection each
// open on the server, which the load test counts).
func (s *server) health() v1.Health {
	s.t.Helper()
	code, _, body := s.raw("GET", "/v1/health", "")
	var h v1.Health
	if err := json.Unmarshal([]byte(body), &h); code != 200 || err != nil {
		s.t.Fatalf("GET /v1/health: %d %v: %s", code, err, body)
	}
	return h
}

// poolsSettled waits until every pool of s is full or failing, nothing
// being made, and returns how many sandboxes they hold.
func (s *server) poolsSettled() int {
	s.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		h := s.health()
		n, settled := 0, h.Pools.Size == 0 || len(h.Pools.Pools) > 0
		for _, p := range h.Pools.Pools {
			n += p.Ready
			if p.Filling > 0 || (p.Ready < p.Size && p.Error == "") {
				settled = false
			}
		}
		if settled {
			return n
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the pools did not settle: %+v", h.Pools)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// poolCall is a function call that reports whether the files an earlier
// call would have left are there, then leaves them and a background
// process (sleep MARKER) behind.
const poolCall = `
import os, subprocess
def main(marker):
    seen = [p for p in ("/work/left", "/tmp/left") if os.path.exists(p)]
    for p in ("/work/left", "/tmp/left"):
        open(p, "w").write("x")
    subprocess.Popen(["sleep", marker], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return {"seen": seen, "pid": os.getpid()}
`

// TestPoolsOnBackends: execbox serve keeps warm pools by default; on every
// isolating backend here a call takes a ready sandbox, no state crosses
// calls (a file written by one is absent in the next; a process started by
// one is dead before the next starts), a burst drains the pool and it
// refills, and a stopped server leaves nothing.
func TestPoolsOnBackends(t *testing.T) {
	requireNative(t)
	requirePython(t)
	for _, b := range sessionBackends() {
		t.Run(b, func(t *testing.T) {
			// docker.pool_size 0: the backend starts no container ahead of its
			// own, so the pool's are all there are.
			langs := "python"
			if b == "native" {
				langs = "python,javascript" // the JavaScript runner too, once
			}
			s := startOn(t, b, "EXECBOX_POOLS_LANGUAGES="+langs, "EXECBOX_FUNCTIONS_CONCURRENCY=8", "EXECBOX_DOCKER_POOL_SIZE=0")
			c := s.client("")
			ctx := context.Background()
			before := s.poolState(b, 2)
			if b != "docker" && len(leftoversOf(t, s.cmd.Process.Pid, s.work)) == 0 {
				t.Fatal("a server with a full pool shows no sandbox on the host; the checks below are blind")
			}
			marker := fmt.Sprint(time.Now().UnixNano()%90000000 + 10000000)
			for i := range 3 {
				s.poolState(b, 2)
				r, err := c.Execute(ctx, &v1.FunctionRequest{Code: poolCall, Params: json.RawMessage(`{"marker":"` + marker + `"}`)})
				if err != nil || !r.OK {
					t.Fatalf("call %d: %+v %v", i, r, err)
				}
				if r.Backend != b {
					t.Fatalf("call %d ran on %s, want %s", i, r.Backend, b)
				}
				var out struct{ Seen []string }
				json.Unmarshal(r.Data, &out)
				if len(out.Seen) > 0 {
					t.Errorf("call %d found what an earlier call left: %v", i, out.Seen)
				}
				if hostVisible(b) {
					if left := alive("sleep " + marker); len(left) > 0 {
						t.Errorf("call %d returned with its background process alive: %v", i, left)
					}
				}
			}
			if b == "native" {
				s.poolsSettled()
				r, err := c.Execute(ctx, &v1.FunctionRequest{Language: "javascript", Code: "function main(x) { return x + 1 }", Params: json.RawMessage(`{"x":41}`)})
				if err != nil || !r.OK || string(r.Data) != "42" {
					t.Fatalf("a JavaScript call: %+v %v", r, err)
				}
				for _, p := range s.health().Pools.Pools {
					if p.Language == "javascript" && (p.Hits != 1 || p.Misses != 0) {
						t.Errorf("the JavaScript pool after one call: %+v", p)
					}
				}
			}
			after := s.poolState(b, 2)
			if after.Hits-before.Hits != 3 || after.Misses != before.Misses {
				t.Errorf("3 calls: %d hits and %d misses, want 3 hits", after.Hits-before.Hits, after.Misses-before.Misses)
			}

			// A burst larger than the pool: every call answered, the pool
			// drained (misses start cold) and refilled.
			var wg sync.WaitGroup
			var mu sync.Mutex
			var failed []string
			for i := range 8 {
				wg.Go(func() {
					r, err := c.Execute(ctx, &v1.FunctionRequest{Code: "def main(i):\n    return i + 1\n", Params: json.RawMessage(fmt.Sprint(`{"i":`, i, `}`))})
					if err != nil || !r.OK || string(r.Data) != fmt.Sprint(i+1) {
						mu.Lock()
						failed = append(failed, fmt.Sprintf("%d: %+v %v", i, r, err))
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if len(failed) > 0 {
				t.Fatalf("burst: %v", failed)
			}
			burst := s.poolState(b, 2)
			if burst.Hits+burst.Misses-after.Hits-after.Misses != 8 || burst.Misses == after.Misses || burst.Hits == after.Hits {
				t.Errorf("a burst of 8: %d hits and %d misses; want both, 8 in all", burst.Hits-after.Hits, burst.Misses-after.Misses)
			}
			if m := s.metric(`execbox_pool_events_total{backend="` + b + `",event="hit",language="python"}`); m != float64(burst.Hits) {
				t.Errorf("metrics say %v hits, health %d", m, burst.Hits)
			}
			// doctor --remote shows the server's live counters.
			d := execbox(t, nil, "", "doctor", "--remote", s.url)
			row := false
			for _, line := range strings.Split(d.stdout, "\n") {
				f := strings.Fields(line)
				row = row || len(f) > 4 && f[0] == b && f[1] == "python" && f[2] == "2/2" && f[3] == fmt.Sprint(burst.Hits)
			}
			if d.code != 0 || !row {
				t.Errorf("doctor --remote (exit %d) lacks the pool's row (%s python 2/2 %d):\n%s%s", d.code, b, burst.Hits, d.stdout, d.stderr)
			}

			pid := s.cmd.Process.Pid
			instance := fmt.Sprintf("cli-%d", pid)
			if b == "docker" {
				// The calls' containers go in the background; then the pool's 2 remain.
				for deadline := time.Now().Add(30 * time.Second); len(containersOfInstance(t, instance)) != 2; time.Sleep(100 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("the pool's containers: %v, want 2", containersOfInstance(t, instance))
					}
				}
			}
			if s.stop() != 0 {
				t.Errorf("serve exited %d", s.exitCode)
			}
			left := append(leftoversOf(t, pid, s.work), sandboxLeftovers(s.work, false)...)
			if b == "docker" {
				left = append(left, containersOfInstance(t, instance)...)
			}
			if len(left) > 0 {
				t.Errorf("a stopped server's pools left: %v", left)
			}
		})
	}
}

// TestPoolsAfterKill9: execbox serve killed with SIGKILL while its pools
// are full leaves their sandboxes; the next serve on the same work root
// removes every one.
func TestPoolsAfterKill9(t *testing.T) {
	requireNative(t)
	requirePython(t)
	for _, b := range sessionBackends() {
		t.Run(b, func(t *testing.T) {
			work := filepath.Join(reachableTempDir(t), "work")
			env := append(onBackend(t, b), "EXECBOX_STATE_DIR="+t.TempDir(), "EXECBOX_WORK_ROOT="+work, "EXECBOX_POOLS_LANGUAGES=python")
			s := startServer(t, env)
			s.requireReady(b, "")
			s.poolState(b, 2)
			pid := s.cmd.Process.Pid
			instance := fmt.Sprintf("cli-%d", pid)
			found := leftoversOf(t, pid, work)
			if b == "docker" {
				found = containersOfInstance(t, instance)
			}
			if len(found) == 0 {
				t.Fatal("a server with a full pool shows nothing on the host; the check is blind")
			}
			s.cmd.Process.Signal(syscall.SIGKILL)
			<-s.exited

			s2 := startServer(t, env)
			noneLeft(t, "after a restart, the killed server's pools", func() []string {
				left := leftoversOf(t, pid, work)
				if b == "docker" {
					left = append(left, containersOfInstance(t, instance)...)
				}
				return left
			})
			// And the new server fills its own.
			s2.poolState(b, 2)
		})
	}
}

// containersOfInstance lists the docker containers an execbox instance
// made (label execbox.instance), with the docker CLI on DOCKER_HOST.
func containersOfInstance(t *testing.T, instance string) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=execbox.instance="+instance).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	var found []string
	for _, c := range strings.Fields(string(out)) {
		found = append(found, "container "+c+" of "+instance)
	}
	return found
}
