package kubernetes

import (
	"context"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// BenchmarkStart times a sandbox's start (Create) and its first output
// (Create, then echo to its end), side by side: a Pod started for it
// (kubernetes.warm 0), and a warm Pod taken from the pool (refilled
// before each).
func BenchmarkStart(b *testing.B) {
	for _, v := range []struct {
		name string
		warm int
	}{{"cold", 0}, {"warm", 1}} {
		b.Run(v.name, func(b *testing.B) {
			be := newBackend(b, "kubernetes", func(c *Config) { c.Warm, c.WarmMax = v.warm, v.warm })
			var create, first []time.Duration
			for range b.N {
				for deadline := time.Now().Add(2 * time.Minute); v.warm > 0 && len(create) > 0 && be.pool.Len() == 0; {
					if time.Now().After(deadline) {
						b.Fatal("no warm Pod in 2 minutes")
					}
					time.Sleep(20 * time.Millisecond)
				}
				t0 := time.Now()
				sb, err := be.Create(context.Background(), sandbox.Spec{})
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				res, err := sb.Exec(context.Background(), &sandbox.Process{Args: []string{"echo", "hi"}})
				if err != nil || res.Stdout != "hi\n" {
					b.Fatalf("%v %+v", err, res)
				}
				create, first = append(create, t1.Sub(t0)), append(first, time.Since(t0))
				sb.Close(context.Background())
			}
			if v.warm > 0 && len(create) > 1 {
				create, first = create[1:], first[1:] // the first found the pool empty
			}
			testutil.ReportP50(b, "create-", create)
			testutil.ReportP50(b, "first-output-", first)
		})
	}
}
