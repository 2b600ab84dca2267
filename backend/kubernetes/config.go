package kubernetes

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/execbox/execbox/backend/internal/warm"
	"github.com/execbox/execbox/sandbox"
)

// Config is the backend's configuration section (kubernetes.*).
type Config struct {
	// Kubeconfig is the kubeconfig file to reach the cluster with (its
	// current context).
	Kubeconfig string `yaml:"kubeconfig"`
	// InCluster reaches the cluster execbox runs in with its Pod's own
	// service account. Without it or Kubeconfig the backend is not
	// configured, and unavailable: it never makes Pods in a cluster it
	// was not pointed at.
	InCluster bool `yaml:"in_cluster"`
	// Namespace is where sandbox Pods are made; empty means the
	// namespace execbox's own Pod runs in, else "default".
	Namespace string `yaml:"namespace"`
	// Image is the default sandbox image; a Spec.Image overrides it. The
	// nodes must have it or be able to pull it.
	Image string `yaml:"image"`
	// AgentImage holds execbox-guest at /execbox-guest (a static binary,
	// nothing else is needed); an init container copies it into the Pod.
	AgentImage string `yaml:"agent_image"`
	// PullPolicy is the Pods' imagePullPolicy: IfNotPresent, Always or
	// Never.
	PullPolicy string `yaml:"pull_policy"`
	// RuntimeClass is the Pods' runtimeClassName (gvisor, kata, …); empty
	// means the cluster's default runtime (runc).
	RuntimeClass string `yaml:"runtime_class"`
	// Isolation is the level RuntimeClass gives: process (runc), kernel
	// (gVisor) or vm (Kata). It is what the backend reports, so it must
	// be true of the cluster; empty means process without a
	// RuntimeClass, and is an error with one.
	Isolation string `yaml:"isolation"`
	// StartTimeout bounds a Pod's way from creation to its agent's hello
	// (scheduling, image, init container).
	StartTimeout time.Duration `yaml:"start_timeout"`
	// MaxAge is every sandbox Pod's activeDeadlineSeconds: the kubelet
	// ends a Pod this old whatever execbox does.
	MaxAge time.Duration `yaml:"max_age"`
	// Warm is how many started Pods (the agent attached and waiting) are
	// kept at least per sandbox shape (image and limits), for the two
	// shapes used last, so that Create does not wait for scheduling and
	// container starts. Each serves one sandbox, then goes.
	Warm int `yaml:"warm"`
	// WarmMax is how many a shape keeps at most when its arrivals need
	// more: enough to serve the arrivals of the time a Pod takes to
	// start (backend/internal/warm). At or below Warm the pool is Warm
	// always; 0 and 0 keep none.
	WarmMax int `yaml:"warm_max"`
}

// warmSizing is the pool's floor and ceiling.
func (c *Config) warmSizing() warm.Sizing {
	return warm.Sizing{Min: c.Warm, Max: max(c.Warm, c.WarmMax)}
}

// Defaults of a zero Config.
const (
	DefaultImage        = "execbox-python:latest"
	DefaultAgentImage   = "execbox-agent:latest"
	DefaultStartTimeout = 2 * time.Minute
	DefaultMaxAge       = 24 * time.Hour
)

// DefaultConfig is the kubernetes section's built-in value.
func DefaultConfig() *Config {
	return &Config{Image: DefaultImage, AgentImage: DefaultAgentImage, PullPolicy: "IfNotPresent",
		StartTimeout: DefaultStartTimeout, MaxAge: DefaultMaxAge, Warm: 1, WarmMax: 8}
}

// Validate names the key at fault.
func (c *Config) Validate() error {
	switch {
	case c.Kubeconfig != "" && !filepath.IsAbs(c.Kubeconfig):
		return fmt.Errorf("kubernetes.kubeconfig: %q is not an absolute path", c.Kubeconfig)
	case c.Kubeconfig != "" && c.InCluster:
		return errors.New("kubernetes.in_cluster: set it or kubernetes.kubeconfig, not both")
	case c.Namespace != "" && len(validation.IsDNS1123Label(c.Namespace)) > 0:
		return fmt.Errorf("kubernetes.namespace: %q is not a namespace name", c.Namespace)
	case c.Image == "":
		return errors.New("kubernetes.image: must not be empty")
	case c.AgentImage == "":
		return errors.New("kubernetes.agent_image: must not be empty")
	case c.PullPolicy != "IfNotPresent" && c.PullPolicy != "Always" && c.PullPolicy != "Never":
		return fmt.Errorf("kubernetes.pull_policy: %q is not IfNotPresent, Always or Never", c.PullPolicy)
	case c.RuntimeClass != "" && len(validation.IsDNS1123Subdomain(c.RuntimeClass)) > 0:
		return fmt.Errorf("kubernetes.runtime_class: %q is not a RuntimeClass name", c.RuntimeClass)
	case c.RuntimeClass != "" && c.Isolation == "":
		return fmt.Errorf("kubernetes.isolation: say what RuntimeClass %q gives (process, kernel or vm)", c.RuntimeClass)
	case c.StartTimeout < time.Second || c.StartTimeout > time.Hour:
		return fmt.Errorf("kubernetes.start_timeout: %v is not within 1s..1h", c.StartTimeout)
	case c.MaxAge < time.Minute || c.MaxAge > sandbox.MaxDuration:
		return fmt.Errorf("kubernetes.max_age: %v is not within 1m..%v", c.MaxAge, sandbox.MaxDuration)
	case c.Warm < 0 || c.Warm > 16:
		return fmt.Errorf("kubernetes.warm: %d is not within 0..16", c.Warm)
	case c.WarmMax < 0 || c.WarmMax > 64:
		return fmt.Errorf("kubernetes.warm_max: %d is not within 0..64", c.WarmMax)
	}
	if c.Isolation != "" {
		iso, err := sandbox.ParseIsolation(c.Isolation)
		if err != nil || iso < sandbox.IsolationProcess {
			return fmt.Errorf("kubernetes.isolation: %q is not process, kernel or vm", c.Isolation)
		}
	}
	return nil
}

// isolation is the level c gives.
func (c *Config) isolation() sandbox.Isolation {
	if c.Isolation == "" {
		return sandbox.IsolationProcess
	}
	iso, _ := sandbox.ParseIsolation(c.Isolation)
	return iso
}
