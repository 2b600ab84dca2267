package agent

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// Languages a context may speak, and how each one's kernel starts.
var kernels = map[string][]string{
	"python":     {"python3", "-u", "-c", kernelPy},
	"javascript": {"node", "-e", kernelJS},
}

// Languages lists the languages of contexts.
func Languages() []string { return []string{"javascript", "python"} }

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
	ID     string          `json:"id"`
	Ready  bool            `json:"ready"`
	Out    string          `json:"out"`
	Data   []byte          `json:"data"`
	Exit   *exitInfo       `json:"exit"`
	Result json.RawMessage `json:"result"`
	OK     bool            `json:"ok"`
	Error  *struct {
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
	ready := make(chan struct{})
	var readyOnce sync.Once
	a.calls[""] = func(f frame) {
		if f.Ready {
			readyOnce.Do(func() { close(ready) })
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
	init := map[string]any{"op": "init", "kernels": kernels}
	if err := a.send(init); err != nil {
		<-a.done
		return nil, a.startErr(execErr, res, stderr)
	}
	t := time.NewTimer(readyWait)
	defer t.Stop()
	select {
	case <-ready:
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

// send writes one request.
func (a *Agent) send(req map[string]any) error {
	line, err := json.Marshal(req)
	if err != nil {
		return sandbox.Errorf(sandbox.ErrInternal, "agent_request", "encoding a request: %w", err)
	}
	a.wmu.Lock()
	defer a.wmu.Unlock()
	if _, err := a.in.Write(append(line, '\n')); err != nil {
		if dead := a.Err(); dead != nil {
			return dead
		}
		return sandbox.Errorf(sandbox.ErrUnavailable, CodeAgentLost, "the session's agent is gone: %v", err)
	}
	return nil
}

// feed copies r to request id's input, then closes it.
func (a *Agent) feed(ctx context.Context, id string, r io.Reader) {
	buf := make([]byte, inputChunk)
	for ctx.Err() == nil {
		n, err := r.Read(buf)
		if n > 0 {
			if a.send(map[string]any{"op": "input", "id": id, "data": buf[:n]}) != nil {
				return
			}
		}
		if err != nil {
			break
		}
	}
	a.send(map[string]any{"op": "eof", "id": id})
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
