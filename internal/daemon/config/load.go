package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/execbox/execbox/sandbox"
)

// maxFileSize bounds the config file; a larger one is refused unread.
const maxFileSize = 1 << 20

// envPrefix starts every variable of the environment layer.
const envPrefix = "EXECBOX_"

// nonKeyEnv are execbox's variables that are not configuration keys.
var nonKeyEnv = map[string]bool{
	"EXECBOX_CONFIG":      true, // the config file
	"EXECBOX_TOKEN":       true, // API token; never read or printed here
	"EXECBOX_URL":         true, // the clients' server
	"EXECBOX_REQUIRE":     true, // tests: prerequisites that must be present
	"EXECBOX_SCREENSHOTS": true, // tests: where the playground test saves its screenshots
	// The scripts' own knobs (scripts/, deploy/, the clients' tests),
	// which may be exported (TestEveryScriptVariableIsKnown).
	"EXECBOX_DOCKERD_RUN": true, "EXECBOX_DOCKERD_DATA": true,
	"EXECBOX_RUNSC_CACHE": true, "EXECBOX_RUNSC_VERSION": true, "EXECBOX_TEST_BINARY": true,
	"EXECBOX_K8S_CACHE": true, "EXECBOX_K8S_STATE": true, "EXECBOX_CGROUP_REMOUNT": true, "EXECBOX_BINARY": true,
}

// Load builds the effective configuration from its layers, each overriding
// the one before: defaults, the file, the environment, the flags.
//
// The file is path when it is non-empty, else $EXECBOX_CONFIG; a named file
// that does not exist is ErrNotFound, and with no name the file layer is
// empty. env is in os.Environ form; its EXECBOX_* variables that name keys
// are applied; any other EXECBOX_* variable but the few execbox knows
// (EXECBOX_CONFIG, EXECBOX_TOKEN, …) is an error, as an unknown key in the
// file is: a misspelt variable must not pass for a setting. flags
// map key paths ("limits.memory") to raw values in the syntax of Set.
// The result is validated; any error is an *sandbox.Error naming the file
// and line, the variable or the flag.
func Load(path string, env []string, flags map[string]string) (*Config, *Provenance, error) {
	c, p := Default(), &Provenance{}
	from := "--config"
	if path == "" {
		path, from = lookupEnv(env, "EXECBOX_CONFIG"), "EXECBOX_CONFIG"
	}
	if path != "" {
		if err := loadFile(c, p, path, from); err != nil {
			return nil, nil, err
		}
		p.File, p.FileFrom = path, from
	}
	if err := applyEnv(c, p, env); err != nil {
		return nil, nil, err
	}
	for _, key := range sortedKeys(flags) {
		f, ok := table().byKey[key]
		if !ok {
			if err := moved(key, "flag"); err != nil {
				return nil, nil, err
			}
			return nil, nil, sandbox.Errorf(sandbox.ErrInvalid, "config_unknown_key", "flag %s: unknown key%s", key, suggest(key))
		}
		if err := f.set(c, flags[key], nil); err != nil {
			return nil, nil, sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "flag %s: %w", key, err)
		}
		p.record(key, Source{Origin: FromFlag})
	}
	if err := c.validate(p); err != nil {
		return nil, nil, err
	}
	return c, p, nil
}

// lookupEnv returns the value of the last name=value in env.
func lookupEnv(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if n, val, ok := strings.Cut(kv, "="); ok && n == name {
			v = val
		}
	}
	return v
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func applyEnv(c *Config, p *Provenance, env []string) error {
	vars := map[string]string{}
	for _, kv := range env {
		if name, val, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(name, envPrefix) {
			vars[name] = val // the last one wins, as in exec.Cmd
		}
	}
	for _, name := range sortedKeys(vars) {
		f, ok := table().byEnv[name]
		if !ok {
			for key := range movedKeys {
				if envOf(key) == name {
					return moved(key, "env "+name)
				}
			}
			if nonKeyEnv[name] {
				continue
			}
			// An error, never matched to the nearest key: a typo must
			// not quietly configure something else.
			return sandbox.Errorf(sandbox.ErrInvalid, "config_unknown_key", "env %s: no configuration key has this variable%s", name, suggestEnv(name))
		}
		if err := f.set(c, vars[name], nil); err != nil {
			return sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "env %s (%s): %w", name, f.key, err)
		}
		p.record(f.key, Source{Origin: FromEnv, Env: name})
	}
	return nil
}

// loadFile applies the file at path, named by from ("--config" or
// "EXECBOX_CONFIG").
func loadFile(c *Config, p *Provenance, path, from string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return sandbox.Errorf(sandbox.ErrNotFound, "config_not_found", "reading config file (named by %s): %w", from, err)
	}
	if err != nil {
		return sandbox.Errorf(sandbox.ErrInvalid, "config_unreadable", "reading config file (named by %s): %w", from, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return sandbox.Errorf(sandbox.ErrInvalid, "config_unreadable", "reading config file %s: %w", path, err)
	}
	if len(data) > maxFileSize {
		return sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "reading config file %s: larger than %d bytes", path, maxFileSize)
	}
	return decodeFile(c, p, path, data)
}

// decodeFile applies a YAML document strictly: every key must be known, a
// section must be a mapping, a value must parse, and no key may repeat.
func decodeFile(c *Config, p *Provenance, path string, data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err == io.EOF {
		return nil // empty, or only comments
	} else if err != nil {
		return sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "parsing %s: %w", path, err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); err != io.EOF {
		return sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "parsing %s: want one YAML document, found more", path)
	}
	if len(doc.Content) == 0 {
		return nil
	}
	d := fileDecoder{c: c, p: p, path: path}
	return d.section(doc.Content[0], "")
}

type fileDecoder struct {
	c    *Config
	p    *Provenance
	path string
}

func (d *fileDecoder) errorf(line int, format string, args ...any) error {
	return sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "%s:%d: %w", d.path, line, fmt.Errorf(format, args...))
}

// section applies a mapping: the top level (prefix "") or one section.
func (d *fileDecoder) section(n *yaml.Node, prefix string) error {
	n = resolve(n)
	if isNull(n) {
		return nil // "docker:" with every key commented out
	}
	if n.Kind != yaml.MappingNode {
		what := "the top level"
		if prefix != "" {
			what = strings.TrimSuffix(prefix, ".")
		}
		return d.errorf(n.Line, "%s: want a mapping of keys, got %s", what, describe(n))
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := resolve(n.Content[i]), resolve(n.Content[i+1])
		if kn.Kind != yaml.ScalarNode {
			return d.errorf(kn.Line, "want a key, got %s", describe(kn))
		}
		key := prefix + kn.Value
		if line, dup := seen[kn.Value]; dup {
			return d.errorf(kn.Line, "key %q is set again (first on line %d)", key, line)
		}
		seen[kn.Value] = kn.Line
		if table().sections[key] {
			if err := d.section(vn, key+"."); err != nil {
				return err
			}
			continue
		}
		f, ok := table().byKey[key]
		if !ok {
			if err := moved(key, ""); err != nil {
				return d.errorf(kn.Line, "%s", err.Error())
			}
			return d.errorf(kn.Line, "unknown key %q%s", key, suggest(key))
		}
		if err := d.value(f, vn); err != nil {
			return err
		}
		d.p.record(key, Source{Origin: FromFile, File: d.path, Line: kn.Line})
	}
	return nil
}

func (d *fileDecoder) value(f *field, n *yaml.Node) error {
	if f.syntax == synRecords {
		if !isNull(n) && n.Kind != yaml.SequenceNode {
			return d.errorf(n.Line, "%s: want a list, got %s", f.key, describe(n))
		}
		b, err := yaml.Marshal(n)
		if err == nil {
			err = f.set(d.c, string(b), nil)
		}
		if err != nil {
			return d.errorf(n.Line, "%s: %w", f.key, err)
		}
		return nil
	}
	if f.syntax == synList {
		if isNull(n) {
			return f.set(d.c, "", []string{}) // every item commented out
		}
		if n.Kind != yaml.SequenceNode {
			return d.errorf(n.Line, "%s: want a list, got %s", f.key, describe(n))
		}
		items := make([]string, 0, len(n.Content))
		for _, it := range n.Content {
			if it = resolve(it); it.Kind != yaml.ScalarNode || isNull(it) {
				return d.errorf(it.Line, "%s: want a list of strings, got %s in it", f.key, describe(it))
			}
			items = append(items, it.Value)
		}
		return f.set(d.c, "", items)
	}
	if n.Kind != yaml.ScalarNode {
		return d.errorf(n.Line, "%s: want a single value, got %s", f.key, describe(n))
	}
	if isNull(n) {
		return d.errorf(n.Line, `%s: no value (write "" for an empty string)`, f.key)
	}
	if err := f.set(d.c, n.Value, nil); err != nil {
		return d.errorf(n.Line, "%s: %w", f.key, err)
	}
	return nil
}

// resolve follows YAML aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		if isNull(n) {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	}
}

// suggestEnv names the variable of the key closest to a mistyped one, as
// a message suffix.
func suggestEnv(name string) string {
	key := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, envPrefix), "_", "."))
	hint := suggest(key)
	if hint == "" {
		return ""
	}
	k := strings.TrimSuffix(strings.TrimPrefix(hint, ` (did you mean "`), `"?)`)
	return fmt.Sprintf(" (did you mean %s?)", envOf(k))
}
