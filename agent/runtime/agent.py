# execbox session agent: one process inside a session's sandbox that runs
# the session's execs, interpreter contexts and terminals side by side.
#
# Protocol: JSON lines. Requests on stdin, answers on the original stdout
# (moved to a private fd; fd 1 then points at stderr, so nothing printed
# by accident breaks the protocol). The first request is
# {"op":"init","kernels":{language: [argv...]}}: how each language's kernel
# is started (it reads calls on stdin and answers on fd 3).
#
#   exec    {id, args, env, dir, stdin: bool}  -> out*, exit
#   start   {id, args, env, dir, rows, cols}   a terminal -> out*, exit
#   input   {id, data(b64)} / eof {id}         to an exec's stdin or a terminal
#   resize  {id, req, rows, cols}               -> {id: req, ok} once the size is set
#   signal  {id, sig}                          SIGKILL ends the whole tree
#   ctx     {id, language}                     a new context -> {id, ok}
#   code    {id, ctx, code, timeout}           -> out*, {id, result}
#   interrupt {ctx}                            ends the running call as at its timeout
#   drop    {ctx}                              ends a context
#
# Answers: {"id", "out": "stdout"|"stderr", "data": b64}, {"id", "exit":
# {"code", "signal", "cpu_ns", "error"}}, {"id", "result": {..., "cpu_ns"}},
# {"id", "error": {"code", "message"}}.
#
# The agent is its trees' subreaper (PR_SET_CHILD_SUBREAPER): a process
# that leaves its parent's tree (setsid and a double fork, a daemon) becomes
# the agent's child, an orphan. When an exec, a terminal's program or a
# context's call ends, the orphans are killed and their CPU time counted in
# what ended: nothing a request started outlives it unless it stays a
# descendant of a process that lives on (a context's kernel, a terminal's
# shell, a running exec).
import base64
import errno
import fcntl
import json
import os
import select
import signal
import struct
import sys
import termios
import time

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper():
    """Makes this process the reaper of its descendants' orphans; False
    where it cannot (no ctypes, or the call failed)."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except Exception:  # noqa: BLE001 - any failure means no subreaper
        return False


SUBREAPER = become_subreaper()
PROTO = os.dup(1)  # not inherited (os.dup's fds never are)
os.dup2(2, 1)
WAKE_R, WAKE_W = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
signal.set_wakeup_fd(WAKE_W)
signal.signal(signal.SIGCHLD, lambda *_: None)
signal.signal(signal.SIGPIPE, signal.SIG_IGN)
CHUNK = 64 * 1024
# Input waiting for a program that does not read it: kept up to this, the
# rest dropped (the agent never blocks on a program).
MAX_PENDING = 4 << 20
# A context's kernel ends a call at its timeout itself; LATE after it the
# agent interrupts it (SIGINT), GRACE after that it kills it (lost).
LATE = 1.0
GRACE = 2.0

kernels = {}  # language -> argv of its kernel
procs = {}  # pid -> Proc
readers = {}  # fd -> (Proc, stream)
writers = {}  # id -> Proc whose stdin (or terminal) takes input
contexts = {}  # ctx id -> Context


def nonblocking(fd):
    # fcntl, not os.set_blocking's ioctl: a terminal is the only thing here
    # that needs ioctls.
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)


def send(obj):
    data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
    while data:
        try:
            n = os.write(PROTO, data)
        except InterruptedError:
            continue
        data = data[n:]


def b64(data):
    return base64.b64encode(data).decode()


class Proc:
    def __init__(self, rid, pid, fds, stdin, term=False, ctx=None):
        self.id, self.pid, self.stdin, self.term, self.ctx = rid, pid, stdin, term, ctx
        self.open = set(fds)
        self.status = None
        self.rusage = None
        self.extra_cpu = 0.0  # the orphans' killed when it ended
        self.reaped_at = None
        self.pending = bytearray()  # input not yet taken
        self.eof = False  # close stdin once pending is written
        for fd, stream in fds.items():
            nonblocking(fd)
            readers[fd] = (self, stream)
        procs[pid] = self

    def close_fd(self, fd):
        readers.pop(fd, None)
        self.open.discard(fd)
        os.close(fd)

    def give(self, data):
        """Queues input; what does not fit is dropped."""
        self.pending += data[: max(MAX_PENDING - len(self.pending), 0)]
        self.flush()

    def flush(self):
        """Writes what input it can without blocking."""
        while self.pending and self.stdin is not None:
            try:
                n = os.write(self.stdin, self.pending)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # the program closed its end
                self.pending.clear()
                break
            del self.pending[:n]
        if not self.pending and self.eof and self.stdin is not None and not self.term:
            os.close(self.stdin)
            self.stdin = None


def spawn(rid, args, env, cwd, stdin_fd, out_fd, err_fd, extra=(), setctty=False):
    """Forks a program in its own session and process group."""
    env = dict(os.environ, **env)
    pr, pw = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        try:
            os.close(pr)
            os.setsid()
            os.dup2(stdin_fd, 0)
            os.dup2(out_fd, 1)
            os.dup2(err_fd, 2)
            for i, fd in enumerate(extra):
                os.dup2(fd, 3 + i)
            if setctty:
                fcntl.ioctl(0, termios.TIOCSCTTY, 0)
            for sig in (signal.SIGCHLD, signal.SIGPIPE, signal.SIGINT):
                signal.signal(sig, signal.SIG_DFL)
            signal.set_wakeup_fd(-1)
            if cwd:
                os.chdir(cwd)
            os.execvpe(args[0], args, env)
        except BaseException as e:  # noqa: BLE001 - the child must never return
            code = 127 if isinstance(e, FileNotFoundError) else 126
            try:
                os.write(pw, json.dumps({"code": code, "error": str(e)}).encode())
            finally:
                os._exit(code)
    os.close(pw)
    err = b""
    while True:
        try:
            chunk = os.read(pr, 4096)
        except InterruptedError:
            continue
        if not chunk:
            break
        err += chunk
    os.close(pr)
    return pid, (json.loads(err) if err else None)


def close_all(*fds):
    for fd in fds:
        if fd is not None:
            os.close(fd)


def do_exec(req):
    rid = req["id"]
    if req.get("dir") and not os.path.isdir(req["dir"]):
        send({"id": rid, "error": {"code": "dir_not_found", "message": "working directory %s is not a directory in the work dir" % req["dir"]}})
        return
    i_r, i_w = os.pipe2(os.O_CLOEXEC) if req.get("stdin") else (os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC), None)
    o_r, o_w = os.pipe2(os.O_CLOEXEC)
    e_r, e_w = os.pipe2(os.O_CLOEXEC)
    pid, failed = spawn(rid, req["args"], req.get("env") or {}, req.get("dir") or None, i_r, o_w, e_w)
    close_all(i_r, o_w, e_w)
    if i_w is not None:
        nonblocking(i_w)
    p = Proc(rid, pid, {o_r: "stdout", e_r: "stderr"}, i_w)
    if failed:
        p.error = failed["error"]
    if i_w is not None:
        writers[rid] = p


def do_start(req):
    rid = req["id"]
    if req.get("dir") and not os.path.isdir(req["dir"]):
        send({"id": rid, "error": {"code": "dir_not_found", "message": "working directory %s is not a directory in the work dir" % req["dir"]}})
        return
    master, slave = os.openpty()  # neither is inherited
    set_size(master, req.get("rows") or 24, req.get("cols") or 80)
    env = dict(req.get("env") or {})
    env.setdefault("TERM", "xterm-256color")
    pid, failed = spawn(rid, req["args"], env, req.get("dir") or None, slave, slave, slave, setctty=True)
    os.close(slave)
    p = Proc(rid, pid, {master: "stdout"}, os.dup(master), term=True)
    if failed:
        p.error = failed["error"]
    writers[rid] = p


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Context:
    def __init__(self, cid, language):
        self.id, self.language = cid, language
        self.call = None  # id of the running call
        self.deadline = None
        self.interrupted = None  # when SIGINT was sent
        self.buf = b""
        self.cpu_start = 0.0
        c_r, c_w = os.pipe2(os.O_CLOEXEC)  # requests
        a_r, a_w = os.pipe2(os.O_CLOEXEC)  # answers, on the kernel's fd 3
        o_r, o_w = os.pipe2(os.O_CLOEXEC)
        e_r, e_w = os.pipe2(os.O_CLOEXEC)
        argv = list(kernels[language])
        pid, failed = spawn(cid, argv, {}, None, c_r, o_w, e_w, extra=(a_w,))
        close_all(c_r, a_w, o_w, e_w)
        self.proc = Proc(None, pid, {o_r: "stdout", e_r: "stderr"}, c_w, ctx=self)
        self.answers = a_r
        nonblocking(a_r)
        if failed:
            raise OSError(failed["error"])

    def run(self, rid, code, timeout):
        self.call = rid
        self.proc.id = rid
        self.deadline = time.monotonic() + timeout + LATE
        self.interrupted = None
        self.cpu_start = proc_cpu(self.proc.pid)
        write_all(self.proc.stdin, (json.dumps({"code": code, "timeout": timeout}) + "\n").encode())

    def answered(self):
        """Reads the kernel's answers; returns one when complete."""
        try:
            chunk = os.read(self.answers, CHUNK)
        except (BlockingIOError, InterruptedError):
            return None
        if not chunk:
            return None
        self.buf += chunk
        if b"\n" not in self.buf:
            return None
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)


def write_all(fd, data):
    while data:
        try:
            n = os.write(fd, data)
        except (InterruptedError, BlockingIOError):
            select.select([], [fd], [], 1.0)
            continue
        data = data[n:]


def drain(p, fd, stream):
    while True:
        try:
            data = os.read(fd, CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:  # a terminal whose last user left: EIO
            if e.errno != errno.EIO:
                raise
            data = b""
        if not data:
            p.close_fd(fd)
            return
        if p.id is not None:
            send({"id": p.id, "out": stream, "data": b64(data)})
        if len(data) < CHUNK:
            return


def kill_tree(p, sig=signal.SIGKILL):
    try:
        os.killpg(p.pid, sig)
    except ProcessLookupError:
        pass


def orphans():
    """The agent's children it did not start: orphans of its trees."""
    me = os.getpid()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in procs:
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses.
        fields = stat[stat.rindex(b")") + 2 :].split()
        if int(fields[1]) == me:
            out.append(int(name))
    return out


def sweep():
    """Kills every orphan and reaps it; returns the CPU seconds the orphans
    reaped since the last sweep used. An orphan's own children become
    orphans when it dies: rounds until none is left."""
    global orphan_cpu
    deadline = time.monotonic() + 2.0
    while True:
        left = orphans()
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        collect()
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.005)
    cpu, orphan_cpu = orphan_cpu, 0.0
    return cpu


def proc_cpu(pid):
    """CPU seconds of pid and of its reaped children, from /proc."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(b")") + 2 :].split()
    # utime stime cutime cstime are fields 14-17 of stat(5); here from 3.
    return sum(int(x) for x in fields[11:15]) / TICKS


TICKS = os.sysconf("SC_CLK_TCK")


def finish_ctx_call(c, result):
    for fd in list(c.proc.open):
        drain(c.proc, fd, readers[fd][1])
    rid, c.call, c.deadline, c.proc.id = c.call, None, None, None
    cpu = proc_cpu(c.proc.pid) - c.cpu_start + sweep()
    result["cpu_ns"] = int(max(cpu, 0) * 1e9)
    send({"id": rid, "result": result})


def lose(c, why):
    """A context that did not survive: killed, answered what it was doing."""
    kill_tree(c.proc)
    contexts.pop(c.id, None)
    if c.call is not None:
        finish_ctx_call(c, {"ok": False, "lost": True, "error": {"type": "ContextLost", "message": why}})
    close_all(c.answers, c.proc.stdin)
    c.proc.stdin = None


orphan_cpu = 0.0  # CPU seconds of orphans reaped since the last sweep


def reap():
    """Reaps every child that ended. When an exec's or a terminal's program
    has ended, its process group and every orphan are killed at once (none
    keeps its output open) and their CPU time is counted in its."""
    ended = collect()
    if ended:
        ended[0].extra_cpu += sweep()


def collect():
    """Reaps the children that ended; returns the execs and terminals among
    them, whose process groups it kills."""
    global orphan_cpu
    ended = []
    while True:
        try:
            pid, status, ru = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        p = procs.get(pid)
        if p is None:  # an orphan, or a kernel's reaped process
            orphan_cpu += ru.ru_utime + ru.ru_stime
            continue
        p.status, p.rusage, p.reaped_at = status, ru, time.monotonic()
        if p.ctx is None:
            # What the program left behind dies with it, as in a run.
            kill_tree(p)
            ended.append(p)


def report(p):
    procs.pop(p.pid, None)
    writers.pop(p.id, None)
    for fd in list(p.open):
        p.close_fd(fd)
    if p.stdin is not None:
        try:
            os.close(p.stdin)
        except OSError:
            pass
    st = p.status
    cpu = p.rusage.ru_utime + p.rusage.ru_stime + p.extra_cpu
    ex = {"code": -1, "cpu_ns": int(cpu * 1e9)}
    if os.WIFEXITED(st):
        ex["code"] = os.WEXITSTATUS(st)
    elif os.WIFSIGNALED(st):
        ex["signal"] = signal.Signals(os.WTERMSIG(st)).name
    if getattr(p, "error", None):
        ex["error"] = p.error
    send({"id": p.id, "exit": ex})


def handle(req):
    op = req.get("op")
    rid = req.get("id")
    try:
        if op == "init":
            kernels.update(req["kernels"])
            send({"ready": True, "pid": os.getpid(), "subreaper": SUBREAPER})
        elif op == "exec":
            do_exec(req)
        elif op == "start":
            do_start(req)
        elif op == "input":
            p = writers.get(rid)
            if p is not None and p.stdin is not None:
                p.give(base64.b64decode(req["data"]))
        elif op == "eof":
            p = writers.get(rid)
            if p is not None and not p.term:
                p.eof = True
                p.flush()
        elif op == "resize":
            p = writers.get(rid)
            if p is None or not p.term:
                send({"id": req["req"], "error": {"code": "terminal_ended", "message": "the terminal's program has ended"}})
            else:
                try:
                    set_size(p.stdin, req["rows"], req["cols"])
                except OSError as e:
                    send({"id": req["req"], "error": {"code": "agent_error", "message": "setting the size: %s" % e}})
                else:
                    send({"id": req["req"], "ok": True})
        elif op == "signal":
            for p in list(procs.values()):
                if p.id == rid and p.ctx is None:
                    kill_tree(p, getattr(signal, req.get("sig") or "SIGKILL"))
        elif op == "ctx":
            if req["language"] not in kernels:
                raise LookupError("no kernel for " + req["language"])
            contexts[rid] = Context(rid, req["language"])
            send({"id": rid, "ok": True})
        elif op == "code":
            c = contexts.get(req["ctx"])
            if c is None:
                send({"id": rid, "error": {"code": "context_not_found", "message": "no context " + req["ctx"]}})
            elif c.call is not None:
                send({"id": rid, "error": {"code": "context_busy", "message": "context " + c.id + " is running a call"}})
            else:
                c.run(rid, req["code"], float(req["timeout"]))
        elif op == "interrupt":
            c = contexts.get(req["ctx"])
            if c is not None and c.call is not None:
                c.deadline = min(c.deadline, time.monotonic())
        elif op == "drop":
            c = contexts.get(req["ctx"])
            if c is not None:
                lose(c, "the context was closed")
        else:
            raise ValueError("unknown op %r" % op)
    except Exception as e:  # noqa: BLE001 - each request answers, the agent lives on
        send({"id": rid, "error": {"code": "agent_error", "message": "%s: %s" % (type(e).__name__, e)}})


def main():
    inbuf = b""
    nonblocking(0)
    while True:
        now = time.monotonic()
        timeout = 1.0
        for c in list(contexts.values()):
            if c.call is None:
                continue
            if c.interrupted is None and now >= c.deadline:
                # The call is late: an interrupt, which the kernel turns into
                # an exception, so that the context lives on.
                c.interrupted = now
                try:
                    os.kill(c.proc.pid, signal.SIGINT)
                except ProcessLookupError:
                    pass
            if c.interrupted is not None and now >= c.interrupted + GRACE:
                lose(c, "the call did not stop within %.0f s of its timeout; the context was killed" % GRACE)
                continue
            timeout = min(timeout, max(0.0, (c.deadline if c.interrupted is None else c.interrupted + GRACE) - now))
        fds = [0, WAKE_R] + list(readers) + [c.answers for c in contexts.values()]
        waiting = {p.stdin: p for p in writers.values() if p.pending and p.stdin is not None}
        try:
            ready, writable, _ = select.select(fds, list(waiting), [], timeout)
        except InterruptedError:
            ready, writable = [], []
        for fd in writable:
            waiting[fd].flush()
        for fd in ready:
            if fd == 0:
                try:
                    chunk = os.read(0, CHUNK)
                except (BlockingIOError, InterruptedError):
                    continue
                if not chunk:
                    return
                inbuf += chunk
                while b"\n" in inbuf:
                    line, inbuf = inbuf.split(b"\n", 1)
                    handle(json.loads(line))
            elif fd == WAKE_R:
                try:
                    os.read(WAKE_R, 4096)
                except BlockingIOError:
                    pass
            elif fd in readers:
                p, stream = readers[fd]
                drain(p, fd, stream)
            else:
                for c in list(contexts.values()):
                    if c.answers == fd:
                        ans = c.answered()
                        if ans is not None and c.call is not None:
                            finish_ctx_call(c, ans)
        reap()
        now = time.monotonic()
        for p in list(procs.values()):
            if p.status is None:
                continue
            if p.ctx is not None:
                c = p.ctx
                procs.pop(p.pid, None)
                if contexts.get(c.id) is c:
                    lose(c, "the interpreter exited (%s)" % describe(p.status))
                for fd in list(p.open):
                    p.close_fd(fd)
                continue
            # Its output is read to the end, or for a moment after it
            # ended: a straggler that keeps a pipe is killed (reap).
            if not p.open or now - p.reaped_at > 0.5:
                report(p)


def describe(status):
    if os.WIFSIGNALED(status):
        return "killed by " + signal.Signals(os.WTERMSIG(status)).name
    return "exit status %d" % os.WEXITSTATUS(status)


if __name__ == "__main__":
    try:
        main()
    finally:
        for p in list(procs.values()):
            kill_tree(p)
