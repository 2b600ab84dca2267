package replica

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// podTTL is how long a found Pod's address is reused without asking the
// API server again; maxCached bounds the addresses kept.
const (
	podTTL    = 10 * time.Second
	maxCached = 256
)

// Pods finds a replica as the Pod of its name in the server's own
// namespace. Only a running Pod carrying the selector's labels counts, so
// a session id naming any other Pod is not passed anywhere.
type Pods struct {
	client    kubernetes.Interface
	namespace string
	selector  labels.Selector
	port      int

	mu    sync.Mutex
	found map[string]podAddr
}

type podAddr struct {
	base  string
	until time.Time
}

// NewPods finds replicas through the API server of the cluster execbox
// runs in (its Pod's service account), among the Pods matching selector,
// each reached on port.
func NewPods(selector string, port int) (*Pods, error) {
	sel, err := labels.Parse(selector)
	if err != nil || sel.Empty() {
		return nil, fmt.Errorf("replicas.pods: %q is not a label selector", selector)
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("replicas.pods finds replicas through the cluster execbox runs in: %w", err)
	}
	ns, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return nil, fmt.Errorf("replicas.pods: this Pod's namespace: %w", err)
	}
	cfg.Timeout = 10 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Pods{client: client, namespace: strings.TrimSpace(string(ns)), selector: sel, port: port, found: map[string]podAddr{}}, nil
}

// Find implements Finder.
func (p *Pods) Find(ctx context.Context, name string) (string, error) {
	if !ValidName(name) {
		return "", ErrGone
	}
	p.mu.Lock()
	a, ok := p.found[name]
	p.mu.Unlock()
	if ok && time.Now().Before(a.until) {
		return a.base, nil
	}
	pod, err := p.client.CoreV1().Pods(p.namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", ErrGone
	}
	if err != nil {
		return "", fmt.Errorf("looking up replica %s: %w", name, err)
	}
	// A Pod being deleted still serves its sessions while it drains.
	if !p.selector.Matches(labels.Set(pod.Labels)) || pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
		return "", ErrGone
	}
	base := "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(p.port))
	p.mu.Lock()
	if len(p.found) >= maxCached {
		clear(p.found)
	}
	p.found[name] = podAddr{base, time.Now().Add(podTTL)}
	p.mu.Unlock()
	return base, nil
}
