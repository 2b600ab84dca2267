package guest

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// lossyAttach joins host and agent as a Pod's attach does: what the host
// writes reaches the agent, but the agent's first lost writes are dropped
// (the runtime passes stdin on before it passes stdout on).
func lossyAttach(t *testing.T, lost int) (host, agent net.Conn) {
	host, h := net.Pipe()
	agent, a := net.Pipe()
	go io.Copy(a, h)
	go func() {
		buf := make([]byte, 64<<10)
		for n := 0; ; n++ {
			k, err := a.Read(buf)
			if err != nil {
				h.Close()
				return
			}
			if n < lost {
				continue
			}
			if _, err := h.Write(buf[:k]); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { host.Close(); agent.Close(); h.Close(); a.Close() })
	return host, agent
}

// attach runs Attach, bounded as the backend bounds it.
func attach(t *testing.T, host net.Conn) (*Client, error) {
	t.Helper()
	cut := time.AfterFunc(5*time.Second, func() { host.Close() })
	defer cut.Stop()
	return Attach(host)
}

// TestAttachSurvivesLostHellos: the agent's hellos that an attach drops
// before it passes stdout on do not stop the host from reaching it (CI
// saw an HTTP/2 frame where the one hello should have been).
func TestAttachSurvivesLostHellos(t *testing.T) {
	for _, lost := range []int{0, 1, 3} {
		host, agent := lossyAttach(t, lost)
		go func() {
			if err := greet(agent); err != nil {
				agent.Close()
				return
			}
			(&http2.Server{}).ServeConn(agent, &http2.ServeConnOpts{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "pong "+r.URL.Path)
			})})
		}()
		c, err := attach(t, host)
		if err != nil {
			t.Fatalf("%d hellos lost: %v", lost, err)
		}
		resp, err := c.request(context.Background(), "GET", "/ping", nil, nil)
		if err != nil {
			t.Fatalf("%d hellos lost: %v", lost, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "pong /ping" {
			t.Fatalf("%d hellos lost: HTTP/2 after the greeting answered %q", lost, body)
		}
		c.Close()
	}
}

// TestAttachRefusesAnAgentThatDoesNotGreet: an agent that says something
// else and hangs up fails the attach at once, naming what it said.
func TestAttachRefusesAnAgentThatDoesNotGreet(t *testing.T) {
	host, agent := lossyAttach(t, 0)
	go func() {
		readLine(agent, HostHello)
		io.WriteString(agent, "exec format error\n")
		agent.Close()
	}()
	_, err := attach(t, host)
	if err == nil || !strings.Contains(err.Error(), "exec format error") {
		t.Fatalf("Attach = %v, want the agent's words", err)
	}
}

// TestGreetRefusesAStranger: the agent serves only a host that greets it.
func TestGreetRefusesAStranger(t *testing.T) {
	host, agent := lossyAttach(t, 0)
	done := make(chan error, 1)
	go func() { done <- greet(agent) }()
	io.WriteString(host, "GET / HTTP/1.1\n")
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not") {
			t.Fatalf("greet = %v, want a refusal", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("greet waited on a stranger")
	}
}
