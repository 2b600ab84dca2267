package sandbox

import (
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func TestWallLimit(t *testing.T) {
	l := Limits{Wall: 10 * time.Second}
	for _, c := range []struct {
		timeout, want time.Duration
	}{
		{0, 10 * time.Second},                    // unset: the sandbox's limit
		{3 * time.Second, 3 * time.Second},       // shorter: it wins
		{10 * time.Second, 10 * time.Second},     // equal
		{30 * time.Second, 10 * time.Second},     // longer: cannot extend the limit
		{-time.Second, 10 * time.Second},         // negative: ignored
		{10*time.Second - 1, 10*time.Second - 1}, // just under
	} {
		p := &Process{Args: []string{"true"}, Timeout: c.timeout}
		if got := p.WallLimit(l); got != c.want {
			t.Errorf("Timeout %v under Wall %v: WallLimit = %v; want %v", c.timeout, l.Wall, got, c.want)
		}
	}
}

func TestReasonOf(t *testing.T) {
	for sig, want := range map[syscall.Signal]Reason{
		0: ReasonExited, syscall.SIGXCPU: ReasonCPULimit, syscall.SIGXFSZ: ReasonFileSizeLimit,
		syscall.SIGKILL: ReasonSignaled, syscall.SIGTERM: ReasonSignaled,
	} {
		if got := ReasonOf(sig); got != want {
			t.Errorf("ReasonOf(%v) = %s, want %s", sig, got, want)
		}
	}
}

// The default work root is never os.TempDir()/execbox, which any user could
// make first (issue 22).
func TestDefaultWorkRoot(t *testing.T) {
	t.Setenv("TMPDIR", "/tmpdir")
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/4242")
	got := Settings{}.Root()
	want := "/run/user/4242/execbox"
	if os.Geteuid() == 0 {
		want = "/run/execbox"
	}
	if got != want || (Settings{WorkRoot: "/srv/w"}).Root() != "/srv/w" {
		t.Errorf("Root() = %q, want %q", got, want)
	}
	if os.Geteuid() != 0 {
		t.Setenv("XDG_RUNTIME_DIR", "")
		if got := DefaultWorkRoot(); got != "/tmpdir/execbox-"+strconv.Itoa(os.Geteuid()) {
			t.Errorf("without XDG_RUNTIME_DIR: %q", got)
		}
	}
}
