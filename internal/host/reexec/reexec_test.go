package reexec

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func init() {
	Entry("reexec-test-echo", func() {
		fmt.Printf("args=%v env=%d\n", os.Args[1:], len(os.Environ()))
	})
}

func TestCommandRunsEntryWithEmptyEnv(t *testing.T) {
	t.Setenv("REEXEC_SECRET", "x")
	out, err := Command("reexec-test-echo", "a", "b").CombinedOutput()
	if err != nil {
		t.Fatalf("running entry: %v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "args=[a b] env=0" {
		t.Fatalf("entry output = %q, want args=[a b] env=0", got)
	}
}

func TestUnknownEntryRunsTheBinary(t *testing.T) {
	if Is("reexec-test-echo") {
		t.Fatal("Is true in the test process itself")
	}
}

// A launcher that cannot set argv[0] passes the marker as the one argument.
func TestEntryAsOnlyArgument(t *testing.T) {
	cmd := exec.Command("/proc/self/exe", Arg0("reexec-test-echo"))
	cmd.Env = []string{}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("running entry: %v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "args=["+Arg0("reexec-test-echo")+"] env=0" {
		t.Fatalf("entry output = %q", got)
	}
}
