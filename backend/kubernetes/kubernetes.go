package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/execbox/execbox/backend/internal/warm"
	"github.com/execbox/execbox/internal/host/guest"
	"github.com/execbox/execbox/internal/host/owner"
	"github.com/execbox/execbox/sandbox"
)

// Name is the registered name of this backend.
const Name = "kubernetes"

// answerGrace is how long past a process's wall limit (or a cancel) the
// agent has to answer before its Pod is deleted.
const answerGrace = 20 * time.Second

// enforcement says how each limit is enforced in a Pod.
var enforcement = map[string]string{
	"memory":    "the Pod's memory limit (cgroup): memory + work_size + tmp_size (memory-backed emptyDirs) + 64 MiB for the agent",
	"cpus":      "the Pod's CPU limit (CFS quota)",
	"pids":      "not enforced per sandbox (a Pod has no pids field: set the kubelet's podPidsLimit, which bounds every Pod of the node)",
	"cpu_time":  "RLIMIT_CPU",
	"file_size": "RLIMIT_FSIZE",
	"nofile":    "RLIMIT_NOFILE",
	"work_size": "memory-backed emptyDir sizeLimit",
	"tmp_size":  "memory-backed emptyDir sizeLimit",
	"wall":      "execbox's timer, the Pod's activeDeadlineSeconds as the backstop",
}

// Backend makes a Pod per sandbox. It is safe for concurrent use.
type Backend struct {
	cfg      Config
	defaults sandbox.Limits
	instance string // LabelInstance's value
	me       owner.Owner

	initOnce sync.Once
	initErr  error
	rest     *rest.Config
	cs       kubernetes.Interface
	ns       string

	policyMu sync.Mutex
	policyOK bool

	healthMu sync.Mutex
	health   sandbox.Health // the last probe's, kept for healthTTL

	reconciled sync.Once

	pool *warm.Pool[shape, warmPod]
}

// New returns the kubernetes backend for settings s. It only records the
// settings; the cluster is contacted on first use.
var New = sandbox.Define(Name, DefaultConfig, func(cfg Config, s sandbox.Settings) (sandbox.Backend, error) {
	sum := sha256.Sum256([]byte(s.Instance))
	b := &Backend{cfg: cfg, defaults: s.DefaultLimits(), instance: hex.EncodeToString(sum[:8]), me: owner.Self()}
	b.pool = warm.New[shape](cfg.warmSizing(), warmPod.alive, warmPod.kill)
	return b, nil
})

// Close deletes the warm Pods.
func (b *Backend) Close() error {
	b.pool.Close()
	return nil
}

func (b *Backend) Name() string { return Name }

func (b *Backend) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Isolation: b.cfg.isolation(), Sessions: true, Images: true, Remote: true,
		Networks: []sandbox.Network{sandbox.NetworkNone}, Limits: maps.Clone(enforcement)}
}

// connect builds the client once, from kubernetes.kubeconfig or, with
// kubernetes.in_cluster, the Pod's service account.
func (b *Backend) connect() error {
	b.initOnce.Do(func() {
		var cfg *rest.Config
		var err error
		ns := b.cfg.Namespace
		switch {
		case b.cfg.InCluster:
			cfg, err = rest.InClusterConfig()
			if err == nil && ns == "" {
				if n, rerr := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); rerr == nil {
					ns = strings.TrimSpace(string(n))
				}
			}
		case b.cfg.Kubeconfig != "":
			rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: b.cfg.Kubeconfig}
			cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
			cfg, err = cc.ClientConfig()
			if err == nil && ns == "" {
				ns, _, _ = cc.Namespace()
			}
		default:
			b.initErr = sandbox.Errorf(sandbox.ErrUnavailable, "not_configured", "no cluster configured: set kubernetes.kubeconfig, or kubernetes.in_cluster when execbox runs in the cluster")
			return
		}
		if err != nil {
			b.initErr = sandbox.Errorf(sandbox.ErrUnavailable, "cluster_unavailable", "reaching the Kubernetes cluster: %v", err)
			return
		}
		if ns == "" {
			ns = "default"
		}
		cfg.UserAgent = "execbox"
		b.rest, b.ns = cfg, ns
		b.cs, b.initErr = kubernetes.NewForConfig(cfg)
	})
	return b.initErr
}

// wrap types a client-go error: the cluster down or refusing is
// ErrUnavailable naming what was being done.
func (b *Backend) wrap(err error, doing string) error {
	var se *sandbox.Error
	if errors.As(err, &se) {
		return err
	}
	code := "cluster_unavailable"
	switch {
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		code = "cluster_denied"
	case apierrors.IsInvalid(err):
		return sandbox.Errorf(sandbox.ErrInvalid, "pod_invalid", "%s: %v", doing, err)
	}
	return sandbox.Errorf(sandbox.ErrUnavailable, code, "%s (namespace %s): %v", doing, b.ns, err)
}

// Create makes the sandbox's Pod and sets the sandbox up in it.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	spec.Limits = spec.Limits.WithDefaults(b.defaults)
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if spec.Policy.Network != sandbox.NetworkNone {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "network_unsupported", "the kubernetes backend gives a sandbox no network (network %s)", spec.Policy.Network)
	}
	if len(spec.Policy.Mounts) > 0 {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "mount_invalid", "mount %s: a sandbox Pod has no host paths", spec.Policy.Mounts[0].Source)
	}
	if spec.Policy.RunAsUser != "" {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "run_as_user_unsupported", "a sandbox Pod runs as uid %d; run_as_user is the local backend's", sandboxUID)
	}
	if err := b.connect(); err != nil {
		return nil, err
	}
	b.reconciled.Do(func() { b.Reconcile(ctx) })
	sh, warmable := shapeOf(spec)
	// A health probe's Pod is its own: it takes no warm Pod a call would
	// have found and has none started after it.
	warmable = warmable && !sandbox.IsProbing(ctx)
	w, ok := warmPod{}, false
	if warmable {
		w, ok = b.pool.Take(sh)
	}
	if !ok {
		w.id = sandbox.NewID()
		p, err := b.start(ctx, spec, w.id)
		if err != nil {
			return nil, err
		}
		w.p = p
	}
	if warmable {
		b.pool.Refill(sh, b.startWarm(spec))
	}
	id, p := w.id, w.p
	// No RLIMIT_NPROC inside: under runc every process of uid 65534 on
	// the node counts against it, other Pods' too.
	inner := spec
	inner.Files = nil
	inner.Limits.Pids = sandbox.MaxPids
	// No RLIMIT_DATA either: the Pod's memory limit is the bound, and the
	// OOM killer's work is reported as memory_limit.
	inner.Limits.Memory = sandbox.MaxBytes
	if err := p.client.Setup(ctx, guest.Setup{Spec: inner, Files: spec.Files, HostEnv: hostEnv(spec)}); err != nil {
		p.kill()
		return nil, err
	}
	spec.Files = nil
	return guest.NewSandbox(id, &guest.Sandbox{
		Client: p.client, Spec: spec, Backend: Name, Machine: "Pod", Isolation: b.cfg.isolation(),
		Enforcement: maps.Clone(enforcement), Grace: answerGrace, Kill: p.kill, Lost: p.lost,
	}), nil
}

// healthTTL is how long a probe's answer is reused: a probe makes two
// Pods, and a server asks every backend every 30 s.
const healthTTL = 5 * time.Minute

// Health makes a Pod for real, runs the smoke check every backend passes
// in it and deletes it, then checks that a sandbox Pod cannot reach its
// node (egress). The answer is reused for healthTTL.
func (b *Backend) Health(ctx context.Context) sandbox.Health {
	b.healthMu.Lock()
	defer b.healthMu.Unlock()
	if !b.health.CheckedAt.IsZero() && time.Since(b.health.CheckedAt) < healthTTL {
		return b.health
	}
	h := b.probe(ctx)
	if h.Details["api_server"] != "" && ctx.Err() == nil {
		b.health = h // a cluster was reached: worth keeping
	}
	return h
}

func (b *Backend) probe(ctx context.Context) sandbox.Health {
	h := sandbox.Health{CheckedAt: time.Now(), Details: map[string]string{
		"image": b.cfg.Image, "agent_image": b.cfg.AgentImage, "isolation": b.cfg.isolation().String(),
	}}
	if b.cfg.RuntimeClass != "" {
		h.Details["runtime_class"] = b.cfg.RuntimeClass
	}
	if err := b.connect(); err != nil {
		h.Reason = err.Error()
		return h
	}
	h.Details["api_server"], h.Details["namespace"] = b.rest.Host, b.ns
	ctx, cancel := context.WithTimeout(ctx, b.cfg.StartTimeout+time.Minute)
	defer cancel()
	v, err := b.cs.Discovery().ServerVersion()
	if err != nil {
		h.Reason = b.wrap(err, "asking the API server its version").Error()
		return h
	}
	h.Details["server_version"] = v.GitVersion
	if b.cfg.RuntimeClass != "" {
		if _, err := b.cs.NodeV1().RuntimeClasses().Get(ctx, b.cfg.RuntimeClass, metav1.GetOptions{}); err != nil {
			h.Reason = b.wrap(err, "looking up RuntimeClass "+b.cfg.RuntimeClass).Error()
			return h
		}
	}
	start := time.Now()
	spec := sandbox.Spec{Limits: b.defaults}
	ok, reason := sandbox.Smoke(sandbox.Probing(ctx), b, spec)
	h.Available = ok || !strings.HasPrefix(reason, "smoke check could not run")
	if !ok {
		h.Reason = reason
		return h
	}
	took := time.Since(start)
	if why := b.egress(ctx); why != "" {
		h.Reason = why
		return h
	}
	h.Ready = true
	h.Reason = fmt.Sprintf("a sandbox Pod started, passed the smoke check and was deleted in %v; a sandbox Pod cannot reach its node (NetworkPolicy enforced)", took.Round(time.Millisecond))
	return h
}

// egress says why the cluster is not fit for sandboxes when a sandbox Pod
// can open a connection to its node's kubelet (port 10250, which every
// node serves): the NetworkPolicy that denies them everything is not
// enforced (the network plugin ignores NetworkPolicies), and a sandbox
// would have the cluster's network. "" when it cannot.
func (b *Backend) egress(ctx context.Context) string {
	sb, err := b.Create(ctx, sandbox.Spec{Limits: b.defaults})
	if err != nil {
		return "the egress probe could not start: " + err.Error()
	}
	defer sb.Close(context.Background())
	pd, err := b.cs.CoreV1().Pods(b.ns).Get(ctx, "execbox-"+sb.ID(), metav1.GetOptions{})
	if err != nil || pd.Status.HostIP == "" {
		return fmt.Sprintf("the egress probe found no node address for its Pod: %v", err)
	}
	addr := net.JoinHostPort(pd.Status.HostIP, "10250")
	res, err := sb.Exec(ctx, &sandbox.Process{Args: []string{agentDir + "/execbox-guest", "dial", addr}})
	switch {
	case err != nil:
		return "the egress probe could not run: " + err.Error()
	case res.Reason == sandbox.ReasonExited && res.ExitCode == 1:
		return ""
	case res.Reason == sandbox.ReasonExited && res.ExitCode == 0:
		return fmt.Sprintf("a sandbox Pod connected to its node's kubelet at %s despite NetworkPolicy %s/%s: this cluster's network plugin does not enforce NetworkPolicies, so sandboxes would have its network (use one that does: Calico, Cilium, kube-router, …)", addr, b.ns, policyName)
	}
	return fmt.Sprintf("the egress probe ended %s (exit %d): %s", res.Reason, res.ExitCode, strings.TrimSpace(res.Stdout+res.Stderr))
}

// Reconcile deletes the backend's Pods that nobody wants any more: ended
// ones (a sandbox whose execbox died ends by itself), those whose owner on
// this machine is dead, and those past their deadline that the kubelet
// has not ended yet. Pods of live owners are left alone.
func (b *Backend) Reconcile(ctx context.Context) ([]string, error) {
	if !b.cfg.InCluster && b.cfg.Kubeconfig == "" {
		return nil, nil // not configured: it never made anything
	}
	if err := b.connect(); err != nil {
		return nil, err
	}
	list, err := b.cs.CoreV1().Pods(b.ns).List(ctx, metav1.ListOptions{LabelSelector: LabelBackend + "=" + Name})
	if err != nil {
		return nil, b.wrap(err, "listing sandbox Pods")
	}
	var removed []string
	var errs []error
	for _, p := range list.Items {
		if !b.orphan(&p) {
			continue
		}
		if err := b.deletePod(p.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, "pod "+b.ns+"/"+p.Name)
	}
	return removed, errors.Join(errs...)
}

func (b *Backend) orphan(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	switch p.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return true
	}
	if o, ok := owner.Parse(p.Annotations[AnnotationOwner]); ok && o.Dead(b.me) {
		return true
	}
	if d := p.Spec.ActiveDeadlineSeconds; d != nil && p.Status.StartTime != nil &&
		time.Since(p.Status.StartTime.Time) > time.Duration(*d)*time.Second+time.Minute {
		return true
	}
	return false
}

// Interface guards.
var (
	_ sandbox.Backend    = (*Backend)(nil)
	_ sandbox.Reconciler = (*Backend)(nil)
	_ sandbox.Capacitor  = (*Backend)(nil)
)
