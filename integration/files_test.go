package integration

import (
	"os"
	"path/filepath"
	"testing"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFilesInArtifactsOut(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "input.txt")
	writeFile(t, in, "data")
	arts := filepath.Join(dir, "out")
	r := execbox(t, allowLocal, "", "run", "--backend", "local", "--file", in+":sub/in.txt", "--artifacts", arts,
		"--", "sh", "-c", "tr a-z A-Z < sub/in.txt > result.txt; ln -s /etc/passwd leak")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	got, err := os.ReadFile(filepath.Join(arts, "result.txt"))
	if err != nil || string(got) != "DATA" {
		t.Fatalf("artifact = %q, %v", got, err)
	}
	for _, name := range []string{"sub/in.txt", "leak"} {
		if _, err := os.Lstat(filepath.Join(arts, name)); !os.IsNotExist(err) {
			t.Errorf("%s was written as an artifact", name)
		}
	}
}
