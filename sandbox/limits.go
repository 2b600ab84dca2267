package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
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

// Bounds of the contract itself: no host can honour more, and larger
// values would overflow the arithmetic done on them (a wall near 2^63 ns
// plus the CPU-time slack). Every field is checked against them, whatever
// maxima are configured.
const (
	MaxDuration = 1_000_000 * time.Second // wall, cpu_time: about 11.5 days, as the JSON form allows
	MaxBytes    = 1 << 50                 // memory and every size: 1 PiB
	MaxCPUs     = 4096
	MaxPids     = 1 << 22 // the kernel's PID_MAX_LIMIT
	MaxNoFile   = 1 << 20 // the kernel's default fs.nr_open
	MaxFiles    = 1 << 20 // artifact_files
)

// Validate rejects negative or nonsensical limits with ErrInvalid naming
// the field: a negative value, or one beyond the contract's bounds
// (MaxDuration, MaxBytes, MaxCPUs, MaxPids, MaxNoFile, MaxFiles).
func (l Limits) Validate() error {
	for _, f := range l.fields() {
		if f.v < 0 || math.IsNaN(f.v) {
			return Errorf(ErrInvalid, "limit_invalid", "limits.%s must not be negative", f.name)
		}
		if f.v > f.bound {
			return Errorf(ErrInvalid, "limit_invalid", "limits.%s %s is beyond what any host allows (at most %s)", f.name, f.text, f.format(f.bound))
		}
	}
	if l.Memory != 0 && l.Memory < 4*MiB {
		return Errorf(ErrInvalid, "limit_invalid", "limits.memory must be at least 4 MiB")
	}
	return nil
}

// Within checks that every field l sets (non-zero) is at most the same
// field of max; a zero field of max sets no maximum. The error is
// ErrInvalid naming the field, its value and the maximum, e.g.
// "limits.memory 3g exceeds the maximum 1g (max_limits.memory)".
func (l Limits) Within(max Limits) error {
	mf := max.fields()
	for i, f := range l.fields() {
		if m := mf[i].v; f.v != 0 && m != 0 && f.v > m {
			return Errorf(ErrInvalid, "limit_too_high", "limits.%s %s exceeds the maximum %s (max_limits.%s)", f.name, f.text, mf[i].text, f.name)
		}
	}
	return nil
}

// limitField is one numeric field of Limits, by its JSON name: its value
// as a float64 for comparing (exact for every value within the contract's
// bounds, which Validate checks first), its text, and the contract's bound.
type limitField struct {
	name  string
	v     float64
	text  string
	bound float64
	// format writes a bound or a maximum in the field's syntax.
	format func(float64) string
}

// fields lists Limits' numeric fields (every one but OutputLimitKill) in
// the struct's order.
func (l Limits) fields() []limitField {
	dur := func(v float64) string { return FormatDuration(time.Duration(v)) }
	size := func(v float64) string { return FormatSize(int64(v)) }
	num := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	d := func(name string, v time.Duration) limitField {
		return limitField{name, float64(v), FormatDuration(v), float64(MaxDuration), dur}
	}
	b := func(name string, v int64) limitField {
		return limitField{name, float64(v), FormatSize(v), MaxBytes, size}
	}
	n := func(name string, v int, bound float64) limitField {
		return limitField{name, float64(v), strconv.Itoa(v), bound, num}
	}
	return []limitField{
		d("wall", l.Wall), d("cpu_time", l.CPUTime),
		b("memory", l.Memory),
		{"cpus", l.CPUs, num(l.CPUs), MaxCPUs, num},
		n("pids", l.Pids, MaxPids), n("nofile", l.NoFile, MaxNoFile),
		b("file_size", l.FileSize), b("tmp_size", l.TmpSize), b("work_size", l.WorkSize), b("output", l.Output),
		n("artifact_files", l.ArtifactFiles, MaxFiles),
		b("artifact_bytes", l.ArtifactBytes),
	}
}

// Set lists the JSON names of l's fields that are not zero
// (output_limit_kill when it is set).
func (l Limits) Set() []string {
	var names []string
	for _, f := range l.fields() {
		if f.v != 0 {
			names = append(names, f.name)
		}
	}
	if l.OutputLimitKill {
		names = append(names, "output_limit_kill")
	}
	return names
}

// Differ lists the JSON names of the fields where l and o differ.
func (l Limits) Differ(o Limits) []string {
	var names []string
	of := o.fields()
	for i, f := range l.fields() {
		if f.v != of[i].v {
			names = append(names, f.name)
		}
	}
	if l.OutputLimitKill != o.OutputLimitKill {
		names = append(names, "output_limit_kill")
	}
	return names
}

// LimitNames lists the JSON names of every limit.
func LimitNames() []string {
	var names []string
	for _, f := range (Limits{}).fields() {
		names = append(names, f.name)
	}
	return append(names, "output_limit_kill")
}

// ResultBytes is the most memory a result under l may hold: both streams
// at their output limit and the artifacts at theirs. The engine reserves
// it for every run it admits.
func (l Limits) ResultBytes() int64 { return 2*l.Output + l.ArtifactBytes }

// MaximaFor returns the built-in maxima for a host with ram bytes of
// memory and cpus CPUs: what a request may ask for at most, field by
// field, unless configured otherwise (max_limits). They are never below
// Defaults.
//
//	wall 60s, cpu_time 60s × cpus + 2s, cpus: the host's, pids 1024,
//	nofile 16384, file_size 1g,
//	memory: ram/4, at most 2g;  tmp_size, work_size: ram/8, at most 1g,
//	output: ram/1024, at most 16m;  artifact_bytes: ram/256, at most 64m,
//	artifact_files 1000.
func MaximaFor(ram int64, cpus int) Limits {
	// Whole MiB, so that they read as sizes ("768m").
	sized := func(v, def, most int64) int64 { return max(min(v&^(MiB-1), most), def) }
	cpus = max(cpus, 1)
	return Limits{
		Wall:          60 * time.Second,
		CPUTime:       time.Duration(cpus)*60*time.Second + 2*time.Second,
		Memory:        sized(ram/4, Defaults.Memory, 2*GiB),
		CPUs:          float64(cpus),
		Pids:          1024,
		NoFile:        16384,
		FileSize:      1 * GiB,
		TmpSize:       sized(ram/8, Defaults.TmpSize, 1*GiB),
		WorkSize:      sized(ram/8, Defaults.WorkSize, 1*GiB),
		Output:        sized(ram/1024, Defaults.Output, 16*MiB),
		ArtifactFiles: 1000,
		ArtifactBytes: sized(ram/256, Defaults.ArtifactBytes, 64*MiB),
	}
}

// HostMaxima is MaximaFor this host: HostMemory and runtime.NumCPU.
func HostMaxima() Limits { return MaximaFor(HostMemory(), runtime.NumCPU()) }

// ResultMemoryFor is the built-in bound on what the results of the runs in
// flight may hold (see Limits.ResultBytes) on a host with ram bytes of
// memory: an eighth of it, within 256 MiB–4 GiB; at the built-in maxima
// (MaximaFor) it always holds at least two runs.
func ResultMemoryFor(ram int64) int64 { return min(max((ram/8)&^(MiB-1), 256*MiB), 4*GiB) }

// HostResultMemory is ResultMemoryFor this host's HostMemory.
func HostResultMemory() int64 { return ResultMemoryFor(HostMemory()) }

// SessionMemoryFor is the built-in bound on what the open sessions' files
// may hold together (work_size + tmp_size each: memory-backed, kept for
// the session's life) on a host with ram bytes of memory: half of it, and
// at least one session at MaximaFor's (from 512 MiB of memory on, two).
func SessionMemoryFor(ram int64) int64 {
	m := MaximaFor(ram, 1)
	return max((ram/2)&^(MiB-1), m.WorkSize+m.TmpSize)
}

// HostSessionMemory is SessionMemoryFor this host's HostMemory.
func HostSessionMemory() int64 { return SessionMemoryFor(HostMemory()) }

// HostMemory is the memory this process may use: the host's MemTotal, or
// the memory limit of this process's cgroup when that is lower (execbox in
// a container). When neither can be read it is 4 GiB.
func HostMemory() int64 {
	total := int64(4 * GiB)
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				if kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64); err == nil && kb > 0 {
					total = kb * KiB
				}
			}
		}
	}
	if limit := cgroupMemoryLimit(); limit > 0 && limit < total {
		total = limit
	}
	return total
}

// cgroupMemoryLimit is the memory limit of this process's cgroup (v2
// memory.max, or v1 memory.limit_in_bytes), 0 when there is none or it
// cannot be read.
func cgroupMemoryLimit() int64 {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 || strings.Contains(parts[2], "..") {
			continue
		}
		var file string
		switch {
		case parts[0] == "0" && parts[1] == "":
			file = "/sys/fs/cgroup" + parts[2] + "/memory.max"
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			file = "/sys/fs/cgroup/memory" + parts[2] + "/memory.limit_in_bytes"
		default:
			continue
		}
		v, err := os.ReadFile(filepath.Clean(file))
		if err != nil {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64); err == nil && n > 0 {
			return n
		}
	}
	return 0
}

// limitsJSON is Limits' JSON form: the same fields, durations as seconds
// and sizes as bytes.
type limitsJSON struct {
	Wall            Seconds  `json:"wall,omitzero"`
	CPUTime         Seconds  `json:"cpu_time,omitzero"`
	Memory          jsonSize `json:"memory,omitzero"`
	CPUs            float64  `json:"cpus,omitzero"`
	Pids            int      `json:"pids,omitzero"`
	NoFile          int      `json:"nofile,omitzero"`
	FileSize        jsonSize `json:"file_size,omitzero"`
	TmpSize         jsonSize `json:"tmp_size,omitzero"`
	WorkSize        jsonSize `json:"work_size,omitzero"`
	Output          jsonSize `json:"output,omitzero"`
	OutputLimitKill bool     `json:"output_limit_kill,omitzero"`
	ArtifactFiles   int      `json:"artifact_files,omitzero"`
	ArtifactBytes   jsonSize `json:"artifact_bytes,omitzero"`
}

func (l Limits) MarshalJSON() ([]byte, error) {
	return json.Marshal(limitsJSON{
		Wall: Seconds(l.Wall), CPUTime: Seconds(l.CPUTime), Memory: jsonSize(l.Memory), CPUs: l.CPUs,
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

// Seconds is a duration that JSON gives as seconds (a number, e.g. 2.5)
// or as a duration string ("1500ms"); it encodes as seconds. It is the one
// duration type of execbox's JSON: the limits', and (as v1.Seconds and
// function.Duration) every timeout's and time to live's on the wire.
type Seconds time.Duration

func (d Seconds) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, time.Duration(d).Seconds(), 'f', -1, 64), nil
}

func (d *Seconds) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	bad := &json.UnmarshalTypeError{Value: fmt.Sprintf("%.40s (want seconds or a duration such as \"1500ms\")", b), Type: reflect.TypeFor[Seconds]()}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return bad
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return bad
		}
		*d = Seconds(v)
		return nil
	}
	var secs float64
	// Range-check before converting: a huge float would overflow.
	if err := json.Unmarshal(b, &secs); err != nil || secs < -1e6 || secs > 1e6 {
		return bad
	}
	*d = Seconds(secs * float64(time.Second))
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
