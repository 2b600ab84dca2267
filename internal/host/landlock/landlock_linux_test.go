package landlock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/testutil"
	"golang.org/x/sys/unix"
)

const victimEnv = "EXECBOX_LANDLOCK_VICTIM" // JSON victimConfig

func TestMain(m *testing.M) {
	if cfg := os.Getenv(victimEnv); cfg != "" {
		os.Exit(victimMain(cfg))
	}
	os.Exit(m.Run())
}

type victimConfig struct {
	RO, RW []string
	RODir  string // listed in RO, holds "file"
	RWDir  string // listed in RW
	RWFile string // listed in RW, a file outside RWDir
	Other  string // not listed, writable before Restrict
}

type victimReport struct {
	Desc   string
	Err    string
	Probes map[string]string // probe → "OK" or errno name
}

func result(err error) string {
	if err == nil {
		return "OK"
	}
	var errno unix.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno)
	}
	return err.Error()
}

func write(name string) error { return os.WriteFile(name, []byte("x"), 0o600) }

func read(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Read(make([]byte, 16))
	return err
}

func victimMain(raw string) int {
	var cfg victimConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return 2
	}
	rep := victimReport{Probes: map[string]string{}}
	rep.Probes["before: write other"] = result(write(filepath.Join(cfg.Other, "before")))

	// A thread that exists before Restrict and acts after it.
	start, done := make(chan struct{}), make(chan string)
	go func() {
		runtime.LockOSThread()
		<-start
		done <- result(write(filepath.Join(cfg.Other, "old-thread")))
	}()

	desc, err := Restrict(cfg.RO, cfg.RW)
	rep.Desc = desc
	if err != nil {
		rep.Err = err.Error()
	}
	close(start)
	rep.Probes["old thread: write other"] = <-done

	p := rep.Probes
	p["write rw dir"] = result(write(filepath.Join(cfg.RWDir, "new")))
	p["mkdir rw dir"] = result(os.Mkdir(filepath.Join(cfg.RWDir, "a"), 0o700))
	os.Mkdir(filepath.Join(cfg.RWDir, "b"), 0o700)
	write(filepath.Join(cfg.RWDir, "a", "x"))
	p["rename across rw dirs"] = result(os.Rename(filepath.Join(cfg.RWDir, "a", "x"), filepath.Join(cfg.RWDir, "b", "x")))
	p["write rw file"] = result(write(cfg.RWFile))
	p["write other"] = result(write(filepath.Join(cfg.Other, "after")))
	p["read other"] = result(read(filepath.Join(cfg.Other, "before")))
	p["read ro dir"] = result(read(filepath.Join(cfg.RODir, "file")))
	p["write ro dir"] = result(write(filepath.Join(cfg.RODir, "file")))
	p["create in ro dir"] = result(write(filepath.Join(cfg.RODir, "new")))
	p["read /usr"] = result(read("/usr/bin/python3"))
	_, err = os.ReadDir("/usr/bin")
	p["list /usr/bin"] = result(err)
	p["read /etc/passwd"] = result(read("/etc/passwd"))
	// Children inherit the domain across execve.
	if out, err := exec.Command("/usr/bin/python3", "-c", `
import sys
def w(p):
    try:
        open(p, "w").write("x"); return "OK"
    except OSError as e:
        return type(e).__name__
print(w(sys.argv[1]), w(sys.argv[2]))`, filepath.Join(cfg.RWDir, "py"), filepath.Join(cfg.Other, "py")).CombinedOutput(); err != nil {
		p["python child"] = "error: " + err.Error() + ": " + string(out)
	} else {
		p["python child"] = strings.TrimSpace(string(out))
	}

	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		return 1
	}
	return 0
}

// required reports whether EXECBOX_REQUIRE names a backend that needs
// Landlock, so a missing Landlock fails instead of skipping.
func required() bool {
	for _, f := range strings.FieldsFunc(os.Getenv("EXECBOX_REQUIRE"), func(r rune) bool { return r == ',' || r == ' ' }) {
		if f == "native" || f == "landlock" {
			return true
		}
	}
	return false
}

func TestABI(t *testing.T) {
	abi := ABI()
	t.Logf("landlock ABI %d", abi)
	if abi < 0 {
		t.Fatalf("ABI() = %d", abi)
	}
	if abi == 0 && required() {
		t.Fatal("landlock is unavailable but EXECBOX_REQUIRE needs it")
	}
}

func TestRestrict(t *testing.T) {
	if ABI() == 0 {
		if required() {
			t.Fatal("landlock is unavailable but EXECBOX_REQUIRE needs it")
		}
		t.Skip("landlock is unavailable")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		testutil.SkipOrFail(t, "python3", "/usr/bin/python3 is missing")
	}
	base := t.TempDir()
	cfg := victimConfig{
		RODir:  filepath.Join(base, "ro"),
		RWDir:  filepath.Join(base, "rw"),
		RWFile: filepath.Join(base, "rwfile"),
		Other:  filepath.Join(base, "other"),
	}
	for _, d := range []string{cfg.RODir, cfg.RWDir, cfg.Other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(cfg.RODir, "file"), cfg.RWFile} {
		if err := write(f); err != nil {
			t.Fatal(err)
		}
	}
	cfg.RO = []string{"/usr", cfg.RODir, filepath.Join(base, "missing")}
	// os/exec gives children /dev/null as stdin.
	cfg.RW = []string{cfg.RWDir, cfg.RWFile, "/dev/null"}
	raw, _ := json.Marshal(cfg)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), victimEnv+"="+string(raw))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("victim: %v\n%s", err, stderr.Bytes())
	}
	var rep victimReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("bad report %q: %v", out, err)
	}
	if rep.Err != "" {
		t.Fatalf("Restrict: %s", rep.Err)
	}
	if want := "landlock ABI " + strconv.Itoa(ABI()); rep.Desc != want {
		t.Errorf("description %q, want %q", rep.Desc, want)
	}
	want := map[string]string{
		"before: write other":     "OK",
		"old thread: write other": "EACCES",
		"write rw dir":            "OK",
		"mkdir rw dir":            "OK",
		"rename across rw dirs":   "OK",
		"write rw file":           "OK",
		"write other":             "EACCES",
		"read other":              "EACCES",
		"read ro dir":             "OK",
		"write ro dir":            "EACCES",
		"create in ro dir":        "EACCES",
		"read /usr":               "OK",
		"list /usr/bin":           "OK",
		"read /etc/passwd":        "EACCES",
		"python child":            "OK PermissionError",
	}
	for name, w := range want {
		if got := rep.Probes[name]; got != w {
			t.Errorf("%s = %q, want %s", name, got, w)
		}
	}
	if len(rep.Probes) != len(want) {
		t.Errorf("victim ran %d probes, the test checks %d", len(rep.Probes), len(want))
	}
	// The unrestricted test process could do all of it.
	if err := write(filepath.Join(cfg.Other, "after")); err != nil {
		t.Errorf("the test itself cannot write the other dir: %v", err)
	}
}
