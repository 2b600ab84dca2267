package agent

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/execbox/execbox/sandbox"
)

var (
	//go:embed runtime/agent.py
	agentPy string
	//go:embed runtime/kernel.py
	kernelPy string
	//go:embed runtime/kernel.js
	kernelJS string
)

// kernels says how each language a context may speak (sandbox's Runtime
// languages) starts its kernel: python unbuffered (-u), so that what a
// cell prints is seen as it prints.
var kernels = func() map[string][]string {
	src := map[string][]string{"python": {kernelPy, "-u"}, "javascript": {kernelJS}}
	out := map[string][]string{}
	for _, name := range sandbox.Languages(true) {
		l, _ := sandbox.LookupLanguage(name)
		out[name] = l.InlineArgs(src[name][0], src[name][1:]...)
	}
	return out
}()

// Languages lists the languages of contexts, sorted.
func Languages() []string {
	l := sandbox.Languages(true)
	slices.Sort(l)
	return l
}

// Bounds of the protocol.
const (
	maxFrame   = 1 << 22 // one line from the agent (a 1 MiB value, base64 output chunks)
	readyWait  = 30 * time.Second
	killGrace  = 3 * time.Second
	inputChunk = 32 * 1024
	// ctxGrace is how long a context call may go past its timeout before
	// the agent is deemed stuck: its own grace (SIGINT 1 s late, SIGKILL
	// 2 s after that) and some.
	ctxGrace = 6 * time.Second
	// writeWait bounds how long the agent may take to take one request
	// line. A live agent reads its requests at once (it never blocks on a
	// program, and a line under a pipe's buffer does not even wait for
	// it), so one that has not taken a line by then is stopped or stuck: it
	// is ended (agent_lost), and whatever waited on it is freed.
	writeWait = 5 * time.Second
	// deadlineGrace is how far past its caller's deadline a request line
	// may still be taken.
	deadlineGrace = 500 * time.Millisecond
)

// Agent is a session's agent, running in its sandbox. Its methods are safe
// for concurrent use.
type Agent struct {
	cancel context.CancelFunc
	in     *io.PipeWriter
	wmu    sync.Mutex // one request line at a time
	next   atomic.Uint64

	mu    sync.Mutex
	calls map[string]func(frame) // by request id: who gets the agent's answers
	dead  error                  // why the agent is gone; nil while it runs

	done chan struct{} // closed when the agent's Exec has returned
}

// frame is one line from the agent.
type frame struct {
	ID        string          `json:"id"`
	Ready     bool            `json:"ready"`
	Subreaper bool            `json:"subreaper"`
	Out       string          `json:"out"`
	Data      []byte          `json:"data"`
	Exit      *exitInfo       `json:"exit"`
	Result    json.RawMessage `json:"result"`
	OK        bool            `json:"ok"`
	Error     *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type exitInfo struct {
	Code   int    `json:"code"`
	Signal string `json:"signal"`
	CPU    int64  `json:"cpu_ns"`
	Error  string `json:"error"`
}

// CodeAgentLost is the code of what fails because the agent ended.
const CodeAgentLost = "agent_lost"

// Start runs the agent in sb (one Exec that lasts up to life) and waits
// until it is ready. It fails with ErrUnavailable "agent_unavailable" when
// the sandbox cannot run it (no python3), or with the Exec's own error
// (a sandbox running another Exec is ErrBusy "sandbox_busy").
func Start(ctx context.Context, sb sandbox.Sandbox, life time.Duration) (*Agent, error) {
	if life <= 0 {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "session_expired", "the session has no time left")
	}
	pr, pw := io.Pipe()
	outR, outW := io.Pipe()
	runCtx, cancel := context.WithCancel(context.Background())
	a := &Agent{cancel: cancel, in: pw, calls: map[string]func(frame){}, done: make(chan struct{})}
	stderr := sandbox.NewCapture(16*1024, nil, nil)
	ready := make(chan frame, 1)
	a.calls[""] = func(f frame) {
		if f.Ready {
			select {
			case ready <- f:
			default:
			}
		}
	}
	go a.read(outR)
	var res *sandbox.Result
	var execErr error
	go func() {
		defer close(a.done)
		res, execErr = sb.Exec(runCtx, &sandbox.Process{
			Args: []string{"python3", "-u", "-c", agentPy}, Stdin: pr, Stdout: outW, Stderr: stderr,
			Timeout: life, Lasting: true,
		})
		outW.Close()
		pr.CloseWithError(io.ErrClosedPipe)
		why := execErr
		if why == nil {
			why = fmt.Errorf("the session's agent ended: %s%s", res.Ending(), tail(stderr.String()))
		}
		a.fail(sandbox.Errorf(sandbox.ErrUnavailable, CodeAgentLost, "%v", why))
	}()
	// The first request is taken once the backend has started the agent
	// (a docker or Kubernetes exec, a VM's): it has the start's wait.
	init := map[string]any{"op": "init", "kernels": kernels}
	if err := a.sendWithin(ctx, init, readyWait); err != nil {
		<-a.done
		return nil, a.startErr(execErr, res, stderr)
	}
	t := time.NewTimer(readyWait)
	defer t.Stop()
	select {
	case f := <-ready:
		if !f.Subreaper {
			// Without it, a program that leaves its process group would
			// outlive its exec: fail closed.
			a.Close()
			return nil, sandbox.Errorf(sandbox.ErrUnavailable, "agent_unavailable",
				"the session's agent cannot become its processes' subreaper (python3 without ctypes, or prctl refused), so it could not end a program's whole tree")
		}
		return a, nil
	case <-a.done:
		return nil, a.startErr(execErr, res, stderr)
	case <-ctx.Done():
		a.Close()
		return nil, ctx.Err()
	case <-t.C:
		a.Close()
		return nil, sandbox.Errorf(sandbox.ErrInternal, "agent_unavailable", "the session's agent did not start within %v%s", readyWait, tail(stderr.String()))
	}
}

// startErr is why an agent that ended before it was ready did not start.
func (a *Agent) startErr(execErr error, res *sandbox.Result, stderr *sandbox.Capture) error {
	if execErr != nil {
		return execErr
	}
	if res.ExitCode == sandbox.ExitNotFound && res.Reason == sandbox.ReasonExited {
		return sandbox.Errorf(sandbox.ErrUnavailable, "agent_unavailable", "contexts and terminals need python3 in the sandbox, and it has none")
	}
	return sandbox.Errorf(sandbox.ErrUnavailable, "agent_unavailable", "the session's agent did not start: %s%s", res.Ending(), tail(stderr.String()))
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	return ": " + s
}

// read hands each line from the agent to whoever waits for its id.
func (a *Agent) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 64*1024)
	for {
		line, err := readLine(br)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				a.broken(err)
			}
			io.Copy(io.Discard, r)
			return
		}
		var f frame
		if err := json.Unmarshal(line, &f); err != nil {
			a.broken(err)
			io.Copy(io.Discard, r)
			return
		}
		a.mu.Lock()
		h := a.calls[f.ID]
		a.mu.Unlock()
		if h != nil {
			h(f)
		}
	}
}

// broken ends an agent that broke its protocol; the caller keeps reading
// its output (to the end) so that its Exec can return.
func (a *Agent) broken(err error) {
	a.fail(sandbox.Errorf(sandbox.ErrInternal, CodeAgentLost, "the session's agent broke its protocol: %v", err))
	go a.Close()
}

// readLine reads one line of at most maxFrame bytes.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxFrame {
			return nil, fmt.Errorf("a line longer than %d bytes", maxFrame)
		}
		switch {
		case err == nil:
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case len(line) > 0 && errors.Is(err, io.EOF):
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}

// fail marks the agent gone and tells every waiting call.
func (a *Agent) fail(err error) {
	a.mu.Lock()
	if a.dead == nil {
		a.dead = err
	}
	calls := a.calls
	a.calls = map[string]func(frame){}
	a.mu.Unlock()
	for id, h := range calls {
		if id != "" {
			h(frame{ID: id, Error: &struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			}{CodeAgentLost, err.Error()}})
		}
	}
}

// Err is why the agent is gone, or nil while it runs.
func (a *Agent) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.dead
}

// Done is closed when the agent has ended.
func (a *Agent) Done() <-chan struct{} { return a.done }

// Close ends the agent and everything it runs, and waits for it.
func (a *Agent) Close() {
	a.cancel()
	a.in.CloseWithError(io.ErrClosedPipe)
	<-a.done
}

// register gives id's answers to h; the returned func ends that.
func (a *Agent) register(h func(frame)) (id string, unregister func(), err error) {
	id = strconv.FormatUint(a.next.Add(1), 10)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.dead != nil {
		return "", nil, a.dead
	}
	a.calls[id] = h
	return id, func() {
		a.mu.Lock()
		delete(a.calls, id)
		a.mu.Unlock()
	}, nil
}

// send writes one request. The agent must take it within writeWait, and
// within deadlineGrace past ctx's deadline; one that does not is ended
// (wedged), and send returns agent_lost. A line is never abandoned half
// written (the protocol could not recover), so a ctx cancelled without a
// deadline does not cut it short: writeWait bounds it.
func (a *Agent) send(ctx context.Context, req map[string]any) error {
	return a.sendWithin(ctx, req, writeWait)
}

// sendWithin is send with wait in place of writeWait.
func (a *Agent) sendWithin(ctx context.Context, req map[string]any, wait time.Duration) error {
	line, err := json.Marshal(req)
	if err != nil {
		return sandbox.Errorf(sandbox.ErrInternal, "agent_request", "encoding a request: %w", err)
	}
	if d, ok := ctx.Deadline(); ok {
		wait = min(wait, max(time.Until(d), 0)+deadlineGrace)
	}
	a.wmu.Lock()
	defer a.wmu.Unlock()
	if dead := a.Err(); dead != nil {
		return dead
	}
	// The lock is waited for at most one writer's wait: the writer before
	// either wrote or wedged the agent.
	t := time.AfterFunc(wait, func() { a.wedged(wait) })
	_, err = a.in.Write(append(line, '\n'))
	if !t.Stop() {
		// The timer fired as the write ended: the agent is being ended,
		// and will never answer this request.
		return wedgedErr(wait)
	}
	if err != nil {
		if dead := a.Err(); dead != nil {
			return dead
		}
		return sandbox.Errorf(sandbox.ErrUnavailable, CodeAgentLost, "the session's agent is gone: %v", err)
	}
	return nil
}

// wedged ends an agent that did not take a request within wait: every
// call waiting on it fails agent_lost, its input closes (a blocked write
// returns) and its Exec is cancelled, which kills it.
func (a *Agent) wedged(wait time.Duration) {
	a.fail(wedgedErr(wait))
	a.in.CloseWithError(io.ErrClosedPipe)
	a.cancel()
}

// wedgedErr is why the calls of an agent that did not take a request
// within wait fail.
func wedgedErr(wait time.Duration) error {
	return sandbox.Errorf(sandbox.ErrUnavailable, CodeAgentLost,
		"the session's agent did not take a request within %v (it is stopped or stuck) and was ended", wait.Round(time.Millisecond))
}

// feed copies r to request id's input, then closes it.
func (a *Agent) feed(ctx context.Context, id string, r io.Reader) {
	buf := make([]byte, inputChunk)
	for ctx.Err() == nil {
		n, err := r.Read(buf)
		if n > 0 {
			if a.send(ctx, map[string]any{"op": "input", "id": id, "data": buf[:n]}) != nil {
				return
			}
		}
		if err != nil {
			break
		}
	}
	a.send(ctx, map[string]any{"op": "eof", "id": id})
}

// agentError turns an error frame into an error.
func agentError(f frame) error {
	switch f.Error.Code {
	case CodeAgentLost:
		return sandbox.Errorf(sandbox.ErrUnavailable, CodeAgentLost, "%s", f.Error.Message)
	case "context_not_found":
		return sandbox.Errorf(sandbox.ErrNotFound, f.Error.Code, "%s", f.Error.Message)
	case "context_busy":
		return sandbox.Errorf(sandbox.ErrBusy, f.Error.Code, "%s", f.Error.Message)
	case "dir_not_found":
		return sandbox.Errorf(sandbox.ErrInvalid, f.Error.Code, "%s", f.Error.Message)
	}
	return sandbox.Errorf(sandbox.ErrInternal, f.Error.Code, "%s", f.Error.Message)
}
