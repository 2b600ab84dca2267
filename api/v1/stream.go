package v1

import (
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"
)

// StreamEvent is one line of a streamed run (POST /v1/runs?stream=1):
// output chunks as they are produced, then exactly one result or error.
type StreamEvent struct {
	// Type is stdout, stderr, result or error.
	Type string `json:"type"`
	// Data is an output chunk that is valid UTF-8; DataBase64 carries a
	// chunk that is not. Multi-byte characters are never split.
	Data       string `json:"data,omitempty"`
	DataBase64 []byte `json:"data_base64,omitempty"`
	// Result ends a stream that ran; Error ends one that failed.
	Result *RunResult `json:"result,omitempty"`
	Error  *Problem   `json:"error,omitempty"`
}

// Stream event types.
const (
	EventStdout = "stdout"
	EventStderr = "stderr"
	EventResult = "result"
	EventError  = "error"
)

// Bytes returns the chunk's bytes whichever field carries them.
func (e *StreamEvent) Bytes() []byte {
	if e.DataBase64 != nil {
		return e.DataBase64
	}
	return []byte(e.Data)
}

// Chunker turns a stream of output bytes into events without splitting a
// UTF-8 character across two events. It is not safe for concurrent use.
type Chunker struct {
	Type  string
	carry []byte
}

// Next returns the event for p (nil when p only held part of a
// character, kept for the next call).
func (c *Chunker) Next(p []byte) *StreamEvent {
	buf := append(c.carry, p...)
	c.carry = nil
	// Hold back an incomplete character at the end (at most 3 bytes).
	for i := 1; i <= 3 && i <= len(buf); i++ {
		b := buf[len(buf)-i]
		if b < 0x80 {
			break // ASCII: complete
		}
		if utf8.RuneStart(b) {
			if !utf8.FullRune(buf[len(buf)-i:]) {
				c.carry = append([]byte(nil), buf[len(buf)-i:]...)
				buf = buf[:len(buf)-i]
			}
			break
		}
	}
	if len(buf) == 0 {
		return nil
	}
	return c.event(buf)
}

// Flush returns an event for bytes held back, or nil.
func (c *Chunker) Flush() *StreamEvent {
	if len(c.carry) == 0 {
		return nil
	}
	buf := c.carry
	c.carry = nil
	return c.event(buf)
}

func (c *Chunker) event(buf []byte) *StreamEvent {
	if utf8.Valid(buf) {
		return &StreamEvent{Type: c.Type, Data: string(buf)}
	}
	return &StreamEvent{Type: c.Type, DataBase64: append([]byte(nil), buf...)}
}

// ReadEvents decodes NDJSON stream events from r, calling fn for each,
// until EOF or fn's error.
func ReadEvents(r io.Reader, fn func(*StreamEvent) error) error {
	dec := json.NewDecoder(r)
	for {
		var ev StreamEvent
		if err := dec.Decode(&ev); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("decoding a stream event: %w", err)
		}
		if err := fn(&ev); err != nil {
			return err
		}
	}
}
