package integration

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/testutil"
)

var namespaces atomic.Int64

// kubernetesEnv is the server environment for the kubernetes backend on
// the cluster KUBECONFIG names (scripts/k8s.sh up, with test.sh's images
// loaded, never pulled), in a namespace of the test's own, deleted when it
// ends, and with no warm Pods. Without a cluster the test skips, or fails
// when EXECBOX_REQUIRE names kubernetes.
func kubernetesEnv(t *testing.T) []string {
	t.Helper()
	kc := os.Getenv("KUBECONFIG")
	if kc == "" {
		testutil.SkipOrFail(t, "kubernetes", "no cluster: KUBECONFIG is not set (scripts/k8s.sh up, then eval \"$(scripts/k8s.sh env)\")")
	}
	kubectl := testutil.RequiresBinary(t, "kubernetes", "kubectl")
	ns := fmt.Sprintf("execbox-integration-%d-%d", os.Getpid(), namespaces.Add(1))
	if out, err := exec.Command(kubectl, "create", "namespace", ns).CombinedOutput(); err != nil {
		testutil.SkipOrFail(t, "kubernetes", "the cluster does not answer: kubectl create namespace: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command(kubectl, "delete", "namespace", ns, "--wait=false").Run() })
	// The namespace's default service account appears a moment after it;
	// a Pod made before is refused.
	for deadline := time.Now().Add(30 * time.Second); exec.Command(kubectl, "-n", ns, "get", "serviceaccount", "default").Run() != nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("namespace %s has no default service account after 30 s", ns)
		}
	}
	return []string{"EXECBOX_KUBERNETES_KUBECONFIG=" + kc, "EXECBOX_KUBERNETES_NAMESPACE=" + ns,
		"EXECBOX_KUBERNETES_PULL_POLICY=Never", "EXECBOX_KUBERNETES_WARM=0"}
}

// podsOf lists the Pods in the namespace of a server environment env
// (kubernetesEnv's).
func podsOf(t *testing.T, env []string) []string {
	t.Helper()
	var ns string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "EXECBOX_KUBERNETES_NAMESPACE="); ok {
			ns = v
		}
	}
	if ns == "" {
		t.Fatal("podsOf: the environment names no namespace")
	}
	out, err := exec.Command("kubectl", "-n", ns, "get", "pods", "-o", "name").Output()
	if err != nil {
		t.Fatalf("kubectl get pods: %v", err)
	}
	return strings.Fields(string(out))
}
