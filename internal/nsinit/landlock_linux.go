package nsinit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	golandlock "github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// restrictThread applies Landlock to the calling thread only: read and
// execute everywhere below ro, read, write, execute and refer below rw,
// signals and abstract unix sockets scoped to the domain. It is the
// policy of internal/landlock.Restrict, enforced on one thread instead of
// all: the program is forked from this thread, and stopping every thread
// of the init (psx) for it costs a few hundred microseconds per sandbox.
// Best effort: a kernel without Landlock gets nothing, an older ABI what
// it supports.
func restrictThread(ro, rw []string) (string, error) {
	abi, err := ll.LandlockGetABIVersion()
	if err != nil || abi <= 0 {
		return "landlock unavailable", nil
	}
	var rules []golandlock.Rule
	add := func(paths []string, dirs, files func(...string) golandlock.FSRule) error {
		for _, p := range paths {
			st, err := os.Stat(p)
			switch {
			case errors.Is(err, fs.ErrNotExist):
			case err != nil:
				return fmt.Errorf("checking landlock path: %w", err)
			case st.IsDir():
				rules = append(rules, dirs(p))
			default:
				rules = append(rules, files(p))
			}
		}
		return nil
	}
	rwDirs := func(paths ...string) golandlock.FSRule { return golandlock.RWDirs(paths...).WithRefer() }
	if err := add(ro, golandlock.RODirs, golandlock.ROFiles); err != nil {
		return "", err
	}
	if err := add(rw, rwDirs, golandlock.RWFiles); err != nil {
		return "", err
	}
	cfg := golandlock.Config{
		HandledAccessFS: golandlock.V11.HandledAccessFS,
		Scoped:          golandlock.V11.Scoped,
	}.BestEffort()
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return "", fmt.Errorf("building landlock ruleset: %w", err)
	}
	if fd < 0 {
		return "landlock: nothing to restrict", nil
	}
	defer unix.Close(fd)
	// Without CAP_SYS_ADMIN in the init user namespace, restricting needs
	// no_new_privs (per thread, like the ruleset).
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return "", fmt.Errorf("setting no_new_privs: %w", err)
	}
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return "", fmt.Errorf("enforcing landlock ruleset: %w", err)
	}
	return fmt.Sprintf("landlock ABI %d", abi), nil
}
