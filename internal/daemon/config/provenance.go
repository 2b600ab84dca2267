package config

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/execbox/execbox/sandbox"
)

// Origin is the layer a value came from.
type Origin string

const (
	FromDefault Origin = "default"
	FromFile    Origin = "file"
	FromEnv     Origin = "env"
	FromFlag    Origin = "flag"
)

// Source says where one effective value came from.
type Source struct {
	Origin Origin `json:"origin"`
	File   string `json:"file,omitempty"` // FromFile: the config file
	Line   int    `json:"line,omitempty"` // FromFile: the line of the key
	Env    string `json:"env,omitempty"`  // FromEnv: the variable
}

func (s Source) String() string {
	switch s.Origin {
	case FromFile:
		return fmt.Sprintf("file %s:%d", s.File, s.Line)
	case FromEnv:
		return "env " + s.Env
	case "":
		return string(FromDefault)
	default:
		return string(s.Origin)
	}
}

// Provenance records where each effective value came from. A nil
// *Provenance says "default" for every key.
type Provenance struct {
	// File is the config file that was read; "" when there was none.
	File string
	// FileFrom says how File was named: "--config" or "EXECBOX_CONFIG".
	FileFrom string

	sources map[string]Source
}

// Source returns where key's effective value came from.
func (p *Provenance) Source(key string) Source {
	if p == nil {
		return Source{Origin: FromDefault}
	}
	if s, ok := p.sources[key]; ok {
		return s
	}
	return Source{Origin: FromDefault}
}

func (p *Provenance) record(key string, s Source) {
	if p.sources == nil {
		p.sources = map[string]Source{}
	}
	p.sources[key] = s
}

// Entry is one key's effective value and its source, as Print writes it.
type Entry struct {
	Key string `json:"key"`
	// Value is typed for machines: sizes in bytes, durations as text
	// ("1m30s"), lists as arrays.
	Value  any    `json:"value"`
	Text   string `json:"-"` // Value in the syntax of the file, env and flags
	Source Source `json:"source"`
}

// Entries lists every key with its effective value and source, in the
// order of the Config struct.
func Entries(c *Config, p *Provenance) []Entry {
	out := make([]Entry, 0, len(table().fields))
	for _, f := range table().fields {
		v := f.get(c)
		switch x := v.(type) {
		case time.Duration:
			v = sandbox.FormatDuration(x)
		case []string:
			if x == nil {
				v = []string{} // an empty list, never null
			}
		}
		if f.syntax == synRecords {
			// As YAML writes them (durations as text), never null.
			var recs []any
			_ = yaml.Unmarshal([]byte(f.format(c)), &recs)
			if recs == nil {
				recs = []any{}
			}
			v = recs
		}
		out = append(out, Entry{Key: f.key, Value: v, Text: f.format(c), Source: p.Source(f.key)})
	}
	return out
}

// Print writes the effective configuration and where each value came from,
// as a text table or, with asJSON, as one JSON object.
func Print(w io.Writer, c *Config, p *Provenance, asJSON bool) error {
	if p == nil {
		p = &Provenance{}
	}
	entries := Entries(c, p)
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			File     string  `json:"file"`
			FileFrom string  `json:"file_from,omitempty"`
			Keys     []Entry `json:"keys"`
		}{p.File, p.FileFrom, entries})
	}
	switch {
	case p.File == "":
		fmt.Fprintln(w, "# config file: none")
	case p.FileFrom != "":
		fmt.Fprintf(w, "# config file: %s (from %s)\n", p.File, p.FileFrom)
	default:
		fmt.Fprintf(w, "# config file: %s\n", p.File)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE")
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Key, e.Text, e.Source)
	}
	return tw.Flush()
}
