package testutil

import (
	"slices"
	"testing"
	"time"
)

// Ms is d in milliseconds, to microsecond precision.
func Ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// ReportP50 sorts ds and reports its median as prefix+"p50-ms".
func ReportP50(b *testing.B, prefix string, ds []time.Duration) {
	b.Helper()
	if len(ds) == 0 {
		b.Fatalf("%sp50: no samples", prefix)
	}
	slices.Sort(ds)
	b.ReportMetric(Ms(ds[len(ds)/2]), prefix+"p50-ms")
}

// ReportP50P90 is ReportP50 plus the 90th percentile as prefix+"p90-ms".
func ReportP50P90(b *testing.B, prefix string, ds []time.Duration) {
	b.Helper()
	ReportP50(b, prefix, ds)
	b.ReportMetric(Ms(ds[len(ds)*9/10]), prefix+"p90-ms")
}
