package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
)

// maxDepth bounds how deeply a request's JSON may nest.
const maxDepth = 128

var rawMessage = reflect.TypeFor[json.RawMessage]()

// checkStrict refuses what encoding/json would quietly accept in a
// request body of type t: a key given twice in one object (json keeps the
// last), a key that names a field only when case is ignored (json matches
// "Command" to "command"), and nesting deeper than maxDepth. The error
// names the key's path ("limits.memory"). Fields are the json names of
// t's struct fields, also for a struct with its own UnmarshalJSON
// (sandbox.Limits, whose JSON form has the same names); maps, RawMessage
// and interfaces take any key but still no duplicate. Syntax errors are
// left to the decoder, which names them better.
func checkStrict(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	err := walkStrict(dec, t, "", 0)
	var se *strictError
	if errors.As(err, &se) {
		return invalidField(se.field, "%s", se.msg)
	}
	return nil // a syntax error: the decoder reports it
}

type strictError struct{ field, msg string }

func (e *strictError) Error() string { return e.field + ": " + e.msg }

// walkStrict reads one value of type t (nil: any) at path.
func walkStrict(dec *json.Decoder, t reflect.Type, path string, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar
	}
	if depth >= maxDepth {
		return &strictError{path, "nested more than 128 deep"}
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
			if err := walkStrict(dec, elem, path, depth+1); err != nil {
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
				return &strictError{at, "the key is given twice (keys must be unique)"}
			}
			seen[key] = true
			vt := elem
			if fold != nil {
				ft, ok := fields[key]
				if !ok {
					if name, near := fold[strings.ToLower(key)]; near {
						return &strictError{at, "unknown field (keys are case-sensitive: did you mean " + name + "?)"}
					}
					return &strictError{at, "unknown field"}
				}
				vt = ft
			}
			if err := walkStrict(dec, vt, at, depth+1); err != nil {
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
