package config

import "strings"

// parseList splits a comma-separated list (the env and flag syntax),
// trimming blanks and dropping empty items: "" is the empty list.
func parseList(s string) []string {
	out := []string{}
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
