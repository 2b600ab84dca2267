package gvisor

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/sandbox"
)

// Seed 004's four checks: uid 65534, read-only root, no network, host
// secrets invisible.
func TestSeed004Checks(t *testing.T) {
	b := newBackend(t)

	t.Run("uid_65534", func(t *testing.T) {
		res := sh(t, b, sandbox.Spec{}, "id -u; id -g; id -G")
		wantOK(t, res)
		if res.Stdout != "65534\n65534\n65534\n" {
			t.Fatalf("ids inside = %q, want 65534 for uid, gid and groups", res.Stdout)
		}
	})

	t.Run("uid_65534_on_host", func(t *testing.T) {
		// What the program writes to the work dir belongs to host uid
		// 65534 (an unprivileged user), not to root.
		sb := create(t, b, sandbox.Spec{})
		wantOK(t, exec1(t, sb, "/bin/sh", "-c", "echo x > owned"))
		st, err := os.Lstat(filepath.Join(sb.(*Sandbox).wd.Path, "owned"))
		if err != nil {
			t.Fatal(err)
		}
		if uid := st.Sys().(*syscall.Stat_t).Uid; uid != 65534 {
			t.Fatalf("a file the program wrote is owned by host uid %d, want 65534", uid)
		}
	})

	t.Run("root_read_only", func(t *testing.T) {
		res := sh(t, b, sandbox.Spec{}, `for p in /x /etc/x /usr/x /bin/x /dev/x /proc/x /sys/x; do
  if ( echo x > $p ) 2>/dev/null; then echo "wrote $p"; fi
done
for p in /usr/bin/true /etc/passwd /etc/ld.so.cache; do
  if ( : >> $p ) 2>/dev/null; then echo "appended $p"; fi
done
mkdir /newdir 2>/dev/null && echo "made /newdir"
echo ok > /tmp/x && echo ok > /work/x && cat /tmp/x /work/x`)
		wantOK(t, res)
		if res.Stdout != "ok\nok\n" {
			t.Fatalf("writes outside /tmp and /work succeeded (or /tmp, /work failed): %q %q", res.Stdout, res.Stderr)
		}
	})

	t.Run("network_unreachable", func(t *testing.T) {
		// A listener on the host's loopback. gVisor's netstack has a
		// loopback of its own; nothing of the host is reachable.
		port := listen(t, "host")
		res := py(t, b, sandbox.Spec{}, fmt.Sprintf(`
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
		wantOK(t, res)
		if strings.Contains(res.Stdout, "connected") {
			t.Fatalf("the sandbox reached the network:\n%s", res.Stdout)
		}
		if strings.Count(res.Stdout, "refused") != 3 || !strings.Contains(res.Stdout, "interfaces ['lo']") {
			t.Fatalf("unexpected network view:\n%s%s", res.Stdout, res.Stderr)
		}
		// The same listener is reachable with the host network: the check
		// above can fail.
		hostNet := sandbox.Spec{Policy: sandbox.Policy{Network: sandbox.NetworkHost}}
		res = py(t, b, hostNet, fmt.Sprintf(`
import socket
s = socket.create_connection(("127.0.0.1", %d), timeout=3)
print(s.recv(10).decode())`, port))
		wantOK(t, res)
		if res.Stdout != "host\n" {
			t.Fatalf("with network=host the host listener was not reachable: %q %q", res.Stdout, res.Stderr)
		}
	})

	t.Run("host_secrets_invisible", func(t *testing.T) {
		secret := "execbox-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		t.Setenv("EXECBOX_GVISOR_SECRET", secret)
		dir := t.TempDir() // outside the rootfs
		file := filepath.Join(dir, "secret.txt")
		if err := os.WriteFile(file, []byte(secret), 0o644); err != nil {
			t.Fatal(err)
		}
		res := sh(t, b, sandbox.Spec{}, `env; cat /proc/self/environ /proc/1/environ 2>/dev/null | tr '\0' '\n'
for p in `+file+` `+dir+` /root /home /var /run /var/run/docker.sock /proc/1/root/`+file+` `+b.workRoot+`; do
  if [ -e "$p" ]; then echo "visible: $p"; fi
done
cat `+file+` 2>/dev/null
true`)
		wantOK(t, res)
		if strings.Contains(res.Stdout, secret) || strings.Contains(res.Stdout, "visible") {
			t.Fatalf("a host secret reached the sandbox:\n%s", res.Stdout)
		}
		if !strings.Contains(res.Stdout, "HOME=/work") {
			t.Fatalf("env did not run: %q %q", res.Stdout, res.Stderr)
		}
		// The check can fail: the same file is visible when mounted.
		res = sh(t, b, sandbox.Spec{Policy: sandbox.Policy{Mounts: []sandbox.Mount{{Source: dir, Target: "/mnt/in"}}}},
			"cat /mnt/in/secret.txt")
		wantOK(t, res)
		if res.Stdout != secret {
			t.Fatalf("a mounted host file was not visible: %q %q", res.Stdout, res.Stderr)
		}
	})
}

// listen serves reply on a fresh TCP port of the host's loopback.
func listen(t *testing.T, reply string) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(reply))
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// The program talks to gVisor's kernel, not the host's: its kernel release
// is gVisor's, and the host's processes are invisible.
func TestUserSpaceKernel(t *testing.T) {
	b := newBackend(t)
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	host := unix.ByteSliceToString(u.Release[:])
	res := py(t, b, sandbox.Spec{}, `import os; print(os.uname().release); print(os.uname().nodename); print(len([p for p in os.listdir("/proc") if p.isdigit()]))`)
	wantOK(t, res)
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("output %q %q", res.Stdout, res.Stderr)
	}
	t.Logf("kernel release inside %q, host %q", lines[0], host)
	if lines[0] == "" || lines[0] == host {
		t.Errorf("kernel release inside = %q, the host's is %q: not gVisor's kernel", lines[0], host)
	}
	if lines[1] != "sandbox" {
		t.Errorf("hostname inside = %q, want sandbox", lines[1])
	}
	if n, _ := strconv.Atoi(lines[2]); n < 1 || n > 3 {
		t.Errorf("%s processes visible in /proc, want only the sandbox's own", lines[2])
	}
	if res.Isolation != sandbox.IsolationKernel || res.Backend != Name {
		t.Errorf("result says backend %s isolation %s", res.Backend, res.Isolation)
	}
}

// The program holds no capability, and execbox's seccomp policy is in
// force inside the sandbox: a syscall it denies fails with EPERM, clone3
// with ENOSYS (so libc falls back to clone and threads work).
func TestPrivilegesDropped(t *testing.T) {
	b := newBackend(t)
	res := py(t, b, sandbox.Spec{}, `
import ctypes, os, threading
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
print("caps", status["CapEff"].strip(), status["CapPrm"].strip(), status["CapBnd"].strip(), "seccomp", status["Seccomp"].strip())
libc = ctypes.CDLL(None, use_errno=True)
def try_(name, f):
    r = f()
    print(name, "ok" if r == 0 else os.strerror(ctypes.get_errno()))
try_("keyctl", lambda: libc.syscall(250, 1, 0))
try_("unshare_user", lambda: libc.unshare(0x10000000))
try_("mount", lambda: libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))
try_("clone3", lambda: libc.syscall(435, 0, 0))
try_("setuid0", lambda: libc.setuid(0))
t = threading.Thread(target=lambda: print("thread ran")); t.start(); t.join()`)
	wantOK(t, res)
	want := "caps 0000000000000000 0000000000000000 0000000000000000 seccomp 2\n" +
		"keyctl Operation not permitted\nunshare_user Operation not permitted\nmount Operation not permitted\n" +
		"clone3 Function not implemented\nsetuid0 Operation not permitted\nthread ran\n"
	if res.Stdout != want {
		t.Fatalf("got:\n%s%s\nwant:\n%s", res.Stdout, res.Stderr, want)
	}
}

// The program cannot see or use execbox's bundle, runsc's state or other
// sandboxes' work dirs: none of them is mounted.
func TestBundleInvisible(t *testing.T) {
	b := newBackend(t)
	other := create(t, b, sandbox.Spec{})
	if err := other.WriteFiles(t.Context(), map[string][]byte{"other.txt": []byte("other sandbox")}); err != nil {
		t.Fatal(err)
	}
	sb := create(t, b, sandbox.Spec{})
	s := sb.(*Sandbox)
	res := exec1(t, sb, "/bin/sh", "-c", `for p in /config.json /rootfs /state /log `+s.dir+` `+other.(*Sandbox).wd.Path+`; do
  if [ -e "$p" ]; then echo "visible: $p"; fi
done; cat /proc/mounts | grep -c `+b.workRoot+`; true`)
	wantOK(t, res)
	if res.Stdout != "0\n" {
		t.Fatalf("execbox's own files are visible in the sandbox: %q %q", res.Stdout, res.Stderr)
	}
}
