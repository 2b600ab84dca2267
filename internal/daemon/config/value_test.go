package config

import (
	"slices"
	"testing"
)

func TestParseList(t *testing.T) {
	for in, want := range map[string][]string{
		"":                 {},
		" ":                {},
		",,":               {},
		"a":                {"a"},
		"a,b":              {"a", "b"},
		" native , bwrap,": {"native", "bwrap"},
	} {
		if got := parseList(in); !slices.Equal(got, want) || got == nil {
			t.Errorf("parseList(%q) = %#v, want %#v", in, got, want)
		}
	}
}
