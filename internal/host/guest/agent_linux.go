package guest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/sandbox"
)

// Paths of the guest.
const (
	modulesDir = "/modules" // the initramfs's kernel modules, loaded in the order of modulesDir/order
	newRoot    = "/newroot"
	workRoot   = "/run/execbox" // the inner backend's work root (a tmpfs in the VM's RAM)
)

// Main is the agent: PID 1 of the VM. It mounts the host's view as the
// root, opens the port, serves one sandbox made with newBackend, and
// powers the VM off when the host hangs up. It never returns.
func Main(newBackend func(sandbox.Settings) (sandbox.Backend, error)) {
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "execbox-guest: this is the init of an execbox microVM; it runs as PID 1 of one, not by hand")
		os.Exit(2)
	}
	port, err := boot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "execbox-guest: boot:", err)
		powerOff()
	}
	if err := serve(portConn{port}, sayHello, newBackend, workRoot); err != nil {
		fmt.Fprintln(os.Stderr, "execbox-guest:", err)
	}
	powerOff()
}

// ServeStdio is the agent of a container (the kubernetes backend's Pod):
// the host speaks to it through its stdin and stdout (an attach), and the
// sandbox's work root is workRoot. It returns when the host hangs up, the
// sandbox closed.
func ServeStdio(newBackend func(sandbox.Settings) (sandbox.Backend, error), workRoot string) error {
	return serve(stdioConn{}, greet, newBackend, workRoot)
}

// serve greets the host on conn with hello and serves one sandbox made
// with newBackend until the host hangs up; then it closes the sandbox.
func serve(conn net.Conn, hello func(net.Conn) error, newBackend func(sandbox.Settings) (sandbox.Backend, error), root string) error {
	b, err := newBackend(sandbox.Settings{WorkRoot: root})
	if err != nil {
		return fmt.Errorf("backend: %w", err)
	}
	a := &agent{b: b}
	if err := hello(conn); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	srv := &http2.Server{MaxConcurrentStreams: 64}
	srv.ServeConn(conn, &http2.ServeConnOpts{Handler: a.mux()})
	// The host hung up: nothing else will ever come.
	if sb := a.sandbox(); sb != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		sb.Close(ctx)
		cancel()
	}
	return nil
}

// sayHello is the agent's greeting on a VM's port: the host reads Hello
// before it writes (a virtio-serial port drops what arrives while the
// guest has it closed).
func sayHello(conn net.Conn) error {
	_, err := io.WriteString(conn, Hello)
	return err
}

func powerOff() {
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	select {}
}

// boot mounts what the agent needs, loads the modules, moves onto the
// host's view as root (pivot_root, which the inner backend uses, does not
// work from an initramfs) and opens the port.
func boot() (*os.File, error) {
	for _, m := range []struct{ src, dst, fs, data string }{
		{"devtmpfs", "/dev", "devtmpfs", "mode=0755"},
		{"proc", "/proc", "proc", ""},
		{"sysfs", "/sys", "sysfs", ""},
	} {
		if err := unix.Mount(m.src, m.dst, m.fs, unix.MS_NOSUID, m.data); err != nil {
			return nil, fmt.Errorf("mounting %s: %w", m.dst, err)
		}
	}
	if err := loadModules(); err != nil {
		return nil, err
	}
	opts := "trans=virtio,version=9p2000.L,cache=loose,msize=262144"
	if err := retry(func() error {
		return unix.Mount(RootTag, newRoot, "9p", unix.MS_RDONLY|unix.MS_NODEV|unix.MS_NOSUID, opts)
	}); err != nil {
		return nil, fmt.Errorf("mounting the host's view: %w", err)
	}
	for _, d := range []string{"/dev", "/proc", "/sys"} {
		if err := unix.Mount(d, newRoot+d, "", unix.MS_MOVE, ""); err != nil {
			return nil, fmt.Errorf("moving %s: %w", d, err)
		}
	}
	if err := unix.Chdir(newRoot); err != nil {
		return nil, err
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return nil, fmt.Errorf("moving the root: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return nil, err
	}
	if err := unix.Chdir("/"); err != nil {
		return nil, err
	}
	// No tmpfs on /tmp: a host path the sandbox mounts may live there
	// (the inner backend gives the program a /tmp of its own).
	for _, m := range []struct{ src, dst, fs, data string }{
		{"tmpfs", "/run", "tmpfs", "mode=0755"},
		{"cgroup2", "/sys/fs/cgroup", "cgroup2", ""},
	} {
		if err := unix.Mount(m.src, m.dst, m.fs, unix.MS_NOSUID|unix.MS_NODEV, m.data); err != nil {
			return nil, fmt.Errorf("mounting %s: %w", m.dst, err)
		}
	}
	for _, c := range []string{"cpu", "memory", "pids"} {
		if err := os.WriteFile("/sys/fs/cgroup/cgroup.subtree_control", []byte("+"+c), 0); err != nil {
			return nil, fmt.Errorf("enabling the %s controller: %w", c, err)
		}
	}
	var port *os.File
	err := retry(func() error {
		p, err := findPort()
		if err == nil {
			port, err = os.OpenFile(p, os.O_RDWR, 0)
		}
		return err
	})
	return port, err
}

// loadModules loads the initramfs's modules in dependency order.
func loadModules() error {
	order, err := os.ReadFile(filepath.Join(modulesDir, "order"))
	if err != nil {
		return err
	}
	for _, name := range strings.Fields(string(order)) {
		f, err := os.Open(filepath.Join(modulesDir, name))
		if err != nil {
			return err
		}
		err = unix.FinitModule(int(f.Fd()), "", 0)
		f.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("loading module %s: %w", name, err)
		}
	}
	return nil
}

// findPort is the device of the port named PortName.
func findPort() (string, error) {
	names, _ := filepath.Glob("/sys/class/virtio-ports/*/name")
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err == nil && strings.TrimSpace(string(b)) == PortName {
			return "/dev/" + filepath.Base(filepath.Dir(n)), nil
		}
	}
	return "", fmt.Errorf("no virtio port named %s", PortName)
}

// retry runs f until it succeeds, for up to 5 s: devices appear as their
// drivers probe them, not when the module is loaded.
func retry(f func() error) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// portConn is the port as the net.Conn HTTP/2 serves.
type portConn struct{ *os.File }

func (portConn) LocalAddr() net.Addr  { return &net.UnixAddr{Name: PortName, Net: "unix"} }
func (portConn) RemoteAddr() net.Addr { return &net.UnixAddr{Name: "host", Net: "unix"} }

// stdioConn is the agent's stdin and stdout as one net.Conn.
type stdioConn struct{}

func (stdioConn) Read(p []byte) (int, error)  { return os.Stdin.Read(p) }
func (stdioConn) Write(p []byte) (int, error) { return os.Stdout.Write(p) }
func (stdioConn) Close() error                { return errors.Join(os.Stdin.Close(), os.Stdout.Close()) }
func (stdioConn) LocalAddr() net.Addr         { return &net.UnixAddr{Name: "stdio", Net: "unix"} }
func (stdioConn) RemoteAddr() net.Addr        { return &net.UnixAddr{Name: "host", Net: "unix"} }
func (stdioConn) SetDeadline(t time.Time) error {
	return errors.Join(os.Stdin.SetReadDeadline(t), os.Stdout.SetWriteDeadline(t))
}
func (stdioConn) SetReadDeadline(t time.Time) error  { return os.Stdin.SetReadDeadline(t) }
func (stdioConn) SetWriteDeadline(t time.Time) error { return os.Stdout.SetWriteDeadline(t) }

// agent serves the one sandbox of this VM.
type agent struct {
	b sandbox.Backend

	mu     sync.Mutex
	sb     sandbox.Sandbox
	cancel context.CancelFunc // the running exec's
}

func (a *agent) sandbox() sandbox.Sandbox {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sb
}

func (a *agent) mux() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("POST /setup", a.setup)
	m.HandleFunc("POST /exec", a.exec)
	m.HandleFunc("POST /cancel", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		if a.cancel != nil {
			a.cancel()
		}
		a.mu.Unlock()
		reply(w, struct{}{}, nil)
	})
	m.HandleFunc("POST /write", func(w http.ResponseWriter, r *http.Request) {
		sb, err := a.need()
		var files map[string][]byte
		if err == nil {
			err = json.NewDecoder(r.Body).Decode(&files)
		}
		if err == nil {
			err = sb.WriteFiles(r.Context(), files)
		}
		reply(w, struct{}{}, err)
	})
	m.HandleFunc("GET /artifacts", func(w http.ResponseWriter, r *http.Request) {
		sb, err := a.need()
		var arts sandbox.Artifacts
		if err == nil {
			arts, err = sb.Artifacts(r.Context())
		}
		reply(w, artifactsReply{Files: arts.Files, Skipped: arts.Skipped}, err)
	})
	m.HandleFunc("GET /memory", func(w http.ResponseWriter, r *http.Request) {
		sb, err := a.need()
		var n int64
		if err == nil {
			if m, ok := sb.(sandbox.Meter); ok {
				n, err = m.Memory()
			} else {
				err = sandbox.Errorf(sandbox.ErrUnavailable, "no_cgroup", "the guest sandbox cannot measure its memory")
			}
		}
		reply(w, n, err)
	})
	m.HandleFunc("PUT /file", func(w http.ResponseWriter, r *http.Request) {
		f, err := a.files()
		var n int64
		if err == nil {
			n, err = f.PutFile(r.Context(), r.URL.Query().Get("path"), r.Body, queryInt(r, "max"))
		}
		reply(w, n, err)
	})
	m.HandleFunc("GET /file", a.getFile)
	m.HandleFunc("GET /stat", func(w http.ResponseWriter, r *http.Request) {
		f, err := a.files()
		var fi sandbox.FileInfo
		if err == nil {
			fi, err = f.Stat(r.Context(), r.URL.Query().Get("path"))
		}
		reply(w, fi, err)
	})
	m.HandleFunc("GET /list", func(w http.ResponseWriter, r *http.Request) {
		f, err := a.files()
		var l listReply
		if err == nil {
			l.Entries, l.Truncated, err = f.List(r.Context(), r.URL.Query().Get("path"), int(queryInt(r, "max")))
		}
		reply(w, l, err)
	})
	m.HandleFunc("POST /remove", func(w http.ResponseWriter, r *http.Request) {
		f, err := a.files()
		if err == nil {
			err = f.Remove(r.Context(), r.URL.Query().Get("path"))
		}
		reply(w, struct{}{}, err)
	})
	m.HandleFunc("POST /mkdir", func(w http.ResponseWriter, r *http.Request) {
		f, err := a.files()
		if err == nil {
			err = f.Mkdir(r.Context(), r.URL.Query().Get("path"))
		}
		reply(w, struct{}{}, err)
	})
	return m
}

func queryInt(r *http.Request, k string) int64 {
	n, _ := strconv.ParseInt(r.URL.Query().Get(k), 10, 64)
	return n
}

// reply answers with v as JSON, or with err.
func reply(w http.ResponseWriter, v any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(http.StatusUnprocessableEntity)
		json.NewEncoder(w).Encode(toWire(err))
		return
	}
	json.NewEncoder(w).Encode(v)
}

func (a *agent) need() (sandbox.Sandbox, error) {
	if sb := a.sandbox(); sb != nil {
		return sb, nil
	}
	return nil, sandbox.Errorf(sandbox.ErrInternal, "guest_not_set_up", "the agent has no sandbox yet")
}

func (a *agent) files() (sandbox.Files, error) {
	sb, err := a.need()
	if err != nil {
		return nil, err
	}
	f, ok := sb.(sandbox.Files)
	if !ok {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "files_unsupported", "the guest sandbox has no file calls")
	}
	return f, nil
}

func (a *agent) setup(w http.ResponseWriter, r *http.Request) {
	var s Setup
	if err := json.NewDecoder(r.Body).Decode(&s); err != nil {
		reply(w, nil, sandbox.Errorf(sandbox.ErrInternal, "guest_protocol", "bad setup: %w", err))
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sb != nil {
		reply(w, nil, sandbox.Errorf(sandbox.ErrInternal, "guest_protocol", "the agent already has its sandbox"))
		return
	}
	// The inner backend lets the host's allowlisted variables through
	// from its own environment.
	os.Clearenv()
	for _, kv := range s.HostEnv {
		if k, v, ok := strings.Cut(kv, "="); ok {
			os.Setenv(k, v)
		}
	}
	s.Spec.Files = s.Files
	sb, err := a.b.Create(r.Context(), s.Spec)
	if err == nil {
		a.sb = sb
	}
	reply(w, struct{}{}, err)
}

// exec runs one process, streaming its output as frames when the host
// asked for them, and ends with its Result.
func (a *agent) exec(w http.ResponseWriter, r *http.Request) {
	out := &frames{w: w}
	end := func(res *sandbox.Result, err error) {
		if res != nil {
			res.WireForm(true)
		}
		b, _ := json.Marshal(execEnd{Result: res, Error: toWire(err)})
		out.write(frameEnd, b)
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	sb, err := a.need()
	if err != nil {
		end(nil, err)
		return
	}
	body := bufio.NewReader(r.Body)
	line, err := body.ReadBytes('\n')
	var req ExecRequest
	if err == nil {
		err = json.Unmarshal(line, &req)
	}
	if err != nil {
		end(nil, sandbox.Errorf(sandbox.ErrInternal, "guest_protocol", "bad exec request: %v", err))
		return
	}
	p := &sandbox.Process{Args: req.Args, Env: req.Env, Dir: req.Dir, Timeout: req.Timeout, Lasting: req.Lasting}
	if req.Stdin {
		p.Stdin = body
	}
	if req.Stream {
		p.Stdout, p.Stderr = out.stream(frameStdout), out.stream(frameStderr)
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	a.mu.Lock()
	a.cancel = cancel
	a.mu.Unlock()
	res, err := sb.Exec(ctx, p)
	a.mu.Lock()
	a.cancel = nil
	a.mu.Unlock()
	end(res, err)
}

func (a *agent) getFile(w http.ResponseWriter, r *http.Request) {
	out := &frames{w: w}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	f, err := a.files()
	var n int64
	if err == nil {
		n, err = f.GetFile(r.Context(), r.URL.Query().Get("path"), out.stream(frameStdout), queryInt(r, "max"))
	}
	b, _ := json.Marshal(copyEnd{N: n, Error: toWire(err)})
	out.write(frameEnd, b)
}

// frames writes frames to a streamed answer, one at a time, flushing each.
type frames struct {
	mu  sync.Mutex
	w   http.ResponseWriter
	err error
}

func (f *frames) write(kind byte, p []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	if f.err = writeFrame(f.w, kind, p); f.err == nil {
		f.w.(http.Flusher).Flush()
	}
	return f.err
}

// stream is a writer of kind frames, each at most maxFrame bytes.
func (f *frames) stream(kind byte) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		n := 0
		for len(p) > 0 {
			c := p[:min(len(p), maxFrame)]
			if err := f.write(kind, c); err != nil {
				return n, err
			}
			n += len(c)
			p = p[len(c):]
		}
		return n, nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
