package errmap

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/execbox/execbox/sandbox"
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
	if ExitCode(nil) != 0 {
		t.Error("ExitCode(nil) != 0")
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
