package sandboxtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// artifacts collects sb's artifacts, failing the test on an error or when
// collecting hangs (a FIFO opened for reading would).
func (s *suite) artifacts(t *testing.T, sb sandbox.Sandbox) sandbox.Artifacts {
	t.Helper()
	type out struct {
		a   sandbox.Artifacts
		err error
	}
	ch := make(chan out, 1)
	ctx, cancel := context.WithTimeout(t.Context(), s.cfg.opTimeout)
	defer cancel()
	go func() {
		a, err := sb.Artifacts(ctx)
		ch <- out{a, err}
	}()
	select {
	case o := <-ch:
		if o.err != nil {
			t.Fatalf("Artifacts: %v", o.err)
		}
		return o.a
	case <-time.After(s.cfg.opTimeout + 5*time.Second):
		t.Fatalf("Artifacts did not return within %v", s.cfg.opTimeout)
	}
	panic("unreachable")
}

// byPath indexes artifacts by path, failing on duplicates and on a Size
// that disagrees with Data.
func byPath(t *testing.T, files []sandbox.Artifact) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, f := range files {
		if _, dup := m[f.Path]; dup {
			t.Errorf("artifact %q listed twice", f.Path)
		}
		if f.Size != int64(len(f.Data)) {
			t.Errorf("artifact %q: Size %d but %d bytes of Data", f.Path, f.Size, len(f.Data))
		}
		m[f.Path] = string(f.Data)
	}
	return m
}

// wantArtifacts fails unless files are exactly want (path → content).
func wantArtifacts(t *testing.T, files []sandbox.Artifact, want map[string]string) {
	t.Helper()
	got := byPath(t, files)
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			t.Errorf("artifact %q missing (got %v)", p, keys(got))
		case g != w:
			t.Errorf("artifact %q = %s, want %s", p, clip(g), clip(w))
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("unexpected artifact %q = %s", p, clip(got[p]))
		}
	}
}

func keys(m map[string]string) []string {
	var k []string
	for p := range m {
		k = append(k, p)
	}
	slices.Sort(k)
	return k
}

// skippedPaths maps skipped paths to their reasons.
func skippedPaths(sk []sandbox.Skipped) map[string]string {
	m := map[string]string{}
	for _, s := range sk {
		m[s.Path] = s.Reason
	}
	return m
}

// inputs are the files the files subtests write.
var inputs = map[string][]byte{"in.txt": []byte("hello"), "dir/sub/b.txt": []byte("bee")}

func (s *suite) testFiles(t *testing.T) {
	s.run(t, "write_and_read", func(t *testing.T) {
		sb := s.create(t, s.spec(nil))
		if err := sb.WriteFiles(s.ctx(t), inputs); err != nil {
			t.Fatalf("WriteFiles: %v", err)
		}
		res := s.exec(t, sb, sh("cat in.txt; echo; cat dir/sub/b.txt"))
		wantExit(t, res, 0)
		if res.Stdout != "hello\nbee" {
			t.Fatalf("reading the written files: %s", describe(res))
		}
	})

	s.run(t, "process_dir", func(t *testing.T) {
		sb := s.create(t, s.spec(nil))
		if err := sb.WriteFiles(s.ctx(t), inputs); err != nil {
			t.Fatalf("WriteFiles: %v", err)
		}
		p := sh("cat b.txt; echo; cat ../../in.txt; echo made > here.txt")
		p.Dir = "dir/sub"
		wantExit(t, s.exec(t, sb, p), 0)
		wantArtifacts(t, s.artifacts(t, sb).Files, map[string]string{"dir/sub/here.txt": "made\n"})
	})

	s.run(t, "artifacts_new_only", func(t *testing.T) {
		sb := s.create(t, s.spec(nil))
		if err := sb.WriteFiles(s.ctx(t), inputs); err != nil {
			t.Fatalf("WriteFiles: %v", err)
		}
		res := s.exec(t, sb, sh(`set -e
cat in.txt dir/sub/b.txt >/dev/null
printf 'new\n' > out.txt
printf '\001\002\003\377' > dir/new.bin
mkdir -p newdir/deep && printf deep > newdir/deep/f.txt
mkdir emptydir`))
		wantExit(t, res, 0)
		a := s.artifacts(t, sb)
		wantArtifacts(t, a.Files, map[string]string{
			"out.txt": "new\n", "dir/new.bin": "\x01\x02\x03\xff", "newdir/deep/f.txt": "deep",
		})
		if len(a.Skipped) != 0 {
			t.Errorf("nothing should be skipped, got %v", a.Skipped)
		}
	})

	s.run(t, "artifacts_changed_input", func(t *testing.T) {
		sb := s.create(t, s.spec(nil))
		files := map[string][]byte{"in.txt": []byte("hello"), "same.txt": []byte("same"), "gone.txt": []byte("gone")}
		if err := sb.WriteFiles(s.ctx(t), files); err != nil {
			t.Fatalf("WriteFiles: %v", err)
		}
		wantExit(t, s.exec(t, sb, sh("echo more >> in.txt; cat same.txt >/dev/null; rm gone.txt")), 0)
		wantArtifacts(t, s.artifacts(t, sb).Files, map[string]string{"in.txt": "hellomore\n"})
	})

	s.run(t, "artifacts_rewritten_same_size", func(t *testing.T) {
		sb := s.create(t, s.spec(nil))
		if err := sb.WriteFiles(s.ctx(t), map[string][]byte{"in.txt": []byte("hello")}); err != nil {
			t.Fatalf("WriteFiles: %v", err)
		}
		wantExit(t, s.exec(t, sb, sh("printf HELLO > in.txt")), 0)
		wantArtifacts(t, s.artifacts(t, sb).Files, map[string]string{"in.txt": "HELLO"})
	})

	// collect runs a script creating files and returns the artifacts.
	collect := func(t *testing.T, lim func(*sandbox.Limits), script string) sandbox.Artifacts {
		sb := s.create(t, s.spec(func(sp *sandbox.Spec) { lim(&sp.Limits) }))
		wantExit(t, s.exec(t, sb, sh(script)), 0)
		return s.artifacts(t, sb)
	}
	// checkCapped: every returned file is whole, returned ∪ skipped = all,
	// the caps hold and (unless wantSkipped < 0) so many were skipped.
	checkCapped := func(t *testing.T, a sandbox.Artifacts, all map[string]string, maxFiles int, maxBytes int64, wantSkipped int) {
		t.Helper()
		got := byPath(t, a.Files)
		var total int64
		for p, d := range got {
			if all[p] != d {
				t.Errorf("artifact %q is not the whole file: %d of %d bytes", p, len(d), len(all[p]))
			}
			total += int64(len(d))
		}
		sk := skippedPaths(a.Skipped)
		for p, r := range sk {
			if _, ok := all[p]; !ok {
				t.Errorf("skipped %q, which the program did not create", p)
			}
			if r == "" {
				t.Errorf("skipped %q without a reason", p)
			}
			if _, ok := got[p]; ok {
				t.Errorf("%q both returned and skipped", p)
			}
		}
		for p := range all {
			_, r := got[p]
			_, k := sk[p]
			if !r && !k {
				t.Errorf("%q neither returned nor listed as skipped", p)
			}
		}
		if len(got) > maxFiles || total > maxBytes {
			t.Errorf("returned %d files / %d bytes, limits %d files / %d bytes", len(got), total, maxFiles, maxBytes)
		}
		if wantSkipped >= 0 && len(sk) != wantSkipped {
			t.Errorf("skipped %v, want %d skipped", a.Skipped, wantSkipped)
		}
	}
	three := map[string]string{"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"}
	threeScript := "echo a > a.txt; echo b > b.txt; echo c > c.txt"

	s.run(t, "artifact_files_limit", func(t *testing.T) {
		a := collect(t, func(l *sandbox.Limits) { l.ArtifactFiles = 2 }, threeScript)
		checkCapped(t, a, three, 2, 1<<30, 1)
		if len(a.Files) != 2 {
			t.Errorf("ArtifactFiles=2 with 3 files: returned %d", len(a.Files))
		}
	})

	s.run(t, "artifact_files_at_limit", func(t *testing.T) {
		a := collect(t, func(l *sandbox.Limits) { l.ArtifactFiles = 3 }, threeScript)
		checkCapped(t, a, three, 3, 1<<30, 0)
	})

	fill := func(name string, n int) string {
		return "yes " + name + " | head -c " + fmt.Sprint(n) + " > " + name + ".bin; "
	}
	content := func(name string, n int) string { return strings.Repeat(name+"\n", n/(len(name)+1)+1)[:n] }

	s.run(t, "artifact_bytes_limit", func(t *testing.T) {
		a := collect(t, func(l *sandbox.Limits) { l.ArtifactBytes = 1000 }, fill("a", 600)+fill("b", 600)+fill("big", 2000))
		all := map[string]string{"a.bin": content("a", 600), "b.bin": content("b", 600), "big.bin": content("big", 2000)}
		// Which of a and b fits depends on the walk order; big never does.
		checkCapped(t, a, all, 100, 1000, -1)
		if r := skippedPaths(a.Skipped)["big.bin"]; r == "" {
			t.Errorf("big.bin (2000 bytes, over the 1000-byte cap) not listed as skipped: %v", a.Skipped)
		}
	})

	s.run(t, "artifact_bytes_at_limit", func(t *testing.T) {
		a := collect(t, func(l *sandbox.Limits) { l.ArtifactBytes = 1000 }, fill("a", 500)+fill("b", 500))
		checkCapped(t, a, map[string]string{"a.bin": content("a", 500), "b.bin": content("b", 500)}, 100, 1000, 0)
	})

	s.run(t, "run_spec_files", func(t *testing.T) {
		spec := s.spec(func(sp *sandbox.Spec) { sp.Files = inputs })
		res := s.oneShot(t, spec, sh("cat in.txt dir/sub/b.txt; printf x > out.txt; echo changed > in.txt"))
		wantExit(t, res, 0)
		if res.Stdout != "hellobee" {
			t.Errorf("program saw %s, want the Spec.Files contents", clip(res.Stdout))
		}
		wantArtifacts(t, res.Artifacts, map[string]string{"out.txt": "x", "in.txt": "changed\n"})
	})
}
