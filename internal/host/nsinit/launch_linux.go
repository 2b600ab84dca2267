package nsinit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/host/reexec"
)

// Namespaces are the namespaces every init is cloned with; CLONE_NEWNET is
// added unless the network is the host's. Every namespace is made at clone
// time, so every thread of the init is in it: a network namespace made
// later by one thread (unshare is per thread) would leave the Go runtime's
// other threads in the host's, where /proc/1/task/N/net shows the host's
// interfaces and connections to the program.
const Namespaces = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP

// Options say how to start the init.
type Options struct {
	// InitPath is a standalone init binary (cmd/execbox-init); empty means
	// re-executing the current binary as the nsinit entry point.
	InitPath string
	// Cloneflags are the namespaces to create (Namespaces, plus
	// CLONE_NEWNET unless the network is the host's).
	Cloneflags uintptr
	// UIDMap and GIDMap map ids inside to ids on the host.
	UIDMap, GIDMap []syscall.SysProcIDMap
	// Setgroups allows setgroups(2) in the user namespace (root only; an
	// unprivileged gid_map requires it denied).
	Setgroups bool
	// AmbientCaps are kept across the init's execve when it is not root
	// in its user namespace (rootless).
	AmbientCaps []uintptr
	// CgroupFD, when >= 0, is a cgroup v2 directory fd the init is cloned
	// into (CLONE_INTO_CGROUP).
	CgroupFD int
}

// Launch is one init about to start: Cmd goes to a supervisor (proc.Run),
// Serve talks to the init while it runs, Release ends the talk once the
// init is gone.
type Launch struct {
	Cmd    *exec.Cmd
	cfg    []byte
	parent *os.File // our end of the control socket
	child  *os.File // the init's end (fd 3), held until Release
}

// NewLaunch prepares the init for cfg.
func NewLaunch(cfg *Config, o Options) (*Launch, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("checking init config: %w", err)
	}
	msg, err := frame(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding init config: %w", err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("creating control socket: %w", err)
	}
	// SO_PASSCRED: the init's first byte carries its PID as we see it.
	if err := unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, fmt.Errorf("creating control socket: %w", err)
	}
	var cmd *exec.Cmd
	if o.InitPath != "" {
		cmd = &exec.Cmd{Path: o.InitPath, Args: []string{"execbox-init"}, Env: []string{}}
	} else {
		cmd = reexec.Command(EntryName)
	}
	cmd.Env = []string{} // the init's own environment is empty: /proc/1/environ shows nothing
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:                 o.Cloneflags,
		UidMappings:                o.UIDMap,
		GidMappings:                o.GIDMap,
		GidMappingsEnableSetgroups: o.Setgroups,
		AmbientCaps:                o.AmbientCaps,
		Pdeathsig:                  syscall.SIGKILL,
	}
	if o.CgroupFD >= 0 {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = o.CgroupFD
	}
	l := &Launch{
		Cmd:    cmd,
		cfg:    msg,
		parent: os.NewFile(uintptr(fds[0]), "nsinit-control"),
		child:  os.NewFile(uintptr(fds[1]), "nsinit-control-child"),
	}
	cmd.ExtraFiles = []*os.File{l.child}
	return l, nil
}

// Serve sends the config, waits for the init to be ready, calls place
// with its host PID and the host id of the thread that will fork the
// program (to put the init in a cgroup while it sets up, and that thread in
// the program's own leaf), gives it the go-ahead and returns its status. It
// returns an error when the init ended without a status (killed, or failed
// before it could report) or when place failed, in which case the init
// gets no go-ahead and exits without running anything. Run it in its own
// goroutine, started before the supervisor; it returns once the init has
// reported or Release was called after the init ended.
func (l *Launch) Serve(place func(pid, tid int) error) (*Status, error) {
	defer l.parent.Close()
	// The config goes out at once: the init reads it while we place it.
	_, werr := l.parent.Write(l.cfg)
	// The init's own first word goes before a failed write: an init that
	// exited at once (a stale one) said why first, and the write then
	// fails with EPIPE or not, depending on who was faster.
	pid, nsTID, err := l.ready()
	if err != nil {
		return nil, err
	}
	if werr != nil {
		return nil, fmt.Errorf("sending init config: %w", werr)
	}
	if place != nil {
		tid, err := HostTID(pid, nsTID)
		if err != nil {
			return nil, err
		}
		if err := place(pid, tid); err != nil {
			return nil, err
		}
	}
	if _, err := l.parent.Write([]byte{goByte}); err != nil {
		return nil, fmt.Errorf("starting the sandbox init: %w", err)
	}
	var st Status
	if err := ReadMsg(l.parent, &st); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errors.New("the sandbox init ended without a status")
		}
		return nil, fmt.Errorf("reading init status: %w", err)
	}
	return &st, nil
}

// ready reads the init's first message — the protocol version and the id
// of its forking thread in its own PID namespace — and the PID the kernel
// attached.
func (l *Launch) ready() (pid, nsTID int, err error) {
	raw, err := l.parent.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	buf := make([]byte, 5)
	oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred))
	var n, oobn int
	var rerr error
	err = raw.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC)
		return !errors.Is(rerr, unix.EAGAIN)
	})
	if err == nil {
		err = rerr
	}
	if errors.Is(err, unix.ECONNRESET) {
		n, err = 0, nil // it died with our config unread
	}
	if err != nil {
		return 0, 0, fmt.Errorf("waiting for the sandbox init: %w", err)
	}
	if n == 0 {
		return 0, 0, errors.New("the sandbox init ended before it was ready")
	}
	if buf[0] != protocol {
		return 0, 0, fmt.Errorf("the sandbox init %s speaks protocol %d, this execbox %d: install execbox and execbox-init from the same build",
			l.Cmd.Path, buf[0], protocol)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) == 0 {
		return 0, 0, errors.New("the sandbox init sent no credentials")
	}
	cred, err := unix.ParseUnixCredentials(&msgs[0])
	if err != nil || cred.Pid <= 0 {
		return 0, 0, errors.New("the sandbox init sent no credentials")
	}
	if n < len(buf) {
		if _, err := io.ReadFull(l.parent, buf[n:]); err != nil {
			return 0, 0, errors.New("the sandbox init ended before it was ready")
		}
	}
	return int(cred.Pid), int(binary.BigEndian.Uint32(buf[1:])), nil
}

// HostTID maps thread nsTID of process pid, as the process's own (deepest)
// PID namespace numbers it, to the id this process sees: the task of pid
// whose NSpid ends in nsTID.
func HostTID(pid, nsTID int) (int, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("listing the threads of the sandbox init: %w", err)
	}
	for _, e := range ents {
		data, err := os.ReadFile(dir + "/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(data)) {
			ids, ok := strings.CutPrefix(line, "NSpid:")
			if !ok {
				continue
			}
			f := strings.Fields(ids)
			if len(f) > 0 && f[len(f)-1] == strconv.Itoa(nsTID) {
				return strconv.Atoi(f[0])
			}
		}
	}
	return 0, fmt.Errorf("the sandbox init %d has no thread %d", pid, nsTID)
}

// Release closes this process's copy of the init's end of the control
// socket. Call it once the supervisor has returned (the init is gone):
// Serve then sees the end of the stream. Safe to call more than once.
func (l *Launch) Release() {
	l.child.Close()
}
