package sandboxtest

// The syscall table: what a normal program needs, which must behave the
// same under every backend, and what execbox's policy denies, which must
// be denied under every backend that isolates (isolation above "none").
// It is data, reviewed here in one place; syscalls.go only runs it.
//
// Each row is a Python function body. It runs in the work dir, after the
// prelude (syscallPrelude), and returns its result as a string. An allowed
// row must return exactly Want. A denied row runs in a forked child (so a
// call that does get through changes nothing of the program) and reports
// refused(r, errno) of the call: "denied <ERRNO>" for EPERM, EACCES or
// ENOSYS, "allowed …" otherwise; Want is "denied" (any of those) or one
// exact answer. Syscall names the call the row is about (for a reader, and
// for the suite's self-test, which denies it to prove the row can fail).

// SyscallRow is one row of the syscall table.
type SyscallRow struct {
	Name    string // the row's name: the subtest syscalls/{allowed,denied}/<Name>
	Syscall string // the system call the row exercises
	Allowed bool   // allowed everywhere (else denied wherever there is isolation)
	Want    string // the exact result; for a denied row "denied" means any refusal
	Probe   string // Python: the body of a function returning the result
}

// SyscallTable returns the table (a copy).
func SyscallTable() []SyscallRow { return append([]SyscallRow(nil), syscallTable...) }

var syscallTable = []SyscallRow{
	// Waiting on file descriptors: a pipe is not ready, then is.
	{"select", "pselect6", true, "ok 0 1", `
r, w = os.pipe()
a = len(select.select([r], [], [], 0)[0])
os.write(w, b"x")
return "ok %d %d" % (a, len(select.select([r], [], [], 5)[0]))`},
	{"pselect6", "pselect6", true, "ok 0 1", `
r, w = os.pipe()
def ps():
    fds = (ctypes.c_ulong * 16)()
    fds[r // 64] |= 1 << (r % 64)
    ts = (ctypes.c_long * 2)(0, 0)
    return libc.pselect(r + 1, ctypes.byref(fds), None, None, ctypes.byref(ts), None)
a = ps()
os.write(w, b"x")
return "ok %d %d" % (a, ps())`},
	{"poll", "poll", true, "ok 0 1", `
r, w = os.pipe()
p = select.poll()
p.register(r, select.POLLIN)
a = len(p.poll(0))
os.write(w, b"x")
return "ok %d %d" % (a, len(p.poll(5000)))`},
	{"ppoll", "ppoll", true, "ok 0 1", `
r, w = os.pipe()
def pp():
    pfd = (ctypes.c_int * 2)(r, 1)  # struct pollfd {int fd; short events, revents}: POLLIN
    ts = (ctypes.c_long * 2)(0, 0)
    return libc.ppoll(ctypes.byref(pfd), 1, ctypes.byref(ts), None)
a = pp()
os.write(w, b"x")
return "ok %d %d" % (a, pp())`},
	{"epoll", "epoll_wait", true, "ok 0 1", `
r, w = os.pipe()
e = select.epoll()
e.register(r, select.EPOLLIN)
a = len(e.poll(0))
os.write(w, b"x")
return "ok %d %d" % (a, len(e.poll(5)))`},
	// Files and directories.
	{"statx", "statx", true, "ok size=5", `
with open("sc-statx", "w") as f: f.write("hello")
buf = ctypes.create_string_buffer(256)
r = libc.statx(-100, b"sc-statx", 0, 0x7ff, buf)  # AT_FDCWD, STATX_BASIC_STATS
if r != 0: return en(ctypes.get_errno())
return "ok size=%d" % struct.unpack_from("=Q", buf, 40)[0]`},
	{"newfstatat", "newfstatat", true, "ok 5 True", `
with open("sc-stat", "w") as f: f.write("hello")
st = os.stat("sc-stat")
return "ok %d %s" % (st.st_size, stat.S_ISREG(st.st_mode))`},
	{"getdents64", "getdents64", true, "ok a,b,c", `
os.makedirs("sc-dir", exist_ok=True)
for n in "cab": open("sc-dir/" + n, "w").close()
return "ok " + ",".join(sorted(os.listdir("sc-dir")))`},
	{"openat_rw", "openat", true, "ok hello", `
fd = os.open("sc-rw", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"hello")
os.lseek(fd, 0, 0)
data = os.read(fd, 10)
os.fsync(fd)
os.close(fd)
return "ok " + data.decode()`},
	{"fs_ops", "rename", true, "ok link=target sym=x", `
with open("sc-x", "w") as f: f.write("x")
os.rename("sc-x", "sc-y")
os.link("sc-y", "sc-z")
os.symlink("target", "sc-l")
os.mkdir("sc-m"); os.rmdir("sc-m")
os.utime("sc-y", (1, 2)); os.chmod("sc-y", 0o600)
out = "ok link=%s sym=%s" % (os.readlink("sc-l"), open("sc-z").read())
for n in ("sc-y", "sc-z", "sc-l"): os.unlink(n)
return out`},
	{"getcwd", "getcwd", true, "ok", `
return "ok" if os.getcwd() == os.path.realpath(".") else "cwd " + os.getcwd()`},
	// Processes and threads.
	{"fork_wait4", "wait4", true, "ok 7", `
pid = os.fork()
if pid == 0: os._exit(7)
_, st, ru = os.wait4(pid, 0)
return "ok %d" % os.waitstatus_to_exitcode(st)`},
	{"thread", "clone", true, "ok 42", `
box = []
t = threading.Thread(target=lambda: box.append(42)); t.start(); t.join()
return "ok %d" % box[0]`},
	{"futex", "futex", true, "ok 0 EAGAIN", `
word = ctypes.c_int(0)
woken = libc.syscall(ctypes.c_long(NR["futex"]), ctypes.byref(word), ctypes.c_long(1), ctypes.c_long(1), None, None, ctypes.c_long(0))  # FUTEX_WAKE
ctypes.set_errno(0)
r = libc.syscall(ctypes.c_long(NR["futex"]), ctypes.byref(word), ctypes.c_long(0), ctypes.c_long(1), None, None, ctypes.c_long(0))  # FUTEX_WAIT, value differs
return "ok %d %s" % (woken, en(ctypes.get_errno()) if r < 0 else "waited")`},
	{"signal", "rt_sigaction", true, "ok handled", `
got = []
signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))
os.kill(os.getpid(), signal.SIGUSR1)
time.sleep(0)
return "ok handled" if got else "not handled"`},
	{"setitimer", "setitimer", true, "ok", `
signal.setitimer(signal.ITIMER_REAL, 100)
left = signal.getitimer(signal.ITIMER_REAL)[0]
signal.setitimer(signal.ITIMER_REAL, 0)
return "ok" if 0 < left <= 100 else "left %r" % left`},
	{"prctl_name", "prctl", true, "ok execbox-probe", `
libc.prctl(15, b"execbox-probe")  # PR_SET_NAME
buf = ctypes.create_string_buffer(16)
libc.prctl(16, buf)  # PR_GET_NAME
return "ok " + buf.value.decode()`},
	{"sched_yield", "sched_yield", true, "ok", `
os.sched_yield()
return "ok" if os.sched_getaffinity(0) else "no cpus"`},
	{"rlimits", "prlimit64", true, "ok", `
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
return "ok" if resource.getrusage(resource.RUSAGE_SELF).ru_utime >= 0 else "no rusage"`},
	// Descriptors of special kinds.
	{"pipe2", "pipe2", true, "ok EAGAIN", `
r, w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
try:
    os.read(r, 1)
    return "read something"
except BlockingIOError as e:
    return "ok " + en(e.errno)`},
	{"eventfd", "eventfd2", true, "ok 3", `
fd = os.eventfd(0)
os.eventfd_write(fd, 3)
return "ok %d" % os.eventfd_read(fd)`},
	{"timerfd", "timerfd_create", true, "ok 1", `
fd = libc.timerfd_create(1, 0)  # CLOCK_MONOTONIC
if fd < 0: return en(ctypes.get_errno())
spec = (ctypes.c_long * 4)(0, 0, 0, 1000000)  # it_interval 0, it_value 1 ms
if libc.timerfd_settime(fd, 0, ctypes.byref(spec), None) != 0: return en(ctypes.get_errno())
return "ok %d" % min(struct.unpack("=Q", os.read(fd, 8))[0], 1)`},
	{"memfd_create", "memfd_create", true, "ok abc", `
fd = os.memfd_create("execbox-probe")
os.write(fd, b"abc")
return "ok " + os.pread(fd, 3, 0).decode()`},
	{"inotify", "inotify_init1", true, "ok", `
fd = libc.inotify_init1(0o2000000)  # IN_CLOEXEC
if fd < 0: return en(ctypes.get_errno())
wd = libc.inotify_add_watch(fd, b".", 0x100)  # IN_CREATE
return "ok" if wd >= 0 else en(ctypes.get_errno())`},
	{"socketpair", "socketpair", true, "ok ping", `
a, b = socket.socketpair()
a.sendall(b"ping")
return "ok " + b.recv(4).decode()`},
	{"unix_socket", "bind", true, "ok hi", `
if os.path.exists("sc-sock"): os.unlink("sc-sock")
srv = socket.socket(socket.AF_UNIX); srv.bind("sc-sock"); srv.listen(1)
c = socket.socket(socket.AF_UNIX); c.connect("sc-sock")
conn, _ = srv.accept(); c.sendall(b"hi")
out = "ok " + conn.recv(2).decode()
os.unlink("sc-sock")
return out`},
	{"tcp_loopback", "connect", true, "ok hi", `
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
c = socket.create_connection(srv.getsockname(), timeout=5)
conn, _ = srv.accept(); c.sendall(b"hi")
return "ok " + conn.recv(2).decode()`},
	{"sendfile", "sendfile", true, "ok hello", `
with open("sc-src", "w") as f: f.write("hello")
src = os.open("sc-src", os.O_RDONLY)
dst = os.open("sc-dst", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.sendfile(dst, src, 0, 5)
os.close(src); os.close(dst)
return "ok " + open("sc-dst").read()`},
	{"ioctl_pipe", "ioctl", true, "ok ENOTTY", `
r, w = os.pipe()
try:
    fcntl.ioctl(r, termios.TCGETS, b"\0" * 64)
    return "a tty"
except OSError as e:
    return "ok " + en(e.errno)`},
	// Memory and time.
	{"mmap_mprotect", "mprotect", true, "ok 42", `
m = mmap.mmap(-1, 4096)
m[0] = 42
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
r = libc.mprotect(addr, 4096, 1)  # PROT_READ
return "ok %d" % m[0] if r == 0 else en(ctypes.get_errno())`},
	{"clock_nanosleep", "clock_nanosleep", true, "ok", `
t = time.monotonic(); time.sleep(0.001)
return "ok" if time.monotonic() > t else "clock stood still"`},
	{"nanosleep", "nanosleep", true, "ok 0", `
ts = (ctypes.c_long * 2)(0, 1000)  # glibc's nanosleep is clock_nanosleep: made raw
return "ok %d" % libc.syscall(ctypes.c_long(NR["nanosleep"]), ctypes.byref(ts), None)`},
	{"getrandom", "getrandom", true, "ok 16", `
return "ok %d" % len(os.getrandom(16))`},
	{"uname", "uname", true, "ok Linux", `
return "ok " + os.uname().sysname`},

	// What the policy denies. Each runs in a forked child.
	{"unshare_user", "unshare", false, "denied", `
return refused(libc.unshare(0x10000000), ctypes.get_errno())  # CLONE_NEWUSER`},
	{"unshare_mount", "unshare", false, "denied", `
return refused(libc.unshare(0x00020000), ctypes.get_errno())  # CLONE_NEWNS`},
	{"unshare_net", "unshare", false, "denied", `
return refused(libc.unshare(0x40000000), ctypes.get_errno())  # CLONE_NEWNET`},
	{"clone_newuser", "clone", false, "denied", `
r = libc.syscall(ctypes.c_long(NR["clone"]), ctypes.c_long(0x10000000 | 17), None, None, None, None)  # CLONE_NEWUSER|SIGCHLD
if r == 0: os._exit(0)
e = ctypes.get_errno()
if r > 0: os.waitpid(r, 0)
return refused(r, e)`},
	{"clone3", "clone3", false, "denied ENOSYS", `
args = (ctypes.c_uint64 * 11)()
args[4] = 17  # exit_signal SIGCHLD
r = libc.syscall(ctypes.c_long(NR["clone3"]), ctypes.byref(args), ctypes.c_long(88))
if r == 0: os._exit(0)
e = ctypes.get_errno()
if r > 0: os.waitpid(r, 0)
return refused(r, e)`},
	{"setns", "setns", false, "denied", `
fd = os.open(".", os.O_RDONLY)  # not a namespace: a setns that gets through fails with EINVAL
return refused(libc.setns(fd, 0), ctypes.get_errno())`},
	{"mount", "mount", false, "denied", `
os.makedirs("sc-mnt", exist_ok=True)
if libc.unshare(0x00020000) == 0:  # CLONE_NEWNS: where that gets through, mounts stay in this child
    libc.mount(b"none", b"/", None, 0x4000 | 0x40000, None)  # MS_REC|MS_PRIVATE
r = libc.mount(b"none", b"sc-mnt", b"tmpfs", 0, None)
e = ctypes.get_errno()
if r == 0: libc.umount2(b"sc-mnt", 2)  # MNT_DETACH: leave nothing behind
return refused(r, e)`},
	{"umount2", "umount2", false, "denied", `
return refused(libc.umount2(b"/execbox-no-such-mount", 0), ctypes.get_errno())`},
	{"pivot_root", "pivot_root", false, "denied", `
return refused(libc.syscall(ctypes.c_long(NR["pivot_root"]), b"/execbox-no-a", b"/execbox-no-b"), ctypes.get_errno())`},
	{"chroot", "chroot", false, "denied", `
return refused(libc.chroot(b"."), ctypes.get_errno())`},
	{"ptrace", "ptrace", false, "denied", `
pid = os.fork()
if pid == 0:
    time.sleep(30); os._exit(0)
r = libc.ptrace(16, pid, None, None)  # PTRACE_ATTACH
e = ctypes.get_errno()
os.kill(pid, signal.SIGKILL); os.waitpid(pid, 0)
return refused(r, e)`},
	{"process_vm_readv", "process_vm_readv", false, "denied", `
src = ctypes.create_string_buffer(8); dst = ctypes.create_string_buffer(8)
local = (ctypes.c_void_p * 2)(ctypes.addressof(dst), 8)
remote = (ctypes.c_void_p * 2)(ctypes.addressof(src), 8)
return refused(libc.process_vm_readv(os.getpid(), local, 1, remote, 1, 0), ctypes.get_errno())`},
	{"kexec_load", "kexec_load", false, "denied", `
return refused(libc.syscall(ctypes.c_long(NR["kexec_load"]), None, None, None, ctypes.c_long(0x7fff0000)), ctypes.get_errno())  # flags no kernel knows`},
	{"init_module", "init_module", false, "denied", `
return refused(libc.syscall(ctypes.c_long(NR["init_module"]), None, None, b""), ctypes.get_errno())`},
	{"delete_module", "delete_module", false, "denied", `
return refused(libc.syscall(ctypes.c_long(NR["delete_module"]), b"execbox_no_such_module", None), ctypes.get_errno())`},
	{"keyctl", "keyctl", false, "denied", `
return refused(libc.syscall(ctypes.c_long(NR["keyctl"]), ctypes.c_long(1), None), ctypes.get_errno())  # KEYCTL_JOIN_SESSION_KEYRING`},
	{"add_key", "add_key", false, "denied", `
return refused(libc.syscall(ctypes.c_long(NR["add_key"]), b"user", b"execbox", b"v", ctypes.c_long(1), ctypes.c_long(-2)), ctypes.get_errno())  # the process keyring`},
	{"bpf", "bpf", false, "denied", `
attr = ctypes.create_string_buffer(128)
return refused(libc.syscall(ctypes.c_long(NR["bpf"]), ctypes.c_long(0), attr, ctypes.c_long(128)), ctypes.get_errno())  # BPF_MAP_CREATE`},
	{"perf_event_open", "perf_event_open", false, "denied", `
attr = ctypes.create_string_buffer(128)
struct.pack_into("=II", attr, 0, 1, 128)  # PERF_TYPE_SOFTWARE, size
return refused(libc.syscall(ctypes.c_long(NR["perf_event_open"]), attr, ctypes.c_long(0), ctypes.c_long(-1), ctypes.c_long(-1), ctypes.c_long(0)), ctypes.get_errno())`},
	{"userfaultfd", "userfaultfd", false, "denied", `
return refused(libc.syscall(ctypes.c_long(NR["userfaultfd"]), ctypes.c_long(0)), ctypes.get_errno())`},
	{"io_uring_setup", "io_uring_setup", false, "denied", `
params = ctypes.create_string_buffer(120)
return refused(libc.syscall(ctypes.c_long(NR["io_uring_setup"]), ctypes.c_long(1), params), ctypes.get_errno())`},
	{"personality", "personality", false, "denied", `
return refused(libc.personality(0x0040000), ctypes.get_errno())  # ADDR_NO_RANDOMIZE`},
	{"swapon", "swapon", false, "denied", `
return refused(libc.swapon(b"/execbox-no-such-swap", 0), ctypes.get_errno())`},
	{"reboot", "reboot", false, "denied", `
return refused(libc.syscall(ctypes.c_long(NR["reboot"]), ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0), None), ctypes.get_errno())  # bad magic`},
}
