package v1

import (
	"errors"
	"net/http"
	"testing"

	"github.com/execbox/execbox/sandbox"
)

func TestProblem(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{sandbox.Errorf(sandbox.ErrBusy, "busy", "full"), 429, "busy"},
		{sandbox.Errorf(sandbox.ErrDenied, CodeUnauthenticated, "who?"), 401, CodeUnauthenticated},
		{sandbox.Errorf(sandbox.ErrLimit, "input_too_large", "big"), 413, "input_too_large"},
		{errors.New("plain"), 500, "internal"},
	} {
		p := NewProblem(tc.err)
		if p.Status != tc.status || p.Code != tc.code || p.Type != ProblemTypePrefix+tc.code || p.Detail != tc.err.Error() {
			t.Errorf("%v: %+v", tc.err, p)
		}
	}
	// Back on the client side: the kind and code survive.
	for status, kind := range map[int]*sandbox.Kind{400: sandbox.ErrInvalid, 401: sandbox.ErrDenied, 403: sandbox.ErrDenied, 404: sandbox.ErrNotFound,
		405: sandbox.ErrInvalid, 413: sandbox.ErrLimit, 415: sandbox.ErrInvalid, 429: sandbox.ErrBusy, 500: sandbox.ErrInternal, 503: sandbox.ErrUnavailable} {
		p := ProblemFor(status, "some_code", "detail")
		if !errors.Is(p, kind) || sandbox.CodeOf(p) != "some_code" {
			t.Errorf("%d: kind %v, code %s", status, sandbox.KindOf(p), sandbox.CodeOf(p))
		}
	}
	// A function code's kind wins over the status.
	if p := ProblemFor(http.StatusInternalServerError, "busy", "x"); !errors.Is(p, sandbox.ErrBusy) {
		t.Errorf("function code kind: %v", sandbox.KindOf(p))
	}
	if CodeOfType(ProblemTypePrefix+"busy") != "busy" || CodeOfType("about:blank") != "" {
		t.Error("CodeOfType")
	}
}
