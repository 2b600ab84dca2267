package sandbox

import (
	"math"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	good := []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"1", 1},
		{"1024", 1024},
		{"1b", 1},
		{"1k", 1 << 10},
		{"1K", 1 << 10},
		{"64k", 64 << 10},
		{"1kb", 1 << 10},
		{"1KiB", 1 << 10},
		{"512m", 512 << 20},
		{"16MiB", 16 << 20},
		{"16mib", 16 << 20},
		{"16 MiB", 16 << 20},
		{" 2g ", 2 << 30},
		{"1g", 1 << 30},
		{"1.5g", 3 << 29},
		{"0.5k", 512},
		{"0.0001k", 0}, // fractions of a byte are dropped
		{"1.0009765625k", 1025},
		{"8t", 8 << 40},
		{"0k", 0},
		{"9223372036854775807", math.MaxInt64},
		{"8388607t", 8388607 << 40},
		{"8388607.99999999999999999t", math.MaxInt64}, // just below 2^63, exact
	}
	for _, c := range good {
		got, err := ParseSize(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	bad := []string{
		"", " ", "k", "-1", "-1m", "+1m", "12x", "1kk", "1 k b", "1.5", "1.5b",
		"1.", ".5k", "1..5k", "1.2.3k", "1e3", "0x10", "NaN", "inf", "1\u212a", // Kelvin sign
		"9223372036854775808", "8388608t", "8388608.0t", "99999999999999999999k",
		"1" + string(make([]byte, 70)), // too long
	}
	for _, in := range bad {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0", 1: "1", 1023: "1023", 1024: "1k", 1536: "1536", 256 << 20: "256m",
		3 << 29: "1536m", 1 << 30: "1g", 5 << 40: "5t", math.MaxInt64: "9223372036854775807",
	} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
		if back, err := ParseSize(FormatSize(n)); err != nil || back != n {
			t.Errorf("ParseSize(FormatSize(%d)) = %d, %v", n, back, err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	good := []struct {
		in   string
		want time.Duration
	}{
		{"0", 0},
		{"0s", 0},
		{"1", time.Second},
		{"30", 30 * time.Second},
		{"30s", 30 * time.Second},
		{"2m", 2 * time.Minute},
		{"1h30m", 90 * time.Minute},
		{"100ms", 100 * time.Millisecond},
		{"1.5s", 1500 * time.Millisecond},
		{" 5s ", 5 * time.Second},
		{"9223372036", 9223372036 * time.Second}, // the most whole seconds a Duration holds
	}
	for _, c := range good {
		got, err := ParseDuration(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	bad := []string{
		"", "s", "-1s", "-1", "-0.5s", "12x", "1.5", "30S", "1d", "9223372037", "99999999999999999999",
		"1" + string(make([]byte, 70)),
	}
	for _, in := range bad {
		if got, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, got)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 15 * time.Second: "15s", 10 * time.Second: "10s", time.Minute: "1m", 5 * time.Minute: "5m",
		90 * time.Second: "1m30s", time.Hour: "1h", 720 * time.Hour: "720h", 90 * time.Minute: "1h30m",
		time.Hour + time.Second: "1h0m1s", 100 * time.Millisecond: "100ms",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
		if back, err := ParseDuration(FormatDuration(d)); err != nil || back != d {
			t.Errorf("ParseDuration(FormatDuration(%v)) = %v, %v", d, back, err)
		}
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "1k", "1.5g", "16MiB", "-1m", "12x", "9223372036854775807", "8388607.9t", " 2 GB "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("ParseSize(%q) = %d: negative", s, n)
		}
		back, err := ParseSize(FormatSize(n))
		if err != nil || back != n {
			t.Fatalf("ParseSize(FormatSize(%d)) = %d, %v", n, back, err)
		}
	})
}

func TestHumanSize(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 bytes", 1: "1 byte", 1023: "1023 bytes", 1024: "1 KiB", 1536: "1.5 KiB",
		256 << 20: "256 MiB", 3 << 29: "1.5 GiB", 1 << 40: "1 TiB",
	} {
		if got := HumanSize(n); got != want {
			t.Errorf("HumanSize(%d) = %q, want %q", n, got, want)
		}
	}
}
