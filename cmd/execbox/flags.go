package main

import (
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/execbox/execbox/sandbox"
)

// durationFlag reads a duration as every execbox duration is read
// (sandbox.ParseDuration: 30s, 2m, 1h30m or whole seconds), so that
// `--ttl 90` means what `--timeout 90` and the API's 90 mean.
type durationFlag struct{ d *time.Duration }

func durationVar(fl *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fl.Var(durationFlag{p}, name, usage)
}

func (f durationFlag) String() string {
	if f.d == nil || *f.d == 0 {
		return "0s"
	}
	return sandbox.FormatDuration(*f.d)
}

func (f durationFlag) Set(s string) error {
	d, err := sandbox.ParseDuration(s)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}

func (durationFlag) Type() string { return "duration" }

// languageAliases are the names people type for a language, mapped to
// the one the API takes.
var languageAliases = map[string]string{
	"py": "python", "python3": "python",
	"js": "javascript", "node": "javascript", "nodejs": "javascript",
}

// languageFlag is a --language flag that takes the usual aliases (js,
// node, py, ...) and passes on the API's name; any other name passes as
// given, for the command's own check to name what it takes.
type languageFlag struct{ s *string }

func languageVar(fl *pflag.FlagSet, p *string, value, usage string) {
	*p = value
	fl.Var(languageFlag{p}, "language", usage)
}

func (f languageFlag) String() string {
	if f.s == nil {
		return ""
	}
	return *f.s
}

func (f languageFlag) Set(s string) error {
	s = strings.TrimSpace(s)
	if c, ok := languageAliases[strings.ToLower(s)]; ok {
		s = c
	}
	*f.s = s
	return nil
}

func (languageFlag) Type() string { return "string" }

// flagAliases are other names a flag is known by: the server's URL was
// --remote on some commands and --server on others; both are accepted
// everywhere, and help shows --server.
var flagAliases = map[string]string{"remote": "server"}

func normalizeFlag(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	if n, ok := flagAliases[name]; ok {
		name = n
	}
	return pflag.NormalizedName(name)
}
