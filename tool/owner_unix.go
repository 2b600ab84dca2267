//go:build unix

package tool

import (
	"os"
	"syscall"
)

// ownedByMe reports whether a file belongs to this process's effective user.
func ownedByMe(st os.FileInfo) bool {
	s, ok := st.Sys().(*syscall.Stat_t)
	return ok && int(s.Uid) == os.Geteuid()
}
