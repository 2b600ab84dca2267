package server

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/sandbox"
)

// encodeStreaming writes exactly what json.Encoder (no HTML escaping)
// writes, whatever the output holds: NULs, invalid UTF-8, characters
// across chunk boundaries, U+2028, HTML; large artifacts as base64.
func TestEncodeStreamingIsJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "\x00", "é", "€", "😀", "\xff", "\xe2\x82", "\u2028", "<&>", "\"\\", "\n\t\r", "\x80\x80\x80\x80", "\xf0\x9f"}
	gen := func(n int) string {
		var b strings.Builder
		for b.Len() < n {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		return b.String()
	}
	for i, size := range []int{0, 10, chunk - 1, chunk, chunk + 1, 3*chunk + 7, 200_000} {
		res := &sandbox.Result{ID: "id", Backend: "local", Reason: sandbox.ReasonExited, Stdout: gen(size), Stderr: gen(size / 2),
			Message: "m <x>", Enforcement: map[string]string{"wall": "timer"}}
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(r.IntN(256))
		}
		res.Artifacts = []sandbox.Artifact{{Path: "small", Data: []byte("x")}, {Path: "big", Size: int64(size), Data: data}, {Path: "empty", Data: []byte{}}, {Path: "nil"}}
		if i%2 == 1 { // the form of a stream that is not UTF-8
			res.StdoutBase64 = data
			res.StderrBase64 = data[:size/3]
		}
		before := *res
		for _, v := range []any{res, &v1.StreamEvent{Type: v1.EventResult, Result: res}} {
			var want, got bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(v); err != nil {
				t.Fatal(err)
			}
			if err := encodeStreaming(&got, v, res); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Fatalf("case %d (%d bytes): the streamed JSON differs from encoding/json's (%d vs %d bytes)", i, size, got.Len(), want.Len())
			}
		}
		if res.Stdout != before.Stdout || &res.Artifacts[0] != &before.Artifacts[0] || !bytes.Equal(res.Artifacts[1].Data, data) {
			t.Fatalf("case %d: the result was changed", i)
		}
	}
}
