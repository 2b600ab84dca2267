package v1

import "github.com/execbox/execbox/sandbox"

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
