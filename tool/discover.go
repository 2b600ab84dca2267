package tool

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/execbox/execbox/sandbox"
)

// maxWalk bounds the entries the fingerprint looks at, over all dirs; a
// configuration with more is discovered anew for every List and Run.
const maxWalk = 10000

// discovery caches the last catalog, keyed by the fingerprint of the
// tools dirs it came from.
type discovery struct {
	lock chan struct{} // held while discovering (and while reading the cache)
	fp   [sha256.Size]byte
	cat  *catalog // nil until the first discovery
}

// catalog is a Catalog with the resolved schemas Run validates against.
type catalog struct {
	Catalog
	tools    map[string]*entry
	problems map[string]Problem
}

type entry struct {
	spec   Spec
	schema *jsonschema.Resolved
}

func newDiscovery() discovery { return discovery{lock: make(chan struct{}, 1)} }

// List discovers the tools: the built-ins overridden by those of the
// tools dirs, each dir overriding the ones before it. It starts a sandbox
// (through run) only when the dirs changed since the last discovery (or
// were never discovered): names, sizes, modes and modification times of
// everything in them, up to 10000 entries. A tool whose module does not
// load, whose SPEC is malformed or whose schema does not resolve is left
// out of Tools and listed in Problems; the list itself fails only when
// the runtime could not answer.
func (s *Set) List(ctx context.Context, run RunFunc) (*Catalog, error) {
	c, err := s.catalog(ctx, run)
	if err != nil {
		return nil, err
	}
	out := c.Catalog
	out.Tools = append([]Spec(nil), out.Tools...)
	out.Problems = append([]Problem(nil), out.Problems...)
	return &out, nil
}

func (s *Set) catalog(ctx context.Context, run RunFunc) (*catalog, error) {
	fp, cacheable, err := s.fingerprint()
	if err != nil {
		return nil, err
	}
	select {
	case s.disc.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, sandbox.Errorf(sandbox.ErrInternal, CodeInterrupted, "listing tools: waiting for a discovery in progress: %w", ctx.Err())
	}
	defer func() { <-s.disc.lock }()
	if cacheable && s.disc.cat != nil && s.disc.fp == fp {
		return s.disc.cat, nil
	}
	c, err := s.discover(ctx, run)
	if err != nil {
		return nil, err
	}
	if cacheable {
		s.disc.fp, s.disc.cat = fp, c
	}
	return c, nil
}

// fingerprint hashes what the dirs hold: every entry's path, size, mode
// and modification time, without following symlinks. cacheable is false
// when there are more than maxWalk entries.
func (s *Set) fingerprint() (fp [sha256.Size]byte, cacheable bool, err error) {
	h := sha256.New()
	n := 0
	errTooMany := errors.New("too many entries")
	var num [8]byte
	for i, d := range s.dirs {
		fmt.Fprintf(h, "dir %d %s\x00", i, d)
		err := filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				if p == d {
					return err
				}
				fmt.Fprintf(h, "unreadable %s\x00", p) // the runtime will say so
				return nil
			}
			if n++; n > maxWalk {
				return errTooMany
			}
			st, err := e.Info()
			if err != nil {
				fmt.Fprintf(h, "gone %s\x00", p)
				return nil
			}
			h.Write([]byte(p))
			h.Write([]byte{0})
			for _, v := range []uint64{uint64(st.Size()), uint64(st.Mode()), uint64(st.ModTime().UnixNano())} {
				binary.LittleEndian.PutUint64(num[:], v)
				h.Write(num[:])
			}
			return nil
		})
		if errors.Is(err, errTooMany) {
			return fp, false, nil
		}
		if err != nil {
			return fp, false, sandbox.Errorf(sandbox.ErrInvalid, CodeDirInvalid, "reading tools dir %s: %w", s.opts.Dirs[i], err)
		}
	}
	copy(fp[:], h.Sum(nil))
	return fp, true, nil
}

// discover runs the runtime's list action and checks its answer.
func (s *Set) discover(ctx context.Context, run RunFunc) (*catalog, error) {
	spec, p := s.template(sandbox.Limits{}, sandbox.NetworkNone, s.opts.Timeout, map[string]string{"EXECBOX_TOOL_ACTION": "list"})
	out, _, err := s.invoke(ctx, run, spec, p, "listing tools")
	if err != nil {
		return nil, err
	}
	w, err := decodeList(out)
	if err != nil {
		return nil, fmt.Errorf("listing tools: %w", err)
	}
	c := &catalog{tools: map[string]*entry{}, problems: map[string]Problem{}}
	for _, x := range w.Problems {
		src, ok := s.source(x.Source)
		if !ok {
			return nil, badOutput("problem of unknown source %q", x.Source)
		}
		pr := Problem{Name: x.Name, Source: src, Message: x.Message}
		c.Problems = append(c.Problems, pr)
		if pr.Name != "" {
			c.problems[pr.Name] = pr
		}
	}
	for _, x := range *w.Tools {
		src, ok := s.source(x.Source)
		if !ok {
			return nil, badOutput("tool %q of unknown source %q", x.Name, x.Source)
		}
		if _, dup := c.tools[x.Name]; dup {
			return nil, badOutput("tool %q listed twice", x.Name)
		}
		sp := Spec{Name: x.Name, Description: x.Description, Parameters: x.Parameters, Source: src}
		rs, err := resolveSchema(x.Parameters)
		if err != nil {
			pr := Problem{Name: x.Name, Source: src, Message: fmt.Sprintf("tool %s: parameters are not a usable JSON Schema: %v", x.Name, err)}
			c.Problems = append(c.Problems, pr)
			c.problems[pr.Name] = pr
			continue
		}
		c.tools[x.Name] = &entry{spec: sp, schema: rs}
		c.Tools = append(c.Tools, sp)
	}
	if c.Tools == nil {
		c.Tools = []Spec{}
	}
	if c.Problems == nil {
		c.Problems = []Problem{}
	}
	return c, nil
}

// resolveSchema parses and resolves a tool's parameters schema, which
// must describe an object (or not say: then any object does).
func resolveSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	var sc jsonschema.Schema
	if err := json.Unmarshal(raw, &sc); err != nil {
		return nil, err
	}
	if sc.Type != "" && sc.Type != "object" || len(sc.Types) > 0 && !slices.Equal(sc.Types, []string{"object"}) {
		return nil, errors.New(`its type must be "object"`)
	}
	if err := checkTypes(reflect.ValueOf(&sc), "root"); err != nil {
		return nil, err
	}
	return sc.Resolve(nil)
}

// jsonTypes are the values "type" may take.
var jsonTypes = map[string]bool{"null": true, "boolean": true, "object": true, "array": true, "number": true, "string": true, "integer": true}

var (
	schemaPtr   = reflect.TypeFor[*jsonschema.Schema]()
	schemaSlice = reflect.TypeFor[[]*jsonschema.Schema]()
	schemaMap   = reflect.TypeFor[map[string]*jsonschema.Schema]()
)

// checkTypes refuses a "type" that is not a JSON type anywhere in the
// schema v (a *jsonschema.Schema), which Resolve does not check: such a
// schema would refuse, or accept, every value silently.
func checkTypes(v reflect.Value, at string) error {
	s := v.Interface().(*jsonschema.Schema)
	if s == nil {
		return nil
	}
	for _, t := range append([]string{s.Type}, s.Types...) {
		if t != "" && !jsonTypes[t] {
			return fmt.Errorf("%s: type %q is not a JSON type", at, t)
		}
	}
	e := v.Elem()
	for i := range e.NumField() {
		f, name := e.Field(i), e.Type().Field(i).Name
		name = strings.ToLower(name[:1]) + name[1:] // the keyword, near enough
		switch f.Type() {
		case schemaPtr:
			if err := checkTypes(f, at+"/"+name); err != nil {
				return err
			}
		case schemaSlice:
			for j := range f.Len() {
				if err := checkTypes(f.Index(j), fmt.Sprintf("%s/%s/%d", at, name, j)); err != nil {
					return err
				}
			}
		case schemaMap:
			for _, k := range f.MapKeys() {
				if err := checkTypes(f.MapIndex(k), at+"/"+name+"/"+k.String()); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
