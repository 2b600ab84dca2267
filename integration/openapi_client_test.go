package integration

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// oapiCodegen is the generator the test takes from the Go module proxy,
// pinned, in a module of the test's own: execbox's go.mod gains nothing.
const oapiCodegen = "github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2"

// TestOpenAPIGeneratesAClient: the document a live server serves is
// consumable: a generator makes a Go client of it, the client compiles,
// and it runs a command (with ?explain=1) on that server, with the token.
func TestOpenAPIGeneratesAClient(t *testing.T) {
	s := startServer(t, append(localServe, "EXECBOX_TOKEN=gen-secret"))
	resp, err := http.Get(s.url + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/openapi.json: %d %v", resp.StatusCode, err)
	}
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("openapi.json", string(doc))
	write("go.mod", "module gentest\n\ngo 1.24\n")
	write("main.go", `package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
)

func main() {
	c, err := NewClientWithResponses(os.Args[1], WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+os.Args[2])
		return nil
	}))
	if err != nil {
		panic(err)
	}
	explain := RunParamsExplain("1")
	cmd := []string{"sh", "-c", "echo generated"}
	res, err := c.RunWithResponse(context.Background(), &RunParams{Explain: &explain}, RunJSONRequestBody{Command: &cmd})
	if err != nil {
		panic(err)
	}
	if res.JSON200 == nil {
		panic(fmt.Sprintf("status %d: %s", res.StatusCode(), res.Body))
	}
	fmt.Printf("%d %s %q %t\n", res.JSON200.ExitCode, res.JSON200.Reason, res.JSON200.Stdout, res.JSON200.Enforcement != nil)
}
`)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("run", oapiCodegen, "-generate", "types,client", "-package", "main", "-o", "client.gen.go", "openapi.json")
	run("mod", "tidy")
	if out := run("run", ".", s.url, "gen-secret"); out != "0 exited \"generated\\n\" true\n" {
		t.Errorf("the generated client's run: %q", out)
	}
}
