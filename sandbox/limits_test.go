package sandbox

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestLimitsJSON(t *testing.T) {
	var l Limits
	err := json.Unmarshal([]byte(`{"memory":"1.5g","output":1024,"wall":"1500ms","cpu_time":2.5,"cpus":0.5,"output_limit_kill":true}`), &l)
	if err != nil {
		t.Fatal(err)
	}
	want := Limits{Memory: 1536 * MiB, Output: 1024, Wall: 1500 * time.Millisecond, CPUTime: 2500 * time.Millisecond, CPUs: 0.5, OutputLimitKill: true}
	if l != want {
		t.Fatalf("decoded %+v, want %+v", l, want)
	}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"wall":1.5,"cpu_time":2.5,"memory":1610612736,"cpus":0.5,"output":1024,"output_limit_kill":true}` {
		t.Fatalf("encoded %s", b)
	}
	var back Limits
	if err := json.Unmarshal(b, &back); err != nil || back != l {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	if b, _ := json.Marshal(Limits{}); string(b) != `{}` {
		t.Fatalf("zero limits encode as %s, want {}", b)
	}
	// Inside a request, the failing field is named with its path.
	var req struct {
		Limits Limits `json:"limits"`
	}
	for _, bad := range []string{`{"memory":"lots"}`, `{"memory":1.5}`, `{"memory":true}`, `{"wall":"soon"}`, `{"wall":1e7}`, `{"wall":[]}`} {
		err := json.Unmarshal([]byte(`{"limits":`+bad+`}`), &req)
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) || !strings.HasPrefix(te.Field, "limits.memory") && !strings.HasPrefix(te.Field, "limits.wall") {
			t.Errorf("%s: %v, want a type error naming the field", bad, err)
		}
	}
	if err := json.Unmarshal([]byte(`{"memroy":"1g"}`), &l); err == nil || !strings.Contains(err.Error(), "memroy") {
		t.Errorf("unknown field: %v, want an error naming it", err)
	}
}
