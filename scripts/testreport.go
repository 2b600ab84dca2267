//go:build ignore

// testreport reads `go test -json` on stdin and prints what a person reads
// in a CI log: each package's result line as it ends, each benchmark's
// result line, the whole output of every failed test, and at the end every
// skipped test or benchmark with its reason, so a skip CI could have
// lifted is seen (go test prints a skipped benchmark only with -v), and
// the slowest top-level tests, to know where the run's time goes. It
// exits 1 if anything failed.
//
//	go test -json ./... | go run scripts/testreport.go
//	go test -run '^$' -bench . -json ./engine/ | go run scripts/testreport.go
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

// timed is a top-level test's wall time.
type timed struct {
	name string
	secs float64
}

func main() {
	out := map[string][]string{} // package + test → its output lines
	bench := map[string]string{} // package + benchmark → its output's unfinished line
	var skips []string
	var times []timed
	failed := false
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	for in.Scan() {
		var e event
		if err := json.Unmarshal(in.Bytes(), &e); err != nil {
			// Not an event (a build error): pass it on as it is.
			fmt.Println(in.Text())
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "build-output":
			fmt.Print(e.Output)
		case "build-fail":
			failed = true
		case "output":
			if e.Test == "" {
				// Package-level lines: ok/FAIL, panics, build failures.
				if !strings.HasPrefix(e.Output, "=== ") && !strings.HasPrefix(e.Output, "PASS") {
					fmt.Print(e.Output)
				}
				continue
			}
			out[key] = append(out[key], e.Output)
			if strings.HasPrefix(e.Test, "Benchmark") {
				// A passing benchmark gets no pass event: its result lines
				// are printed as they come, in pieces ("BenchmarkX-2 \t",
				// then the numbers).
				bench[key] += e.Output
				for {
					l, rest, ok := strings.Cut(bench[key], "\n")
					if !ok {
						break
					}
					if strings.HasPrefix(l, "Benchmark") && strings.Contains(l, "\t") {
						fmt.Println(l)
					}
					bench[key] = rest
				}
			}
		case "fail":
			if e.Test != "" {
				failed = true
				for _, l := range out[key] {
					if !strings.HasPrefix(l, "=== ") {
						fmt.Print(l)
					}
				}
			} else {
				failed = true
			}
			delete(out, key)
		case "skip":
			if e.Test != "" {
				why := ""
				for _, l := range out[key] {
					if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "=== ") && !strings.HasPrefix(t, "--- SKIP") {
						why = t
					}
				}
				skips = append(skips, fmt.Sprintf("%s %s: %s", e.Package, e.Test, why))
			}
			delete(out, key)
		case "pass":
			delete(out, key)
		}
		if (e.Action == "pass" || e.Action == "fail") && e.Test != "" && !strings.Contains(e.Test, "/") {
			times = append(times, timed{e.Package[strings.LastIndex(e.Package, "/")+1:] + " " + e.Test, e.Elapsed})
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		failed = true
	}
	sort.Slice(times, func(i, j int) bool { return times[i].secs > times[j].secs })
	if len(times) > 10 {
		times = times[:10]
	}
	if len(times) > 0 {
		fmt.Println("== slowest tests")
		for _, t := range times {
			fmt.Printf("%7.1f s  %s\n", t.secs, t.name)
		}
	}
	fmt.Printf("== skipped tests (%d)\n", len(skips))
	for _, s := range skips {
		fmt.Println(s)
	}
	if failed {
		os.Exit(1)
	}
}
