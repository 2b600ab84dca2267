package server

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"unicode/utf8"

	"github.com/execbox/execbox/sandbox"
)

// A result's output and artifacts may be tens of MiB; JSON-escaping them
// into one buffer, as json.Encoder does, would hold them a second time
// (and up to six times over: a NUL byte is \u0000). encodeStreaming writes
// the same bytes json.Encoder (with SetEscapeHTML(false)) would, holding
// only the small rest of the document and one escaped chunk at a time.

// chunk is how many bytes of a large value are escaped at a time.
const chunk = 32 << 10

// largeValue is one of a result's large values, replaced by a placeholder
// in the document's skeleton.
type largeValue struct {
	placeholder []byte // as it appears in the skeleton, quotes included
	str         string // a string value…
	data        []byte // …or bytes (base64)
	isData      bool
}

// encodeStreaming writes v as JSON followed by a newline, as json.Encoder
// with SetEscapeHTML(false) does; res, when v holds it, is the result
// whose stdout, stderr and artifact data are written in chunks. res is
// left as it was.
func encodeStreaming(w io.Writer, v any, res *sandbox.Result) error {
	var nonce [16]byte
	rand.Read(nonce[:])
	tag := hex.EncodeToString(nonce[:])
	var large []largeValue
	str := func(s *string, name string) {
		if len(*s) < chunk {
			return
		}
		ph := "\x00execbox:" + tag + ":" + name
		large = append(large, largeValue{placeholder: []byte(`"\u0000execbox:` + tag + ":" + name + `"`), str: *s})
		*s = ph
	}
	var arts []sandbox.Artifact
	if res != nil {
		saved := *res
		defer func() { *res = saved }()
		str(&res.Stdout, "stdout")
		str(&res.Stderr, "stderr")
		data := func(b *[]byte, name string) {
			if len(*b) < chunk {
				return
			}
			ph := []byte("\x00execbox:" + tag + ":" + name)
			large = append(large, largeValue{placeholder: []byte(`"` + base64.StdEncoding.EncodeToString(ph) + `"`), data: *b, isData: true})
			*b = ph
		}
		data(&res.StdoutBase64, "stdout_base64")
		data(&res.StderrBase64, "stderr_base64")
		arts = make([]sandbox.Artifact, len(res.Artifacts))
		copy(arts, res.Artifacts)
		for i := range arts {
			if len(arts[i].Data) < chunk {
				continue
			}
			ph := []byte("\x00execbox:" + tag + ":artifact:" + hex.EncodeToString([]byte{byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}))
			large = append(large, largeValue{placeholder: []byte(`"` + base64.StdEncoding.EncodeToString(ph) + `"`), data: arts[i].Data, isData: true})
			arts[i].Data = ph
		}
		res.Artifacts = arts
	}
	var skel bytes.Buffer
	enc := json.NewEncoder(&skel)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, chunk)
	rest := skel.Bytes()
	for _, lv := range large {
		i := bytes.Index(rest, lv.placeholder)
		if i < 0 {
			continue // not in v: nothing to replace
		}
		bw.Write(rest[:i])
		rest = rest[i+len(lv.placeholder):]
		var err error
		if lv.isData {
			err = writeBase64(bw, lv.data)
		} else {
			err = writeString(bw, lv.str)
		}
		if err != nil {
			return err
		}
	}
	bw.Write(rest)
	return bw.Flush()
}

// writeString writes s as a JSON string, escaped as encoding/json escapes
// it (without HTML escaping), chunk by chunk. A chunk ends before a byte
// that starts a character, so no character is split: the escaping of each
// chunk is the escaping of its part of the whole.
func writeString(w *bufio.Writer, s string) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	w.WriteByte('"')
	for len(s) > 0 {
		// Split before a byte that is not a continuation byte: no valid
		// character spans such a boundary, and an invalid byte is escaped
		// alone either way. Within three bytes back there is one, or the
		// byte at n belongs to no character and the split there is as good.
		n := min(chunk, len(s))
		for m := n; m < len(s) && m > n-utf8.UTFMax && m > 0; m-- {
			if utf8.RuneStart(s[m]) {
				n = m
				break
			}
		}
		buf.Reset()
		if err := enc.Encode(s[:n]); err != nil {
			return err
		}
		b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if _, err := w.Write(b[1 : len(b)-1]); err != nil {
			return err
		}
		s = s[n:]
	}
	_, err := w.Write([]byte{'"'})
	return err
}

// writeBase64 writes data as encoding/json writes a []byte: a string of
// its standard base64, chunk by chunk (whole 3-byte groups but the last).
func writeBase64(w *bufio.Writer, data []byte) error {
	w.WriteByte('"')
	buf := make([]byte, base64.StdEncoding.EncodedLen(chunk/3*3))
	for len(data) > 0 {
		n := min(chunk/3*3, len(data))
		m := base64.StdEncoding.EncodedLen(n)
		base64.StdEncoding.Encode(buf[:m], data[:n])
		if _, err := w.Write(buf[:m]); err != nil {
			return err
		}
		data = data[n:]
	}
	_, err := w.Write([]byte{'"'})
	return err
}
