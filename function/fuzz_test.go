package function

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/execbox/execbox/sandbox"
)

// FuzzDecodeRequest: decoding and validation never panic; an accepted
// request stays within every bound and survives a round trip.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"code": "def main(a, b):\n    return a + b", "params": {"a": 2, "b": 40}, "entrypoint": "main", "mode": "execute"}`,
		`{"code":"function main(){}","language":"javascript","mode":"lint","timeout":"2s"}`,
		`{"code":"x","timeout":1e308}`, `{"code":"x","timeout":-0}`, `{"code":"\u0000"}`,
		`{"code":"x","entrypoint":"\u00e9\u0301"}`, `{"code":"x","min_isolation":"vm"}`, `null`, `{}`, `[`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := ReadRequest(bytes.NewReader(b))
		if err != nil {
			if req != nil {
				t.Fatal("request returned with an error")
			}
			if sandbox.CodeOf(err) == "" || ErrorResponse(err).Code == "" {
				t.Fatalf("error without a code: %v", err)
			}
			return
		}
		if len(req.Code) > MaxCode || strings.TrimSpace(req.Code) == "" {
			t.Fatalf("accepted code of %d bytes", len(req.Code))
		}
		in, err := req.Input()
		if err != nil || len(in) > MaxInput {
			t.Fatalf("accepted input of %d bytes (%v)", len(in), err)
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		req2, err := DecodeRequest(again)
		if err != nil && sandbox.CodeOf(err) != CodeInputTooLarge {
			t.Fatalf("round trip of %s: %v", again, err)
		}
		if err == nil && (req2.Code != req.Code || req2.Entrypoint != req.Entrypoint || req2.Timeout != req.Timeout) {
			t.Fatalf("round trip changed the request: %+v → %+v", req, req2)
		}
	})
}
