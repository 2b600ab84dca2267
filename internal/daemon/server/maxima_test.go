package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
	"github.com/execbox/execbox/tool"
)

// limitBound is one field of sandbox.Limits at its maximum and one step
// past it, as a request's limits object.
type limitBound struct {
	name     string // the field's JSON name
	at, past json.RawMessage
	atValue  reflect.Value // the maximum itself
}

// limitBounds lists, by reflection, every field of sandbox.Limits that
// has a maximum (all but the bool output_limit_kill) at max's value and
// one step past it: a millisecond, a byte, one, or a hundredth of a CPU.
// A field added to Limits is listed without a change here; a field of a
// type this does not know fails the test.
func limitBounds(t *testing.T, max sandbox.Limits) []limitBound {
	t.Helper()
	var out []limitBound
	typ := reflect.TypeFor[sandbox.Limits]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		m := reflect.ValueOf(max).Field(i)
		past := reflect.New(f.Type).Elem()
		switch {
		case f.Type == reflect.TypeFor[time.Duration]():
			past.SetInt(m.Int() + int64(time.Millisecond))
		case f.Type.Kind() == reflect.Int || f.Type.Kind() == reflect.Int64:
			past.SetInt(m.Int() + 1)
		case f.Type.Kind() == reflect.Float64:
			past.SetFloat(m.Float() + 0.01)
		case f.Type.Kind() == reflect.Bool:
			continue // a switch, not a size: no maximum
		default:
			t.Fatalf("Limits.%s is a %s: teach limitBounds its step", f.Name, f.Type)
		}
		if m.IsZero() {
			t.Fatalf("max_limits.%s is not set", name)
		}
		only := func(v reflect.Value) json.RawMessage {
			var l sandbox.Limits
			reflect.ValueOf(&l).Elem().Field(i).Set(v)
			b, err := json.Marshal(l)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		out = append(out, limitBound{name: name, at: only(m), past: only(past), atValue: m})
	}
	return out
}

// overMaximum checks that a is 400 code (limit_too_high, but for the
// function protocol's own) naming the limit, for the request's field.
func overMaximum(t *testing.T, what, name string, a answer, code, field string) {
	t.Helper()
	if a.status != http.StatusBadRequest {
		t.Errorf("%s: %d %.300s, want 400 %s", what, a.status, a.body, code)
		return
	}
	p := a.problem(t)
	if p.Code != code || p.Field != field || !strings.Contains(p.Detail, "limits."+name+" ") || !strings.Contains(p.Detail, "(max_limits."+name+")") {
		t.Errorf("%s: %+v, want %s naming limits.%s (field %q)", what, p, code, name, field)
	}
}

// maxima are the maxima of TestEveryMaximum: every field above its
// default, small enough to run at.
var maxima = sandbox.Limits{Wall: 30 * time.Second, CPUTime: 35 * time.Second, Memory: 512 * sandbox.MiB, CPUs: 1.5, Pids: 128,
	NoFile: 2048, FileSize: 128 * sandbox.MiB, TmpSize: 32 * sandbox.MiB, WorkSize: 128 * sandbox.MiB, Output: 2 * sandbox.MiB,
	ArtifactFiles: 200, ArtifactBytes: 32 * sandbox.MiB}

// TestEveryMaximum: every limit a request can set, at its maximum, is
// accepted and runs; one step past it is refused, 400 limit_too_high
// naming it, for runs, sessions and tools (their limits and their
// timeout, which is their wall limit). A function sets only its timeout
// (its wall limit): past max_limits.wall it is refused alike, with the
// function protocol's code, invalid_request. A context's call timeout is
// bounded by its session's wall limit: timeout_invalid past it.
func TestEveryMaximum(t *testing.T) {
	requirePython(t)
	// A call's timeout (and the discovery's) is its wall limit: at most
	// the maximum.
	tools, err := tool.New(tool.Options{RuntimeDir: filepath.Join(t.TempDir(), "rt"), Timeout: maxima.Wall})
	if err != nil {
		t.Fatal(err)
	}
	en := newEnv(t, setup{maxima: maxima, resultMemory: 256 * sandbox.MiB, backends: []string{"native"},
		options: func(o *Options) { o.Tools = tools }})
	max := en.srv.opts.Engine.Maxima()
	bounds := limitBounds(t, max)
	if len(bounds) != len(sandbox.LimitNames())-1 {
		t.Fatalf("%d limits found by reflection, %d named by the contract (but output_limit_kill)", len(bounds), len(sandbox.LimitNames())-1)
	}
	for _, b := range bounds {
		t.Run(b.name, func(t *testing.T) {
			run := func(l json.RawMessage) answer {
				return en.do("POST", "/v1/runs", `{"command":["true"],"limits":`+string(l)+`}`)
			}
			if a := run(b.at); a.status != 200 || decode[v1.RunResult](t, a).Reason != sandbox.ReasonExited {
				t.Errorf("a run at max_limits.%s: %d %.300s", b.name, a.status, a.body)
			}
			overMaximum(t, "a run past max_limits."+b.name, b.name, run(b.past), "limit_too_high", "limits")

			session := func(l json.RawMessage) answer {
				return en.do("POST", "/v1/sessions", `{"limits":`+string(l)+`}`)
			}
			a := session(b.at)
			if s := decode[v1.Session](t, a); a.status != http.StatusCreated || !reflect.ValueOf(s.Limits).FieldByName(fieldName(b.name)).Equal(b.atValue) {
				t.Errorf("a session at max_limits.%s: %d %.300s", b.name, a.status, a.body)
			} else if a := en.do("DELETE", "/v1/sessions/"+s.ID, nil); a.status != http.StatusNoContent {
				t.Fatalf("closing it: %d %s", a.status, a.body)
			}
			a = session(b.past)
			if a.status == http.StatusCreated {
				en.do("DELETE", "/v1/sessions/"+decode[v1.Session](t, a).ID, nil)
			}
			overMaximum(t, "a session past max_limits."+b.name, b.name, a, "limit_too_high", "limits")

			t.Run("tool", func(t *testing.T) {
				testutil.RequiresRoot(t, "native")
				call := func(l json.RawMessage) answer {
					return en.do("POST", "/v1/tools/python:run", `{"args":{"code":"6 * 7"},"backend":"native","limits":`+string(l)+`}`)
				}
				if a := call(b.at); a.status != 200 || !decode[v1.ToolResult](t, a).OK {
					t.Errorf("a tool call at max_limits.%s: %d %.300s", b.name, a.status, a.body)
				}
				overMaximum(t, "a tool call past max_limits."+b.name, b.name, call(b.past), "limit_too_high", "limits")
			})
		})
	}

	// The wall limit as a timeout: a function's, a tool's.
	secs := func(d time.Duration) string { return fmt.Sprint(d.Seconds()) }
	fn := func(d time.Duration) answer {
		return en.do("POST", "/v1/functions:execute", `{"code":"def f():\n    return 1\n","timeout":`+secs(d)+`}`)
	}
	if a := fn(max.Wall); a.status != 200 {
		t.Errorf("a function with the timeout max_limits.wall: %d %s", a.status, a.body)
	}
	overMaximum(t, "a function with a timeout past max_limits.wall", "wall", fn(max.Wall+time.Millisecond), "invalid_request", "")
	t.Run("tool timeout", func(t *testing.T) {
		testutil.RequiresRoot(t, "native")
		call := func(d time.Duration) answer {
			return en.do("POST", "/v1/tools/python:run", `{"args":{"code":"1"},"backend":"native","timeout":`+secs(d)+`}`)
		}
		if a := call(max.Wall); a.status != 200 {
			t.Errorf("a tool call with the timeout max_limits.wall: %d %s", a.status, a.body)
		}
		overMaximum(t, "a tool call with a timeout past max_limits.wall", "wall", call(max.Wall+time.Millisecond), "limit_too_high", "timeout")
	})

	// A context's call: at most its session's wall limit.
	a := en.do("POST", "/v1/sessions", `{"limits":{"wall":"7s"}}`)
	sess := decode[v1.Session](t, a)
	a = en.do("POST", "/v1/sessions/"+sess.ID+"/contexts", `{}`)
	cx := decode[v1.Context](t, a)
	code := func(timeout string) answer {
		return en.do("POST", "/v1/sessions/"+sess.ID+"/contexts/"+cx.ID+"/run", `{"code":"1","timeout":`+timeout+`}`)
	}
	if a := code("7"); a.status != 200 || !decode[v1.CodeResult](t, a).OK {
		t.Errorf("a context call with the session's wall as its timeout: %d %s", a.status, a.body)
	}
	if a := code("7.001"); a.status != http.StatusBadRequest || a.problem(t).Code != "timeout_invalid" || a.problem(t).Field != "timeout" {
		t.Errorf("a context call with a timeout past the session's wall: %d %s", a.status, a.body)
	}
}

// fieldName is the Go name of the Limits field whose JSON name is name.
func fieldName(name string) string {
	typ := reflect.TypeFor[sandbox.Limits]()
	for i := range typ.NumField() {
		if n, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ","); n == name {
			return typ.Field(i).Name
		}
	}
	return ""
}
