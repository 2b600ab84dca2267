package cgroups

import (
	"testing"
)

func TestLeafNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		pid  int
		ok   bool
	}{
		{leafName(42, "run-1"), 42, true},
		{"execbox-7-a-b", 7, true},
		{"execbox-7-", 0, false},
		{"execbox-x-a", 0, false},
		{"execbox-007-a", 0, false},
		{"execbox--1-a", 0, false},
		{"execbox.daemon", 0, false},
		{"other-7-a", 0, false},
	} {
		pid, ok := LeafOwner(tc.name)
		if pid != tc.pid || ok != tc.ok {
			t.Errorf("LeafOwner(%q) = %d, %v; want %d, %v", tc.name, pid, ok, tc.pid, tc.ok)
		}
	}
	for id, ok := range map[string]bool{"a": true, "sb-1.x_Y": true, "": false, ".": false, "..": false, "a/b": false, "a\x00": false} {
		if validID(id) != ok {
			t.Errorf("validID(%q) = %v", id, !ok)
		}
	}
}

func TestLimitsValidate(t *testing.T) {
	good := []Limits{{}, {Memory: 64 << 20, Pids: 1, CPUs: 0.01}}
	bad := []Limits{{Memory: -1}, {Pids: -1}, {CPUs: -1}, {CPUs: nan()}}
	for _, l := range good {
		if err := l.Validate(); err != nil {
			t.Errorf("%+v: %v", l, err)
		}
	}
	for _, l := range bad {
		if err := l.Validate(); err == nil {
			t.Errorf("%+v: valid", l)
		}
	}
	if q := cpuQuota(0.5); q != 50000 {
		t.Errorf("cpuQuota(0.5) = %d", q)
	}
	if q := cpuQuota(0.001); q != 1000 {
		t.Errorf("cpuQuota(0.001) = %d, want the 1ms minimum", q)
	}
}

func nan() float64 { z := 0.0; return z / z }

func TestKeyedInt(t *testing.T) {
	data := "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"
	if n, ok := keyedInt(data, "oom_kill"); !ok || n != 3 {
		t.Errorf("oom_kill = %d, %v", n, ok)
	}
	if _, ok := keyedInt(data, "oom"); ok {
		t.Error("found a key prefix")
	}
}
