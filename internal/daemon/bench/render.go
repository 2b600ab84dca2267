package bench

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/execbox/execbox/sandbox"
)

// Table writes the report for a terminal.
func (r *Report) Table(w io.Writer) {
	fmt.Fprintf(w, "%s on %s, %d interleaved rounds\n\n", r.Workload, r.Host, r.Rounds)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "SUBJECT\tPATH\tP50 ms\tP90 ms\tP99 ms\t× BARE\tCALLS\tERRORS\t")
	for _, s := range r.Latency {
		ratio := "-"
		if s.Ratio > 0 {
			ratio = fmt.Sprintf("%.2f", s.Ratio)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.2f\t%s\t%d\t%d\t\n", s.Name, s.Path, s.P50, s.P90, s.P99, ratio, s.Calls, s.Errors)
	}
	tw.Flush()
	for _, s := range r.Latency {
		if s.Error != "" {
			fmt.Fprintf(w, "  %s: %s\n", s.Name, s.Error)
		}
	}
	if len(r.Rates) > 0 {
		fmt.Fprintln(w, "\ncalls per second:")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "SUBJECT\t")
		concs := r.concurrencies()
		for _, c := range concs {
			fmt.Fprintf(tw, "×%d\t", c)
		}
		fmt.Fprintln(tw)
		for _, name := range r.rateNames() {
			fmt.Fprintf(tw, "%s\t", name)
			for _, c := range concs {
				fmt.Fprintf(tw, "%s\t", r.rate(name, c))
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
	if len(r.Idle) > 0 {
		fmt.Fprintln(w, "\nan idle pooled sandbox holds:")
		for _, i := range r.Idle {
			rss := "processes not measured (they are not execbox's)"
			if i.RSS > 0 {
				rss = fmt.Sprintf("RSS %s, PSS %s, private %s (all its processes)", mib(i.RSS), mib(i.PSS), mib(i.Private))
			}
			fmt.Fprintf(w, "  %-8s %s; cgroup %s\n", i.Backend, rss, mib(i.Cgroup))
		}
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped: %s\n", s)
	}
}

func (r *Report) concurrencies() []int {
	var out []int
	for _, x := range r.Rates {
		if !contains(out, x.Concurrency) {
			out = append(out, x.Concurrency)
		}
	}
	return out
}

func (r *Report) rateNames() []string {
	var out []string
	for _, x := range r.Rates {
		if !contains(out, x.Name) {
			out = append(out, x.Name)
		}
	}
	return out
}

func (r *Report) rate(name string, c int) string {
	for _, x := range r.Rates {
		if x.Name == name && x.Concurrency == c {
			s := fmt.Sprintf("%.0f", x.PerSecond)
			if x.Errors > 0 {
				s += fmt.Sprintf(" (%d errors)", x.Errors)
			}
			return s
		}
	}
	return "-"
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/float64(sandbox.MiB)) }

func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// JSON writes the report as indented JSON.
func (r *Report) JSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// bar is one row of the chart.
type bar struct {
	Y, Mid, Top, Bottom, X50, X90, X99, W string
	Label, Value, Fill                    string
}

// HTML writes the report as a page a person can look at: a bar chart of
// the p50 latencies (log scale, whiskers to p90 and p99) and the tables.
func (r *Report) HTML(w io.Writer) error {
	const left, width, rowH = 220.0, 560.0, 22.0
	maxMS := 1.0
	for _, s := range r.Latency {
		maxMS = math.Max(maxMS, s.P99)
	}
	// log10 scale from 0.1 ms to the largest p99.
	lo, hi := math.Log10(0.1), math.Log10(maxMS*1.2)
	x := func(ms float64) float64 {
		if ms <= 0.1 {
			return left
		}
		return left + (math.Log10(ms)-lo)/(hi-lo)*width
	}
	var bars []bar
	for i, s := range r.Latency {
		if s.Calls == 0 {
			continue
		}
		fill := "#7a9cc6"
		switch {
		case s.Path == "host":
			fill = "#999"
		case s.Path == "cli" || strings.Contains(s.Name, "raw"):
			fill = "#c9a26b"
		case strings.Contains(s.Name, "warm"):
			fill = "#5aa469"
		}
		y := 30 + float64(i)*rowH
		bars = append(bars, bar{
			Y: f(y), Mid: f(y + 8), Top: f(y + 3), Bottom: f(y + 13),
			X50: f(x(s.P50)), X90: f(x(s.P90)), X99: f(x(s.P99)), W: f(x(s.P50) - left),
			Label: s.Name + " (" + s.Path + ")", Value: fmt.Sprintf("%.2f ms", s.P50), Fill: fill,
		})
	}
	var ticks []struct{ X, Label string }
	for _, t := range []float64{0.1, 1, 10, 100, 1000, 10000} {
		if math.Log10(t) <= hi {
			ticks = append(ticks, struct{ X, Label string }{f(x(t)), fmt.Sprintf("%g ms", t)})
		}
	}
	var table strings.Builder
	r.Table(&table)
	return page.Execute(w, map[string]any{
		"R": r, "Bars": bars, "Ticks": ticks, "H": f(40 + float64(len(r.Latency))*rowH + 20), "Axis": f(30 + float64(len(r.Latency))*rowH + 4),
		"Left": f(left), "Right": f(left + width), "Table": table.String(),
	})
}

func f(v float64) string { return fmt.Sprintf("%.1f", v) }

var page = template.Must(template.New("bench").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>execbox bench</title>
<style>body{font:14px system-ui,sans-serif;margin:2em;max-width:70em}pre{background:#f6f6f6;padding:1em;overflow:auto}</style>
</head><body>
<h1>execbox bench</h1>
<p>{{.R.Workload}} on {{.R.Host}}, {{.R.Rounds}} interleaved rounds, {{.R.Time.Format "2006-01-02 15:04 MST"}}.
Bars are the median (p50), whiskers reach p90 and p99; the scale is logarithmic.
Grey: bare exec on the host; brown: peers (raw bwrap, the docker CLI); blue: execbox cold; green: execbox warm (a pooled sandbox).</p>
<svg xmlns="http://www.w3.org/2000/svg" width="900" height="{{.H}}" role="img" aria-label="latency per subject">
{{range .Ticks}}<line x1="{{.X}}" y1="20" x2="{{.X}}" y2="{{$.Axis}}" stroke="#ddd"/><text x="{{.X}}" y="14" font-size="11" text-anchor="middle">{{.Label}}</text>
{{end}}{{range .Bars}}<text x="{{$.Left}}" dx="-6" y="{{.Y}}" dy="14" font-size="12" text-anchor="end">{{.Label}}</text>
<rect x="{{$.Left}}" y="{{.Y}}" width="{{.W}}" height="16" fill="{{.Fill}}"/>
<line x1="{{.X50}}" y1="{{.Mid}}" x2="{{.X99}}" y2="{{.Mid}}" stroke="#333"/>
<line x1="{{.X90}}" y1="{{.Top}}" x2="{{.X90}}" y2="{{.Bottom}}" stroke="#333"/>
<line x1="{{.X99}}" y1="{{.Top}}" x2="{{.X99}}" y2="{{.Bottom}}" stroke="#333"/>
<text x="{{.X99}}" dx="6" y="{{.Y}}" dy="13" font-size="11">{{.Value}}</text>
{{end}}</svg>
<pre>{{.Table}}</pre>
</body></html>
`))
