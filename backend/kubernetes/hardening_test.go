package kubernetes

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// runtimes are the two ways the suite runs a sandbox Pod here.
var runtimes = []struct {
	name, feature string
	set           func(*Config)
}{
	{"runc", "kubernetes", nil},
	{"gvisor", "kubernetes-gvisor", func(c *Config) { c.RuntimeClass, c.Isolation = "gvisor", "kernel" }},
}

// TestHardened: what a program in a sandbox Pod finds, on each runtime:
// uid and gid 65534, no service account token, a read-only root, no
// capabilities, no_new_privs, a seccomp filter (runc; gVisor filters its
// own kernel), no way out of the Pod's network (the API server, the node,
// the kubernetes Service, the outside), no name server; and the Pod as the
// API server keeps it says so too.
func TestHardened(t *testing.T) {
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) {
			b := newBackend(t, rt.feature, rt.set)
			node := nodeIP(t, b)
			sb := testutil.Create(t, b, sandbox.Spec{})
			check := func(what, script, want string) {
				t.Helper()
				res := testutil.Exec(t, sb, "/bin/sh", "-c", script)
				if res.Reason != sandbox.ReasonExited || strings.TrimSpace(res.Stdout) != want {
					t.Errorf("%s: got %q (exit %d %s), want %q; stderr %q", what, res.Stdout, res.ExitCode, res.Reason, want, res.Stderr)
				}
			}
			check("uid and gid", "id -u; id -g; id -G", "65534\n65534\n65534")
			check("service account token", "ls /var/run/secrets/kubernetes.io 2>&1 | head -1; env | grep -c KUBERNETES_", "ls: cannot access '/var/run/secrets/kubernetes.io': No such file or directory\n0")
			check("read-only root", "for p in /x /etc/x /usr/x /execbox/x; do touch $p 2>/dev/null && echo wrote $p; done; touch /work/x /tmp/x && echo work-and-tmp", "work-and-tmp")
			check("capabilities", "grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status | cut -f2 | sort -u", "0000000000000000")
			check("no_new_privs", "grep NoNewPrivs /proc/self/status | cut -f2", "1")
			if rt.name == "runc" {
				check("seccomp", "grep '^Seccomp:' /proc/self/status | cut -f2", "2")
			}
			// Every connect fails: the NetworkPolicy drops what the Pod
			// sends (a timeout) or nothing listens (refused); neither
			// may connect.
			egress := `import socket, sys
out = []
for host, port in [(sys.argv[1], 6443), (sys.argv[1], 10250), ("10.96.0.1", 443), ("1.1.1.1", 53)]:
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((host, port)); out.append("connected %s:%d" % (host, port))
    except OSError:
        pass
print("\n".join(out) or "none")`
			res := testutil.Exec(t, sb, "python3", "-c", egress, node)
			if strings.TrimSpace(res.Stdout) != "none" {
				t.Errorf("egress: %q %q", res.Stdout, res.Stderr)
			}
			check("name servers", "grep -v '^#' /etc/resolv.conf | grep nameserver", "nameserver 127.0.0.1")

			pod, err := b.cs.CoreV1().Pods(b.ns).Get(context.Background(), "execbox-"+sb.ID(), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s := pod.Spec
			c := s.Containers[0]
			switch {
			case s.AutomountServiceAccountToken == nil || *s.AutomountServiceAccountToken:
				t.Errorf("automountServiceAccountToken = %v", s.AutomountServiceAccountToken)
			case s.HostNetwork || s.HostPID || s.HostIPC:
				t.Errorf("host namespaces: %v %v %v", s.HostNetwork, s.HostPID, s.HostIPC)
			case s.ActiveDeadlineSeconds == nil || *s.ActiveDeadlineSeconds != int64(DefaultMaxAge/time.Second):
				t.Errorf("activeDeadlineSeconds = %v", s.ActiveDeadlineSeconds)
			case c.SecurityContext.RunAsNonRoot == nil || !*c.SecurityContext.RunAsNonRoot,
				c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem,
				c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation:
				t.Errorf("securityContext = %+v", c.SecurityContext)
			case c.Resources.Limits.Memory().Value() != sandbox.Defaults.Memory+sandbox.Defaults.WorkSize+sandbox.Defaults.TmpSize+agentOverhead:
				t.Errorf("memory limit = %v", c.Resources.Limits.Memory())
			case pod.Labels[LabelNetwork] != "none":
				t.Errorf("labels = %v", pod.Labels)
			}
			if rt.name == "gvisor" && (s.RuntimeClassName == nil || *s.RuntimeClassName != "gvisor") {
				t.Errorf("runtimeClassName = %v", s.RuntimeClassName)
			}
		})
	}
}

// TestMemoryBomb: a program that allocates past its memory limit is
// stopped and reported as memory_limit; one that stays under it runs.
func TestMemoryBomb(t *testing.T) {
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) {
			b := newBackend(t, rt.feature, rt.set)
			spec := sandbox.Spec{Limits: sandbox.Limits{Memory: 64 * sandbox.MiB}}
			grow := "b = []\nfor _ in range(%d): b.append(bytearray(1 << 20))\nprint('grew')"
			res := testutil.Py(t, b, spec, strings.ReplaceAll(grow, "%d", "32"))
			testutil.WantOK(t, res)
			res = testutil.Py(t, b, spec, strings.ReplaceAll(grow, "%d", "1024"))
			if res.Reason != sandbox.ReasonMemoryLimit {
				t.Errorf("1 GiB under a 64 MiB limit: want %s, got %s exit %d %q %q", sandbox.ReasonMemoryLimit, res.Reason, res.ExitCode, res.Stdout, testutil.Tail(res.Stderr))
			}
		})
	}
}

// TestCloseDuringExecEndsThePod: Close while a program runs ends the Exec
// (canceled) and deletes the Pod before it returns.
func TestCloseDuringExecEndsThePod(t *testing.T) {
	b := newBackend(t, "kubernetes", nil)
	sb, err := b.Create(context.Background(), sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	name := "execbox-" + sb.ID()
	done := make(chan *sandbox.Result, 1)
	go func() {
		res, _ := sb.Exec(context.Background(), &sandbox.Process{Args: []string{"sleep", "1000"}})
		done <- res
	}()
	time.Sleep(time.Second)
	if err := sb.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.cs.CoreV1().Pods(b.ns).Get(context.Background(), name, metav1.GetOptions{}); err == nil {
		t.Errorf("Pod %s still there after Close", name)
	}
	select {
	case res := <-done:
		if res == nil || res.Reason != sandbox.ReasonCanceled {
			t.Errorf("the Exec Close ended: %+v", res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the Exec did not end after Close")
	}
}

// nodeIP is the address of the node the cluster runs on.
func nodeIP(t *testing.T, b *Backend) string {
	t.Helper()
	nodes, err := b.cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("listing nodes: %v", err)
	}
	for _, a := range nodes.Items[0].Status.Addresses {
		if a.Type == "InternalIP" {
			return a.Address
		}
	}
	t.Fatalf("node %s has no InternalIP", nodes.Items[0].Name)
	return ""
}

// TestEgressProbe: health's egress probe passes on this cluster (its
// NetworkPolicies are enforced), and says the cluster does not enforce
// them once the sandboxes' policy is gone, as on a cluster whose network
// plugin ignores it.
func TestEgressProbe(t *testing.T) {
	b := newBackend(t, "kubernetes", nil)
	ctx := context.Background()
	if err := b.ensurePolicy(ctx); err != nil {
		t.Fatal(err)
	}
	if why := b.egress(ctx); why != "" {
		t.Fatalf("with the NetworkPolicy: %s", why)
	}
	if err := b.cs.NetworkingV1().NetworkPolicies(b.ns).Delete(ctx, policyName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		b.policyMu.Lock()
		b.policyOK = false
		b.policyMu.Unlock()
		if err := b.ensurePolicy(ctx); err != nil {
			t.Error(err)
		}
	}()
	// The enforcer drops the policy's rules a moment after it is gone.
	deadline := time.Now().Add(30 * time.Second)
	for {
		why := b.egress(ctx)
		if strings.Contains(why, "does not enforce NetworkPolicies") {
			t.Log(why)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("without the NetworkPolicy, the probe still says %q", why)
		}
	}
}
