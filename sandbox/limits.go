package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"time"
)

// Limits bound a sandbox. A zero field means the default (see Defaults);
// WithDefaults fills them in.
//
// One type serves the contract, the configuration (the keys of the limits
// section are the JSON names) and the wire. Its JSON form gives durations
// in seconds and sizes in bytes, and reads either as numbers or as text
// ("1500ms", "256m"); zero fields are left out; unknown fields are errors.
type Limits struct {
	Wall            time.Duration `json:"wall,omitempty"`              // wall-clock limit of one Exec
	CPUTime         time.Duration `json:"cpu_time,omitempty"`          // CPU-seconds rlimit; zero derives it from Wall
	Memory          int64         `json:"memory,omitempty"`            // bytes, swap included
	CPUs            float64       `json:"cpus,omitempty"`              // CPU quota in cores
	Pids            int           `json:"pids,omitempty"`              // processes and threads
	NoFile          int           `json:"nofile,omitempty"`            // open files (hard)
	FileSize        int64         `json:"file_size,omitempty"`         // largest file the program may write
	TmpSize         int64         `json:"tmp_size,omitempty"`          // size of /tmp
	WorkSize        int64         `json:"work_size,omitempty"`         // size of the work dir
	Output          int64         `json:"output,omitempty"`            // bytes kept per stream (stdout, stderr)
	OutputLimitKill bool          `json:"output_limit_kill,omitempty"` // end the run when a stream passes Output
	ArtifactFiles   int           `json:"artifact_files,omitempty"`    // artifacts returned at most
	ArtifactBytes   int64         `json:"artifact_bytes,omitempty"`    // artifact bytes returned at most
}

// Size units.
const (
	KiB = 1 << 10
	MiB = 1 << 20
	GiB = 1 << 30
)

// Defaults are the limits a zero Limits means.
var Defaults = Limits{
	Wall:          15 * time.Second,
	Memory:        256 * MiB,
	CPUs:          1,
	Pids:          64,
	NoFile:        1024,
	FileSize:      64 * MiB,
	TmpSize:       16 * MiB,
	WorkSize:      64 * MiB,
	Output:        1 * MiB,
	ArtifactFiles: 100,
	ArtifactBytes: 16 * MiB,
}

// WithDefaults returns l with every zero field set from d.
func (l Limits) WithDefaults(d Limits) Limits {
	set := func(v *int64, def int64) {
		if *v == 0 {
			*v = def
		}
	}
	if l.Wall == 0 {
		l.Wall = d.Wall
	}
	if l.CPUTime == 0 {
		l.CPUTime = d.CPUTime
	}
	if l.CPUTime == 0 {
		// RLIMIT_CPU counts whole seconds; give a second of slack over Wall so
		// the wall clock, not the CPU rlimit, ends an ordinary timeout.
		l.CPUTime = l.Wall.Truncate(time.Second) + 2*time.Second
	}
	set(&l.Memory, d.Memory)
	if l.CPUs == 0 {
		l.CPUs = d.CPUs
	}
	if l.Pids == 0 {
		l.Pids = d.Pids
	}
	if l.NoFile == 0 {
		l.NoFile = d.NoFile
	}
	set(&l.FileSize, d.FileSize)
	set(&l.TmpSize, d.TmpSize)
	set(&l.WorkSize, d.WorkSize)
	set(&l.Output, d.Output)
	if l.ArtifactFiles == 0 {
		l.ArtifactFiles = d.ArtifactFiles
	}
	set(&l.ArtifactBytes, d.ArtifactBytes)
	return l
}

// Validate rejects negative or nonsensical limits with ErrInvalid naming the field.
func (l Limits) Validate() error {
	neg := func(name string, bad bool) error {
		if bad {
			return Errorf(ErrInvalid, "limit_invalid", "limits.%s must not be negative", name)
		}
		return nil
	}
	for _, c := range []struct {
		name string
		bad  bool
	}{
		{"wall", l.Wall < 0}, {"cpu_time", l.CPUTime < 0}, {"memory", l.Memory < 0},
		{"cpus", l.CPUs < 0}, {"pids", l.Pids < 0}, {"nofile", l.NoFile < 0},
		{"file_size", l.FileSize < 0}, {"tmp_size", l.TmpSize < 0}, {"work_size", l.WorkSize < 0},
		{"output", l.Output < 0}, {"artifact_files", l.ArtifactFiles < 0}, {"artifact_bytes", l.ArtifactBytes < 0},
	} {
		if err := neg(c.name, c.bad); err != nil {
			return err
		}
	}
	if l.Memory != 0 && l.Memory < 4*MiB {
		return Errorf(ErrInvalid, "limit_invalid", "limits.memory must be at least 4 MiB")
	}
	return nil
}

// limitsJSON is Limits' JSON form: the same fields, durations as seconds
// and sizes as bytes.
type limitsJSON struct {
	Wall            jsonDuration `json:"wall,omitzero"`
	CPUTime         jsonDuration `json:"cpu_time,omitzero"`
	Memory          jsonSize     `json:"memory,omitzero"`
	CPUs            float64      `json:"cpus,omitzero"`
	Pids            int          `json:"pids,omitzero"`
	NoFile          int          `json:"nofile,omitzero"`
	FileSize        jsonSize     `json:"file_size,omitzero"`
	TmpSize         jsonSize     `json:"tmp_size,omitzero"`
	WorkSize        jsonSize     `json:"work_size,omitzero"`
	Output          jsonSize     `json:"output,omitzero"`
	OutputLimitKill bool         `json:"output_limit_kill,omitzero"`
	ArtifactFiles   int          `json:"artifact_files,omitzero"`
	ArtifactBytes   jsonSize     `json:"artifact_bytes,omitzero"`
}

func (l Limits) MarshalJSON() ([]byte, error) {
	return json.Marshal(limitsJSON{
		Wall: jsonDuration(l.Wall), CPUTime: jsonDuration(l.CPUTime), Memory: jsonSize(l.Memory), CPUs: l.CPUs,
		Pids: l.Pids, NoFile: l.NoFile, FileSize: jsonSize(l.FileSize), TmpSize: jsonSize(l.TmpSize),
		WorkSize: jsonSize(l.WorkSize), Output: jsonSize(l.Output), OutputLimitKill: l.OutputLimitKill,
		ArtifactFiles: l.ArtifactFiles, ArtifactBytes: jsonSize(l.ArtifactBytes),
	})
}

func (l *Limits) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var w limitsJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return err
	}
	*l = Limits{
		Wall: time.Duration(w.Wall), CPUTime: time.Duration(w.CPUTime), Memory: int64(w.Memory), CPUs: w.CPUs,
		Pids: w.Pids, NoFile: w.NoFile, FileSize: int64(w.FileSize), TmpSize: int64(w.TmpSize),
		WorkSize: int64(w.WorkSize), Output: int64(w.Output), OutputLimitKill: w.OutputLimitKill,
		ArtifactFiles: w.ArtifactFiles, ArtifactBytes: int64(w.ArtifactBytes),
	}
	return nil
}

// jsonDuration is a duration given as seconds (a number, e.g. 2.5) or a
// duration string ("1500ms"); it encodes as seconds.
type jsonDuration time.Duration

func (d jsonDuration) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, time.Duration(d).Seconds(), 'f', -1, 64), nil
}

func (d *jsonDuration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	bad := &json.UnmarshalTypeError{Value: fmt.Sprintf("%.40s (want seconds or a duration such as \"1500ms\")", b), Type: reflect.TypeFor[jsonDuration]()}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return bad
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return bad
		}
		*d = jsonDuration(v)
		return nil
	}
	var secs float64
	// Range-check before converting: a huge float would overflow.
	if err := json.Unmarshal(b, &secs); err != nil || secs < -1e6 || secs > 1e6 {
		return bad
	}
	*d = jsonDuration(secs * float64(time.Second))
	return nil
}

// jsonSize is a byte count given as a number or a size string ("256m",
// "1.5g"); it encodes as a number of bytes.
type jsonSize int64

func (s jsonSize) MarshalJSON() ([]byte, error) { return strconv.AppendInt(nil, int64(s), 10), nil }

func (s *jsonSize) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	bad := &json.UnmarshalTypeError{Value: fmt.Sprintf("%.40s (want bytes or a size such as \"256m\")", b), Type: reflect.TypeFor[jsonSize]()}
	if len(b) > 0 && b[0] == '"' {
		var t string
		if err := json.Unmarshal(b, &t); err != nil {
			return bad
		}
		n, err := ParseSize(t)
		if err != nil {
			return bad
		}
		*s = jsonSize(n)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return bad
	}
	*s = jsonSize(n)
	return nil
}
