package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Stamped at release time (scripts/release.sh) with
//
//	-ldflags "-X main.version=1.2.0 -X main.commit=<sha> -X main.date=<RFC 3339>"
//
// A plain go build or go run leaves them empty but for version "dev"; the
// commit and its time then come from the Go toolchain's VCS stamp, when it
// made one, and the build date is unknown.
var (
	version = "dev"
	commit  = ""
	date    = ""
)

// buildInfo is what `execbox version` prints.
type buildInfo struct {
	Version, Commit, Date, Go, Platform string
	CommitTime                          string // the VCS stamp's commit time (dev builds)
	Modified                            bool   // the VCS stamp saw uncommitted changes
}

// readBuildInfo combines the stamped variables with the toolchain's build
// information; stamped values win.
func readBuildInfo() buildInfo {
	b := buildInfo{Version: version, Commit: commit, Date: date, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.Go = bi.GoVersion
	stamped := b.Commit != ""
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if !stamped {
				b.Commit = s.Value
			}
		case "vcs.time":
			if !stamped {
				b.CommitTime = s.Value
			}
		case "vcs.modified":
			if !stamped {
				b.Modified = s.Value == "true"
			}
		}
	}
	return b
}

// write prints the first line as "execbox VERSION" (what scripts read),
// then one "key: value" line each.
func (b buildInfo) write(w io.Writer) {
	unknown := func(s string) string {
		if s == "" {
			return "unknown"
		}
		return s
	}
	c := unknown(b.Commit)
	if b.CommitTime != "" {
		c += " (" + b.CommitTime + ")"
	}
	if b.Modified {
		c += ", modified"
	}
	fmt.Fprintf(w, "execbox %s\ncommit: %s\nbuilt: %s\ngo: %s\nplatform: %s\n",
		b.Version, c, unknown(b.Date), b.Go, b.Platform)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and build date",
		Long: `Print the version, the commit and the build date of this binary, the Go
version and the platform. Release builds have all three stamped in; a
development build (go build, go run) says "dev" and takes the commit and
its time from the toolchain's VCS stamp when there is one (go build in a
git checkout; go run with -buildvcs=true).`,
		Args: cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			readBuildInfo().write(cmd.OutOrStdout())
		},
	}
}
