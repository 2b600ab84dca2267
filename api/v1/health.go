package v1

import (
	"time"

	"github.com/execbox/execbox/sandbox"
)

// Health is GET /v1/health: the selection report — every backend, and
// what the configured choice resolves to and why.
type Health struct {
	// Configured is the configured backend: a name, auto or off.
	Configured string `json:"configured"`
	// Backend and Isolation are what a request without a selection gets
	// (Backend is empty when nothing may run); SelectedBecause says why,
	// or why nothing.
	Backend         string `json:"backend"`
	Isolation       string `json:"isolation,omitempty"`
	SelectedBecause string `json:"selected_because"`
	// Defaults are the limits a request gets for the fields it leaves zero.
	Defaults sandbox.Limits `json:"defaults"`
	// Candidates are the backends in the order auto tries them.
	Candidates []Backend `json:"candidates"`
	// Pools are the warm pools of function runners.
	Pools Pools `json:"pools"`
}

// Pools describe the warm pools: sandboxes kept ready with a function
// runner waiting in each, each used for one call.
type Pools struct {
	// Size is each pool's configured size; 0: there are none.
	Size  int    `json:"size"`
	Pools []Pool `json:"pools"`
	// Reason says why there are no pools although Size is set.
	Reason string `json:"reason,omitempty"`
}

// Pool is one backend's warm pool for one language.
type Pool struct {
	Backend  string `json:"backend"`
	Language string `json:"language"`
	Size     int    `json:"size"`
	Ready    int    `json:"ready"`
	Filling  int    `json:"filling"`
	// Hits are calls that took a ready sandbox, misses ones that found none
	// (a cold start); made, failed and lost count the sandboxes made, the
	// attempts that failed, and ready ones that ended unused.
	Hits   uint64 `json:"hits"`
	Misses uint64 `json:"misses"`
	Made   uint64 `json:"made"`
	Failed uint64 `json:"failed"`
	Lost   uint64 `json:"lost"`
	// IdleMemory is what the ready sandboxes hold now.
	IdleMemory int64 `json:"idle_memory_bytes"`
	// LastRefill is how long making the last sandbox took.
	LastRefill time.Duration `json:"last_refill_ns"`
	Error      string        `json:"error,omitempty"`
}

// Backend is one backend in the health report and in GET /v1/backends.
type Backend struct {
	Name      string            `json:"name"`
	Isolation sandbox.Isolation `json:"isolation"`
	// Available says the backend can run here; Ready that a probe really
	// started something; Reason says why not, or how.
	Available bool              `json:"available"`
	Ready     bool              `json:"ready"`
	Reason    string            `json:"reason"`
	Details   map[string]string `json:"details,omitempty"`
	// Enforcement maps each limit to the mechanism that enforces it.
	Enforcement map[string]string `json:"enforcement,omitempty"`
	Sessions    bool              `json:"sessions"`
	// Unisolated marks a backend without isolation (local); Allowed says
	// whether the configuration lets requests use it.
	Unisolated bool `json:"unisolated,omitempty"`
	Allowed    bool `json:"allowed"`
	// Capacity is the admission lane the backend's runs take slots of.
	Capacity *Capacity `json:"capacity,omitempty"`
	// Warm is what the backend keeps started ahead, per sandbox shape,
	// and why that many (kubernetes and microvm: their warm pools).
	Warm []sandbox.Warm `json:"warm,omitempty"`
}

// Capacity is an admission lane: "host" for the backends that run on the
// server's host (or all of them, when server.max_runs is set), a remote
// backend's name for one sized by what bounds it (a cluster's quota).
type Capacity struct {
	Lane string `json:"lane"`
	// Slots and InUse: how many runs may be alive at once, and are.
	Slots int `json:"slots"`
	InUse int `json:"in_use"`
	// Source says where Slots came from.
	Source string `json:"source"`
}

// Backends is GET /v1/backends.
type Backends struct {
	Backends []Backend `json:"backends"`
}

// Status is GET /healthz and GET /readyz.
type Status struct {
	OK       bool   `json:"ok"`
	Draining bool   `json:"draining,omitempty"`
	Reason   string `json:"reason,omitempty"`
}
