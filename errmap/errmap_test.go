package errmap

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/execbox/execbox/sandbox"
	"golang.org/x/sys/unix"
)

func TestHTTPStatusRoundTrip(t *testing.T) {
	want := map[*sandbox.Kind]int{
		sandbox.ErrInvalid: 400, sandbox.ErrUnavailable: 503, sandbox.ErrBusy: 429, sandbox.ErrLimit: 413,
		sandbox.ErrNotFound: 404, sandbox.ErrDenied: 403, sandbox.ErrInternal: 500,
	}
	if len(want) != len(sandbox.Kinds()) {
		t.Fatalf("the test lists %d kinds, sandbox has %d", len(want), len(sandbox.Kinds()))
	}
	for _, k := range sandbox.Kinds() {
		err := fmt.Errorf("wrapped: %w", sandbox.Errorf(k, "some_code", "boom"))
		if got := HTTPStatus(err); got != want[k] {
			t.Errorf("HTTPStatus(%s) = %d, want %d", k.Code(), got, want[k])
		}
		if back := KindOfStatus(want[k]); back != k {
			t.Errorf("KindOfStatus(%d) = %s, want %s", want[k], back.Code(), k.Code())
		}
		if got := ExitCode(err); got != 125 {
			t.Errorf("ExitCode(%s) = %d, want 125", k.Code(), got)
		}
	}
	if got := HTTPStatus(errors.New("plain")); got != 500 {
		t.Errorf("HTTPStatus(plain error) = %d, want 500", got)
	}
	if got := HTTPStatus(sandbox.Errorf(sandbox.ErrDenied, CodeUnauthenticated, "who are you")); got != http.StatusUnauthorized {
		t.Errorf("unauthenticated = %d, want 401", got)
	}
	for status, k := range map[int]*sandbox.Kind{401: sandbox.ErrDenied, 405: sandbox.ErrInvalid, 408: sandbox.ErrInvalid,
		415: sandbox.ErrInvalid, 431: sandbox.ErrLimit, 418: sandbox.ErrInternal, 502: sandbox.ErrInternal} {
		if got := KindOfStatus(status); got != k {
			t.Errorf("KindOfStatus(%d) = %s, want %s", status, got.Code(), k.Code())
		}
	}
	if got := ExitCode(fmt.Errorf("waiting for the probe: %w", context.Canceled)); got != 130 {
		t.Errorf("ExitCode(canceled) = %d, want 130", got)
	}
	if ExitCode(nil) != 0 {
		t.Error("ExitCode(nil) != 0")
	}
	// A program that cannot be started exits like a shell, whether the
	// backend said so with a Result (ResultExitCode) or an error.
	for code, want := range map[string]int{"program_not_found": 127, "program_not_executable": 126, "dir_not_found": 125} {
		err := fmt.Errorf("wrapped: %w", sandbox.Errorf(sandbox.ErrInvalid, code, "x"))
		if got := ExitCode(err); got != want {
			t.Errorf("ExitCode(%s) = %d, want %d", code, got, want)
		}
	}
}

func TestFunctionKind(t *testing.T) {
	for code, want := range map[string]*sandbox.Kind{
		"user_error": sandbox.ErrInvalid, "timeout": sandbox.ErrLimit, "busy": sandbox.ErrBusy,
		"isolation_unavailable": sandbox.ErrUnavailable, "denied": sandbox.ErrDenied, "internal_error": sandbox.ErrInternal,
	} {
		if got, ok := FunctionKind(code); !ok || got != want {
			t.Errorf("FunctionKind(%q) = %v, %v; want %s", code, got, ok, want.Code())
		}
	}
	if _, ok := FunctionKind("no_such_code"); ok {
		t.Error("FunctionKind of an unknown code: ok")
	}
	if n := len(FunctionCodes()); n != 18 {
		t.Errorf("%d function codes, want 18", n)
	}
}

func TestResultExitCode(t *testing.T) {
	for _, c := range []struct {
		res  sandbox.Result
		want int
	}{
		{sandbox.Result{Reason: sandbox.ReasonExited, ExitCode: 0}, 0},
		{sandbox.Result{Reason: sandbox.ReasonExited, ExitCode: 7}, 7},
		{sandbox.Result{Reason: sandbox.ReasonExited, ExitCode: 127, Message: "program \"x\" not found"}, 127},
		{sandbox.Result{Reason: sandbox.ReasonExited, ExitCode: 126, Message: "program \"/etc\": is a directory"}, 126},
		{sandbox.Result{Reason: sandbox.ReasonTimeout, ExitCode: -1, Signal: "SIGKILL"}, 124},
		{sandbox.Result{Reason: sandbox.ReasonCanceled, ExitCode: -1, Signal: "SIGKILL"}, 130},
		{sandbox.Result{Reason: sandbox.ReasonSandboxError, ExitCode: -1}, 125},
		{sandbox.Result{Reason: sandbox.ReasonSignaled, ExitCode: -1, Signal: "SIGKILL"}, 137},
		// A refused fork ends nothing: the program's own code.
		{sandbox.Result{Reason: sandbox.ReasonPidsLimit, ExitCode: 2}, 2},
		{sandbox.Result{Reason: sandbox.ReasonPidsLimit, ExitCode: -1, Signal: "SIGSEGV"}, 139},
		{sandbox.Result{Reason: sandbox.ReasonSignaled, ExitCode: -1, Signal: "SIGSEGV"}, 139},
		{sandbox.Result{Reason: sandbox.ReasonMemoryLimit, ExitCode: -1, Signal: "SIGKILL"}, 137},
		{sandbox.Result{Reason: sandbox.ReasonCPULimit, ExitCode: -1, Signal: "SIGXCPU"}, 152},
		{sandbox.Result{Reason: sandbox.ReasonOutputLimit, ExitCode: -1, Signal: "SIGKILL"}, 137},
		{sandbox.Result{Reason: sandbox.ReasonOutputLimit, ExitCode: -1}, 125},
		{sandbox.Result{Reason: sandbox.ReasonSignaled, ExitCode: -1, Signal: "SIGNOPE"}, 125},
	} {
		if got := ResultExitCode(&c.res); got != c.want {
			t.Errorf("%s %s exit %d: %d, want %d", c.res.Reason, c.res.Signal, c.res.ExitCode, got, c.want)
		}
	}
	// The table agrees with x/sys's for every standard signal.
	if len(signalNumbers) != 31 {
		t.Errorf("%d signals in the table, want 31", len(signalNumbers))
	}
	for name, n := range signalNumbers {
		if want := unix.SignalNum(name); int(want) != n {
			t.Errorf("%s = %d, x/sys says %d", name, n, want)
		}
	}
}
