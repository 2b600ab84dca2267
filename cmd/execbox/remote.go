package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"
	"unicode/utf8"

	"github.com/spf13/pflag"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/errmap"
	"github.com/execbox/execbox/function"
	"github.com/execbox/execbox/internal/daemon/config"
	"github.com/execbox/execbox/internal/daemon/wire"
	"github.com/execbox/execbox/sandbox"
)

// maxRemoteStdin bounds what `run --server` reads from stdin: it travels
// in the request body, which the server bounds too (server.max_body).
const maxRemoteStdin = 16 * sandbox.MiB

// addRemoteFlag adds --server (also read as --remote) to a command's flags.
func addRemoteFlag(fl *pflag.FlagSet, dst *string) {
	fl.StringVar(dst, "server", "", "run on the execbox server at this URL, e.g. http://127.0.0.1:8080 (token from EXECBOX_TOKEN; --remote is the same flag)")
}

// remoteClient is a client for url, authenticated with EXECBOX_TOKEN.
func remoteClient(url string) (*client.Client, error) {
	return client.New(url, client.WithToken(os.Getenv("EXECBOX_TOKEN")))
}

// runAt runs args here, or on the server at remote when it is set.
func runAt(ctx context.Context, g *globals, f *runFlags, remote string, args []string) error {
	if remote == "" {
		return runRun(ctx, g, f, args)
	}
	c, err := remoteClient(remote)
	if err != nil {
		return err
	}
	req, err := f.remoteRequest(args)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	var opts []client.RunOption
	if f.explain {
		opts = append(opts, client.Explain())
	}
	var res *v1.RunResult
	if f.jsonOut {
		res, err = c.Run(ctx, req, opts...)
	} else {
		res, err = c.RunStream(ctx, req, os.Stdout, os.Stderr, opts...)
	}
	if err != nil {
		return err
	}
	return f.finish(res)
}

// remoteRequest builds the wire request from the same flags a local run
// takes; the server applies its own policy and defaults.
func (f *runFlags) remoteRequest(args []string) (*v1.RunRequest, error) {
	spec, err := f.spec(config.Default())
	if err != nil {
		return nil, err
	}
	p, err := f.process(spec, args)
	if err != nil {
		return nil, err
	}
	req := &v1.RunRequest{
		Command:      p.Args,
		Dir:          p.Dir,
		Env:          spec.Env,
		Files:        spec.Files,
		Limits:       spec.Limits,
		Network:      spec.Policy.Network.String(),
		Backend:      f.sel.Backend,
		Tier:         f.sel.Tier,
		MinIsolation: f.sel.MinIsolation,
		Image:        spec.Image,
		TmpExec:      spec.Policy.TmpExec,
	}
	if f.interactive || !isTerminal(os.Stdin) {
		in, err := io.ReadAll(io.LimitReader(os.Stdin, maxRemoteStdin+1))
		if err != nil {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "stdin_invalid", "reading stdin: %w", err)
		}
		if len(in) > maxRemoteStdin {
			return nil, sandbox.Errorf(sandbox.ErrLimit, "input_too_large", "stdin exceeds %d MiB, the most --server sends", maxRemoteStdin/sandbox.MiB)
		}
		if utf8.Valid(in) {
			req.Stdin = string(in)
		} else {
			req.StdinBase64 = in
		}
	}
	return req, nil
}

// callFunctionAt calls a function here, or on the server at remote when it
// is set. A failure the server answers comes back as an error whose code
// function.ErrorResponse keeps.
func callFunctionAt(ctx context.Context, g *globals, remote string, req *function.Request) (*function.Response, error) {
	if remote == "" {
		return callFunction(ctx, g, req)
	}
	c, err := remoteClient(remote)
	if err != nil {
		return nil, err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	resp, err := c.Execute(ctx, wire.FunctionRequest(req))
	var p *v1.Problem
	switch {
	case errors.As(err, &p) && errmap.IsFunctionCode(p.Code):
		return function.ErrorResponse(p), nil
	case errors.As(err, &p):
		// The server's own code (unauthenticated, forbidden, …), as it
		// said it: one code for one failure, whichever way it is read.
		return &function.Response{Code: p.Code, Error: p.Error()}, nil
	case err != nil && ctx.Err() != nil:
		return &function.Response{Code: function.CodeInterrupted, Error: "execution was interrupted"}, nil
	case err != nil:
		return &function.Response{Code: function.CodeSandboxFailed, Error: "could not reach the execbox server: " + err.Error()}, nil
	}
	return wire.FunctionResponseOf(resp), nil
}
