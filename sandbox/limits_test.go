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

// Values no host can honour are refused by the contract itself, naming the
// field, whatever maxima are configured (issue 22: pids 2^31-1 reached the
// cgroup and came back as a 500 showing the host's cgroup path).
func TestLimitsValidateBounds(t *testing.T) {
	for _, tc := range []struct {
		l    Limits
		want string
	}{
		{Limits{Pids: 2147483647}, "limits.pids 2147483647 is beyond what any host allows (at most 4194304)"},
		{Limits{Memory: 1<<63 - 1}, "limits.memory"},
		{Limits{WorkSize: 1 << 51}, "limits.work_size 2048t is beyond"},
		{Limits{Wall: 1<<63 - 1}, "limits.wall"},
		{Limits{CPUs: 1e9}, "limits.cpus"},
		{Limits{NoFile: 1<<20 + 1}, "limits.nofile"},
		{Limits{ArtifactFiles: 1 << 30}, "limits.artifact_files"},
		{Limits{Output: -1}, "limits.output must not be negative"},
	} {
		err := tc.l.Validate()
		if !errors.Is(err, ErrInvalid) || CodeOf(err) != "limit_invalid" || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want limit_invalid with %q", tc.l, err, tc.want)
		}
	}
	at := Limits{Wall: MaxDuration, CPUTime: MaxDuration, Memory: MaxBytes, CPUs: MaxCPUs, Pids: MaxPids, NoFile: MaxNoFile,
		FileSize: MaxBytes, TmpSize: MaxBytes, WorkSize: MaxBytes, Output: MaxBytes, ArtifactFiles: MaxFiles, ArtifactBytes: MaxBytes}
	if err := at.Validate(); err != nil {
		t.Errorf("every field at its bound: %v", err)
	}
}

// Within names the first field over its maximum, with both values in the
// configuration's syntax and the key that sets the maximum.
func TestLimitsWithin(t *testing.T) {
	max := Limits{Wall: time.Minute, Memory: GiB, Output: 16 * MiB, CPUs: 2}
	for _, tc := range []struct {
		l    Limits
		want string
	}{
		{Limits{Memory: 3 * GiB}, "limits.memory 3g exceeds the maximum 1g (max_limits.memory)"},
		{Limits{Output: 300 * MiB}, "limits.output 300m exceeds the maximum 16m (max_limits.output)"},
		{Limits{Wall: 90 * time.Second}, "limits.wall 1m30s exceeds the maximum 1m (max_limits.wall)"},
		{Limits{CPUs: 2.5}, "limits.cpus 2.5 exceeds the maximum 2 (max_limits.cpus)"},
	} {
		err := tc.l.Within(max)
		if !errors.Is(err, ErrInvalid) || CodeOf(err) != "limit_too_high" || err.Error() != tc.want {
			t.Errorf("%+v: %v, want %q", tc.l, err, tc.want)
		}
	}
	// At the maximum, and fields the maxima leave zero, pass.
	if err := (Limits{Memory: GiB, Pids: 1 << 20, Wall: time.Minute}).Within(max); err != nil {
		t.Errorf("at the maximum: %v", err)
	}
}

// The built-in maxima follow the host and never fall below the defaults.
func TestMaximaFor(t *testing.T) {
	big := MaximaFor(64*GiB, 32)
	if big.Memory != 2*GiB || big.WorkSize != GiB || big.TmpSize != GiB || big.Output != 16*MiB || big.ArtifactBytes != 64*MiB ||
		big.CPUs != 32 || big.Wall != time.Minute || big.CPUTime != 32*time.Minute+2*time.Second {
		t.Errorf("64 GiB, 32 CPUs: %+v", big)
	}
	if odd := MaximaFor(3*GiB+12345, 2); odd.Memory != 768*MiB || odd.Memory%MiB != 0 || ResultMemoryFor(24152*MiB+777)%MiB != 0 {
		t.Errorf("sizes from an odd memory size are not whole MiB: %+v", odd)
	}
	small := MaximaFor(512*MiB, 1)
	if small.Memory != Defaults.Memory || small.WorkSize != Defaults.WorkSize || small.Output != Defaults.Output ||
		small.ArtifactBytes != Defaults.ArtifactBytes || small.CPUs != 1 {
		t.Errorf("512 MiB, 1 CPU: %+v", small)
	}
	for _, m := range []Limits{big, small, HostMaxima()} {
		if err := m.Validate(); err != nil {
			t.Errorf("maxima %+v: %v", m, err)
		}
		if err := Defaults.Within(m); err != nil {
			t.Errorf("the defaults are above the maxima %+v: %v", m, err)
		}
	}
	if HostMemory() <= 0 {
		t.Errorf("HostMemory %d", HostMemory())
	}
}

func TestLimitsSetAndDiffer(t *testing.T) {
	l := Limits{Wall: time.Second, Memory: MiB, OutputLimitKill: true}
	if got := strings.Join(l.Set(), ","); got != "wall,memory,output_limit_kill" {
		t.Errorf("Set() = %s", got)
	}
	if got := strings.Join(l.Differ(Limits{Wall: time.Second, Pids: 3}), ","); got != "memory,pids,output_limit_kill" {
		t.Errorf("Differ() = %s", got)
	}
	if n := len(LimitNames()); n != 13 {
		t.Errorf("%d limit names, want 13", n)
	}
}
