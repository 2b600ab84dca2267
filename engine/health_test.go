package engine

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// TestHealthCacheSharedBetweenEngines: one engine's probe answers the next
// engine (a later CLI process) without a probe, while the answer is fresh
// and the backend's configuration is the same; a changed configuration,
// an unsafe file or a lapsed not-ready answer makes it probe again.
func TestHealthCacheSharedBetweenEngines(t *testing.T) {
	world("t-kernel")
	cache := filepath.Join(t.TempDir(), "state", "health.json")
	k := stubs["t-kernel"]
	engineWith := func(cfg any) *Engine {
		return newEngine(t, Options{HealthCache: cache, Settings: func(string) sandbox.Settings { return sandbox.Settings{Config: cfg} }})
	}
	pick := func(e *Engine) string {
		t.Helper()
		got, err := selectName(t, e, sandbox.Selection{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	before := k.probeCount()
	if got := pick(engineWith("a")); got != "t-kernel" || k.probeCount() != before+1 {
		t.Fatalf("first engine: %s after %d probes", got, k.probeCount()-before)
	}
	if st, err := os.Stat(filepath.Dir(cache)); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("cache dir: %v %v", st, err)
	}
	if got := pick(engineWith("a")); got != "t-kernel" || k.probeCount() != before+1 {
		t.Fatalf("second engine probed again (%d probes); the cache should answer", k.probeCount()-before)
	}
	// Another configuration of the backend: the old answer does not count.
	pick(engineWith("b"))
	if k.probeCount() != before+2 {
		t.Fatalf("a changed configuration did not probe again (%d probes)", k.probeCount()-before)
	}
	// A cache file others may write is not believed.
	os.Chmod(cache, 0o666)
	pick(engineWith("b"))
	if k.probeCount() != before+3 {
		t.Fatalf("a world-writable cache was believed (%d probes)", k.probeCount()-before)
	}
	// A not-ready answer is kept only briefly: an old one is probed again.
	world()
	stubs["t-kernel"].set(true, false, "warming up")
	e := engineWith("c")
	if _, err := e.healthOf(context.Background(), "t-kernel"); err != nil {
		t.Fatal(err)
	}
	entries := readCache(cache)
	c := entries["t-kernel"]
	c.Health.CheckedAt = c.Health.CheckedAt.Add(-2 * cacheNotReadyTTL)
	entries["t-kernel"] = c
	e.cacheStoreEntries(entries)
	n := k.probeCount()
	if _, ok := engineWith("c").knownHealth("t-kernel"); ok || k.probeCount() != n {
		t.Fatalf("a lapsed not-ready answer was used (known %v)", ok)
	}
}

// TestProbeAllKeepsEveryAnswer: doctor's probes run side by side and each
// rewrites the cache file; every backend's answer is in it afterwards
// (none lost to another's rewrite), and progress heard of each once.
func TestProbeAllKeepsEveryAnswer(t *testing.T) {
	world("t-none", "t-proc1", "t-proc2", "t-kernel", "t-vm")
	cache := filepath.Join(t.TempDir(), "health.json")
	for range 5 {
		os.Remove(cache)
		e := newEngine(t, Options{HealthCache: cache})
		heard := map[string]int{}
		e.ProbeAll(context.Background(), func(name string, _ sandbox.Health, _ time.Duration) { heard[name]++ })
		entries := readCache(cache)
		for _, name := range []string{"t-none", "t-proc1", "t-proc2", "t-kernel", "t-vm"} {
			if _, ok := entries[name]; !ok {
				t.Fatalf("the cache lacks %s's answer after ProbeAll: %v", name, slices.Sorted(maps.Keys(entries)))
			}
			if heard[name] != 1 {
				t.Fatalf("progress heard of %s %d times", name, heard[name])
			}
		}
	}
}
