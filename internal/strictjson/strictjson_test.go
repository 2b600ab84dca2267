package strictjson

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

type req struct {
	Command []string          `json:"command"`
	Env     map[string]string `json:"env"`
	Items   []struct {
		Name string `json:"name"`
	} `json:"items"`
	Any any `json:"any"`
}

func TestCheck(t *testing.T) {
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, c := range []struct {
		data  string
		t     reflect.Type
		field string // "" : accepted
		msg   string
	}{
		{`{"command":["a"],"env":{"A":"1"},"items":[{"name":"x"}],"any":{"k":1}}`, reflect.TypeFor[req](), "", ""},
		{`{"command":["a"],"command":["b"]}`, reflect.TypeFor[req](), "command", "given twice"},
		{`{"env":{"A":"1","A":"2"}}`, reflect.TypeFor[req](), "env.A", "given twice"},
		{`{"items":[{"name":"x"},{"name":"y","name":"z"}]}`, reflect.TypeFor[req](), "items.name", "given twice"},
		{`{"any":{"k":1,"k":2}}`, reflect.TypeFor[req](), "any.k", "given twice"},
		{`{"Command":["a"]}`, reflect.TypeFor[req](), "Command", "did you mean command?"},
		{`{"nope":1}`, reflect.TypeFor[req](), "nope", "unknown field"},
		// No type: any key, but none twice, at any depth.
		{`{"x":{"y":[{"z":1,"Z":2}]}}`, nil, "", ""},
		{`{"x":{"y":[{"z":1,"z":2}]}}`, nil, "x.y.z", "given twice"},
		// Nesting: 128 deep accepted, 129 refused.
		{nest(MaxDepth), nil, "", ""},
		{nest(MaxDepth + 1), nil, "", "nested more than 128 deep"},
		// Syntax errors are the decoder's to report.
		{`{"command":`, reflect.TypeFor[req](), "", ""},
		{``, nil, "", ""},
	} {
		err := Check([]byte(c.data), c.t)
		var e *Error
		if c.msg == "" {
			if err != nil {
				t.Errorf("%.40s: %v", c.data, err)
			}
			continue
		}
		if !errors.As(err, &e) || e.Field != c.field || !strings.Contains(e.Msg, c.msg) {
			t.Errorf("%.40s: %#v, want %s: …%s…", c.data, err, c.field, c.msg)
		}
	}
}
