package server

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/internal/daemon/wire"
)

// TestHealthOfARealEngine: a real engine's report keeps its JSON on the
// wire, and comes back the same.
func TestHealthOfARealEngine(t *testing.T) {
	en := newEnv(t, setup{})
	rep := en.srv.opts.Engine.Report(t.Context())
	want, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(wire.Health(rep))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("wire\n%s\nengine\n%s (%v)", got, want, err)
	}
	var h v1.Health
	if err := json.Unmarshal(got, &h); err != nil || !reflect.DeepEqual(h, wire.Health(rep)) {
		t.Errorf("round trip: %+v %v", h, err)
	}
}
