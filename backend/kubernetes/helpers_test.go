package kubernetes

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// The tests run against the cluster $KUBECONFIG names (scripts/k8s.sh up,
// with the images loaded: scripts/test.sh does both), each package run in
// a namespace of its own that is deleted at the end. Without a cluster
// they skip, and fail when EXECBOX_REQUIRE names kubernetes.

// testNS is the package run's namespace; a helper process the tests
// start is given theirs.
var testNS = cmp.Or(os.Getenv("EXECBOX_K8S_TEST_NS"), fmt.Sprintf("execbox-test-%d", os.Getpid()))

func TestMain(m *testing.M) {
	code := testutil.RunKeepingDevNull(m) // the gVisor RuntimeClass's shim starts runsc

	if nsMade && os.Getenv("EXECBOX_K8S_TEST_NS") == "" {
		b := &Backend{cfg: *DefaultConfig()}
		b.cfg.Namespace, b.cfg.Kubeconfig = testNS, os.Getenv("KUBECONFIG")
		if b.connect() == nil {
			b.cs.CoreV1().Namespaces().Delete(context.Background(), testNS, metav1.DeleteOptions{})
		}
	}
	os.Exit(code)
}

var nsMade bool

// newBackend is a backend on the test cluster, in the package's
// namespace, with the images test.sh loaded (never pulled), changed by
// set; feature is what EXECBOX_REQUIRE must name for a missing cluster to
// fail the test.
func newBackend(t testing.TB, feature string, set func(*Config)) *Backend {
	t.Helper()
	if os.Getenv("KUBECONFIG") == "" {
		testutil.SkipOrFail(t, feature, "no cluster: KUBECONFIG is not set (scripts/k8s.sh up, then eval \"$(scripts/k8s.sh env)\")")
	}
	cfg := DefaultConfig()
	cfg.Kubeconfig = os.Getenv("KUBECONFIG")
	cfg.Namespace = testNS
	cfg.PullPolicy = "Never"
	// A fixed pool, as the tests count Pods: TestWarmPodsFollowDemand
	// lets it grow.
	cfg.WarmMax = cfg.Warm
	if set != nil {
		set(cfg)
	}
	b := testutil.MustNew[*Backend](t, func(s sandbox.Settings) (sandbox.Backend, error) { return New(s) },
		sandbox.Settings{Config: cfg, Instance: "kubernetes-test"})
	t.Cleanup(func() { b.Close() })
	if err := b.connect(); err != nil {
		testutil.SkipOrFail(t, feature, "no cluster: %v", err)
	}
	if !nsMade {
		_, err := b.cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			testutil.SkipOrFail(t, feature, "the cluster does not answer: %v", err)
		}
		nsMade = true
		// The namespace's default service account appears a moment after
		// it; a Pod made before is refused.
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := b.cs.CoreV1().ServiceAccounts(testNS).Get(context.Background(), "default", metav1.GetOptions{}); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return b
}

// pods are the backend's Pods in the test namespace.
func pods(t testing.TB, b *Backend) []corev1.Pod {
	t.Helper()
	l, err := b.cs.CoreV1().Pods(b.ns).List(context.Background(), metav1.ListOptions{LabelSelector: LabelBackend + "=" + Name})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}
