package guest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"

	"golang.org/x/net/http2"

	"github.com/execbox/execbox/sandbox"
)

// Client is the host's end of the channel to one agent. It trusts nothing
// the guest sends: every answer is read within a bound.
type Client struct {
	conn net.Conn
	cc   *http2.ClientConn
}

// maxReply bounds a JSON answer other than artifacts and results.
const maxReply = 4 << 20

// Dial waits for the agent's Hello on conn (the caller bounds the wait
// with conn's deadline) and starts HTTP/2 over it.
func Dial(conn net.Conn) (*Client, error) {
	hello := make([]byte, len(Hello))
	if _, err := io.ReadFull(conn, hello); err != nil {
		return nil, fmt.Errorf("waiting for the guest agent: %w", err)
	}
	if string(hello) != Hello {
		return nil, fmt.Errorf("the guest agent said %q, not hello", hello)
	}
	return newClient(conn)
}

// newClient starts HTTP/2 over conn, past the greeting.
func newClient(conn net.Conn) (*Client, error) {
	tr := &http2.Transport{MaxReadFrameSize: 1 << 20, MaxHeaderListSize: 64 << 10}
	cc, err := tr.NewClientConn(conn)
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn, cc: cc}, nil
}

// Close hangs up; the agent ends its sandbox (and powers a VM off).
func (c *Client) Close() error {
	c.cc.Close()
	return c.conn.Close()
}

// codeBroken is the code of a channel that failed under a call.
const codeBroken = "agent_lost"

// broken is the error of a channel that failed under a call.
func broken(err error) error {
	return sandbox.Errorf(sandbox.ErrInternal, codeBroken, "the agent did not answer: %w", err)
}

func (c *Client) request(ctx context.Context, method, path string, q url.Values, body io.Reader) (*http.Response, error) {
	u := &url.URL{Scheme: "http", Host: "guest", Path: path, RawQuery: q.Encode()}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	resp, err := c.cc.RoundTrip(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, broken(err)
	}
	return resp, nil
}

// call makes a request whose answer is JSON of at most max bytes.
func (c *Client) call(ctx context.Context, method, path string, q url.Values, body io.Reader, max int64, out any) error {
	resp, err := c.request(ctx, method, path, q, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnprocessableEntity {
		var we wireError
		if err := decodeLimited(resp.Body, maxReply, &we); err != nil {
			return broken(err)
		}
		return we.err()
	}
	if resp.StatusCode != http.StatusOK {
		return broken(fmt.Errorf("status %s on %s", resp.Status, path))
	}
	if out == nil {
		out = &struct{}{}
	}
	if err := decodeLimited(resp.Body, max, out); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return broken(err)
	}
	return nil
}

func jsonBody(v any) io.Reader {
	b, _ := json.Marshal(v)
	return bytes.NewReader(b)
}

// Setup makes the agent's sandbox.
func (c *Client) Setup(ctx context.Context, s Setup) error {
	return c.call(ctx, "POST", "/setup", nil, jsonBody(s), maxReply, nil)
}

// Cancel ends the running Exec (its Result says "canceled").
func (c *Client) Cancel(ctx context.Context) error {
	return c.call(ctx, "POST", "/cancel", nil, nil, maxReply, nil)
}

// Exec runs p and returns its Result; maxResult bounds the Result's JSON.
func (c *Client) Exec(ctx context.Context, p *sandbox.Process, maxResult int) (*sandbox.Result, error) {
	req := ExecRequest{Args: p.Args, Env: p.Env, Dir: p.Dir, Timeout: p.Timeout, Lasting: p.Lasting,
		Stdin: p.Stdin != nil, Stream: p.Stdout != nil || p.Stderr != nil}
	line, _ := json.Marshal(req)
	var body io.Reader = bytes.NewReader(append(line, '\n'))
	if p.Stdin != nil {
		body = io.MultiReader(body, p.Stdin)
	}
	resp, err := c.request(ctx, "POST", "/exec", nil, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	for {
		kind, b, err := readFrame(resp.Body, maxResult)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, broken(err)
		}
		var w io.Writer
		switch kind {
		case frameStdout:
			w = p.Stdout
		case frameStderr:
			w = p.Stderr
		case frameEnd:
			var e execEnd
			if err := json.Unmarshal(b, &e); err != nil {
				return nil, broken(err)
			}
			if e.Error != nil {
				return nil, e.Error.err()
			}
			if e.Result == nil {
				return nil, broken(errors.New("no result"))
			}
			restore(e.Result)
			return e.Result, nil
		default:
			return nil, broken(fmt.Errorf("unknown frame %d", kind))
		}
		if w != nil {
			w.Write(b)
		}
	}
}

// restore undoes WireForm's base64 of output that is not UTF-8.
func restore(r *sandbox.Result) {
	if r.StdoutBase64 != nil {
		r.Stdout, r.StdoutBase64 = string(r.StdoutBase64), nil
	}
	if r.StderrBase64 != nil {
		r.Stderr, r.StderrBase64 = string(r.StderrBase64), nil
	}
}

// WriteFiles writes files into the work dir.
func (c *Client) WriteFiles(ctx context.Context, files map[string][]byte) error {
	return c.call(ctx, "POST", "/write", nil, jsonBody(files), maxReply, nil)
}

// Artifacts collects the work dir; maxBytes is the artifact byte limit.
func (c *Client) Artifacts(ctx context.Context, maxFiles int, maxBytes int64) (sandbox.Artifacts, error) {
	var r artifactsReply
	// base64 makes 4 bytes of 3, plus paths and the list of skipped files.
	err := c.call(ctx, "GET", "/artifacts", nil, nil, maxBytes/3*4+int64(maxFiles+1)*8192+maxReply, &r)
	return sandbox.Artifacts{Files: r.Files, Skipped: r.Skipped}, err
}

// Memory is what the sandbox's processes hold in the guest.
func (c *Client) Memory(ctx context.Context) (int64, error) {
	var n int64
	err := c.call(ctx, "GET", "/memory", nil, nil, maxReply, &n)
	return n, err
}

func pathQuery(path string, max int64) url.Values {
	return url.Values{"path": {path}, "max": {strconv.FormatInt(max, 10)}}
}

// PutFile is sandbox.Files.PutFile in the guest.
func (c *Client) PutFile(ctx context.Context, path string, r io.Reader, max int64) (int64, error) {
	var n int64
	err := c.call(ctx, "PUT", "/file", pathQuery(path, max), onlyReader{r}, maxReply, &n)
	return n, err
}

// GetFile is sandbox.Files.GetFile in the guest.
func (c *Client) GetFile(ctx context.Context, path string, w io.Writer, max int64) (int64, error) {
	resp, err := c.request(ctx, "GET", "/file", pathQuery(path, max), nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var got int64
	for {
		kind, b, err := readFrame(resp.Body, maxReply)
		if err != nil {
			if ctx.Err() != nil {
				return got, ctx.Err()
			}
			return got, broken(err)
		}
		switch kind {
		case frameStdout:
			if got+int64(len(b)) > max {
				return got, broken(errors.New("the guest sent more than the file limit"))
			}
			n, err := w.Write(b)
			got += int64(n)
			if err != nil {
				return got, err
			}
		case frameEnd:
			var e copyEnd
			if err := json.Unmarshal(b, &e); err != nil {
				return got, broken(err)
			}
			return got, e.Error.err()
		default:
			return got, broken(fmt.Errorf("unknown frame %d", kind))
		}
	}
}

// Stat is sandbox.Files.Stat in the guest.
func (c *Client) Stat(ctx context.Context, path string) (sandbox.FileInfo, error) {
	var fi sandbox.FileInfo
	err := c.call(ctx, "GET", "/stat", url.Values{"path": {path}}, nil, maxReply, &fi)
	return fi, err
}

// List is sandbox.Files.List in the guest.
func (c *Client) List(ctx context.Context, dir string, max int) ([]sandbox.FileInfo, bool, error) {
	var l listReply
	err := c.call(ctx, "GET", "/list", pathQuery(dir, int64(max)), nil, int64(max+1)*4096+maxReply, &l)
	if err == nil && len(l.Entries) > max {
		return nil, false, broken(errors.New("the guest listed more entries than asked"))
	}
	return l.Entries, l.Truncated, err
}

// Remove is sandbox.Files.Remove in the guest.
func (c *Client) Remove(ctx context.Context, path string) error {
	return c.call(ctx, "POST", "/remove", url.Values{"path": {path}}, nil, maxReply, nil)
}

// Mkdir is sandbox.Files.Mkdir in the guest.
func (c *Client) Mkdir(ctx context.Context, path string) error {
	return c.call(ctx, "POST", "/mkdir", url.Values{"path": {path}}, nil, maxReply, nil)
}

// onlyReader hides a reader's other methods (a *bytes.Reader's length),
// so the transport streams it instead of guessing a length.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }
