package workroot

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Dir is this process's base directory Base under the work root Root.
type Dir struct {
	Root string // the backend's work root
	Base string // <Root>/<pid>.<rand>; "" when none was made
}

// liveBases are the bases this process made (one per Dir), so reconciling
// never takes a sibling backend's.
var liveBases sync.Map

// Open makes root (0711), removes what dead processes left in it and makes
// this process's base there (0711).
func Open(root string) (*Dir, error) {
	if err := os.MkdirAll(root, 0o711); err != nil {
		return nil, fmt.Errorf("creating work root: %w", err)
	}
	if _, err := Reconcile(root); err != nil {
		return nil, err
	}
	var r [4]byte
	rand.Read(r[:])
	d := &Dir{Root: root, Base: filepath.Join(root, strconv.Itoa(os.Getpid())+"."+hex.EncodeToString(r[:]))}
	liveBases.Store(d.Base, true)
	if err := os.Mkdir(d.Base, 0o711); err != nil {
		liveBases.Delete(d.Base)
		return nil, fmt.Errorf("creating work dir parent: %w", err)
	}
	return d, nil
}

// Reconcile removes, mounts first, every <pid>.<rand> directory of root
// that belongs to a dead process, or to this PID but no live Dir. It
// returns the directories it removed.
func Reconcile(root string) ([]string, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("reconciling work dirs: %w", err)
	}
	var removed []string
	var errs []error
	for _, ent := range ents {
		dir := filepath.Join(root, ent.Name())
		if _, live := liveBases.Load(dir); live {
			continue
		}
		p, _, ok := strings.Cut(ent.Name(), ".")
		pid, err := strconv.Atoi(p)
		if ok && err == nil && pid != os.Getpid() {
			if err := unix.Kill(pid, 0); err == nil || errors.Is(err, unix.EPERM) {
				continue // its owner lives
			}
		}
		if err := RemoveTree(dir); err != nil {
			errs = append(errs, fmt.Errorf("reconciling work dirs: %w", err))
			continue
		}
		removed = append(removed, dir)
	}
	return removed, errors.Join(errs...)
}

// Close removes the base with everything in it, and the work root when
// nothing else is left in it. Every sandbox under the base must be closed
// first. The error is the one os.RemoveAll returned.
func (d *Dir) Close() error {
	if d.Base != "" {
		liveBases.Delete(d.Base)
		if err := os.RemoveAll(d.Base); err != nil {
			return err
		}
	}
	os.Remove(d.Root) // fails, as it should, while another process uses it
	return nil
}

// CloseEmpty is Close for a base that must already be empty: it refuses
// (and the base stays live) while anything is left in it. The error is the
// one os.Remove returned.
func (d *Dir) CloseEmpty() error {
	if d.Base != "" {
		if err := os.Remove(d.Base); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		liveBases.Delete(d.Base)
	}
	os.Remove(d.Root) // fails, as it should, while another process uses it
	return nil
}

// RemoveTree detaches every mount at or below dir, checks that none is
// left (a writable host bind must never be emptied by RemoveAll) and
// removes dir.
func RemoveTree(dir string) error {
	if err := UnmountUnder(dir); err != nil {
		return err
	}
	if left, err := MountsUnder(dir); err != nil || len(left) > 0 {
		return errors.Join(err, fmt.Errorf("mounts still below %s: %v", dir, left))
	}
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	return nil
}

// UnmountUnder detaches every mount at or below dir, deepest first.
func UnmountUnder(dir string) error {
	mps, err := MountsUnder(dir)
	if err != nil {
		return err
	}
	slices.SortFunc(mps, func(a, b string) int { return len(b) - len(a) })
	for _, mp := range mps {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("unmounting %s: %w", mp, err)
		}
	}
	return nil
}

// MountsUnder lists the mount points at or below dir.
func MountsUnder(dir string) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	var mps []string
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := UnescapeMount(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			mps = append(mps, mp)
		}
	}
	return mps, nil
}

// UnescapeMount undoes mountinfo's octal escapes (\040 for a space).
func UnescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
