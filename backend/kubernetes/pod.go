package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/execbox/execbox/internal/host/guest"
	"github.com/execbox/execbox/sandbox"
)

// Labels and annotations of every object the backend makes.
const (
	LabelBackend    = "execbox.dev/backend"  // "kubernetes": what Reconcile looks at
	LabelInstance   = "execbox.dev/instance" // the execbox instance (a hash: label values are short)
	LabelNetwork    = "execbox.dev/network"  // "none": the NetworkPolicy denies it everything
	LabelSession    = "execbox.dev/session"  // Spec.Labels["session"]: which session the Pod serves
	AnnotationOwner = "execbox.dev/owner"    // the owning process (internal/host/owner)
	AnnotationRun   = "execbox.dev/run"      // the sandbox's id
)

// policyName is the NetworkPolicy that isolates the sandbox Pods.
const policyName = "execbox-sandbox-deny-all"

// Where the agent lives in a Pod, and the Pod's fixed sizes.
const (
	agentDir       = "/execbox"
	agentOverhead  = 64 * sandbox.MiB // the agent and the local backend's reaper
	containerName  = "sandbox"
	sandboxUID     = 65534
	deleteDeadline = 60 * time.Second
)

// podSpec is the hardened Pod of a sandbox of spec.
func (b *Backend) podSpec(spec sandbox.Spec, id string) *corev1.Pod {
	l := spec.Limits
	image := b.cfg.Image
	if spec.Image != "" {
		image = spec.Image
	}
	mem := l.Memory + l.WorkSize + l.TmpSize + agentOverhead
	// Memory is reserved whole (it cannot be taken back); CPU is a quota,
	// of which a tenth is reserved: a sandbox mostly waits, and one that
	// reserved whole cores would leave a node full of idle Pods.
	limits := corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI)}
	requests := limits.DeepCopy()
	if l.CPUs > 0 {
		milli := int64(l.CPUs*1000 + 0.5)
		limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(milli, resource.DecimalSI)
		requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(max(milli/10, 10), resource.DecimalSI)
	}
	small := corev1.ResourceList{
		corev1.ResourceMemory: *resource.NewQuantity(agentOverhead, resource.BinarySI),
		corev1.ResourceCPU:    *resource.NewMilliQuantity(100, resource.DecimalSI),
	}
	smallReq := corev1.ResourceList{
		corev1.ResourceMemory: *resource.NewQuantity(agentOverhead, resource.BinarySI),
		corev1.ResourceCPU:    *resource.NewMilliQuantity(10, resource.DecimalSI),
	}
	no, yes := false, true
	uid := int64(sandboxUID)
	hardened := func() *corev1.SecurityContext {
		return &corev1.SecurityContext{
			RunAsUser: &uid, RunAsGroup: &uid, RunAsNonRoot: &yes,
			ReadOnlyRootFilesystem:   &yes,
			AllowPrivilegeEscalation: &no,
			Privileged:               &no,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}
	}
	memDir := func(name string, size int64) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(size, resource.BinarySI)}}}
	}
	deadline := int64(b.cfg.MaxAge / time.Second)
	grace := int64(1)
	labels := map[string]string{LabelBackend: Name, LabelInstance: b.instance, LabelNetwork: "none"}
	if s := spec.Labels["session"]; s != "" && len(s) <= 63 {
		labels[LabelSession] = s
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "execbox-" + id,
			Namespace:   b.ns,
			Labels:      labels,
			Annotations: map[string]string{AnnotationOwner: b.me.String(), AnnotationRun: id},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			ActiveDeadlineSeconds:         &deadline,
			TerminationGracePeriodSeconds: &grace,
			Hostname:                      "sandbox",
			DNSPolicy:                     corev1.DNSNone,
			// No name server that answers: the Pod has no network anyway.
			DNSConfig: &corev1.PodDNSConfig{Nameservers: []string{"127.0.0.1"}},
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser: &uid, RunAsGroup: &uid, RunAsNonRoot: &yes, FSGroup: &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			InitContainers: []corev1.Container{{
				Name:            "agent",
				Image:           b.cfg.AgentImage,
				ImagePullPolicy: corev1.PullPolicy(b.cfg.PullPolicy),
				Command:         []string{"/execbox-guest", "install", agentDir},
				VolumeMounts:    []corev1.VolumeMount{{Name: "agent", MountPath: agentDir}},
				SecurityContext: hardened(),
				Resources:       corev1.ResourceRequirements{Limits: small, Requests: smallReq},
			}},
			Containers: []corev1.Container{{
				Name:            containerName,
				Image:           image,
				ImagePullPolicy: corev1.PullPolicy(b.cfg.PullPolicy),
				Command:         []string{agentDir + "/execbox-guest", "pod"},
				WorkingDir:      "/work",
				Stdin:           true,
				StdinOnce:       true,
				VolumeMounts: []corev1.VolumeMount{
					{Name: "agent", MountPath: agentDir, ReadOnly: true},
					{Name: "work", MountPath: "/work"},
					{Name: "tmp", MountPath: "/tmp"},
				},
				SecurityContext: hardened(),
				Resources:       corev1.ResourceRequirements{Limits: limits, Requests: requests},
			}},
			Volumes: []corev1.Volume{memDir("agent", 64*sandbox.MiB), memDir("work", l.WorkSize), memDir("tmp", l.TmpSize)},
		},
	}
	if b.cfg.RuntimeClass != "" {
		rc := b.cfg.RuntimeClass
		pod.Spec.RuntimeClassName = &rc
	}
	return pod
}

// ensurePolicy makes the namespace's deny-all NetworkPolicy for the
// sandbox Pods once; without it a Pod would have the cluster's network.
func (b *Backend) ensurePolicy(ctx context.Context) error {
	b.policyMu.Lock()
	defer b.policyMu.Unlock()
	if b.policyOK {
		return nil
	}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName, Namespace: b.ns, Labels: map[string]string{LabelBackend: Name}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelNetwork: "none"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
	_, err := b.cs.NetworkingV1().NetworkPolicies(b.ns).Create(ctx, np, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return b.wrap(err, "making the NetworkPolicy "+policyName)
	}
	b.policyOK = true
	return nil
}

// pod is a running sandbox Pod with the channel to its agent.
type pod struct {
	b      *Backend
	name   string
	conn   *pipeConn
	client *guest.Client
	stream chan error // the attach's end

	once    sync.Once
	killErr error
}

// start makes the Pod, waits until its sandbox container runs, attaches
// and waits for the agent's hello.
func (b *Backend) start(ctx context.Context, spec sandbox.Spec, id string) (_ *pod, err error) {
	if err := b.ensurePolicy(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.StartTimeout)
	defer cancel()
	want := b.podSpec(spec, id)
	created, err := b.cs.CoreV1().Pods(b.ns).Create(ctx, want, metav1.CreateOptions{})
	if err != nil {
		return nil, b.wrap(err, "creating a sandbox Pod")
	}
	p := &pod{b: b, name: created.Name, stream: make(chan error, 1)}
	defer func() {
		if err != nil {
			p.kill()
		}
	}()
	if err := b.waitRunning(ctx, p.name); err != nil {
		return nil, err
	}
	p.conn = newPipeConn()
	attach := b.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(b.ns).Name(p.name).SubResource("attach").
		VersionedParams(&corev1.PodAttachOptions{Container: containerName, Stdin: true, Stdout: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(b.rest, "GET", attach.URL().String())
	if err != nil {
		return nil, b.wrap(err, "attaching to Pod "+p.name)
	}
	spdy, err := remotecommand.NewSPDYExecutor(b.rest, "POST", attach.URL())
	if err != nil {
		return nil, b.wrap(err, "attaching to Pod "+p.name)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return nil, b.wrap(err, "attaching to Pod "+p.name)
	}
	go func() {
		err := ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdin: p.conn.stdinR, Stdout: p.conn.stdoutW})
		p.conn.stdoutW.CloseWithError(errors.Join(err, io.EOF))
		p.stream <- err
	}()
	hello := time.AfterFunc(time.Until(deadlineOf(ctx)), func() { p.conn.Close() })
	defer hello.Stop()
	p.client, err = guest.Attach(p.conn)
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrUnavailable, "pod_failed", "Pod %s: %v", p.name, p.attachErr(err))
	}
	return p, nil
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// attachErr is the attach's own error when it ended, else err.
func (p *pod) attachErr(err error) error {
	select {
	case e := <-p.stream:
		p.stream <- e
		if e != nil {
			return e
		}
	default:
	}
	return err
}

// waitRunning watches the Pod until its sandbox container runs; a Pod
// that ends, or a container that cannot start (an image missing), fails.
func (b *Backend) waitRunning(ctx context.Context, name string) error {
	w, err := b.cs.CoreV1().Pods(b.ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return b.wrap(err, "watching Pod "+name)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return sandbox.Errorf(sandbox.ErrUnavailable, "pod_start_timeout", "Pod %s did not start within kubernetes.start_timeout (%v)", name, b.cfg.StartTimeout)
		case ev, ok := <-w.ResultChan():
			if !ok {
				return b.waitRunning(ctx, name)
			}
			pd, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if pd.Status.Phase == corev1.PodSucceeded || pd.Status.Phase == corev1.PodFailed {
				return sandbox.Errorf(sandbox.ErrUnavailable, "pod_failed", "Pod %s ended before it served: %s %s", name, pd.Status.Reason, pd.Status.Message)
			}
			for _, cs := range append(pd.Status.InitContainerStatuses, pd.Status.ContainerStatuses...) {
				if w := cs.State.Waiting; w != nil {
					switch w.Reason {
					case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
						return sandbox.Errorf(sandbox.ErrUnavailable, "pod_failed", "Pod %s: container %s: %s: %s", name, cs.Name, w.Reason, w.Message)
					}
				}
				if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
					return sandbox.Errorf(sandbox.ErrUnavailable, "pod_failed", "Pod %s: container %s exited %d: %s %s", name, cs.Name, t.ExitCode, t.Reason, t.Message)
				}
				if cs.Name == containerName && cs.State.Running != nil {
					return nil
				}
			}
		}
	}
}

// kill hangs up; the agent then ends the sandbox and exits, which ends
// the attach (the container's output closes): nothing of the sandbox runs
// any more, and the Pod is deleted without waiting for the kubelet to tidy
// up after it (its process is gone, and an ended Pod that is left is
// Reconcile's). An agent that does not end in time has its Pod deleted
// and waited for until the API server no longer has it (the kubelet has
// then killed every container of it).
func (p *pod) kill() error {
	p.once.Do(func() {
		if p.conn != nil {
			p.conn.stdinW.Close()
			ended := p.client != nil && p.attachEnded(endWait)
			if p.client != nil {
				p.client.Close()
			}
			p.conn.Close()
			if ended {
				zero := int64(0)
				ctx, cancel := context.WithTimeout(context.Background(), deleteDeadline)
				defer cancel()
				err := p.b.cs.CoreV1().Pods(p.b.ns).Delete(ctx, p.name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
				if err == nil || apierrors.IsNotFound(err) {
					return
				}
			}
		}
		p.killErr = p.b.deletePod(p.name)
	})
	return p.killErr
}

// attachEnded waits up to d for the attach to end.
func (p *pod) attachEnded(d time.Duration) bool {
	select {
	case e := <-p.stream:
		p.stream <- e
		return true
	case <-time.After(d):
		return false
	}
}

// ended reports whether the attach has ended (the agent is gone).
func (p *pod) ended() bool {
	select {
	case e := <-p.stream:
		p.stream <- e
		return true
	default:
		return false
	}
}

// endWait is how long an agent that was hung up on has to end by itself.
const endWait = 10 * time.Second

// deletePod deletes Pod name and waits for it to be gone.
func (b *Backend) deletePod(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), deleteDeadline)
	defer cancel()
	grace := int64(1)
	err := b.cs.CoreV1().Pods(b.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return b.wrap(err, "deleting Pod "+name)
	}
	for {
		_, err := b.cs.CoreV1().Pods(b.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("Pod %s still there %v after its deletion", name, deleteDeadline)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// lost is how the Pod ended when the channel to its agent broke under an
// Exec: killed at its memory limit (under gVisor the OOM killer takes the
// whole sandbox) is memory_limit; anything else is left to the error.
func (p *pod) lost() *sandbox.Result {
	ctx, cancel := context.WithTimeout(context.Background(), endWait)
	defer cancel()
	for ctx.Err() == nil {
		pd, err := p.b.cs.CoreV1().Pods(p.b.ns).Get(ctx, p.name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		for _, cs := range pd.Status.ContainerStatuses {
			if t := cs.State.Terminated; cs.Name == containerName && t != nil {
				if t.Reason == "OOMKilled" {
					return &sandbox.Result{Reason: sandbox.ReasonMemoryLimit, ExitCode: -1, Signal: "SIGKILL",
						Message: "the Pod was killed at its memory limit (OOMKilled); the sandbox is gone"}
				}
				return nil
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// pipeConn is the attach's stdin and stdout as the net.Conn HTTP/2 runs
// over.
type pipeConn struct {
	stdinR  *io.PipeReader
	stdinW  *io.PipeWriter
	stdoutR *io.PipeReader
	stdoutW *io.PipeWriter
}

func newPipeConn() *pipeConn {
	c := &pipeConn{}
	c.stdinR, c.stdinW = io.Pipe()
	c.stdoutR, c.stdoutW = io.Pipe()
	return c
}

func (c *pipeConn) Read(p []byte) (int, error)  { return c.stdoutR.Read(p) }
func (c *pipeConn) Write(p []byte) (int, error) { return c.stdinW.Write(p) }
func (c *pipeConn) Close() error {
	c.stdinW.Close()
	c.stdoutR.Close()
	return nil
}
func (c *pipeConn) LocalAddr() net.Addr              { return &net.UnixAddr{Name: "execbox", Net: "unix"} }
func (c *pipeConn) RemoteAddr() net.Addr             { return &net.UnixAddr{Name: "pod", Net: "unix"} }
func (c *pipeConn) SetDeadline(time.Time) error      { return nil }
func (c *pipeConn) SetReadDeadline(time.Time) error  { return nil }
func (c *pipeConn) SetWriteDeadline(time.Time) error { return nil }

// imagePATH is PATH in a sandbox Pod: the host's would name the host's
// directories, not the image's.
const imagePATH = "/usr/local/bin:/usr/bin:/bin"

// hostEnv is what a sandbox's policy lets through of execbox's own
// environment (the agent has none of its own to take it from), with the
// image's PATH.
func hostEnv(spec sandbox.Spec) []string {
	env := []string{"PATH=" + imagePATH}
	for _, kv := range sandbox.BuildEnv(os.Environ(), spec.Policy, nil) {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	return env
}
