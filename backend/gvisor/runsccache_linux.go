package gvisor

import "github.com/execbox/execbox/internal/host/binfacts"

// runscCacheFile is where, in the state dir, what runsc said about itself
// is kept between execbox processes (internal/host/binfacts): asking it
// (version, platforms, flags and the syscall table) takes four runsc
// starts, 50–150 ms, which every CLI call would otherwise pay.
const runscCacheFile = "gvisor-runsc.json"

// runscFacts are what is kept: runsc's answers.
type runscFacts struct {
	Version  string          `json:"version"`
	Offered  []string        `json:"offered"`
	Flags    map[string]bool `json:"flags"`
	Syscalls map[int]string  `json:"syscalls"`
}

// loadRunsc finds runsc (name, resolved in PATH) and its syscall table for
// goarch: from the cache file when it holds this binary's answers, else by
// asking runsc, then keeping the answers there (cache "" keeps nothing).
func loadRunsc(name, cache, goarch string) (*runsc, map[int]string, error) {
	path, err := lookRunsc(name)
	if err != nil {
		return nil, nil, err
	}
	key, kerr := binfacts.Key(path, "runsc", goarch)
	var f runscFacts
	if kerr == nil && binfacts.Load(cache, key, &f) {
		r := &runsc{path: path, version: f.Version, offered: f.Offered, flags: f.Flags}
		if err := r.check(); err == nil && len(f.Syscalls) >= 100 {
			return r, f.Syscalls, nil
		}
	}
	r, err := findRunsc(path)
	if err != nil {
		return nil, nil, err
	}
	table, err := r.syscalls(goarch)
	if err != nil {
		return nil, nil, err
	}
	if kerr == nil {
		binfacts.Store(cache, key, runscFacts{Version: r.version, Offered: r.offered, Flags: r.flags, Syscalls: table})
	}
	return r, table, nil
}
