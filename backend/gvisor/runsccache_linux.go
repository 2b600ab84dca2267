package gvisor

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// runscCacheFile is where, in the state dir, what runsc said about itself
// is kept between execbox processes: asking it (version, platforms, flags
// and the syscall table) takes four runsc starts, 50–150 ms, which every
// CLI call would otherwise pay.
const runscCacheFile = "gvisor-runsc.json"

// runscCacheFormat changes when what is kept changes.
const runscCacheFormat = "1"

// runscFacts are what is kept: runsc's answers, under the key of the
// binary they came from.
type runscFacts struct {
	Key      string          `json:"key"`
	Version  string          `json:"version"`
	Offered  []string        `json:"offered"`
	Flags    map[string]bool `json:"flags"`
	Syscalls map[int]string  `json:"syscalls"`
}

// binaryKey names the binary at path as it is now (its inode, size and
// modification time): a replaced or rebuilt runsc has another key.
func binaryKey(path, goarch string) (string, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s dev=%d ino=%d size=%d mtime=%d.%d %s", runscCacheFormat, path, st.Dev, st.Ino, st.Size,
		st.Mtim.Sec, st.Mtim.Nsec, goarch), nil
}

// loadRunsc finds runsc (name, resolved in PATH) and its syscall table for
// goarch: from the cache file when it holds this binary's answers, else by
// asking runsc, then keeping the answers there (cache "" keeps nothing).
func loadRunsc(name, cache, goarch string) (*runsc, map[int]string, error) {
	path, err := lookRunsc(name)
	if err != nil {
		return nil, nil, err
	}
	key, kerr := binaryKey(path, goarch)
	if kerr == nil && cache != "" {
		if f, ok := readRunscCache(cache); ok && f.Key == key {
			r := &runsc{path: path, version: f.Version, offered: f.Offered, flags: f.Flags}
			if err := r.check(); err == nil && len(f.Syscalls) >= 100 {
				return r, f.Syscalls, nil
			}
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
	if kerr == nil && cache != "" {
		writeRunscCache(cache, runscFacts{Key: key, Version: r.version, Offered: r.offered, Flags: r.flags, Syscalls: table})
	}
	return r, table, nil
}

// readRunscCache reads the cache file if this user alone can have
// written it: a regular file of the effective user, not writable by group
// or others (the state dir is private, but a file it holds is checked
// anyway, since the seccomp policy is built from its syscall table).
func readRunscCache(path string) (runscFacts, bool) {
	var f runscFacts
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o022 != 0 {
		return f, false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
		return f, false
	}
	data, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(data, &f) != nil {
		return runscFacts{}, false
	}
	return f, true
}

// writeRunscCache replaces the cache file atomically; failing to keep it
// only costs the next process the asking.
func writeRunscCache(path string, f runscFacts) {
	data, err := json.Marshal(f)
	if err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+runscCacheFile+".*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), path) != nil {
		os.Remove(tmp.Name())
	}
}
