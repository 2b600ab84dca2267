package bwrap

import (
	"context"
	"testing"
	"time"

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
	variants := []struct {
		name string
		run  func() (*sandbox.Result, error)
	}{
		{"run", func() (*sandbox.Result, error) { return sandbox.Run(context.Background(), be, sandbox.Spec{}, p) }},
		{"exec", func() (*sandbox.Result, error) { return sb.Exec(context.Background(), p) }},
	}
	times := make([][]time.Duration, len(variants))
	for b.Loop() {
		for i, v := range variants {
			start := time.Now()
			res, err := v.run()
			if err != nil || !res.Succeeded() {
				b.Fatalf("%s: %v %+v", v.name, err, res)
			}
			times[i] = append(times[i], time.Since(start))
		}
	}
	for i, v := range variants {
		testutil.ReportP50P90(b, v.name+"-", times[i])
	}
}
