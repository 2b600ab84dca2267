package workdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
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
