package sandbox

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// maxValueLen bounds a size or duration text; longer input is refused
// before any arithmetic.
const maxValueLen = 64

// sizeUnits maps a lower-cased unit suffix to its multiplier. Every unit is
// binary: "k", "kb" and "kib" all mean 1024 bytes.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
	"m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
	"g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
	"t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40,
}

// ParseSize parses a byte size: a plain number of bytes ("1024") or a
// decimal number with a binary unit, case-insensitive ("64k", "512m",
// "16MiB", "1.5g"). Fractions of a byte are dropped. Signs, exponents and
// unknown units are errors, as is a size above math.MaxInt64.
func ParseSize(s string) (int64, error) {
	if len(s) > maxValueLen {
		return 0, fmt.Errorf("invalid size %.20q…: too long", s)
	}
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], asciiLower(strings.TrimSpace(t[i:]))
	mult, ok := sizeUnits[unit]
	if !ok || !isDecimal(num) {
		return 0, fmt.Errorf("invalid size %q (want bytes or a number with k, m, g or t, e.g. 512m)", s)
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n > math.MaxInt64/mult {
			return 0, fmt.Errorf("invalid size %q: too large", s)
		}
		return n * mult, nil
	}
	if unit == "" || unit == "b" {
		return 0, fmt.Errorf("invalid size %q: a number of bytes must be whole", s)
	}
	// Exact arithmetic: 1.5g is exactly 1610612736, never 1610612735.99.
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	n := new(big.Int).Quo(r.Num(), r.Denom())
	if !n.IsInt64() {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return n.Int64(), nil
}

// isDecimal reports whether s is digits with at most one inner dot.
func isDecimal(s string) bool {
	whole, frac, dot := strings.Cut(s, ".")
	return whole != "" && allDigits(whole) && (!dot || frac != "" && allDigits(frac))
}

// asciiLower lower-cases ASCII letters only, so no Unicode letter (the
// Kelvin sign folds to "k") can pass for a unit.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// FormatSize writes n in the largest binary unit that divides it exactly,
// in the syntax ParseSize reads: 268435456 → "256m", 1536 → "1536".
func FormatSize(n int64) string {
	if n == 0 {
		return "0"
	}
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"t", 1 << 40}, {"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}} {
		if n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// ParseDuration parses a duration as time.ParseDuration does ("30s", "2m",
// "1h30m") or a plain whole number of seconds ("30"). Negative durations
// are errors: no setting means anything by one.
func ParseDuration(s string) (time.Duration, error) {
	if len(s) > maxValueLen {
		return 0, fmt.Errorf("invalid duration %.20q…: too long", s)
	}
	t := strings.TrimSpace(s)
	if allDigits(t) {
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil || n > int64(math.MaxInt64/time.Second) {
			return 0, fmt.Errorf("invalid duration %q: too large", s)
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q (want e.g. 30s, 2m, 1h30m or whole seconds)", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("invalid duration %q: must not be negative", s)
	}
	return d, nil
}

// FormatDuration writes d as time.Duration.String does, without the zero
// tails: 60s → "1m", 720h → "720h", 90m → "1h30m".
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// HumanSize writes n bytes as a person reads them: "256 MiB", "1.5 GiB",
// "512 KiB", "100 bytes" (one decimal where the unit does not divide n).
func HumanSize(n int64) string {
	for _, u := range []struct {
		name string
		mult int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.mult {
			if n%u.mult == 0 {
				return strconv.FormatInt(n/u.mult, 10) + " " + u.name
			}
			return strconv.FormatFloat(float64(n)/float64(u.mult), 'f', 1, 64) + " " + u.name
		}
	}
	if n == 1 {
		return "1 byte"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
