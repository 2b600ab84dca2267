package docker

import (
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/moby/moby/client"

	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/sandbox"
)

// TestRemoteEngineCapacity: an engine on a unix socket is this host's
// (not Remote: the engine gates it by the host's cores); one reached over
// TCP — here the same dockerd behind a TCP relay — is Remote, and its
// capacity is the CPUs it reports, fewer when its memory holds fewer
// sandboxes of the default limits, named, and it has a lane of its own in
// the engine's admission; a run on it works (issue 43).
func TestRemoteEngineCapacity(t *testing.T) {
	local := newBackend(t, Config{})
	if local.Capabilities().Remote || !strings.HasPrefix(local.host, "unix://") {
		t.Fatalf("the engine at %s is remote to us", local.host)
	}
	info, err := local.cli.Info(t.Context(), client.InfoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cpus, mem := info.Info.NCPU, info.Info.MemTotal

	addr := tcpRelay(t, strings.TrimPrefix(local.host, "unix://"))
	remote := func(memory int64) *Backend {
		b, err := NewWithConfig(Config{Host: "tcp://" + addr, Image: testImage()},
			sandbox.Settings{Instance: "test-" + t.Name(), Defaults: sandbox.Limits{Memory: memory}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	b := remote(0)
	if !b.Capabilities().Remote {
		t.Fatal("an engine over TCP is not Remote")
	}
	c, err := b.Capacity(t.Context())
	if want := fmt.Sprintf("the docker engine at tcp://%s: %d CPUs", addr, cpus); err != nil || c.Runs != cpus || c.Source != want {
		t.Fatalf("capacity %+v, %v; want %d runs from %q", c, err, cpus, want)
	}
	// An engine gates a local one in the host's lane (never asking it),
	// a remote one in a lane of its own.
	for _, tc := range []struct {
		host, lane   string
		slots, lanes int
	}{{local.host, engine.HostLane, runtime.NumCPU(), 1}, {"tcp://" + addr, Name, cpus, 2}} {
		e, err := engine.New(engine.Options{Backends: []string{Name}, Backend: Name, Settings: func(string) sandbox.Settings {
			return sandbox.Settings{Config: &Config{Host: tc.host, Image: testImage()}, Instance: "test-" + t.Name()}
		}})
		if err != nil {
			t.Fatal(err)
		}
		c := e.Report(t.Context()).Candidates[0].Capacity
		lanes := e.Admission().Lanes
		e.Close()
		if c == nil || c.Name != tc.lane || c.Slots != tc.slots || len(lanes) != tc.lanes {
			t.Fatalf("an engine on docker at %s: capacity %+v, lanes %+v", tc.host, c, lanes)
		}
	}
	res := py(t, b, sandbox.Spec{}, "print('over tcp')")
	if res.ExitCode != 0 || res.Stdout != "over tcp\n" {
		t.Fatalf("a run on the engine over TCP: %s", describe(res))
	}

	// Sandboxes of a memory that fits cpus-1 times in the engine's.
	per := mem/int64(cpus) + 1
	c, err = remote(per).Capacity(t.Context())
	if err != nil || c.Runs != cpus-1 || !strings.Contains(c.Source, "for sandboxes of "+sandbox.HumanSize(per)+" (limits.memory)") {
		t.Fatalf("sandboxes of %s on an engine of %s and %d CPUs: %+v, %v", sandbox.FormatSize(per), sandbox.FormatSize(mem), cpus, c, err)
	}
}

// tcpRelay serves a TCP port on loopback that relays each connection to
// the unix socket path, until the test ends.
func tcpRelay(t *testing.T, path string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				u, err := net.Dial("unix", path)
				if err != nil {
					fmt.Fprintln(os.Stderr, "tcpRelay:", err)
					return
				}
				defer u.Close()
				go func() { io.Copy(u, c); u.(*net.UnixConn).CloseWrite() }()
				io.Copy(c, u)
			})
		}
	})
	return ln.Addr().String()
}
