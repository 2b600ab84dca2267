package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
)

// MaxDepth bounds how deeply a document may nest.
const MaxDepth = 128

var rawMessage = reflect.TypeFor[json.RawMessage]()

// Check checks data, a JSON document to be decoded into a value of type t
// (nil: any). Fields are the json names of t's struct fields, also for a
// struct with its own UnmarshalJSON (sandbox.Limits, whose JSON form has
// the same names); maps, RawMessage and interfaces take any key but still
// no duplicate. A refusal is an *Error naming the key's path; syntax
// errors are left to the decoder, which names them better (Check returns
// nil).
func Check(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var e *Error
	if err := walk(dec, t, "", 0); errors.As(err, &e) {
		return e
	}
	return nil
}

// Error is what Check refuses: the key's path (Field, "limits.memory"; ""
// at the top) and what is wrong with it.
type Error struct{ Field, Msg string }

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

// walk reads one value of type t (nil: any) at path.
func walk(dec *json.Decoder, t reflect.Type, path string, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar
	}
	if depth >= MaxDepth {
		return &Error{path, "nested more than 128 deep"}
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessage || t != nil && t.Kind() == reflect.Interface {
		t = nil
	}
	switch d {
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := walk(dec, elem, path, depth+1); err != nil {
				return err
			}
		}
	case '{':
		fields := map[string]reflect.Type{}
		var fold map[string]string // lower-cased name → name
		var elem reflect.Type
		switch {
		case t == nil:
		case t.Kind() == reflect.Struct:
			fold = map[string]string{}
			for i := range t.NumField() {
				sf := t.Field(i)
				name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
				if !sf.IsExported() || name == "-" {
					continue
				}
				if name == "" {
					name = sf.Name
				}
				fields[name] = sf.Type
				fold[strings.ToLower(name)] = name
			}
		case t.Kind() == reflect.Map:
			elem = t.Elem()
		}
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := tok.(string)
			at := key
			if path != "" {
				at = path + "." + key
			}
			if seen[key] {
				return &Error{at, "the key is given twice (keys must be unique)"}
			}
			seen[key] = true
			vt := elem
			if fold != nil {
				ft, ok := fields[key]
				if !ok {
					if name, near := fold[strings.ToLower(key)]; near {
						return &Error{at, "unknown field (keys are case-sensitive: did you mean " + name + "?)"}
					}
					return &Error{at, "unknown field"}
				}
				vt = ft
			}
			if err := walk(dec, vt, at, depth+1); err != nil {
				return err
			}
		}
	}
	// The closing delimiter.
	if _, err := dec.Token(); err != nil && err != io.EOF {
		return err
	}
	return nil
}
