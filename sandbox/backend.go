package sandbox

import (
	"context"
	"time"
)

// Backend is one isolation technology. Implementations register a Factory
// with Register and end with an interface-guard block.
type Backend interface {
	// Name is the registered name ("native", "local", …).
	Name() string
	// Capabilities describe what the backend can do and enforce; they do
	// not change at run time.
	Capabilities() Capabilities
	// Health says whether the backend can run a sandbox now, found by
	// really starting something, never by looking for a binary alone.
	Health(ctx context.Context) Health
	// Create makes a sandbox for spec. Errors are ErrInvalid (bad spec),
	// ErrUnavailable (the technology does not work here) or ErrInternal.
	Create(ctx context.Context, spec Spec) (Sandbox, error)
}

// Sandbox is one isolated environment with its own work dir, limits and
// network.
type Sandbox interface {
	// ID is unique among the sandboxes of this process.
	ID() string
	// WriteFiles writes files into the work dir: relative path → content.
	// A path that is invalid or would pass through a symlink is ErrInvalid
	// naming the path; nothing is written then.
	WriteFiles(ctx context.Context, files map[string][]byte) error
	// Exec runs one process to its end and returns how it ended. The error
	// is non-nil only when the request is invalid (ErrInvalid: empty Args, a
	// bad or missing Dir), another Exec of the sandbox runs (ErrBusy
	// "sandbox_busy"), or the process could not be run or watched; a
	// program that fails, times out or is killed is a Result with a Reason,
	// and so is one that is not found (exit code ExitNotFound) or cannot be
	// executed (ExitNotExecutable). When ctx ends, the whole process tree is
	// killed and the Result says "canceled".
	Exec(ctx context.Context, p *Process) (*Result, error)
	// Artifacts collects the regular files created or changed in the work
	// dir since the last WriteFiles, never following a symlink, within the
	// artifact limits; what is left out is listed with the reason.
	Artifacts(ctx context.Context) (Artifacts, error)
	// Close kills anything still running and removes every trace of the
	// sandbox (processes, cgroups, mounts, temp dirs, containers). It is
	// safe to call more than once and from any goroutine. When it returns,
	// no process of the sandbox runs any more.
	Close(ctx context.Context) error
}

// Capabilities describe a backend.
type Capabilities struct {
	Isolation Isolation `json:"isolation"`
	// Sessions is true when a Sandbox may run Exec more than once.
	Sessions bool `json:"sessions"`
	// Images is true when Spec.Image chooses the root filesystem from the
	// backend's own images (docker's engine).
	Images bool `json:"images,omitempty"`
	// RootImages is true when the backend mounts Spec.Root, an image of
	// execbox's store, as the root filesystem.
	RootImages bool `json:"root_images,omitempty"`
	// Networks lists the network modes the backend supports.
	Networks []Network `json:"networks"`
	// Limits maps each limit to how this backend enforces it, as far as is
	// known without starting a sandbox (e.g. "memory": "cgroup v1").
	Limits map[string]string `json:"limits"`
	// Weak names the limits that do not bound the sandbox as a whole here
	// (memory, pids, cpus without a cgroup: per process, or not at all),
	// each with what bounds it instead; WeakWhy says why, once. The engine
	// refuses a run on such a backend unless the configuration allows weak
	// limits (allow_weak_limits).
	Weak    map[string]string `json:"weak,omitempty"`
	WeakWhy string            `json:"weak_why,omitempty"`
	// Emulated is true when the backend runs programs under software
	// emulation here (a VM without hardware virtualisation): strong, but
	// many times slower, so auto never picks it by itself.
	Emulated bool `json:"emulated,omitempty"`
	// Remote is true when the sandboxes run apart from this execbox (Pods
	// of a cluster, containers of a docker engine over TCP): their memory, their files' included, is bounded where
	// they run and never taken from this host's, so the engine holds none
	// of a session's files against it.
	Remote bool `json:"remote,omitempty"`
}

// Health is a backend's state as last probed.
type Health struct {
	// Available: the technology works on this host (a sandbox started).
	Available bool `json:"available"`
	// Ready: available, and what it needs to run (an image, a rootfs) is
	// present, so a run starts without a long wait.
	Ready bool `json:"ready"`
	// Reason says why it is not available or ready, or what was found.
	Reason string `json:"reason"`
	// Details are facts worth showing (cgroup version, Landlock ABI, …).
	Details map[string]string `json:"details,omitempty"`
	// CheckedAt is when the probe ran.
	CheckedAt time.Time `json:"checked_at"`
}

// Closer is a Backend that holds host resources of its own beyond its
// sandboxes (a work root, a client connection, reused containers). The
// engine calls Close once, at shutdown, after every sandbox is closed; the
// backend is not used afterwards.
type Closer interface {
	Close() error
}

// Reconciler is a Backend that can find and remove what an earlier,
// crashed execbox process left behind (processes, cgroups, mounts, work
// dirs, containers), never touching what a live process owns. It returns
// a description of each thing it removed. The engine calls it at start;
// it is safe to call at any time.
type Reconciler interface {
	Reconcile(ctx context.Context) (removed []string, err error)
}

// Capacity is how many sandboxes a backend can hold alive at once, and
// what says so (a cluster's quota, its nodes' allocatable resources).
type Capacity struct {
	Runs   int    `json:"runs"`
	Source string `json:"source"`
}

// Capacitor is a Remote backend that knows what bounds it: the engine
// admits its runs by that rather than by this host's cores, which it does
// not use. The answer is asked again at each health probe.
type Capacitor interface {
	Capacity(ctx context.Context) (Capacity, error)
}

// Warmer is a backend that starts the machines of its sandboxes (VMs,
// Pods) ahead, in a warm pool: what each shape holds now and why.
type Warmer interface {
	Warm() []Warm
}

// Warm is one sandbox shape's machines started ahead.
type Warm struct {
	Shape    string `json:"shape"`    // the image and limits they fit
	Idle     int    `json:"idle"`     // waiting for a sandbox
	Starting int    `json:"starting"` // on their way
	Target   int    `json:"target"`   // what the pool keeps now
	Why      string `json:"why"`      // how Target came about
}

// Meter is a Sandbox that can say how much memory its processes hold now
// (a cgroup's current usage): what a warm pool's idle sandboxes cost.
type Meter interface {
	Memory() (int64, error)
}
