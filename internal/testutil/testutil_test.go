package testutil

import (
	"errors"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

func TestRequired(t *testing.T) {
	t.Setenv("EXECBOX_REQUIRE", "native,bwrap")
	if !Required("bwrap") || !Required("native") {
		t.Error("a listed feature is not required")
	}
	if Required("gvisor") || Required("bw") || Required("") {
		t.Error("an unlisted feature is required")
	}
	t.Setenv("EXECBOX_REQUIRE", "")
	if Required("native") {
		t.Error("native is required with EXECBOX_REQUIRE empty")
	}
}

func TestCheck(t *testing.T) {
	if err := Check(&sandbox.Result{Reason: sandbox.ReasonExited}, nil); err != nil {
		t.Errorf("a success: %v", err)
	}
	if err := Check(&sandbox.Result{Reason: sandbox.ReasonExited, ExitCode: 1}, nil); err == nil {
		t.Error("exit 1 is no error")
	}
	want := errors.New("boom")
	if err := Check(nil, want); err != want {
		t.Errorf("Check(nil, boom) = %v", err)
	}
}

func BenchmarkReportP50P90(b *testing.B) {
	var ds []time.Duration
	for range b.N {
		ds = append(ds, time.Millisecond)
	}
	ReportP50P90(b, "x-", ds)
}
