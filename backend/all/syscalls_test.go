package all

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/elastic/go-seccomp-bpf/arch"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/execbox/execbox/internal/host/seccomp"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// TestSyscallTable runs one syscall table probe (backend/gvisor's
// testdata/syscalls.py: every syscall of the host's table, all arguments
// -1) inside every backend that enforces execbox's seccomp policy and is
// available here, and holds each answer against the policy and native's:
//
//   - a syscall the policy denies answers EPERM everywhere (clone3:
//     ENOSYS), or ENOSYS where the runtime does not know its number at all
//     (gVisor's sentry, runc's libseccomp), as on an older kernel;
//   - one it allows is never denied: it answers EPERM only where native,
//     on the host kernel, does too. gVisor is a different kernel whose own
//     answers differ (setsid as the sandbox's PID 1 is EPERM there); its
//     allowed answers are logged here and held exactly to gVisor without a
//     policy by backend/gvisor's TestSyscallTable.
func TestSyscallTable(t *testing.T) {
	testutil.RequiresRoot(t, "native")
	var numbers map[string]int
	switch runtime.GOARCH {
	case "amd64":
		numbers = arch.X86_64.SyscallNames
	case "arm64":
		numbers = arch.AARCH64.SyscallNames
	default:
		t.Skipf("no syscall table for %s", runtime.GOARCH)
	}
	script, err := os.ReadFile("../gvisor/testdata/syscalls.py")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := seccomp.DockerProfile()
	if err != nil {
		t.Fatal(err)
	}
	var pol specs.LinuxSeccomp
	if err := json.Unmarshal(raw, &pol); err != nil {
		t.Fatal(err)
	}
	allowed, partial, enosys := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, r := range pol.Syscalls {
		for _, n := range r.Names {
			switch {
			case r.Action == specs.ActAllow && len(r.Args) == 0:
				allowed[n] = true
			case r.Action == specs.ActAllow:
				partial[n] = true
			case r.ErrnoRet != nil && *r.ErrnoRet == 38:
				enosys[n] = true
			}
		}
	}
	probe := map[string]int{}
	for n, nr := range numbers {
		if nr < 1024 {
			probe[n] = nr
		}
	}
	arg, _ := json.Marshal(probe)

	root := t.TempDir()
	os.Chmod(root, 0o711) // bwrap runs as 65534 and must reach its work dirs
	for d := filepath.Dir(root); d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o711)
	}
	tables := map[string]map[string]string{}
	var names []string
	for _, name := range []string{"native", "bwrap", "gvisor", "docker"} {
		r, ok := sandbox.Lookup(name)
		if !ok {
			t.Fatalf("%s is not registered", name)
		}
		be, err := r.New(sandbox.Settings{WorkRoot: filepath.Join(root, name)})
		if err != nil {
			t.Fatal(err)
		}
		if c, ok := be.(interface{ Close() error }); ok {
			defer c.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if h := be.Health(ctx); !h.Available {
			if testutil.Required(name) {
				t.Errorf("%s is required (EXECBOX_REQUIRE) but unavailable: %s", name, h.Reason)
			} else {
				t.Logf("%s unavailable, not probed: %s", name, h.Reason)
			}
			continue
		}
		sb, err := be.Create(ctx, sandbox.Spec{Limits: sandbox.Limits{Wall: 60 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close(context.Background())
		if err := sb.WriteFiles(ctx, map[string][]byte{"syscalls.py": script}); err != nil {
			t.Fatal(err)
		}
		res, err := sb.Exec(ctx, &sandbox.Process{Args: []string{"python3", "/work/syscalls.py", string(arg)}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		testutil.WantOK(t, res)
		var out map[string]string
		if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
			t.Fatalf("%s: probe output %q: %v (stderr %q)", name, res.Stdout, err, res.Stderr)
		}
		tables[name] = out
		names = append(names, name)
	}
	native := tables["native"]
	if native == nil {
		testutil.SkipOrFail(t, "native", "native is not available: nothing to hold the others against")
	}
	for _, be := range names {
		tab := tables[be]
		counts := map[string]int{}
		var differs []string
		for sc, got := range tab {
			base, variant, _ := strings.Cut(sc, ":")
			want := native[sc]
			switch {
			case got == "SKIP":
				counts["skipped"]++
				continue
			case variant != "" && slices.Contains([]string{"alg", "newuser", "addr_no_randomize"}, variant),
				variant == "" && partial[base],
				variant == "" && !allowed[base] && !enosys[base] && !partial[base]:
				switch {
				case got == "EPERM":
					counts["denied"]++
				case got == "ENOSYS" && (be == "gvisor" || be == "docker"):
					counts["denied, number unknown to the runtime (ENOSYS)"]++
				default:
					t.Errorf("%s: %s is denied by the policy but answers %s (native: %s)", be, sc, got, want)
				}
			case enosys[base]:
				if got != "ENOSYS" {
					t.Errorf("%s: %s answers %s, want ENOSYS", be, sc, got)
				}
				counts["enosys"]++
			default:
				// Allowed: never EPERM unless the host kernel says so too.
				if got == "EPERM" && want != "EPERM" && be != "gvisor" {
					t.Errorf("%s: %s is allowed by the policy but answers EPERM (native: %s)", be, sc, want)
				}
				counts["allowed"]++
				if got != want {
					differs = append(differs, sc+" "+want+"→"+got)
				}
			}
		}
		sort.Strings(differs)
		t.Logf("%s: %d syscalls: %v; allowed ones answering otherwise than native: %d %v", be, len(tab), counts, len(differs), differs)
	}
}
