package workdir

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Base is this process's directory Path under a backend's work root Root:
// every sandbox dir the process makes for that backend is below it.
type Base struct {
	Root string // the backend's work root
	Path string // <Root>/<pid>.<rand>; "" when none was made
}

// liveBases are the bases this process made (one per Base), so reconciling
// never takes a sibling backend's.
var liveBases sync.Map

// OpenBase makes root (0711), removes what dead processes left in it and
// makes this process's base there (0711).
func OpenBase(root string) (*Base, error) {
	if err := os.MkdirAll(root, 0o711); err != nil {
		return nil, fmt.Errorf("creating work root: %w", err)
	}
	if _, err := Reconcile(root); err != nil {
		return nil, err
	}
	var r [4]byte
	rand.Read(r[:])
	d := &Base{Root: root, Path: filepath.Join(root, strconv.Itoa(os.Getpid())+"."+hex.EncodeToString(r[:]))}
	liveBases.Store(d.Path, true)
	if err := os.Mkdir(d.Path, 0o711); err != nil {
		liveBases.Delete(d.Path)
		return nil, fmt.Errorf("creating work dir parent: %w", err)
	}
	return d, nil
}

// Reconcile removes, mounts first, every <pid>.<rand> directory of root
// that belongs to a dead process, or to this PID but no live Base. It
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
func (d *Base) Close() error {
	if d.Path != "" {
		liveBases.Delete(d.Path)
		if err := os.RemoveAll(d.Path); err != nil {
			return err
		}
	}
	os.Remove(d.Root) // fails, as it should, while another process uses it
	return nil
}

// CloseEmpty is Close for a base that must already be empty: it refuses
// (and the base stays live) while anything is left in it. The error is the
// one os.Remove returned.
func (d *Base) CloseEmpty() error {
	if d.Path != "" {
		if err := os.Remove(d.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		liveBases.Delete(d.Path)
	}
	os.Remove(d.Root) // fails, as it should, while another process uses it
	return nil
}
