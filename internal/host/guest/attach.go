package guest

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"time"
)

// An attach (the kubernetes backend's Pod) joins the agent's stdin and
// stdout to the host, but the runtime passes stdin on before it passes
// stdout on (containerd's CRI attaches them in that order) and drops what
// the agent writes in between. So a hello may be lost: the agent repeats
// it until the host says it heard one, then marks where HTTP/2 begins.
//
//	host: HostHello    agent: Hello, Hello, …
//	host: HostHeard    agent: Serving, then HTTP/2
const (
	HostHello = "execbox-host\n"
	HostHeard = "execbox-host heard\n"
	Serving   = "execbox-guest serving\n"
)

// helloEvery and maxHellos pace the agent's hellos: far more often than
// an attach takes to join stdout, for at most 10 s.
const (
	helloEvery = 20 * time.Millisecond
	maxHellos  = 500
)

// maxGreeting bounds what the host reads before Serving: hellos, and
// pieces of one the attach cut.
const maxGreeting = 64 << 10

// Attach greets the agent behind an attach on conn and starts HTTP/2 over
// it. The caller bounds the wait (closing conn ends it).
func Attach(conn net.Conn) (*Client, error) {
	if _, err := io.WriteString(conn, HostHello); err != nil {
		return nil, err
	}
	if err := readUntil(conn, Hello); err != nil {
		return nil, err
	}
	if _, err := io.WriteString(conn, HostHeard); err != nil {
		return nil, err
	}
	if err := readUntil(conn, Serving); err != nil {
		return nil, err
	}
	return newClient(conn)
}

// readUntil reads r a byte at a time (what follows is HTTP/2's) until
// what it read ends with s.
func readUntil(r io.Reader, s string) error {
	var seen []byte
	b := make([]byte, 1)
	for !bytes.HasSuffix(seen, []byte(s)) {
		if len(seen) >= maxGreeting {
			return fmt.Errorf("the guest agent said %d bytes, none of them %q", len(seen), s)
		}
		if _, err := io.ReadFull(r, b); err != nil {
			if len(seen) > 200 {
				seen = seen[len(seen)-200:]
			}
			return fmt.Errorf("the guest agent said %q, not %q: %w", seen, s, err)
		}
		seen = append(seen, b[0])
	}
	return nil
}

// greet is the agent's side of Attach on rw, its stdin and stdout.
func greet(rw net.Conn) error {
	if err := readLine(rw, HostHello); err != nil {
		return err
	}
	stop, done := make(chan struct{}), make(chan error, 1)
	go func() {
		t := time.NewTicker(helloEvery)
		defer t.Stop()
		for range maxHellos {
			if _, err := io.WriteString(rw, Hello); err != nil {
				done <- err
				return
			}
			select {
			case <-stop:
				done <- nil
				return
			case <-t.C:
			}
		}
		done <- fmt.Errorf("the host did not hear %d hellos", maxHellos)
	}()
	err := readLine(rw, HostHeard)
	close(stop)
	if werr := <-done; err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	_, err = io.WriteString(rw, Serving)
	return err
}

// readLine reads one line of at most len(want) bytes, a byte at a time
// (what follows is HTTP/2's), and wants it to be want.
func readLine(r io.Reader, want string) error {
	var line []byte
	b := make([]byte, 1)
	for len(line) < len(want) && (len(line) == 0 || line[len(line)-1] != '\n') {
		if _, err := io.ReadFull(r, b); err != nil {
			return fmt.Errorf("waiting for the host: %w", err)
		}
		line = append(line, b[0])
	}
	if string(line) != want {
		return fmt.Errorf("the host said %q, not %q", line, want)
	}
	return nil
}
