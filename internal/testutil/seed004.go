package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// Seed004Opts are the backend-specific parts of Seed004.
type Seed004Opts struct {
	// WorkDir is the host path of sb's work directory.
	WorkDir func(sb sandbox.Sandbox) string
	// WritePaths must not be creatable or writable by the program.
	WritePaths []string
	// AppendPaths are existing files the program must not append to.
	AppendPaths []string
	// MoreWrites is extra shell that prints a line when a write it tries
	// succeeds.
	MoreWrites string
	// SecretEnv is the host environment variable that carries the secret.
	SecretEnv string
	// ProcFiles are the /proc files whose NUL-separated contents must not
	// carry the secret.
	ProcFiles []string
	// HiddenPaths are more host paths that must not exist in the sandbox.
	HiddenPaths []string
	// InitRoot also checks that /proc/1/root/ cannot be listed.
	InitRoot bool
	// MountCheck shows that the secrets check can fail: the secret file
	// is visible when its directory is mounted.
	MountCheck bool
}

// Seed004 runs seed 004's four checks against b: uid 65534, read-only
// root, no network, host secrets invisible.
func Seed004(t *testing.T, b sandbox.Backend, o Seed004Opts) {
	t.Run("uid_65534", func(t *testing.T) {
		res := Sh(t, b, sandbox.Spec{}, "id -u; id -g; id -G")
		WantOK(t, res)
		if res.Stdout != "65534\n65534\n65534\n" {
			t.Fatalf("ids inside = %q, want 65534 for uid, gid and groups", res.Stdout)
		}
	})

	t.Run("uid_65534_on_host", func(t *testing.T) {
		// What the program writes to the work dir belongs to host uid
		// 65534 (an unprivileged user), not to root.
		sb := Create(t, b, sandbox.Spec{})
		WantOK(t, Exec(t, sb, "/bin/sh", "-c", "echo x > owned"))
		st, err := os.Lstat(filepath.Join(o.WorkDir(sb), "owned"))
		if err != nil {
			t.Fatal(err)
		}
		if uid := st.Sys().(*syscall.Stat_t).Uid; uid != 65534 {
			t.Fatalf("a file the program wrote is owned by host uid %d, want 65534", uid)
		}
	})

	t.Run("root_read_only", func(t *testing.T) {
		res := Sh(t, b, sandbox.Spec{}, `for p in `+strings.Join(o.WritePaths, " ")+`; do
  if ( echo x > $p ) 2>/dev/null; then echo "wrote $p"; fi
done
for p in `+strings.Join(o.AppendPaths, " ")+`; do
  if ( : >> $p ) 2>/dev/null; then echo "appended $p"; fi
done
mkdir /newdir 2>/dev/null && echo "made /newdir"
`+o.MoreWrites+`
echo ok > /tmp/x && echo ok > /work/x && cat /tmp/x /work/x`)
		WantOK(t, res)
		if res.Stdout != "ok\nok\n" {
			t.Fatalf("writes outside /tmp and /work succeeded (or /tmp, /work failed): %q %q", res.Stdout, res.Stderr)
		}
	})

	t.Run("network_unreachable", func(t *testing.T) {
		// A listener on the host's loopback: in the sandbox's own network
		// 127.0.0.1 is its own, and nothing outside is reachable.
		port := Listen(t, "host")
		res := Py(t, b, sandbox.Spec{}, fmt.Sprintf(`
import socket
for host, port in [("1.1.1.1", 53), ("127.0.0.1", %d), ("8.8.8.8", 443)]:
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((host, port))
        print("connected", host, port, s.recv(10))
    except OSError as e:
        print("refused", host, port, type(e).__name__)
print("interfaces", sorted(n for _, n in socket.if_nameindex()))`, port))
		WantOK(t, res)
		if strings.Contains(res.Stdout, "connected") {
			t.Fatalf("the sandbox reached the network:\n%s", res.Stdout)
		}
		if strings.Count(res.Stdout, "refused") != 3 || !strings.Contains(res.Stdout, "interfaces ['lo']") {
			t.Fatalf("unexpected network view:\n%s%s", res.Stdout, res.Stderr)
		}
		// The same listener is reachable with the host network: the check
		// above can fail.
		hostNet := sandbox.Spec{Policy: sandbox.Policy{Network: sandbox.NetworkHost}}
		res = Py(t, b, hostNet, fmt.Sprintf(`
import socket
s = socket.create_connection(("127.0.0.1", %d), timeout=3)
print(s.recv(10).decode())`, port))
		WantOK(t, res)
		if res.Stdout != "host\n" {
			t.Fatalf("with network=host the host listener was not reachable: %q %q", res.Stdout, res.Stderr)
		}
	})

	t.Run("host_secrets_invisible", func(t *testing.T) {
		secret := "execbox-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		t.Setenv(o.SecretEnv, secret)
		dir := t.TempDir() // outside the rootfs
		file := filepath.Join(dir, "secret.txt")
		if err := os.WriteFile(file, []byte(secret), 0o644); err != nil {
			t.Fatal(err)
		}
		hidden := append([]string{file, dir, "/root", "/home", "/var", "/run", "/var/run/docker.sock", "/proc/1/root/" + file}, o.HiddenPaths...)
		script := `env; cat ` + strings.Join(o.ProcFiles, " ") + ` 2>/dev/null | tr '\0' '\n'
for p in ` + strings.Join(hidden, " ") + `; do
  if [ -e "$p" ]; then echo "visible: $p"; fi
done
cat ` + file + ` 2>/dev/null
`
		if o.InitRoot {
			script += `ls /proc/1/root/ 2>/dev/null && echo "init root listed"
`
		}
		res := Sh(t, b, sandbox.Spec{}, script+"true")
		WantOK(t, res)
		if strings.Contains(res.Stdout, secret) || strings.Contains(res.Stdout, "visible") || strings.Contains(res.Stdout, "init root listed") {
			t.Fatalf("a host secret reached the sandbox:\n%s", res.Stdout)
		}
		if !strings.Contains(res.Stdout, "HOME=/work") {
			t.Fatalf("env did not run: %q %q", res.Stdout, res.Stderr)
		}
		if !o.MountCheck {
			return
		}
		// The check can fail: the same file is visible when mounted.
		res = Sh(t, b, sandbox.Spec{Policy: sandbox.Policy{Mounts: []sandbox.Mount{{Source: dir, Target: "/mnt/in"}}}},
			"cat /mnt/in/secret.txt")
		WantOK(t, res)
		if res.Stdout != secret {
			t.Fatalf("a mounted host file was not visible: %q %q", res.Stdout, res.Stderr)
		}
	})
}
