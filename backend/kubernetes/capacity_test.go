package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/internal/daemon/server"
	"github.com/execbox/execbox/sandbox"
)

// TestCapacity: the backend's capacity is the tightest resource of the
// namespace's ResourceQuotas for a sandbox of the default limits, less the
// warm Pods, named; without a quota, the nodes' allocatable. An engine on
// it (server.max_runs unset) admits more runs at once than this host has
// cores when the quota allows, and refuses the one past the quota, busy,
// naming the quota — over HTTP too: a 429, and /v1/health and /metrics
// count the lane's slots (issue 43).
func TestCapacity(t *testing.T) {
	ns := fmt.Sprintf("execbox-capacity-%d", time.Now().UnixNano()%1e6)
	b := newBackend(t, "kubernetes", func(c *Config) { c.Warm, c.WarmMax = 0, 0 })
	ctx := t.Context()
	if _, err := b.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	b.ns = ns

	// No quota: the fewest sandboxes the nodes' allocatable pods, memory
	// or cpu (against the Pod's requests) hold.
	req, _ := podResources(b.podSpec(sandbox.Spec{Limits: b.defaults}, "x"))
	nodes, err := b.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pods, mem, cpu int64
	for _, n := range nodes.Items {
		pods += n.Status.Allocatable.Pods().Value()
		mem += n.Status.Allocatable.Memory().Value()
		cpu += n.Status.Allocatable.Cpu().MilliValue()
	}
	want := min(pods, mem/req.Memory().Value(), cpu/req.Cpu().MilliValue())
	c, err := b.Capacity(ctx)
	if err != nil || int64(c.Runs) != want || !strings.Contains(c.Source, "the nodes' allocatable") || !strings.Contains(c.Source, "has no ResourceQuota") {
		t.Fatalf("no quota: %+v, %v; want %d (of %d pods, %s memory, %dm cpu)", c, err, want, pods, sandbox.HumanSize(mem), cpu)
	}
	t.Logf("no quota: %+v", c)
	perPod := req[corev1.ResourceMemory]
	quota := func(hard corev1.ResourceList) {
		t.Helper()
		q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "sandboxes"}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
		if _, err := b.cs.CoreV1().ResourceQuotas(ns).Update(ctx, q, metav1.UpdateOptions{}); err != nil {
			if _, err := b.cs.CoreV1().ResourceQuotas(ns).Create(ctx, q, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	cores := runtime.NumCPU()
	pods = int64(cores + 2)
	quota(corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(pods, resource.DecimalSI)})
	if c, err := b.Capacity(ctx); err != nil || int64(c.Runs) != pods || !strings.Contains(c.Source, fmt.Sprintf("the ResourceQuota sandboxes of namespace %s: pods %d", ns, pods)) {
		t.Fatalf("pods %d: %+v, %v", pods, c, err)
	}
	// Memory for three sandboxes and a half: three, named by memory.
	memory := perPod.DeepCopy()
	memory.Set(perPod.Value() * 7 / 2)
	quota(corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(pods, resource.DecimalSI), corev1.ResourceRequestsMemory: memory})
	if c, err := b.Capacity(ctx); err != nil || c.Runs != 3 || !strings.Contains(c.Source, "requests.memory") {
		t.Fatalf("memory for 3.5 sandboxes: %+v, %v", c, err)
	}
	// Less what the warm pool may hold: its ceiling, or its floor above it.
	for _, w := range []struct{ warm, max int }{{0, 1}, {1, 0}} {
		b.cfg.Warm, b.cfg.WarmMax = w.warm, w.max
		if c, err := b.Capacity(ctx); err != nil || c.Runs != 2 || !strings.Contains(c.Source, "less the 1 Pods the warm pool may hold") {
			t.Fatalf("memory for 3.5 sandboxes, warm %d, warm_max %d: %+v, %v", w.warm, w.max, c, err)
		}
	}
	b.cfg.Warm, b.cfg.WarmMax = 0, 0

	// An engine admits cores+1 runs at once on the Pods the quota allows,
	// and refuses one more naming the quota.
	quota(corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(cores+1), resource.DecimalSI)})
	cfg := b.cfg
	cfg.Namespace = ns
	e, err := engine.New(engine.Options{Backends: []string{Name}, Backend: Name,
		Settings: func(string) sandbox.Settings {
			return sandbox.Settings{Config: &cfg, Instance: "kubernetes-capacity-test"}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	if l := e.Report(ctx).Candidates[0].Capacity; l == nil || l.Slots != cores+1 {
		t.Fatalf("the engine's lane: %+v", l)
	}
	release := make(chan struct{})
	var wg sync.WaitGroup
	var held sync.WaitGroup
	held.Add(cores + 1)
	errs := make(chan error, cores+1)
	for range cores + 1 {
		wg.Go(func() {
			tk, err := e.Admit(ctx, engine.Owner{}, sandbox.Selection{}, sandbox.Spec{})
			held.Done()
			if err != nil {
				errs <- err
				return
			}
			defer tk.Release()
			<-release
			res, err := tk.Run(ctx, sandbox.Selection{}, &sandbox.Process{Args: []string{"true"}})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	held.Wait()
	_, err = e.Admit(ctx, engine.Owner{}, sandbox.Selection{}, sandbox.Spec{})
	overHTTP(t, e, cores+1, ns)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a run within the quota: %v", err)
	}
	if !errors.Is(err, sandbox.ErrBusy) || !strings.Contains(err.Error(), fmt.Sprintf("every run slot of backend kubernetes is taken (%d: the ResourceQuota sandboxes", cores+1)) {
		t.Fatalf("a run past the quota: %v", err)
	}
}

// overHTTP checks what execbox serve says of a kubernetes lane whose
// slots runs all hold: /metrics and /v1/health count them, with the
// quota as their source, and one more run is 429 busy naming the quota.
func overHTTP(t *testing.T, e *engine.Engine, slots int, ns string) {
	t.Helper()
	srv, err := server.New(server.Options{Engine: e})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	get := func(path string) []byte {
		t.Helper()
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s %s", path, resp.Status, body)
		}
		return body
	}
	m := string(get("/metrics"))
	for _, want := range []string{fmt.Sprintf(`execbox_lane_run_slots{lane="kubernetes"} %d`, slots), fmt.Sprintf(`execbox_lane_run_slots_in_use{lane="kubernetes"} %d`, slots)} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	var h v1.Health
	if err := json.Unmarshal(get("/v1/health"), &h); err != nil {
		t.Fatal(err)
	}
	quota := "the ResourceQuota sandboxes of namespace " + ns
	if len(h.Candidates) != 1 || h.Candidates[0].Capacity == nil || *h.Candidates[0].Capacity != (v1.Capacity{Lane: Name, Slots: slots, InUse: slots, Source: h.Candidates[0].Capacity.Source}) ||
		!strings.Contains(h.Candidates[0].Capacity.Source, quota) {
		t.Errorf("/v1/health's candidates: %+v", h.Candidates)
	}
	resp, err := http.Post(hs.URL+"/v1/runs", "application/json", strings.NewReader(`{"command":["true"]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p v1.Problem
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || resp.StatusCode != http.StatusTooManyRequests || p.Code != "busy" || !strings.Contains(p.Detail, quota) {
		t.Errorf("POST /v1/runs past the quota: %s %+v %v", resp.Status, p, err)
	}
}
