package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchCommand: execbox bench on native times every subject without an
// error, the warm call well below the cold one, measures calls per second
// and an idle pooled sandbox, and writes a page with a chart.
func TestBenchCommand(t *testing.T) {
	requireNative(t)
	requirePython(t)
	page := filepath.Join(t.TempDir(), "bench.html")
	env := []string{"EXECBOX_WORK_ROOT=" + workRoot(t), "EXECBOX_STATE_DIR=" + t.TempDir()}
	r := execbox(t, env, "", "bench", "--backends", "native", "--rounds", "5", "--concurrency", "1,2", "--rate-time", "300ms", "--json", "--html", page)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var rep struct {
		Latency []struct {
			Name, Path    string
			Calls, Errors int
			P50           float64 `json:"p50_ms"`
		}
		Throughput []struct {
			Name        string
			Concurrency int
			PerSecond   float64 `json:"calls_per_second"`
		}
		Idle []struct {
			Backend string
			RSS     int64 `json:"rss_bytes"`
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	p50 := map[string]float64{}
	for _, s := range rep.Latency {
		if s.Calls != 5 || s.Errors != 0 {
			t.Errorf("%s (%s): %d calls, %d errors", s.Name, s.Path, s.Calls, s.Errors)
		}
		p50[s.Name+"/"+s.Path] = s.P50
	}
	for _, k := range []string{"bare/host", "native cold/library", "native warm/library", "native cold/http", "native warm/http"} {
		if _, ok := p50[k]; !ok {
			t.Errorf("no %s in %v", k, p50)
		}
	}
	if p50["native warm/library"] >= p50["native cold/library"] {
		t.Errorf("warm %.2f ms, cold %.2f ms: the pool does not serve the warm calls", p50["native warm/library"], p50["native cold/library"])
	}
	if len(rep.Throughput) != 6 || len(rep.Idle) != 1 || rep.Idle[0].RSS == 0 {
		t.Errorf("throughput %+v, idle %+v", rep.Throughput, rep.Idle)
	}
	b, err := os.ReadFile(page)
	if err != nil || !strings.Contains(string(b), "<svg") || !strings.Contains(string(b), "native warm (library)") {
		t.Errorf("the page: %v\n%.500s", err, b)
	}
}
