package replica

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestIDs(t *testing.T) {
	id := "execbox-7d9f8c6b5-x2x4z.3fa2c1d0e9b87a65"
	if name, ok := Of(id); !ok || name != "execbox-7d9f8c6b5-x2x4z" {
		t.Fatalf("Of(%q) = %q, %v", id, name, ok)
	}
	for _, id := range []string{"3fa2c1d0e9b87a65", ".x", "Upper.x", "-a.x", "a-.x", "a_b.x", strings.Repeat("a", 64) + ".x", "a/b.x"} {
		if name, ok := Of(id); ok {
			t.Errorf("Of(%q) names replica %q", id, name)
		}
	}
	if _, ok := Of(strings.Repeat("a", 63) + ".x"); !ok {
		t.Error("a 63-letter name is a DNS label")
	}
}

func TestStatic(t *testing.T) {
	s, err := ParsePeers([]string{"a=http://10.0.0.1:8080/", "b=https://b.example:443"})
	if err != nil {
		t.Fatal(err)
	}
	if base, err := s.Find(context.Background(), "a"); err != nil || base != "http://10.0.0.1:8080" {
		t.Fatalf("Find(a) = %q, %v", base, err)
	}
	if _, err := s.Find(context.Background(), "c"); !errors.Is(err, ErrGone) {
		t.Fatalf("Find(c) = %v, want ErrGone", err)
	}
	for _, peers := range [][]string{
		{"A=http://x:1"},
		{"a:http://x:1"},
		{"a=ftp://x:1"},
		{"a=http://"},
		{"a=http://x:1/api"},
		{"a=http://u:p@x:1"},
		{"a=http://x:1?q"},
		{"a=http://x:1", "a=http://y:1"},
	} {
		if _, err := ParsePeers(peers); err == nil {
			t.Errorf("ParsePeers(%q) took it", peers)
		}
	}
}
