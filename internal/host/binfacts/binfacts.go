package binfacts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/execbox/execbox/internal/host/proc"
)

// format changes when what a key covers changes.
const format = "2"

// Key names the binary at path as it is now, with salt (what else the
// facts depend on, such as an architecture or the questions asked).
func Key(path string, salt ...string) (string, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s dev=%d ino=%d size=%d mtime=%d.%d %s", format, path, st.Dev, st.Ino, st.Size,
		st.Mtim.Sec, st.Mtim.Nsec, strings.Join(salt, " ")), nil
}

// entry is a kept file's content.
type entry struct {
	Key   string          `json:"key"`
	Facts json.RawMessage `json:"facts"`
}

// Load reads what file keeps into v and reports whether it was kept under
// key, in a regular file of the effective user that group and others
// cannot write.
func Load(file, key string, v any) bool {
	if file == "" {
		return false
	}
	fi, err := os.Lstat(file)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o022 != 0 {
		return false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
		return false
	}
	data, err := os.ReadFile(file)
	var e entry
	if err != nil || json.Unmarshal(data, &e) != nil || e.Key != key {
		return false
	}
	return json.Unmarshal(e.Facts, v) == nil
}

// Store keeps v under key in file, replacing it atomically (mode 0600);
// failing to keep it only costs the next process the asking.
func Store(file, key string, v any) {
	if file == "" {
		return
	}
	facts, err := json.Marshal(v)
	if err != nil {
		return
	}
	data, err := json.Marshal(entry{Key: key, Facts: facts})
	if err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), file) != nil {
		os.Remove(tmp.Name())
	}
}

// Output is what `path args...` writes to stdout, trimmed: from file when
// it was kept for this binary, else by running it (with stdio of its
// own) and keeping the answer. file "" keeps nothing.
func Output(file, path string, args ...string) (string, error) {
	key, kerr := Key(path, args...)
	var out string
	if kerr == nil && Load(file, key, &out) {
		return out, nil
	}
	var b bytes.Buffer
	cmd := exec.Command(path, args...)
	cmd.Stdout = &b
	proc.PrivateStdio(cmd)
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w", path, strings.Join(args, " "), err)
	}
	out = strings.TrimSpace(b.String())
	if kerr == nil {
		Store(file, key, out)
	}
	return out, nil
}
