package config

import (
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/execbox/execbox/sandbox"
)

// syntax is how a key's value is written, fixed by its Go type.
type syntax int

const (
	synString   syntax = iota // string
	synBool                   // bool: strconv.ParseBool
	synInt                    // int: a whole number
	synFloat                  // float64: a finite number
	synDuration               // time.Duration: ParseDuration
	synSize                   // int64: ParseSize
	synList                   // []string: a YAML list, or comma-separated in env and flags
	synRecords                // []struct: a YAML list of mappings; in env and flags, the same in YAML's flow style
)

// field is one key of the configuration.
type field struct {
	key     string // "limits.memory"
	name    string // "memory": the last element of key
	env     string // "EXECBOX_LIMITS_MEMORY"
	syntax  syntax
	backend string // the backend whose section holds it; "" for Config's own keys
	index   []int  // reflect field index within Config, or within the backend's section
}

func (f *field) value(c *Config) reflect.Value {
	if f.backend == "" {
		return reflect.ValueOf(c).Elem().FieldByIndex(f.index)
	}
	v, ok := c.Backends[f.backend]
	if !ok {
		// A Config not made by Default: give it the backend's defaults.
		r, _ := sandbox.Lookup(f.backend)
		v = r.Config()
		if c.Backends == nil {
			c.Backends = map[string]any{}
		}
		c.Backends[f.backend] = v
	}
	return reflect.ValueOf(v).Elem().FieldByIndex(f.index)
}

func (f *field) get(c *Config) any { return f.value(c).Interface() }

// keyTable indexes every key: Config's own, then each registered backend's
// section, in registration-name order.
type keyTable struct {
	fields   []*field
	byKey    map[string]*field
	byEnv    map[string]*field
	sections map[string]bool
}

// table returns the key table, built on first use: backends register in
// init functions, so by then all of them have.
var table = sync.OnceValue(func() *keyTable {
	t := &keyTable{byKey: map[string]*field{}, byEnv: map[string]*field{}, sections: map[string]bool{}}
	t.fields = walkFields(reflect.TypeFor[Config](), "", nil, "")
	for _, name := range sandbox.Names() {
		r, _ := sandbox.Lookup(name)
		if r.Config == nil {
			continue
		}
		typ := reflect.TypeOf(r.Config())
		if typ.Kind() != reflect.Pointer || typ.Elem().Kind() != reflect.Struct {
			panic(fmt.Sprintf("config: backend %s: Config must return a pointer to a struct, not %s", name, typ))
		}
		t.fields = append(t.fields, walkFields(typ.Elem(), name+".", nil, name)...)
		t.sections[name] = true
	}
	for _, f := range t.fields {
		if _, dup := t.byKey[f.key]; dup {
			panic(fmt.Sprintf("config: key %s is declared twice", f.key))
		}
		t.byKey[f.key] = f
		t.byEnv[f.env] = f
		// Every prefix is a section: "guard" and "guard.approvals".
		for i := range len(f.key) {
			if f.key[i] == '.' {
				t.sections[f.key[:i]] = true
			}
		}
	}
	return t
})

var durationType = reflect.TypeFor[time.Duration]()

// notKeys are fields of a section's type that are not keys of it:
// max_limits is a sandbox.Limits, but a flag has no maximum.
var notKeys = map[string]bool{"max_limits.output_limit_kill": true}

// movedKeys are keys that were replaced: setting one is an error naming
// its replacement, never silently ignored.
var movedKeys = map[string]string{"limits.max_wall": "max_limits.wall"}

// moved is the error for a replaced key set by source ("" for the file
// and Set, "flag", "env NAME"), nil when key was not replaced.
func moved(key, source string) error {
	to, ok := movedKeys[key]
	if !ok {
		return nil
	}
	if source != "" {
		source += ": "
	}
	return sandbox.Errorf(sandbox.ErrInvalid, "config_unknown_key", "%s%s was replaced by %s (every limit has a maximum now, under max_limits)", source, key, to)
}

// envOf is the environment variable of key.
func envOf(key string) string {
	return "EXECBOX_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// walkFields lists the keys of struct type t. A field's key is its yaml
// tag, else its json tag's name (the limits come from sandbox.Limits,
// whose JSON names are the keys); "-" skips it, ",inline" flattens it.
func walkFields(t reflect.Type, prefix string, index []int, backend string) []*field {
	var out []*field
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, opts, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if tag == "" && opts == "" {
			tag, _, _ = strings.Cut(sf.Tag.Get("json"), ",")
		}
		idx := append(slices.Clone(index), i)
		switch {
		case tag == "-" || !sf.IsExported() || notKeys[prefix+tag]:
			continue
		case opts == "inline":
			out = append(out, walkFields(sf.Type, prefix, idx, backend)...)
			continue
		case tag == "":
			panic(fmt.Sprintf("config: field %s%s has no key", prefix, sf.Name))
		}
		key := prefix + tag
		var k syntax
		switch {
		case sf.Type == durationType:
			k = synDuration
		case sf.Type.Kind() == reflect.Struct:
			out = append(out, walkFields(sf.Type, key+".", idx, backend)...)
			continue
		case sf.Type.Kind() == reflect.String:
			k = synString
		case sf.Type.Kind() == reflect.Bool:
			k = synBool
		case sf.Type.Kind() == reflect.Int:
			k = synInt
		case sf.Type.Kind() == reflect.Int64:
			k = synSize
		case sf.Type.Kind() == reflect.Float64:
			k = synFloat
		case sf.Type == reflect.TypeFor[[]string]():
			k = synList
		case sf.Type.Kind() == reflect.Slice && sf.Type.Elem().Kind() == reflect.Struct:
			k = synRecords
		default:
			panic(fmt.Sprintf("config: field %s has unsupported type %s", key, sf.Type))
		}
		out = append(out, &field{
			key:     key,
			name:    tag,
			env:     envOf(key),
			syntax:  k,
			backend: backend,
			index:   idx,
		})
	}
	return out
}

// sectionFields returns the fields of one section, in struct order.
func sectionFields(section string) []*field {
	var out []*field
	for _, f := range table().fields {
		if strings.HasPrefix(f.key, section+".") {
			out = append(out, f)
		}
	}
	return out
}

// Keys lists every key path, in the order of the Config struct.
func Keys() []string {
	fs := table().fields
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.key
	}
	return out
}

// EnvName returns the environment variable that sets key, "" for no key.
func EnvName(key string) string {
	if f, ok := table().byKey[key]; ok {
		return f.env
	}
	return ""
}

// Set parses raw in the env and flag syntax and assigns it to key. An
// unknown key or a bad value is ErrInvalid naming the key.
func (c *Config) Set(key, raw string) error {
	f, ok := table().byKey[key]
	if !ok {
		if err := moved(key, ""); err != nil {
			return err
		}
		return sandbox.Errorf(sandbox.ErrInvalid, "config_unknown_key", "unknown key %q%s", key, suggest(key))
	}
	if err := f.set(c, raw, nil); err != nil {
		return sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "%s: %w", key, err)
	}
	return nil
}

// set parses one value. list is the value when it came as a YAML list;
// otherwise a list is parsed from raw, comma-separated.
func (f *field) set(c *Config, raw string, list []string) error {
	v := f.value(c)
	switch f.syntax {
	case synString:
		v.SetString(raw)
	case synBool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return fmt.Errorf("invalid bool %q (want true or false)", raw)
		}
		v.SetBool(b)
	case synInt:
		n, err := strconv.ParseInt(raw, 10, strconv.IntSize)
		if err != nil {
			return fmt.Errorf("invalid whole number %q", raw)
		}
		v.SetInt(n)
	case synFloat:
		x, err := strconv.ParseFloat(raw, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("invalid number %q", raw)
		}
		v.SetFloat(x)
	case synDuration:
		d, err := sandbox.ParseDuration(raw)
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
	case synSize:
		n, err := sandbox.ParseSize(raw)
		if err != nil {
			return err
		}
		v.SetInt(n)
	case synList:
		if list == nil {
			list = parseList(raw)
		}
		v.Set(reflect.ValueOf(slices.Clone(list)))
	case synRecords:
		// Strictly: a misspelt field of a record is an error, as a
		// misspelt key is.
		out := reflect.New(v.Type())
		dec := yaml.NewDecoder(strings.NewReader(raw))
		dec.KnownFields(true)
		if err := dec.Decode(out.Interface()); err != nil && err != io.EOF {
			return fmt.Errorf("want a list of mappings: %w", err)
		}
		v.Set(out.Elem())
	}
	return nil
}

// format writes a value in the syntax Set reads.
func (f *field) format(c *Config) string {
	switch v := f.get(c).(type) {
	case time.Duration:
		return sandbox.FormatDuration(v)
	case int64:
		return sandbox.FormatSize(v)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case []string:
		return "[" + strings.Join(v, ", ") + "]"
	case string:
		if v == "" {
			return `""`
		}
		return v
	default:
		if f.syntax == synRecords {
			return flowYAML(v)
		}
		return fmt.Sprint(v)
	}
}

// flowYAML writes v in YAML's flow style, on one line, as Set reads it.
func flowYAML(v any) string {
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	setFlow(&n)
	b, err := yaml.Marshal(&n)
	if err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSpace(string(b))
}

func setFlow(n *yaml.Node) {
	n.Style |= yaml.FlowStyle
	for _, c := range n.Content {
		setFlow(c)
	}
}

// suggest names the key closest to a mistyped one, as a message suffix.
func suggest(key string) string {
	best, bestDist := "", 3 // farther than two edits is no near miss
	candidates := Keys()
	for s := range table().sections {
		candidates = append(candidates, s)
	}
	slices.Sort(candidates)
	for _, k := range candidates {
		if d := editDistance(key, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
