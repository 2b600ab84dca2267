package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/execbox/execbox/agent"
	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/internal/daemon/audit"
	"github.com/execbox/execbox/internal/daemon/e2b"
	"github.com/execbox/execbox/internal/daemon/guard"
	"github.com/execbox/execbox/sandbox"
)

// The process.Process service: a process is an exec of the session run
// through its agent (or, with a PTY, a terminal), numbered by the sandbox
// (its pid in the protocol is execbox's, not the kernel's). It runs on
// after the stream that started it ends, until it exits, its timeout
// passes or it is killed; Connect follows it again.

// Bounds of a sandbox's processes.
const (
	// e2bMaxProcs is the most processes a sandbox keeps running.
	e2bMaxProcs = 64
	// e2bMaxFollowers is the most streams following one process.
	e2bMaxFollowers = 8
	// e2bFollowerQueue and e2bFollowerBytes bound what waits for one
	// follower, and e2bQueueBytes what waits for all followers of every
	// sandbox together: one that reads slower than its process writes is
	// dropped (its stream ends with resource_exhausted), the process is
	// not held up and the server's memory does not grow.
	e2bFollowerQueue = 256
	e2bFollowerBytes = sandbox.MiB
	e2bQueueBytes    = 64 * sandbox.MiB
)

// e2bQueued is what waits for every follower of the server's processes.
var e2bQueued atomic.Int64

// e2bProc is one running process of a sandbox.
type e2bProc struct {
	pid    uint32
	tag    *string
	config e2b.ProcessConfig
	kill   context.CancelFunc
	stdin  *io.PipeWriter // nil: started without stdin
	// writing is held by the one input being written to stdin: a process
	// that does not read holds one caller's bytes, not every caller's.
	writing sync.Mutex

	mu        sync.Mutex
	term      *agent.Terminal // a PTY's, else nil
	followers map[*e2bFollower]bool
	ended     bool
}

// e2bFollower is a stream following a process: its events, and the bytes
// of output among them not read yet.
type e2bFollower struct {
	ch     chan e2b.ProcessEvent
	queued atomic.Int64
}

// size is what an event holds in a follower's queue.
func size(ev e2b.ProcessEvent) int64 {
	if d := ev.Data; d != nil {
		return int64(len(d.Stdout) + len(d.Stderr) + len(d.PTY))
	}
	return 0
}

// next is the follower's next event; ok is false once its queue is closed
// (after the end event, or when it fell behind).
func (f *e2bFollower) next(ev e2b.ProcessEvent, ok bool) (e2b.ProcessEvent, bool) {
	if ok {
		n := size(ev)
		f.queued.Add(-n)
		e2bQueued.Add(-n)
	}
	return ev, ok
}

// follow adds a follower, which gets every event from now on; its queue
// is closed after the end event, or when it falls behind.
func (p *e2bProc) follow() (*e2bFollower, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process %d has ended", p.pid))
	}
	if len(p.followers) >= e2bMaxFollowers {
		return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("process %d has %d followers, the most it may", p.pid, e2bMaxFollowers))
	}
	f := &e2bFollower{ch: make(chan e2b.ProcessEvent, e2bFollowerQueue)}
	p.followers[f] = true
	return f, nil
}

// unfollow removes a follower that stops reading, and releases what
// waits in its queue.
func (p *e2bProc) unfollow(f *e2bFollower) {
	p.mu.Lock()
	if p.followers[f] {
		delete(p.followers, f)
		close(f.ch)
	}
	p.mu.Unlock()
	for ev := range f.ch {
		f.next(ev, true)
	}
}

// publish gives ev to every follower without waiting: it runs on the
// agent's reader. A follower whose queue is full is dropped.
func (p *e2bProc) publish(ev e2b.ProcessEvent) {
	n := size(ev)
	p.mu.Lock()
	defer p.mu.Unlock()
	drop := func(f *e2bFollower) {
		delete(p.followers, f)
		close(f.ch) // the follower sees its queue closed without an end
	}
	for f := range p.followers {
		if f.queued.Load()+n > e2bFollowerBytes {
			drop(f)
			continue
		}
		if e2bQueued.Add(n) > e2bQueueBytes {
			e2bQueued.Add(-n)
			drop(f)
			continue
		}
		select {
		case f.ch <- ev:
			f.queued.Add(n)
		default:
			e2bQueued.Add(-n)
			drop(f)
		}
	}
	if ev.End != nil {
		p.ended = true
		for f := range p.followers {
			close(f.ch)
		}
		clear(p.followers)
	}
}

// terminal is the process's terminal, nil when it has none (yet).
func (p *e2bProc) terminal() *agent.Terminal {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.term
}

// e2bOutput is a process's stdout or stderr as data events.
type e2bOutput struct {
	p      *e2bProc
	stderr bool
}

func (o e2bOutput) Write(b []byte) (int, error) {
	d := &e2b.DataEvent{}
	if o.stderr {
		d.Stderr = slices.Clone(b)
	} else {
		d.Stdout = slices.Clone(b)
	}
	o.p.publish(e2b.ProcessEvent{Data: d})
	return len(b), nil
}

// proc finds a sandbox's running process by pid or tag.
func (sb *e2bSandbox) proc(sel e2b.ProcessSelector) (*e2bProc, error) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	for _, p := range sb.procs {
		if (sel.PID != nil && p.pid == *sel.PID) || (sel.PID == nil && sel.Tag != nil && p.tag != nil && *p.tag == *sel.Tag) {
			return p, nil
		}
	}
	return nil, connect.NewError(connect.CodeNotFound, errors.New("no running process has that pid or tag"))
}

// add numbers a new process and keeps it while it runs.
func (sb *e2bSandbox) add(p *e2bProc) error {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if len(sb.procs) >= e2bMaxProcs {
		return sandbox.Errorf(sandbox.ErrBusy, "processes_exhausted", "the sandbox runs %d processes, the most it may; end one first", e2bMaxProcs)
	}
	sb.nextPID++
	p.pid = sb.nextPID
	sb.procs[p.pid] = p
	return nil
}

func (sb *e2bSandbox) remove(p *e2bProc) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	delete(sb.procs, p.pid)
}

// e2bBegin starts an in-sandbox execution: the token's limits, then the
// call's session; a refusal comes back as a Connect error (and x.refused
// holds its problem).
func (s *Server) e2bBegin(ctx context.Context, op v1.Operation) (*execution, *e2bCall, *engine.Session, error) {
	c := e2bCallOf(ctx)
	x := s.begin(c.r, op)
	var refused *v1.Problem
	x.refused = &refused
	if !x.admit(nil) {
		return x, c, nil, e2bErr(refused)
	}
	x.entry.Session = c.sb.id
	return x, c, c.sess, nil
}

// e2bStart is process.Process/Start: the start event, then the process's
// output and its end. The Connect timeout (the SDKs' timeoutMs) is the
// process's, within the session's wall limit; the stream ending does not
// end the process.
func (s *Server) e2bStart(ctx context.Context, req *e2b.StartRequest, stream *connect.ServerStream[e2b.StreamEvent]) error {
	op := v1.OpSessionExec
	if req.PTY != nil {
		op = v1.OpSessionTerminal
	}
	x, c, sess, err := s.e2bBegin(ctx, op)
	if err != nil {
		x.end()
		return err
	}
	ended := false
	defer func() {
		if !ended {
			x.end()
		}
	}()
	info := sess.Info()
	cfg := req.Process
	if cfg.Cmd == "" {
		x.fail(nil, invalidField("process.cmd", "give the program to run"))
		return e2bErr(*x.refused)
	}
	args := append([]string{cfg.Cmd}, cfg.Args...)
	dir := ""
	if cfg.Cwd != nil {
		if dir, err = e2bPath(*cfg.Cwd); err != nil {
			x.fail(nil, err)
			return e2bErr(*x.refused)
		}
	}
	h := audit.NewRequestHash("e2b_process")
	h.Field("session", []byte(sess.ID()))
	cmd, _ := json.Marshal(args)
	h.Field("command", cmd)
	h.Field("dir", []byte(dir))
	for _, k := range slices.Sorted(maps.Keys(cfg.Envs)) {
		h.Field("env:"+k, []byte(cfg.Envs[k]))
	}
	x.entry.CodeSHA256 = h.Sum()
	x.inFlight()
	if !x.check(nil, guard.Call{Language: "command", Backend: info.Backend}, nil) {
		return e2bErr(*x.refused)
	}
	x.entry.Limits = &info.Limits
	timeout := info.Limits.Wall
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	// The process lives apart from this request: a background command's
	// stream may end long before it does.
	pctx, kill := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	p := &e2bProc{tag: req.Tag, config: cfg, kill: kill, followers: map[*e2bFollower]bool{}}
	if p.config.Envs == nil {
		p.config.Envs = map[string]string{}
	}
	var stdin *io.PipeReader
	if req.PTY == nil && req.Stdin != nil && *req.Stdin {
		stdin, p.stdin = io.Pipe()
	}
	if err := c.sb.add(p); err != nil {
		kill()
		x.fail(nil, err)
		return e2bErr(*x.refused)
	}
	f, _ := p.follow()
	x.detach()
	if req.PTY != nil {
		err = s.e2bStartTerminal(pctx, x, c.sb, sess, p, args, dir, req.PTY)
	} else {
		s.e2bStartExec(pctx, x, c.sb, sess, p, args, dir, stdin)
	}
	if err != nil {
		kill()
		c.sb.remove(p)
		x.fail(nil, err)
		return e2bErr(*x.refused)
	}
	ended = true // the process's goroutine ends the execution
	if err := stream.Send(&e2b.StreamEvent{Event: e2b.ProcessEvent{Start: &e2b.StartEvent{PID: p.pid}}}); err != nil {
		p.unfollow(f)
		return err
	}
	return s.e2bFollow(ctx, c, p, f, stream)
}

// e2bStartExec runs p as an exec of the session, in the background.
func (s *Server) e2bStartExec(ctx context.Context, x *execution, sb *e2bSandbox, sess *engine.Session, p *e2bProc, args []string, dir string, pr *io.PipeReader) {
	proc := &sandbox.Process{Args: args, Env: p.config.Envs, Dir: dir,
		Stdout: e2bOutput{p: p}, Stderr: e2bOutput{p: p, stderr: true}}
	if pr != nil {
		proc.Stdin = pr
	}
	go func() {
		defer p.kill()
		res, err := sess.Exec(ctx, proc)
		if pr != nil {
			pr.Close() // a SendInput still waiting ends
		}
		end := &e2b.EndEvent{ExitCode: -1}
		switch {
		case err != nil:
			pr := e2bProblem(err)
			msg := pr.Detail + " (" + pr.Code + ")"
			end.Status, end.Error = "error", &msg
			x.entry.ErrorCode = pr.Code
		default:
			x.ran(res, runCode("", args))
			end.ExitCode, end.Exited = int32(res.ExitCode), res.Reason == sandbox.ReasonExited
			end.Status = fmt.Sprintf("exit status %d", res.ExitCode)
			if !end.Exited {
				end.ExitCode = -1
				end.Status = "signal: " + string(res.Reason)
				if res.Signal != "" {
					end.Status = "signal: " + res.Signal
				}
				msg := cmp.Or(res.Message, string(res.Reason))
				end.Error = &msg
			}
		}
		sb.remove(p)
		p.publish(e2b.ProcessEvent{End: end})
		x.end()
	}()
}

// e2bFollow streams a follower's events until the process ends, the
// follower falls behind, or the client goes.
func (s *Server) e2bFollow(ctx context.Context, c *e2bCall, p *e2bProc, f *e2bFollower, stream *connect.ServerStream[e2b.StreamEvent]) error {
	defer p.unfollow(f)
	tick := time.NewTicker(e2bKeepalive)
	defer tick.Stop()
	for {
		var ev e2b.ProcessEvent
		select {
		case <-ctx.Done():
			return connect.NewError(connect.CodeDeadlineExceeded, errors.New("the stream's timeout passed; the process runs on (Connect to follow it again)"))
		case <-tick.C:
			ev.Keepalive = &e2b.Empty{}
		case e, ok := <-f.ch:
			if e, ok = f.next(e, ok); !ok {
				return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("process %d wrote faster than this stream read it; it runs on (Connect to follow it again)", p.pid))
			}
			ev = e
		}
		c.extend(s)
		if err := stream.Send(&e2b.StreamEvent{Event: ev}); err != nil {
			return err
		}
		if ev.End != nil {
			return nil
		}
	}
}

// e2bAttach is process.Process/Connect: the start event, then what the
// process does from now on.
func (s *Server) e2bAttach(ctx context.Context, req *e2b.ConnectRequest, stream *connect.ServerStream[e2b.StreamEvent]) error {
	c := e2bCallOf(ctx)
	p, err := c.sb.proc(req.Process)
	if err != nil {
		return err
	}
	f, err := p.follow()
	if err != nil {
		return err
	}
	if err := stream.Send(&e2b.StreamEvent{Event: e2b.ProcessEvent{Start: &e2b.StartEvent{PID: p.pid}}}); err != nil {
		p.unfollow(f)
		return err
	}
	return s.e2bFollow(ctx, c, p, f, stream)
}

// e2bProcesses is process.Process/List: the running processes.
func (s *Server) e2bProcesses(ctx context.Context, _ *e2b.Empty) (*e2b.ListResponse, error) {
	sb := e2bCallOf(ctx).sb
	sb.mu.Lock()
	out := &e2b.ListResponse{Processes: []e2b.ProcessInfo{}}
	for _, p := range sb.procs {
		out.Processes = append(out.Processes, e2b.ProcessInfo{Config: p.config, PID: p.pid, Tag: p.tag})
	}
	sb.mu.Unlock()
	slices.SortFunc(out.Processes, func(a, b e2b.ProcessInfo) int { return int(a.PID) - int(b.PID) })
	return out, nil
}

// e2bSendInput is process.Process/SendInput: bytes to the process's stdin
// or terminal, written before the answer (a process that does not read
// holds it until the call's timeout).
func (s *Server) e2bSendInput(ctx context.Context, req *e2b.SendInputRequest) (*e2b.Empty, error) {
	p, err := e2bCallOf(ctx).sb.proc(req.Process)
	if err != nil {
		return nil, err
	}
	return &e2b.Empty{}, s.e2bInput(ctx, p, req.Input)
}

// e2bStreamInput is process.Process/StreamInput: the first message names
// the process, each later one is input written in turn; the stream ends
// with its process.
func (s *Server) e2bStreamInput(ctx context.Context, stream *connect.ClientStream[e2b.StreamInputRequest]) (*e2b.Empty, error) {
	var p *e2bProc
	for stream.Receive() {
		m := stream.Msg()
		switch {
		case p == nil && m.Start != nil:
			var err error
			if p, err = e2bCallOf(ctx).sb.proc(m.Start.Process); err != nil {
				return nil, err
			}
		case p == nil && m.Keepalive == nil:
			return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("the stream's first message names the process (start)"))
		case m.Data != nil:
			if err := s.e2bInput(ctx, p, m.Data.Input); err != nil {
				return nil, err
			}
		}
	}
	return &e2b.Empty{}, stream.Err()
}

// e2bInput writes in to p's stdin or terminal as a terminal's input is
// written: within the token's limits, held to the guard's rules again
// (the start was the call confirmed and counted), audited.
func (s *Server) e2bInput(ctx context.Context, p *e2bProc, in e2b.ProcessInput) error {
	x, _, sess, err := s.e2bBegin(ctx, v1.OpSessionTerminal)
	defer x.end()
	if err != nil {
		return err
	}
	data := in.Stdin
	if in.PTY != nil {
		data = in.PTY
	}
	x.inFlight()
	h := audit.NewRequestHash("e2b_process_input")
	h.Field("session", []byte(sess.ID()))
	h.Field("process", []byte(strconv.FormatUint(uint64(p.pid), 10)))
	h.Field("input", data)
	x.entry.CodeSHA256 = h.Sum()
	x.entry.Inputs = []audit.Input{{Size: int64(len(data)), SHA256: audit.Hash(string(data))}}
	info := sess.Info()
	if !x.check(nil, guard.Call{Language: "command", Backend: info.Backend, Continued: true}, nil) {
		return e2bErr(*x.refused)
	}
	x.entry.Backend, x.entry.Isolation, x.entry.Reason = info.Backend, info.Isolation.String(), "input"
	if err := p.input(ctx, in); err != nil {
		x.entry.Reason, x.entry.ErrorCode = "", connect.CodeOf(err).String()
		return err
	}
	return nil
}

// input writes in to the process's stdin or terminal. One write to stdin
// waits at a time: a process that does not read holds one caller's bytes
// (until it reads them or ends), and the others are refused.
func (p *e2bProc) input(ctx context.Context, in e2b.ProcessInput) error {
	switch t := p.terminal(); {
	case in.PTY != nil && t == nil:
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d has no terminal: send stdin", p.pid))
	case in.PTY != nil:
		return e2bErr(t.Write(ctx, in.PTY))
	case p.stdin == nil:
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d was started without stdin", p.pid))
	}
	if !p.writing.TryLock() {
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("process %d has not read the input sent before", p.pid))
	}
	done := make(chan error, 1)
	go func() {
		defer p.writing.Unlock()
		_, err := p.stdin.Write(in.Stdin)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d's stdin is closed", p.pid))
		}
		return nil
	case <-ctx.Done():
		return connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("process %d did not read its stdin in time; the input waits for it", p.pid))
	}
}

// e2bCloseStdin is process.Process/CloseStdin: the process reads EOF.
func (s *Server) e2bCloseStdin(ctx context.Context, req *e2b.CloseStdinRequest) (*e2b.Empty, error) {
	p, err := e2bCallOf(ctx).sb.proc(req.Process)
	if err != nil {
		return nil, err
	}
	if p.stdin == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d was started without stdin", p.pid))
	}
	p.stdin.Close()
	return &e2b.Empty{}, nil
}

// e2bSignal is process.Process/SendSignal: SIGKILL and SIGTERM both kill
// the process's whole tree (execbox ends a program by killing it).
func (s *Server) e2bSignal(ctx context.Context, req *e2b.SendSignalRequest) (*e2b.Empty, error) {
	if req.Signal != e2b.SignalKill && req.Signal != e2b.SignalTerm {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("signal %d: give SIGNAL_SIGKILL or SIGNAL_SIGTERM", req.Signal))
	}
	p, err := e2bCallOf(ctx).sb.proc(req.Process)
	if err != nil {
		return nil, err
	}
	if t := p.terminal(); t != nil {
		return &e2b.Empty{}, e2bErr(t.Kill(ctx))
	}
	p.kill()
	return &e2b.Empty{}, nil
}

// e2bUpdate is process.Process/Update: a terminal's new size.
func (s *Server) e2bUpdate(ctx context.Context, req *e2b.UpdateRequest) (*e2b.Empty, error) {
	p, err := e2bCallOf(ctx).sb.proc(req.Process)
	if err != nil {
		return nil, err
	}
	t := p.terminal()
	if t == nil || req.PTY == nil || req.PTY.Size == nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("process %d: give the new size of its terminal", p.pid))
	}
	return &e2b.Empty{}, e2bErr(t.Resize(ctx, int(req.PTY.Size.Rows), int(req.PTY.Size.Cols)))
}

// e2bStartTerminal runs p on a terminal of the session; its output is
// read by one goroutine until the program exits.
func (s *Server) e2bStartTerminal(ctx context.Context, x *execution, sb *e2bSandbox, sess *engine.Session, p *e2bProc, args []string, dir string, pty *e2b.PTY) error {
	rows, cols := 24, 80
	if pty.Size != nil {
		rows, cols = int(pty.Size.Rows), int(pty.Size.Cols)
	}
	var cpu atomic.Int64 // the agent's reader sets it, the goroutine below reads it
	ti, err := sess.OpenTerminal(ctx, engine.TerminalRequest{Args: args, Env: p.config.Envs, Dir: dir, Rows: rows, Cols: cols,
		OnExit: func(d time.Duration) { cpu.Store(int64(d)) }})
	if err != nil {
		return err
	}
	t, _, err := sess.Terminal(ti.ID)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.term = t
	p.mu.Unlock()
	go func() {
		defer p.kill()
		done := sess.Use()
		defer done()
		end := &e2b.EndEvent{ExitCode: -1}
		for {
			data, _, exit, err := t.Read(ctx)
			if len(data) > 0 {
				p.publish(e2b.ProcessEvent{Data: &e2b.DataEvent{PTY: data}})
			}
			if exit != nil {
				end.ExitCode, end.Exited = int32(exit.ExitCode), exit.Signal == ""
				end.Status = fmt.Sprintf("exit status %d", exit.ExitCode)
				if exit.Signal != "" {
					end.ExitCode, end.Status = -1, "signal: "+exit.Signal
				}
				break
			}
			if err != nil {
				t.Kill(context.WithoutCancel(ctx))
				msg := e2bProblem(err).Detail
				end.Status, end.Error = "error", &msg
				break
			}
		}
		x.entry.Reason = end.Status
		x.cpu = time.Duration(cpu.Load())
		sb.remove(p)
		p.publish(e2b.ProcessEvent{End: end})
		x.end()
	}()
	return nil
}
