package deploy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/testutil"
)

// TestKubernetesManifests applies deploy/kubernetes/base to the cluster
// $KUBECONFIG names (scripts/k8s.sh up; test.sh loads the images
// execbox:latest, execbox-python:latest and execbox-agent:latest into it)
// as an operator would, through an overlay that only keeps images from
// being pulled: the server becomes ready, runs a function through its
// Service in a sandbox Pod, scales to two replicas, and a session keeps
// its files across requests sent to either replica or the Service (the
// replicas find each other's Pods through the API). Everything it made is
// deleted at the end.
func TestKubernetesManifests(t *testing.T) {
	if os.Getenv("KUBECONFIG") == "" {
		testutil.SkipOrFail(t, "kubernetes", "no cluster: KUBECONFIG is not set (scripts/k8s.sh up)")
	}
	kubectl := testutil.RequiresBinary(t, "kubernetes", "kubectl")
	k := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(kubectl, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	base, err := filepath.Abs("kubernetes/base")
	if err != nil {
		t.Fatal(err)
	}
	overlay := t.TempDir()
	rel, err := filepath.Rel(overlay, base) // kustomize takes no absolute root
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(overlay, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("kustomization.yaml", `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- `+rel+`
patches:
- target: {kind: Deployment, name: execbox}
  patch: |
    - op: add
      path: /spec/template/spec/containers/0/imagePullPolicy
      value: Never
- target: {kind: ConfigMap, name: execbox-config}
  patch: |
    - op: replace
      path: /data/execbox.yaml
      value: |
`+indent(strings.Replace(configOf(t, base), "agent_image: execbox-agent:latest", "agent_image: execbox-agent:latest\n  pull_policy: Never", 1), "        ")+`
`)
	token := make([]byte, 16)
	rand.Read(token)
	secret := hex.EncodeToString(token)

	// Everything goes at the end, namespaces (and the Secret) included,
	// however far the test got.
	t.Cleanup(func() {
		exec.Command(kubectl, "delete", "-k", overlay, "--ignore-not-found", "--wait=true", "--timeout=120s").Run()
	})
	k("apply", "-f", filepath.Join(base, "namespaces.yaml"))
	apply := exec.Command(kubectl, "apply", "-f", "-")
	apply.Stdin = strings.NewReader("apiVersion: v1\nkind: Secret\nmetadata: {name: execbox-token, namespace: execbox}\nstringData: {token: " + secret + "}\n")
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("the token Secret: %v\n%s", err, out)
	}
	k("apply", "-k", overlay)
	rollout := func() {
		t.Helper()
		out, err := exec.Command(kubectl, "-n", "execbox", "rollout", "status", "deployment/execbox", "--timeout=120s").CombinedOutput()
		if err != nil {
			pods, _ := exec.Command(kubectl, "-n", "execbox", "describe", "pods").CombinedOutput()
			logs, _ := exec.Command(kubectl, "-n", "execbox", "logs", "deployment/execbox", "--tail=30").CombinedOutput()
			t.Fatalf("the server did not become ready: %v\n%s\n%s\n%s", err, out, testutil.Tail(string(pods)), logs)
		}
	}
	rollout()

	ip := k("-n", "execbox", "get", "service", "execbox", "-o", "jsonpath={.spec.clusterIP}")
	c, err := client.New("http://"+ip, client.WithToken(secret))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The Service answers once kube-proxy programmed its endpoints.
	for deadline := time.Now().Add(120 * time.Second); ; {
		err := c.Ready(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			// What kube-proxy made of the Service, and its endpoints.
			rules, _ := exec.Command("sh", "-c", "iptables-save -t nat | grep -F "+ip).CombinedOutput()
			eps, _ := exec.Command(kubectl, "-n", "execbox", "get", "endpointslices", "-o", "wide").CombinedOutput()
			t.Fatalf("the Service at %s is not ready: %v\nkube-proxy's rules:\n%s\n%s", ip, err, rules, eps)
		}
		time.Sleep(500 * time.Millisecond)
	}
	fn := func() {
		t.Helper()
		res, err := c.Execute(ctx, &v1.FunctionRequest{Code: "def main(a, b):\n    return a + b", Params: []byte(`{"a": 2, "b": 40}`)})
		if err != nil {
			t.Fatalf("a function through the Service: %v", err)
		}
		if !res.OK || string(res.Data) != "42" || res.Backend != "kubernetes" {
			t.Fatalf("a function through the Service: %+v", res)
		}
	}
	fn()
	// The server's Role reads the sandboxes' ResourceQuota: it sizes the
	// kubernetes lane, not the server Pod's cores.
	h, err := c.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(h.Candidates, func(b v1.Backend) bool { return b.Name == "kubernetes" })
	if i < 0 || h.Candidates[i].Capacity == nil || h.Candidates[i].Capacity.Lane != "kubernetes" ||
		!strings.Contains(h.Candidates[i].Capacity.Source, "the ResourceQuota sandboxes of namespace execbox-sandboxes") {
		t.Fatalf("the deployed server's kubernetes backend (%d): %+v", i, h.Candidates)
	}
	t.Logf("the deployed server's kubernetes capacity: %+v", *h.Candidates[i].Capacity)

	k("-n", "execbox", "scale", "deployment/execbox", "--replicas=2")
	rollout()
	if n := k("-n", "execbox", "get", "deployment", "execbox", "-o", "jsonpath={.status.readyReplicas}"); n != "2" {
		t.Fatalf("ready replicas: %s, want 2", n)
	}
	// Each replica, straight at its Pod's address, and the Service (no
	// client affinity): the session's id names the Pod that holds it, and
	// the other replica passes its requests there.
	names := strings.Fields(k("-n", "execbox", "get", "pods", "-l", "app.kubernetes.io/name=execbox", "-o", "jsonpath={.items[*].metadata.name}"))
	ips := strings.Fields(k("-n", "execbox", "get", "pods", "-l", "app.kubernetes.io/name=execbox", "-o", "jsonpath={.items[*].status.podIP}"))
	if len(names) != 2 || len(ips) != 2 {
		t.Fatalf("server Pods %q at %q, want 2", names, ips)
	}
	clients := []*client.Client{c}
	for _, ip := range ips {
		pc, err := client.New("http://"+ip+":8080", client.WithToken(secret))
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, pc)
	}
	s, err := c.CreateSession(ctx, &v1.SessionRequest{})
	if err != nil {
		t.Fatalf("creating a session: %v", err)
	}
	if owner, _, _ := strings.Cut(s.ID, "."); owner != names[0] && owner != names[1] {
		t.Fatalf("session id %q names neither server Pod %q", s.ID, names)
	}
	for i := range 6 {
		res, err := clients[i%3].Exec(ctx, s.ID, &v1.SessionExec{Command: []string{"sh", "-c", "echo x >> kept; wc -l < kept"}})
		if err != nil {
			t.Fatalf("exec %d in session %s: %v", i+1, s.ID, err)
		}
		if got := strings.TrimSpace(res.Stdout); got != strconv.Itoa(i+1) {
			t.Fatalf("exec %d in session %s: the file has %q lines, want %d: %+v", i+1, s.ID, got, i+1, res)
		}
		fn()
	}
	if err := c.CloseSession(ctx, s.ID); err != nil {
		t.Errorf("closing the session: %v", err)
	}

	// An id naming a Pod that is not a replica (no server labels) is
	// passed nowhere: 404, not a request to that Pod (which would be 503).
	k("-n", "execbox", "run", "decoy", "--image=execbox-python:latest", "--image-pull-policy=Never", "--restart=Never", "--command", "--", "sleep", "600")
	k("-n", "execbox", "wait", "pod/decoy", "--for=condition=Ready", "--timeout=120s")
	for _, id := range []string{"decoy.0123456789abcdef", "execbox-gone.0123456789abcdef"} {
		_, err := clients[1].Session(ctx, id)
		var p *v1.Problem
		if !errors.As(err, &p) || p.Status != http.StatusNotFound || p.Code != "session_not_found" {
			t.Fatalf("session %s: %v, want 404 session_not_found", id, err)
		}
	}
}

// configOf is the execbox.yaml of the base's ConfigMap.
func configOf(t *testing.T, base string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(base, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(b), "execbox.yaml: |\n")
	if !ok {
		t.Fatal("config.yaml has no execbox.yaml")
	}
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		lines = append(lines, strings.TrimPrefix(l, "    "))
	}
	return strings.Join(lines, "\n")
}

func indent(s, by string) string {
	return by + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+by)
}
