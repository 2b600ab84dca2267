package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/execbox/execbox/errmap"
	"github.com/execbox/execbox/function"
	"github.com/execbox/execbox/internal/daemon/config"
	"github.com/execbox/execbox/sandbox"
)

// newExecutor builds the function executor over a fresh engine.
func newExecutor(cfg *config.Config) (*function.Executor, func(), error) {
	e, err := newEngine(cfg)
	if err != nil {
		return nil, nil, err
	}
	fx, err := newFunctions(cfg, e)
	if err != nil {
		e.Close()
		return nil, nil, err
	}
	return fx, e.Close, nil
}

func newFnCmd(g *globals) *cobra.Command {
	var codeFile, params, entry, lang, timeout, backend, tier, remote string
	cmd := &cobra.Command{
		Use:   "fn",
		Short: "Call a function: one JSON request on stdin, one JSON response on stdout",
		Long: `fn calls a function with the function protocol: it reads one request
{"code", "params", "entrypoint", "mode", "language", "timeout"} on stdin and
writes one response {"ok": true, "data": …} or {"ok": false, "error": …} on
stdout. With --code-file it builds the request from flags instead.
It exits 0 whenever it answered a request, ok or not; 125 when its flags
were wrong (a response with the error is written then too) or it could not
answer.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var req *function.Request
			var err error
			if codeFile != "" {
				req, err = requestFromFlags("--code-file", codeFile, params, entry, lang, timeout)
			} else {
				req, err = function.ReadRequest(os.Stdin)
			}
			if err == nil && backend != "" {
				req.Backend = backend
			}
			if err == nil && tier != "" {
				req.Tier = tier
			}
			var resp *function.Response
			if err != nil && codeFile != "" {
				// A wrong flag is the caller's mistake, not the function's:
				// the response says what, and the exit code says it did
				// not run. (A request on stdin is answered like any call.)
				if werr := function.WriteResponse(os.Stdout, function.ErrorResponse(err)); werr != nil {
					return werr
				}
				return exitError{errmap.ExitRefused}
			} else if err != nil {
				resp = function.ErrorResponse(err)
			} else {
				resp, err = callFunctionAt(cmd.Context(), g, remote, req)
				if err != nil {
					resp = function.ErrorResponse(err)
				}
			}
			return function.WriteResponse(os.Stdout, resp)
		},
	}
	fl := cmd.Flags()
	addRemoteFlag(fl, &remote)
	fl.StringVar(&codeFile, "code-file", "", "read the code from this file instead of a request on stdin")
	fl.StringVar(&params, "params", "{}", "with --code-file: the params as a JSON object")
	fl.StringVar(&entry, "entrypoint", "", "with --code-file: the function to call (default: the last top-level one)")
	languageVar(fl, &lang, "", "with --code-file: python or javascript (default: by file extension)")
	fl.StringVar(&timeout, "timeout", "", "with --code-file: the timeout, 1s–60s")
	fl.StringVar(&backend, "backend", "", "backend to run on")
	fl.StringVar(&tier, "tier", "", "isolation tier: strict, standard or fast")
	return cmd
}

func callFunction(ctx context.Context, g *globals, req *function.Request) (*function.Response, error) {
	cfg, _, err := g.loadConfig()
	if err != nil {
		return nil, err
	}
	x, closeFn, err := newExecutor(cfg)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return x.Execute(ctx, req), nil
}

// requestFromFlags builds a request from a code file ("-" for stdin) and
// the flags; what names the file in messages.
func requestFromFlags(what, codeFile, params, entry, lang, timeout string) (*function.Request, error) {
	// One byte over the bound is enough for the request's own check to
	// answer with the protocol's error.
	var code []byte
	var err error
	if codeFile == "-" {
		code, err = io.ReadAll(io.LimitReader(os.Stdin, function.MaxCode+1))
	} else {
		code, err = readBounded(codeFile, function.MaxCode+1)
	}
	if err != nil && len(code) == 0 {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, function.CodeInvalidCode, "%s: %w", what, err)
	}
	var p any
	if err := json.Unmarshal([]byte(params), &p); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, function.CodeInvalidRequest, "--params %.40q is not valid JSON: %s", params, jsonProblem(params, err))
	}
	doc := map[string]any{"code": string(code), "params": json.RawMessage(params), "entrypoint": entry}
	if lang == "" {
		if l, ok := function.LanguageFor(codeFile); ok {
			lang = string(l)
		}
	}
	if lang != "" {
		doc["language"] = lang
	}
	if timeout != "" {
		d, err := sandbox.ParseDuration(timeout)
		if err != nil {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, function.CodeInvalidRequest, "--timeout: %w", err)
		}
		doc["timeout"] = d.Seconds()
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, function.CodeInvalidRequest, "--params is not valid JSON: %w", err)
	}
	return function.DecodeRequest(b)
}

func newLintCmd(g *globals) *cobra.Command {
	var asJSON bool
	var lang string
	cmd := &cobra.Command{
		Use:   "lint FILE|-",
		Short: "Check a function's syntax without running it",
		Long: `lint parses FILE ("-": standard input; Python or JavaScript, by extension
or --language, Python for stdin) in a sandbox, never running it, and prints
FILE:LINE:COLUMN: TYPE: MESSAGE per diagnostic, lines and columns 1-based as
gcc and eslint print them; --json prints the diagnostics in the editor form
of the function protocol (lines 1-based, columns 0-based UTF-16 offsets).
It exits 1 when there is a diagnostic.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := requestFromFlags(args[0], args[0], "{}", "", lang, "")
			if err != nil {
				return err
			}
			req.Mode = function.ModeLint
			resp, err := callFunction(cmd.Context(), g, req)
			if err != nil {
				return err
			}
			if !resp.OK {
				return resp.Err()
			}
			if asJSON {
				diags := resp.Diagnostics
				if diags == nil {
					diags = []function.Diagnostic{}
				}
				if err := json.NewEncoder(os.Stdout).Encode(diags); err != nil {
					return err
				}
			} else {
				for _, d := range resp.Diagnostics {
					fmt.Printf("%s:%d:%d: %s: %s\n", args[0], d.Line, d.Column+1, d.Type, d.Message)
				}
			}
			if len(resp.Diagnostics) > 0 {
				return exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the diagnostics as a JSON array")
	languageVar(cmd.Flags(), &lang, "", "python or javascript (default: by file extension)")
	return cmd
}

// jsonProblem says what is wrong with doc, and where, in JSON's words
// rather than those of the Go type that would have held it.
func jsonProblem(doc string, err error) string {
	var se *json.SyntaxError
	switch {
	case strings.TrimSpace(doc) == "":
		return "empty (give {} for no params)"
	case errors.As(err, &se):
		return fmt.Sprintf("%s (at byte %d)", se.Error(), se.Offset)
	}
	return err.Error()
}
