package workdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/host/mountinfo"
)

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
	all, err := mountinfo.Read(mountinfo.Self)
	if err != nil {
		return nil, err
	}
	var mps []string
	for _, m := range all {
		if m.Point == dir || strings.HasPrefix(m.Point, dir+"/") {
			mps = append(mps, m.Point)
		}
	}
	return mps, nil
}
