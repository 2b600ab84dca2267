package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/sandbox"
)

// CreateSession opens a session: a sandbox that keeps its files across
// execs until it is closed, its ttl passes or it goes unused for its idle
// timeout.
func (c *Client) CreateSession(ctx context.Context, req *v1.SessionRequest) (*v1.Session, error) {
	var s v1.Session
	if err := c.do(ctx, http.MethodPost, "/v1/sessions", nil, req, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Session describes one of the caller's sessions.
func (c *Client) Session(ctx context.Context, id string) (*v1.Session, error) {
	var s v1.Session
	if err := c.do(ctx, http.MethodGet, sessionPath(id), nil, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Sessions lists the caller's open sessions (every one, for an admin
// token).
func (c *Client) Sessions(ctx context.Context) ([]v1.Session, error) {
	var s v1.Sessions
	if err := c.do(ctx, http.MethodGet, "/v1/sessions", nil, nil, &s); err != nil {
		return nil, err
	}
	return s.Sessions, nil
}

// CloseSession closes a session; closing a closed one succeeds.
func (c *Client) CloseSession(ctx context.Context, id string) error {
	return c.noContent(ctx, http.MethodDelete, sessionPath(id))
}

// Exec runs a command, or code, in the session.
func (c *Client) Exec(ctx context.Context, id string, req *v1.SessionExec, opts ...RunOption) (*v1.RunResult, error) {
	var res v1.RunResult
	if err := c.do(ctx, http.MethodPost, sessionPath(id)+"/exec", runQuery(opts, url.Values{}), req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// ExecStream is Exec with the output written to stdout and stderr (nil:
// dropped) as it arrives.
func (c *Client) ExecStream(ctx context.Context, id string, req *v1.SessionExec, stdout, stderr io.Writer, opts ...RunOption) (*v1.RunResult, error) {
	return c.stream(ctx, sessionPath(id)+"/exec", req, stdout, stderr, opts)
}

// PutFile uploads r as the file at path (relative to the work dir),
// streamed; missing directories are created.
func (c *Client) PutFile(ctx context.Context, id, path string, r io.Reader) (*v1.FileInfo, error) {
	u, err := filePath(id, "files", path)
	if err != nil {
		return nil, err
	}
	resp, err := c.sendRaw(ctx, http.MethodPut, u, nil, r, "application/octet-stream", "application/json")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var fi v1.FileInfo
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(&fi); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "answer_invalid", "decoding the answer of PUT %s: %w", path, err)
	}
	return &fi, nil
}

// UploadFile is one file of an Upload: its path under the upload's
// directory and its content.
type UploadFile struct {
	Path    string
	Content io.Reader
}

// Upload writes files into the directory dir ("" is the work dir) of
// session id with one multipart/form-data request, streamed part by part
// (nothing is held whole), and returns what was written, in order. When a
// file fails, the ones before it stay written (the problem says which).
func (c *Client) Upload(ctx context.Context, id, dir string, files ...UploadFile) ([]v1.FileInfo, error) {
	u := sessionPath(id) + "/upload"
	if dir != "" {
		var err error
		if u, err = filePath(id, "upload", dir); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		if err := sandbox.CheckPath(f.Path); err != nil {
			return nil, err
		}
	}
	pr, pw := io.Pipe()
	defer pr.Close() // an early answer must not leave the writer blocked
	mw := multipart.NewWriter(pw)
	var mu sync.Mutex
	var readErr error // a file's own read error
	go func() {
		var err error
		for _, f := range files {
			var part io.Writer
			if part, err = mw.CreateFormFile("file", f.Path); err != nil {
				break
			}
			if _, err = io.Copy(part, readerFunc(func(b []byte) (int, error) {
				n, err := f.Content.Read(b)
				if err != nil && err != io.EOF {
					mu.Lock()
					readErr = fmt.Errorf("reading %s: %w", f.Path, err)
					mu.Unlock()
				}
				return n, err
			})); err != nil {
				break
			}
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	resp, err := c.sendRaw(ctx, http.MethodPost, u, nil, pr, mw.FormDataContentType(), "application/json")
	if err != nil {
		mu.Lock()
		defer mu.Unlock()
		if readErr != nil {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "file_invalid", "%v", readErr)
		}
		return nil, err
	}
	defer resp.Body.Close()
	var up v1.Uploaded
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(&up); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "answer_invalid", "decoding the answer of an upload: %w", err)
	}
	return up.Files, nil
}

// GetFile downloads the regular file at path into w, streamed, and
// returns its size.
func (c *Client) GetFile(ctx context.Context, id, path string, w io.Writer) (int64, error) {
	u, err := filePath(id, "files", path)
	if err != nil {
		return 0, err
	}
	resp, err := c.sendRaw(ctx, http.MethodGet, u, nil, nil, "", "application/octet-stream")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, sandbox.Errorf(sandbox.ErrInternal, "download_failed", "downloading %s: %w", path, err)
	}
	return n, nil
}

// ReadFile returns the first max bytes of the regular file at path, and
// its whole size (more than len(data) when it is longer).
func (c *Client) ReadFile(ctx context.Context, id, path string, max int64) (data []byte, size int64, err error) {
	u, err := filePath(id, "files", path)
	if err != nil {
		return nil, 0, err
	}
	resp, err := c.sendRaw(ctx, http.MethodGet, u, url.Values{"max": {strconv.FormatInt(max, 10)}}, nil, "", "application/octet-stream")
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	size, _ = strconv.ParseInt(resp.Header.Get("X-Execbox-File-Size"), 10, 64)
	data, err = io.ReadAll(io.LimitReader(resp.Body, max))
	if err != nil {
		return nil, 0, sandbox.Errorf(sandbox.ErrInternal, "download_failed", "downloading %s: %w", path, err)
	}
	if n := int64(len(data)); size < n {
		size = n
	}
	return data, size, nil
}

// Stat describes the entry at path ("" is the work dir) without
// following a symlink.
func (c *Client) Stat(ctx context.Context, id, path string) (*v1.FileInfo, error) {
	u := sessionPath(id) + "/stat/"
	if path != "" {
		var err error
		if u, err = filePath(id, "stat", path); err != nil {
			return nil, err
		}
	}
	var fi v1.FileInfo
	if err := c.do(ctx, http.MethodGet, u, nil, nil, &fi); err != nil {
		return nil, err
	}
	return &fi, nil
}

// List lists the directory dir ("" is the work dir).
func (c *Client) List(ctx context.Context, id, dir string) (*v1.FileList, error) {
	p := sessionPath(id) + "/list"
	if dir != "" {
		var err error
		if p, err = filePath(id, "list", dir); err != nil {
			return nil, err
		}
	}
	var l v1.FileList
	if err := c.do(ctx, http.MethodGet, p, nil, nil, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// Remove removes the file, or the directory with everything in it, at
// path.
func (c *Client) Remove(ctx context.Context, id, path string) error {
	u, err := filePath(id, "files", path)
	if err != nil {
		return err
	}
	return c.noContent(ctx, http.MethodDelete, u)
}

// Mkdir creates the directory path and its missing parents.
func (c *Client) Mkdir(ctx context.Context, id, path string) (*v1.FileInfo, error) {
	u, err := filePath(id, "mkdir", path)
	if err != nil {
		return nil, err
	}
	var fi v1.FileInfo
	if err := c.do(ctx, http.MethodPost, u, nil, nil, &fi); err != nil {
		return nil, err
	}
	return &fi, nil
}

// sessionPath is a session's path. An id is plain letters and digits;
// one that is not is escaped, so it cannot name another route.
func sessionPath(id string) string { return "/v1/sessions/" + url.PathEscape(id) }

// filePath is the path of op ("files", "stat", …) on path in session id,
// checked here as the server checks it: a ".." must not reach another
// route through the server's path cleaning.
func filePath(id, op, path string) (string, error) {
	if err := sandbox.CheckPath(path); err != nil {
		return "", err
	}
	return sessionPath(id) + "/" + op + "/" + path, nil
}

// noContent sends a request whose answer has no body.
func (c *Client) noContent(ctx context.Context, method, path string) error {
	resp, err := c.sendRaw(ctx, method, path, nil, nil, "", "application/json")
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(b []byte) (int, error) { return f(b) }
