package landlock

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	golandlock "github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// ABI returns the Landlock ABI version of the running kernel, 0 when
// Landlock is not available (not built in, or not enabled at boot).
func ABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// Restrict applies a best-effort Landlock ruleset to the calling process
// (all threads): read+execute on ro paths, read+write+execute on rw paths,
// nothing else. It returns a description like "landlock ABI 7" or
// "landlock unavailable"; unavailable is not an error.
func Restrict(ro, rw []string) (string, error) {
	abi := ABI()
	if abi == 0 {
		return "landlock unavailable", nil
	}
	var rules []golandlock.Rule
	for _, p := range ro {
		r, err := rule(p, golandlock.RODirs, golandlock.ROFiles)
		if err != nil {
			return "", err
		}
		if r != nil {
			rules = append(rules, r)
		}
	}
	rwDirs := func(paths ...string) golandlock.FSRule { return golandlock.RWDirs(paths...).WithRefer() }
	for _, p := range rw {
		r, err := rule(p, rwDirs, golandlock.RWFiles)
		if err != nil {
			return "", err
		}
		if r != nil {
			rules = append(rules, r)
		}
	}
	// The newest filesystem rights and scopes go-landlock knows, cut down
	// to what the kernel has; network ports stay unhandled.
	cfg := golandlock.Config{
		HandledAccessFS: golandlock.V11.HandledAccessFS,
		Scoped:          golandlock.V11.Scoped,
	}.BestEffort()
	if err := cfg.Restrict(rules...); err != nil {
		return "", fmt.Errorf("applying landlock ruleset: %w", err)
	}
	return fmt.Sprintf("landlock ABI %d", abi), nil
}

// rule grants dir or file rights to p depending on what p is now; a
// missing p gets no rule.
func rule(p string, dirs, files func(...string) golandlock.FSRule) (golandlock.Rule, error) {
	st, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("checking landlock path: %w", err)
	case st.IsDir():
		return dirs(p), nil
	default:
		return files(p), nil
	}
}
