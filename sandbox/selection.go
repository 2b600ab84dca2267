package sandbox

// Selection is what a request says about where it may run: a backend by
// name, a tier, a minimum isolation level — all optional. The engine
// decides where it runs and never goes below the configured floor; a
// Selection can raise isolation, never lower it.
type Selection struct {
	Backend      string `json:"backend,omitempty"`       // a backend name, or "" for the configured choice
	Tier         string `json:"tier,omitempty"`          // strict | standard | fast
	MinIsolation string `json:"min_isolation,omitempty"` // none | process | kernel | vm
}
