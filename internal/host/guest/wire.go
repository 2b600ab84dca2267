package guest

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// Hello is the line the agent writes once the port is open: the host
// writes nothing before it, since a virtio-serial port drops what arrives
// while the guest has it closed.
const Hello = "execbox-guest ready\n"

// PortName is the virtio-serial port's name (virtserialport,name=…).
const PortName = "execbox"

// RootTag is the mount tag of the 9p share the guest mounts as its root.
const RootTag = "execroot"

// Setup is the one request that turns a booted VM into a sandbox.
type Setup struct {
	Spec  sandbox.Spec      `json:"spec"`
	Files map[string][]byte `json:"files,omitempty"`
	// HostEnv are the host's variables the spec's policy lets through
	// (sandbox.BuildEnv), since the guest has no environment of its own.
	HostEnv []string `json:"host_env,omitempty"`
}

// ExecRequest is an Exec's process, the first line of its request body;
// the rest of the body is the program's stdin.
type ExecRequest struct {
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env,omitempty"`
	Dir     string            `json:"dir,omitempty"`
	Timeout time.Duration     `json:"timeout,omitempty"`
	Lasting bool              `json:"lasting,omitempty"`
	Stdin   bool              `json:"stdin,omitempty"`  // false: stdin is empty (nil)
	Stream  bool              `json:"stream,omitempty"` // send the output as it comes
}

// Frame kinds of a streamed answer (exec, get file): data as it comes,
// then one end frame with the JSON outcome.
const (
	frameStdout byte = 1
	frameStderr byte = 2
	frameEnd    byte = 3
)

// maxFrame bounds one frame's payload; a longer one is a broken guest.
const maxFrame = 1 << 20

func writeFrame(w io.Writer, kind byte, p []byte) error {
	var h [5]byte
	h[0] = kind
	binary.BigEndian.PutUint32(h[1:], uint32(len(p)))
	if _, err := w.Write(h[:]); err != nil {
		return err
	}
	_, err := w.Write(p)
	return err
}

// readFrame reads one frame; an end frame may be up to maxEnd bytes.
func readFrame(r io.Reader, maxEnd int) (kind byte, p []byte, err error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := int(binary.BigEndian.Uint32(h[1:]))
	limit := maxFrame
	if h[0] == frameEnd {
		limit = maxEnd
	}
	if n > limit {
		return 0, nil, fmt.Errorf("guest sent a frame of %d bytes (at most %d)", n, limit)
	}
	p = make([]byte, n)
	_, err = io.ReadFull(r, p)
	return h[0], p, err
}

// wireError is a typed error on the wire.
type wireError struct {
	Kind    string `json:"kind"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func toWire(err error) *wireError {
	if err == nil {
		return nil
	}
	return &wireError{Kind: sandbox.KindOf(err).Code(), Code: sandbox.CodeOf(err), Message: err.Error()}
}

func (w *wireError) err() error {
	if w == nil {
		return nil
	}
	for _, k := range sandbox.Kinds() {
		if k.Code() == w.Kind {
			return &sandbox.Error{Kind: k, Code: w.Code, Msg: w.Message}
		}
	}
	return &sandbox.Error{Kind: sandbox.ErrInternal, Code: w.Code, Msg: w.Message}
}

// execEnd is the end frame of an exec.
type execEnd struct {
	Result *sandbox.Result `json:"result,omitempty"`
	Error  *wireError      `json:"error,omitempty"`
}

// copyEnd is the end frame of a file read.
type copyEnd struct {
	N     int64      `json:"n"`
	Error *wireError `json:"error,omitempty"`
}

type listReply struct {
	Entries   []sandbox.FileInfo `json:"entries"`
	Truncated bool               `json:"truncated"`
}

type artifactsReply struct {
	Files   []sandbox.Artifact `json:"files"`
	Skipped []sandbox.Skipped  `json:"skipped"`
}

// decodeLimited decodes at most max bytes of JSON from r into v.
func decodeLimited(r io.Reader, max int64, v any) error {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return err
	}
	if int64(len(b)) > max {
		return fmt.Errorf("guest answer longer than %d bytes", max)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errors.New("guest answer is not valid JSON: " + err.Error())
	}
	return nil
}
