package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
)

// Issue 33, "Trust first", against the real binary.

// TestServeUploadPartHeaders: the load — 64 uploads at once, each
// with a 9 MiB part header — on a real `execbox serve` (native backend,
// no token): every one is refused 413 part_header_too_large, and the
// server's resident memory (VmHWM) grows by at most 64 MiB. Before the
// fix the same load took it from 0.32 to 1.58 GB (Go's multipart reader
// buffers up to 10 MiB of a part's headers).
func TestServeUploadPartHeaders(t *testing.T) {
	requireNative(t)
	s := startServer(t, []string{"EXECBOX_BACKEND=native"})
	status, _, body := s.raw("POST", "/v1/sessions", `{}`)
	var sess v1.Session
	if status != http.StatusCreated || json.Unmarshal([]byte(body), &sess) != nil {
		t.Fatalf("a session: %d %s", status, body)
	}
	base, _ := memStatus(t, s.cmd.Process.Pid)

	const uploads, header = 64, 9 << 20
	head := "--B\r\nContent-Disposition: form-data; name=\"f\"; filename=\"big\"\r\nX-Pad: "
	tail := "\r\n\r\ncontent\r\n--B--\r\n"
	pad := bytes.Repeat([]byte("p"), 1<<20)
	answers := make([]string, uploads)
	var wg sync.WaitGroup
	for i := range uploads {
		wg.Go(func() {
			c, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
			if err != nil {
				answers[i] = err.Error()
				return
			}
			defer c.Close()
			// Write the whole body while the answer is read: a refusal
			// comes before the body is in.
			go func() {
				fmt.Fprintf(c, "POST /v1/sessions/%s/upload HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; boundary=B\r\nContent-Length: %d\r\n\r\n%s",
					sess.ID, len(head)+header+len(tail), head)
				for range header / len(pad) {
					if _, err := c.Write(pad); err != nil {
						return
					}
				}
				io.WriteString(c, tail)
			}()
			c.SetReadDeadline(time.Now().Add(2 * time.Minute))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				answers[i] = err.Error()
				return
			}
			defer resp.Body.Close()
			var p v1.Problem
			json.NewDecoder(resp.Body).Decode(&p)
			answers[i] = fmt.Sprintf("%d %s", resp.StatusCode, p.Code)
		})
	}
	wg.Wait()
	hwm, rss := memStatus(t, s.cmd.Process.Pid)
	t.Logf("%d uploads with a %d MiB part header: VmHWM %d MiB (VmRSS %d MiB) from a baseline of %d MiB",
		uploads, header>>20, hwm>>20, rss>>20, base>>20)
	for i, a := range answers {
		if a != "413 part_header_too_large" {
			t.Errorf("upload %d: %s, want 413 part_header_too_large", i, a)
		}
	}
	if hwm-base > 64<<20 {
		t.Errorf("the server's memory peaked %d MiB above its baseline, over 64 MiB", (hwm-base)>>20)
	}
}
