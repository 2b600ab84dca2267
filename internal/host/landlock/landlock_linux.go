package landlock

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	golandlock "github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
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
	cfg, rules, err := ruleset(ro, rw)
	if err != nil {
		return "", err
	}
	if err := cfg.Restrict(rules...); err != nil {
		return "", fmt.Errorf("applying landlock ruleset: %w", err)
	}
	return fmt.Sprintf("landlock ABI %d", abi), nil
}

// RestrictThread applies the same ruleset as Restrict to the calling
// thread only, setting no_new_privs on it. An init that forks the program
// from one locked thread uses it: stopping every thread of the process
// (psx) costs a few hundred microseconds per sandbox.
func RestrictThread(ro, rw []string) (string, error) {
	abi := ABI()
	if abi == 0 {
		return "landlock unavailable", nil
	}
	cfg, rules, err := ruleset(ro, rw)
	if err != nil {
		return "", err
	}
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

// Terminals is where a sandbox's devpts is mounted (a new instance of its
// own): read, write and device ioctls are allowed below it when it exists.
const Terminals = "/dev/pts"

// ruleset is the policy: the newest filesystem rights and scopes
// go-landlock knows, cut down to what the kernel has (network ports stay
// unhandled), with read+execute below ro and read+write+execute+refer
// below rw, and read+write+ioctl on Terminals.
func ruleset(ro, rw []string) (golandlock.Config, []golandlock.Rule, error) {
	var rules []golandlock.Rule
	rwDirs := func(paths ...string) golandlock.FSRule { return golandlock.RWDirs(paths...).WithRefer() }
	for _, set := range []struct {
		paths       []string
		dirs, files func(...string) golandlock.FSRule
	}{{ro, golandlock.RODirs, golandlock.ROFiles}, {rw, rwDirs, golandlock.RWFiles}} {
		for _, p := range set.paths {
			r, err := rule(p, set.dirs, set.files)
			if err != nil {
				return golandlock.Config{}, nil, err
			}
			if r != nil {
				rules = append(rules, r)
			}
		}
	}
	// A sandbox's own terminals: a program on a PTY needs ioctls on it
	// (unlocking and naming the pty, the window size), which RWDirs does
	// not give.
	ttys := func(paths ...string) golandlock.FSRule { return golandlock.RWDirs(paths...).WithIoctlDev() }
	if r, err := rule(Terminals, ttys, golandlock.RWFiles); err != nil {
		return golandlock.Config{}, nil, err
	} else if r != nil {
		rules = append(rules, r)
	}
	cfg := golandlock.Config{
		HandledAccessFS: golandlock.V11.HandledAccessFS,
		Scoped:          golandlock.V11.Scoped,
	}.BestEffort()
	return cfg, rules, nil
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
