package e2b

import (
	"encoding/json"
	"fmt"
	"strconv"

	"connectrpc.com/connect"
)

// Codecs are the Connect codecs of the JSON form for this package's plain
// types (connect's own JSON codec takes only protobuf messages): the SDKs
// speak JSON (connect-web with useBinaryFormat false).
func Codecs() []connect.HandlerOption {
	return []connect.HandlerOption{connect.WithCodec(jsonCodec("json")), connect.WithCodec(jsonCodec("json; charset=utf-8"))}
}

// Codec is the JSON codec itself, for a Go client of the procedures.
var Codec connect.Codec = jsonCodec("json")

type jsonCodec string

func (c jsonCodec) Name() string                { return string(c) }
func (jsonCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }
func (jsonCodec) Unmarshal(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("the message is not this procedure's JSON: %w", err)
	}
	return nil
}

// enum decodes a protobuf enum's JSON form: its value's name or its
// number. names maps each name to its number.
func enum(b []byte, names map[string]int32) (int32, error) {
	var s string
	if json.Unmarshal(b, &s) == nil {
		if n, ok := names[s]; ok {
			return n, nil
		}
		if n, err := strconv.ParseInt(s, 10, 32); err == nil {
			return int32(n), nil
		}
		return 0, fmt.Errorf("unknown enum value %q", s)
	}
	var n int32
	if err := json.Unmarshal(b, &n); err != nil {
		return 0, fmt.Errorf("an enum is a name or a number: %w", err)
	}
	return n, nil
}
