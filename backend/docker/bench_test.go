package docker

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// The docker benchmarks, each side by side with the docker CLI doing the
// same in the same run. Each reports its median as p50-ms; run with
// -benchtime=30x or so for a stable median:
//
//	go test -run '^$' -bench . -benchtime 30x ./backend/docker/
//
// OneShot: a whole one-shot run of /bin/true (create and start a hardened
// container, exec, collect artifacts, remove) against `docker run --rm`
// with the same hardening flags; api-created-ahead is the same run with the
// container started beforehand (an engine warm pool), and raw-api is a bare
// Engine API run of the same container with /bin/true as its command (the
// floor). Exec: one run of
// /bin/true in a running container (what a reused container costs per run)
// against `docker exec`, and raw-api is a bare Engine API exec of
// /bin/true (the floor). ReusedRun is the whole reused-container run
// (lease, exec, artifacts, wipe), for reference.
//
// api and api-created-ahead also report the median of each step of the
// run that the backend traces (every Engine API call: create, start,
// exec-create, exec-start, exec-stream, exec-inspect, stat-…, remove) as
// <step>-p50-ms, so that the time of a run can be laid out call by call.
func BenchmarkOneShot(b *testing.B) {
	b.Run("api", func(b *testing.B) {
		db := newBackend(b, Config{})
		bd := traceSteps(b, db)
		defer bd.report()
		measure(b, func() error {
			res, err := sandbox.Run(context.Background(), db, sandbox.Spec{}, &sandbox.Process{Args: []string{"/bin/true"}})
			return check(res, err)
		})
	})
	b.Run("api-created-ahead", func(b *testing.B) {
		// What an engine warm pool gets: Create (the container start) done
		// before the request; timed are Exec, Artifacts and Close.
		db := newBackend(b, Config{})
		bd := traceSteps(b, db)
		defer bd.report()
		var sb sandbox.Sandbox
		measureWith(b, func() error {
			var err error
			sb, err = db.Create(context.Background(), sandbox.Spec{})
			return err
		}, func() error {
			res, err := sb.Exec(context.Background(), &sandbox.Process{Args: []string{"/bin/true"}})
			if err == nil {
				_, err = sb.Artifacts(context.Background())
			}
			if cerr := sb.Close(context.Background()); err == nil {
				err = cerr
			}
			return check(res, err)
		})
	})
	b.Run("raw-api", func(b *testing.B) {
		// The Engine API's own floor for `docker run --rm`: the same
		// hardened container with /bin/true as its command, attached,
		// started, waited for and removed; no work dir copy, no exec.
		db := newBackend(b, Config{})
		measure(b, func() error { return rawRun(db) })
	})
	b.Run("cli", func(b *testing.B) {
		db := newBackend(b, Config{})
		args := cliRunArgs(b, db)
		n := 0
		measure(b, func() error {
			n++
			a := slices.Clone(args)
			a[slices.Index(a, "NAME")] = fmt.Sprintf("execbox-bench-%d-%d", os.Getpid(), n)
			out, err := exec.Command("docker", a...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("docker %v: %v: %s", a, err, out)
			}
			return nil
		})
	})
}

func BenchmarkExec(b *testing.B) {
	db := newBackend(b, Config{ReuseContainer: true})
	sb := create(b, db, sandbox.Spec{Scope: "bench"})
	b.Run("api", func(b *testing.B) {
		measure(b, func() error {
			res, err := sb.Exec(context.Background(), &sandbox.Process{Args: []string{"/bin/true"}})
			return check(res, err)
		})
	})
	b.Run("raw-api", func(b *testing.B) {
		// The Engine API's own floor: exec /bin/true, no wrapper.
		c := sb.(*Sandbox).c
		measure(b, func() error {
			code, out, err := db.quickExec(context.Background(), c, []string{"/bin/true"}, nil)
			if err == nil && code != 0 {
				err = fmt.Errorf("exit %d: %s", code, out)
			}
			return err
		})
	})
	b.Run("cli", func(b *testing.B) {
		id := sb.(*Sandbox).c.id
		needCLI(b)
		measure(b, func() error {
			out, err := exec.Command("docker", "exec", "-i", "-u", sandboxUser, "-w", workDir, id, "/bin/true").CombinedOutput()
			if err != nil {
				return fmt.Errorf("docker exec: %v: %s", err, out)
			}
			return nil
		})
	})
}

func BenchmarkReusedRun(b *testing.B) {
	db := newBackend(b, Config{ReuseContainer: true})
	measure(b, func() error {
		res, err := sandbox.Run(context.Background(), db, sandbox.Spec{Scope: "bench"}, &sandbox.Process{Args: []string{"/bin/true"}})
		return check(res, err)
	})
}

// rawRun is `docker run --rm IMAGE /bin/true` with the backend's hardening,
// through the Engine API.
func rawRun(db *Backend) error {
	ctx := context.Background()
	spec := sandbox.Spec{Image: db.cfg.Image, Limits: sandbox.Limits{}.WithDefaults(db.defaults)}
	labels := db.labels(spec, sandbox.NewID(), "sandbox", "")
	hc, err := db.hostConfig(spec, labels)
	if err != nil {
		return err
	}
	cfg := &container.Config{Image: spec.Image, User: sandboxUser, Cmd: []string{"/bin/true"}, Entrypoint: []string{},
		WorkingDir: workDir, Labels: labels, AttachStdout: true, AttachStderr: true}
	c, err := db.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: cfg, HostConfig: hc})
	if err != nil {
		return err
	}
	defer db.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	at, err := db.cli.ContainerAttach(ctx, c.ID, client.ContainerAttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return err
	}
	defer at.Close()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wait := db.cli.ContainerWait(wctx, c.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := db.cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		return err
	}
	stdcopy.StdCopy(io.Discard, io.Discard, at.Reader)
	select {
	case r := <-wait.Result:
		if r.StatusCode != 0 {
			return fmt.Errorf("exit %d", r.StatusCode)
		}
	case err := <-wait.Error:
		return err
	}
	return nil
}

func needCLI(b *testing.B) {
	if _, err := exec.LookPath("docker"); err != nil {
		b.Skip("no docker CLI to compare with")
	}
}

// cliRunArgs is `docker run --rm` with the flags the backend uses for a
// default Spec (seed 004's and the hole fixes), the seccomp profile from a
// file, and "NAME" as a placeholder for the container name.
func cliRunArgs(b *testing.B, db *Backend) []string {
	needCLI(b)
	prof, err := seccompProfile()
	if err != nil {
		b.Fatal(err)
	}
	pf := filepath.Join(b.TempDir(), "seccomp.json")
	if err := os.WriteFile(pf, prof, 0o644); err != nil {
		b.Fatal(err)
	}
	l := sandbox.Limits{}.WithDefaults(db.defaults)
	cpu := strconv.FormatInt(int64(l.CPUTime/time.Second), 10)
	return []string{
		"run", "--rm", "--pull=never", "--name", "NAME", "-i",
		"--network=none", "--read-only", "--cap-drop=ALL",
		"--security-opt=no-new-privileges", "--security-opt=seccomp=" + pf,
		"--pids-limit=" + strconv.Itoa(l.Pids+keeperPids),
		"--memory=" + strconv.FormatInt(l.Memory, 10), "--memory-swap=" + strconv.FormatInt(l.Memory, 10),
		"--cpus=" + strconv.FormatFloat(l.CPUs, 'f', -1, 64), "--user=" + sandboxUser,
		"--tmpfs=/tmp:rw,nosuid,nodev,noexec,size=" + strconv.FormatInt(l.TmpSize, 10) + ",mode=1777",
		"--mount=type=volume,dst=/work,volume-driver=local,volume-opt=type=tmpfs,volume-opt=device=tmpfs," +
			`"volume-opt=o=size=` + strconv.FormatInt(l.WorkSize, 10) + `,uid=65534,gid=65534,mode=0700,nosuid,nodev,noexec"`,
		"--shm-size=" + strconv.Itoa(shmSize), "--ipc=private", "--cgroupns=private",
		"--ulimit=nofile=" + strconv.Itoa(l.NoFile) + ":" + strconv.Itoa(l.NoFile),
		"--ulimit=fsize=" + strconv.FormatInt(l.FileSize, 10),
		"--ulimit=cpu=" + cpu + ":" + cpu,
		"--log-driver=none", "--workdir=/work", "--entrypoint=",
		db.cfg.Image, "/bin/true",
	}
}

// measure runs f b.N times and reports the median as p50-ms.
func measure(b *testing.B, f func() error) {
	b.Helper()
	measureWith(b, func() error { return nil }, f)
}

// measureWith is measure with an untimed setup before each f.
func measureWith(b *testing.B, setup, f func() error) {
	b.Helper()
	if err := setup(); err != nil {
		b.Fatal(err)
	}
	if err := f(); err != nil { // warm-up
		b.Fatal(err)
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		if err := setup(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	b.StopTimer()
	testutil.ReportP50(b, "", ds)
}

func check(res *sandbox.Result, err error) error {
	if err != nil {
		return err
	}
	if !res.Succeeded() {
		return fmt.Errorf("not a success: %s", describe(res))
	}
	return nil
}

// steps collects how long each traced step of the backend took.
type steps struct {
	b  *testing.B
	mu sync.Mutex
	d  map[string][]time.Duration
}

func traceSteps(b *testing.B, db *Backend) *steps {
	s := &steps{b: b, d: map[string][]time.Duration{}}
	db.trace = func(step string, d time.Duration) {
		s.mu.Lock()
		s.d[step] = append(s.d[step], d)
		s.mu.Unlock()
	}
	return s
}

// report reports each step's median as <step>-p50-ms.
func (s *steps) report() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, ds := range s.d {
		testutil.ReportP50(s.b, k+"-", ds)
	}
}
