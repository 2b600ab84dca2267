package bwrap

import (
	"context"
	"testing"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// BenchmarkPython times `python3 -I -S -c pass` through the backend, two
// ways interleaved: "run" is a one-shot sandbox.Run (Create, Exec,
// Artifacts, Close), "exec" one Exec in a live sandbox. Each reports its
// median and 90th percentile in milliseconds. backend/native's
// BenchmarkStart has native and raw bwrap beside each other:
//
//	go test -run '^$' -bench Python -benchtime 200x ./backend/bwrap/
func BenchmarkPython(b *testing.B) {
	be := newBackend(b)
	p := &sandbox.Process{Args: []string{"/usr/bin/python3", "-I", "-S", "-c", "pass"}}
	sb := testutil.Create(b, be, sandbox.Spec{})
	testutil.SideBySide(b, []testutil.Variant{
		{Name: "run", Run: func() error { return testutil.Check(sandbox.Run(context.Background(), be, sandbox.Spec{}, p)) }},
		{Name: "exec", Run: func() error { return testutil.Check(sb.Exec(context.Background(), p)) }},
	})
}
