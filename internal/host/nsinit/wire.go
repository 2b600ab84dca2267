package nsinit

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The control channel is a unix stream socket. Messages are a 4-byte
// big-endian length and that many bytes of JSON, at most maxConfig. Every
// init speaking to execbox over a socket uses this framing (the bwrap
// backend's too).

// WriteMsg sends v as one framed message.
func WriteMsg(w io.Writer, v any) error {
	msg, err := frame(v)
	if err != nil {
		return err
	}
	_, err = w.Write(msg)
	return err
}

// frame returns the framed encoding of v.
func frame(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(data) > maxConfig {
		return nil, fmt.Errorf("message of %d bytes exceeds %d", len(data), maxConfig)
	}
	out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(data)), uint32(len(data)))
	return append(out, data...), nil
}

// ReadMsg reads one framed message into v.
func ReadMsg(r io.Reader, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxConfig {
		return fmt.Errorf("message of %d bytes exceeds %d", n, maxConfig)
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(r, data); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return json.Unmarshal(data, v)
}
