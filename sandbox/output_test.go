package sandbox

import (
	"bytes"
	"strings"
	"testing"
)

// A Capture keeps exactly the first limit bytes, whatever the sizes of
// the writes, tees only those, and says what it dropped.
func TestCapture(t *testing.T) {
	for _, limit := range []int64{0, 1, 4095, 4096, 4097, 200_000, 1 << 20} {
		var tee bytes.Buffer
		overflows := 0
		c := NewCapture(limit, &tee, func() { overflows++ })
		var all bytes.Buffer
		for i, n := 0, 1; all.Len() < 1_200_000; i, n = i+1, n*3%70_001+1 {
			p := bytes.Repeat([]byte{byte('a' + i%26)}, n)
			all.Write(p)
			if w, err := c.Write(p); w != len(p) || err != nil {
				t.Fatalf("limit %d: Write = %d, %v", limit, w, err)
			}
		}
		want := all.Bytes()[:limit]
		if !bytes.Equal(c.Bytes(), want) || c.String() != string(want) || !bytes.Equal(tee.Bytes(), want) {
			t.Fatalf("limit %d: kept %d bytes (tee %d), want the first %d", limit, len(c.Bytes()), tee.Len(), limit)
		}
		if !c.Truncated() || overflows != 1 || c.Total() != int64(all.Len()) {
			t.Fatalf("limit %d: truncated %v, %d overflows, total %d", limit, c.Truncated(), overflows, c.Total())
		}
	}
	c := NewCapture(10, nil, nil)
	c.Write([]byte("hello"))
	if c.String() != "hello" || c.Truncated() || strings.Compare(string(c.Bytes()), "hello") != 0 {
		t.Fatalf("under the limit: %q %v", c.String(), c.Truncated())
	}
}

// Holding n bytes costs about n bytes: no slice regrown to twice its size.
func TestCaptureMemory(t *testing.T) {
	const n = 8 << 20
	p := make([]byte, 1000)
	allocs := testing.AllocsPerRun(1, func() {
		c := NewCapture(n, nil, nil)
		for written := 0; written < n; written += len(p) {
			c.Write(p)
		}
	})
	// 4k, 8k, …, 64k, then 64 KiB chunks: about n/64k allocations.
	if allocs > n/(64<<10)+16 {
		t.Fatalf("%v allocations to keep %d bytes", allocs, n)
	}
}

// TeeAll: the tee gets every byte, the capture keeps its limit.
func TestCaptureTeeAll(t *testing.T) {
	for _, all := range []bool{false, true} {
		var tee strings.Builder
		c := NewCapture(4, &tee, nil)
		if all {
			c.TeeAll()
		}
		c.Write([]byte("abc"))
		c.Write([]byte("defg"))
		want := "abcd"
		if all {
			want = "abcdefg"
		}
		if c.String() != "abcd" || !c.Truncated() || tee.String() != want {
			t.Fatalf("TeeAll %v: kept %q, tee %q", all, c.String(), tee.String())
		}
	}
}
