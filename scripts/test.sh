#!/usr/bin/env bash
# Runs execbox's whole test suite on a fresh Debian 12 machine, as root:
# installs what the tests need (interpreters, bubblewrap, runsc, docker.io),
# builds a current gVisor runsc (scripts/runsc.sh) for the gvisor backend,
# starts a private dockerd, builds the sandbox image offline, then vet, the
# race-enabled tests and one short benchmark pass. Every backend listed in
# EXECBOX_REQUIRE must really work here: a missing one fails the run
# instead of being skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
	echo "scripts/test.sh: run as root (the sandbox backends' tests need namespaces, cgroups and dockerd)" >&2
	exit 2
fi

export PATH="/usr/local/go/bin:$PATH"
# go keeps its caches under HOME; CI may start us without one.
export HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
# Every feature a test gates on, so nothing this machine can run is skipped:
# the backends, the conformance self-test, the interpreters, root, the v2
# cgroup mount, the black-box server on an isolating backend, Docker's
# runtime runsc (scripts/dockerd.sh registers it), and Debian's old runsc
# (installed below) for the "available, not ready" health case,
# chromium for the web playground's browser test, and the kubernetes
# backend on a single-node cluster (scripts/k8s.sh), with runc and with
# the gVisor RuntimeClass.
export EXECBOX_REQUIRE="${EXECBOX_REQUIRE:-native,landlock,cgroups,cgroup2,bwrap,gvisor,runsc-debian,docker,docker-runsc,microvm,kubernetes,kubernetes-gvisor,sandboxtest,server,serve,function,python3,node,root,chromium}"
# The browser test's screenshots of each page (kept after the run).
export EXECBOX_SCREENSHOTS="${EXECBOX_SCREENSHOTS:-${TMPDIR:-/tmp}/execbox-screenshots}"

# Stages, timed: each ends with its wall time and the share of the
# machine's CPU it used (low: room to run something beside it); the table
# of all of them comes at the end, also when a stage fails.
stages=()
stage_name='' stage_t0=0 stage_busy0=0 stage_total0=0
cpu_ticks() { awk '/^cpu /{b=$2+$3+$4+$7+$8+$9; print b, b+$5+$6}' /proc/stat; }
stage() {
	local busy total
	read -r busy total < <(cpu_ticks)
	if [ -n "$stage_name" ]; then
		local secs=$((SECONDS - stage_t0)) pct=0
		[ "$total" -gt "$stage_total0" ] && pct=$((100 * (busy - stage_busy0) / (total - stage_total0)))
		stages+=("$(printf '%6d s %4d %% CPU  %s' "$secs" "$pct" "$stage_name")")
		echo "($stage_name: $secs s, $pct % CPU)"
	fi
	stage_name=$1 stage_t0=$SECONDS stage_busy0=$busy stage_total0=$total
	if [ -n "$1" ]; then echo "== $1"; fi
}
# The cleanups of what this run started, newest first, and the table.
cleanups=()
finish() {
	local rc=$?
	stage ""
	for ((i = ${#cleanups[@]} - 1; i >= 0; i--)); do eval "${cleanups[i]}" || true; done
	# A background build still running (the run failed before it was
	# waited for) is stopped, with its go build: each runs in a process
	# group of its own (setsid), which is killed whole.
	for pid in ${k8s_build:-} ${runsc_build:-} ${vet_job:-} ${release_build:-}; do kill -- "-$pid" 2>/dev/null || true; done
	echo "== stages (${SECONDS} s in all, exit $rc)"
	printf '%s\n' "${stages[@]}"
}
trap finish EXIT

# Built in the background while the stages before the kubernetes one run
# (nice 19: it takes only the CPU they leave): the cluster's binaries, ~13 min
# cold, nothing when cached; and a current runsc, which the private dockerd
# needs. Both need only Go, so they start before the packages are installed.
k8s=false
case ",$EXECBOX_REQUIRE," in *,kubernetes,* | *,kubernetes-gvisor,*) k8s=true ;; esac
bglogs=$(mktemp -d)
cleanups+=("rm -rf '$bglogs'")
if $k8s; then
	setsid nice -n 19 ./scripts/k8s.sh build >"$bglogs/k8s-build" 2>&1 &
	k8s_build=$!
fi
setsid ./scripts/runsc.sh >"$bglogs/runsc" 2>"$bglogs/runsc.log" &
runsc_build=$!
# go vet and gofmt need only Go and the tree: they run beside the install,
# whose downloads leave the CPU idle, and are waited for after it.
setsid bash -c 'go vet ./... && u=$(gofmt -l $(git ls-files "*.go" 2>/dev/null || find . -name "*.go")) &&
	if [ -n "$u" ]; then echo "gofmt would change: $u" >&2; exit 1; fi' >"$bglogs/vet" 2>&1 &
vet_job=$!

stage "installing what the tests need"
need=()
# The microvm backend: QEMU, and Debian's kernel (only its files: the
# guest kernel and its modules; the host does not boot it) and xz to
# unpack it; cpio reads back the initramfs the backend writes.
for pkg in python3 python3-venv python3-pip python3-setuptools python3-pytest nodejs bubblewrap runsc docker.io chromium qemu-system-x86 linux-image-amd64 xz-utils cpio; do
	dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
# npm comes with some Node.js builds, with Debian's as a package of its own.
command -v npm >/dev/null 2>&1 || need+=(npm)
if [ ${#need[@]} -gt 0 ]; then
	echo "== installing ${need[*]}"
	apt-get update -qq
	# INITRD=No: the kernel package is there for its files only (the
	# microvm backend builds its own initramfs); Debian's hook would spend
	# minutes of CPU on /boot/initrd.img (10 min on a busy fresh machine).
	DEBIAN_FRONTEND=noninteractive INITRD=No apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

stage "the web playground: built from web/ as committed in internal/daemon/webui/dist"
# The binary embeds internal/daemon/webui/dist, committed so that a build needs no
# Node; a source change not built and committed with it fails here. It is
# built beside the tree (go vet reads the tree meanwhile) and compared; the
# gzip copies are left out: another zlib may pack the same bytes
# differently (a test checks each holds its asset).
webout=$(mktemp -d)
cleanups+=("rm -rf '$webout'")
(cd web && npm ci --no-audit --no-fund --loglevel=error && npm run -s check && PLAYGROUND_OUT="$webout/dist" npm run -s build)
if ! diff -r -q --exclude='*.gz' "$webout/dist" internal/daemon/webui/dist >&2; then
	echo "internal/daemon/webui/dist is not what web/ builds: run npm run build in web/ and commit the result" >&2
	exit 1
fi

stage "go vet, gofmt (started beside the install)"
vet_rc=0
wait "$vet_job" || vet_rc=$?
vet_job=""
cat "$bglogs/vet"
if [ "$vet_rc" != 0 ]; then
	echo "go vet or gofmt failed (above)" >&2
	exit 1
fi

stage "gVisor's runsc (built in the background)"
# A current release first in PATH: the gvisor backend (gvisor.runsc is
# "runsc", looked up in PATH) and the private dockerd's runtime "runsc" use
# it. Debian's (2022) stays the fallback; it lacks statx as coreutils 9
# calls it, so with it gvisor is available but never ready, and every test
# that needs a ready gvisor fails.
runsc_rc=0
wait "$runsc_build" || runsc_rc=$?
runsc_build=""
cat "$bglogs/runsc.log" >&2
if [ "$runsc_rc" = 0 ] && runsc=$(cat "$bglogs/runsc") && [ -x "$runsc" ]; then
	export PATH="$(dirname "$runsc"):$PATH"
	echo "runsc: $runsc ($("$runsc" --version | head -1))"
else
	echo "runsc: BUILDING A CURRENT RUNSC FAILED (see above); FALLING BACK TO $(command -v runsc) ($(runsc --version | head -1)): gvisor will be available but not ready" >&2
fi

stage "private dockerd and the offline sandbox image"
./scripts/dockerd.sh start
cleanups+=("./scripts/dockerd.sh stop")
eval "$(./scripts/dockerd.sh env)"
go run ./cmd/execbox image build python --offline

stage "go test -race (EXECBOX_REQUIRE=$EXECBOX_REQUIRE)"
# Package results as they end, failed tests in full, then every skipped
# test with its reason (scripts/testreport.go). The microvm and kubernetes
# backends and deploy's manifests (the cluster's) come in stages of their
# own, and so does the black-box session test's kubernetes case (k8s_cases).
k8s_cases='^TestSessionContextsOnBackends$/^kubernetes$'
# The black-box tests' microvm cases run in the microvm stage, with no
# other VM or test beside them: under emulation beside the main stage a
# VM's start once took the health probe past its limit (microvm "not
# available" in TestSessionsAfterKill9), and an exec past the agent's
# deadline (TestMicroVMAfterKill9).
vm_tests='TestSessionContextsOnBackends|TestSessionsAfterKill9|TestMicroVMFromTheCLI|TestMicroVMAfterKill9'
vm_cases="^($vm_tests)\$/^microvm\$"
# The longest packages are named first: go test builds and starts packages
# in the order given, two at a time, and the black-box tests (~22 min)
# started last ran alone at the end.
pkgs=$(go list ./... | grep -v -e '/backend/microvm$' -e '/backend/kubernetes$' -e '/deploy$')
first=$(for p in integration backend/docker backend/gvisor; do grep -E "/$p\$" <<<"$pkgs" || true; done)
go test -race -count=1 -timeout 30m -json -skip "^($vm_tests)\$/^(kubernetes|microvm)\$" $first $(grep -v -x -F "$first" <<<"$pkgs") | go run scripts/testreport.go

stage "the microvm backend (alone: under software emulation its VMs keep both cores busy)"
go test -race -count=1 -timeout 30m -json ./backend/microvm/ | go run scripts/testreport.go
go test -race -count=1 -timeout 10m -json -run "$vm_cases" ./integration/ | go run scripts/testreport.go

if $k8s; then
	stage "a single-node Kubernetes cluster (scripts/k8s.sh, its binaries built in the background) and its images"
	k8s_rc=0
	wait "$k8s_build" || k8s_rc=$?
	k8s_build=""
	if [ "$k8s_rc" != 0 ]; then
		cat "$bglogs/k8s-build" >&2
		echo "building the cluster's binaries failed (above)" >&2
		exit 1
	fi
	cat "$bglogs/k8s-build"
	cleanups+=("./scripts/k8s.sh down")
	./scripts/k8s.sh up
	# The kubernetes backend's agent image (execbox-guest alone) and the
	# server's for deploy/kubernetes (execbox alone: its sandboxes are Pods).
	k8simg=$(mktemp -d)
	mkdir -p "$k8simg/agent" "$k8simg/server/run/execbox-nonroot"
	chmod 700 "$k8simg/server/run/execbox-nonroot"
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$k8simg/agent/execbox-guest" ./cmd/execbox-guest
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$k8simg/server/execbox" ./cmd/execbox
	tar -C "$k8simg/agent" -c execbox-guest | docker import -c 'ENTRYPOINT ["/execbox-guest"]' - execbox-agent:latest >/dev/null
	# As the release image (deploy/mkimage): /run/execbox-nonroot is uid
	# 65532's, the server's in deploy/kubernetes, for its work root.
	tar -C "$k8simg/server" --owner=0 --group=0 -cf "$k8simg/server.tar" execbox
	tar -C "$k8simg/server" --owner=0 --group=0 --no-recursion -rf "$k8simg/server.tar" run
	tar -C "$k8simg/server" --owner=65532 --group=65532 -rf "$k8simg/server.tar" run/execbox-nonroot
	docker import -c 'ENTRYPOINT ["/execbox"]' "$k8simg/server.tar" execbox:latest >/dev/null
	rm -rf "$k8simg"
	./scripts/k8s.sh load execbox-python:latest execbox-agent:latest execbox:latest
	eval "$(./scripts/k8s.sh env)"
fi

# The release's bundles (two architectures, the image, the .deb) build
# meanwhile, niced: the cluster's tests wait on Pods and leave CPU idle,
# and a niced build takes nothing from a test at normal priority.
relbuild=$(mktemp -d)
cleanups+=("rm -rf '$relbuild'")
setsid nice -n 19 ./scripts/test-release.sh --build "$relbuild" >"$bglogs/release-build" 2>&1 &
release_build=$!

stage "the kubernetes backend and deploy's manifests (alone but for the niced release build: their Pods share the node's two cores)"
go test -race -count=1 -timeout 30m -json ./backend/kubernetes/ ./deploy/ | go run scripts/testreport.go
go test -race -count=1 -timeout 10m -json -run "$k8s_cases" ./integration/ | go run scripts/testreport.go
echo "(the playground's screenshots: $EXECBOX_SCREENSHOTS)"

stage "the Python and TypeScript clients and the official E2B SDKs, side by side: each installed as its README says, tested against a real execbox serve"
# Python: Debian's python3 (where apt put pytest), a venv that sees it,
# the client installed with the README's command (its build backend needs
# no index; test_install.py checks that command in a stock venv too).
# TypeScript: npm ci, tsc, node --test. Each writes a log of its own,
# shown when both have ended.
clients=$(mktemp -d)
cleanups+=("rm -rf '$clients'")
go build -o "$clients/execbox" ./cmd/execbox
repo=$PWD
(
	/usr/bin/python3 -m venv --system-site-packages "$clients/venv" &&
		"$clients/venv/bin/pip" install -q --no-index ./clients/python &&
		cd "$clients" && EXECBOX_BINARY="$clients/execbox" "$clients/venv/bin/python" -m pytest -q -p no:cacheprovider "$repo/clients/python/tests"
) >"$clients/python.log" 2>&1 &
py_job=$!
# The E2B SDKs (pinned in integration/e2b), unchanged, against execbox
# serve on native, gvisor and the private dockerd.
(cd integration/e2b && npm ci --no-audit --no-fund --loglevel=error && EXECBOX_BINARY="$clients/execbox" E2B_BACKENDS=native,gvisor,docker npm test --silent) >"$clients/e2b.log" 2>&1 &
e2b_job=$!
ts_rc=0
(cd clients/typescript && npm ci --no-audit --no-fund --loglevel=error && npm run -s build && EXECBOX_BINARY="$clients/execbox" npm test --silent) >"$clients/ts.log" 2>&1 || ts_rc=$?
py_rc=0 e2b_rc=0
wait "$py_job" || py_rc=$?
wait "$e2b_job" || e2b_rc=$?
echo "-- the Python client (exit $py_rc)"
cat "$clients/python.log"
echo "-- the TypeScript client (exit $ts_rc)"
cat "$clients/ts.log"
echo "-- the E2B SDKs (exit $e2b_rc)"
cat "$clients/e2b.log"
if [ "$py_rc" != 0 ] || [ "$ts_rc" != 0 ] || [ "$e2b_rc" != 0 ]; then
	echo "a client's tests failed (above)" >&2
	exit 1
fi

stage "the release bundles (built in the background since the kubernetes stage)"
# Waited for here: nothing else runs while the benchmarks do.
release_rc=0
wait "$release_build" || release_rc=$?
release_build=""
cat "$bglogs/release-build"
if [ "$release_rc" != 0 ]; then
	echo "building the release failed (above)" >&2
	exit 1
fi

stage "benchmarks (one short pass, side by side in one run)"
# A benchmark that fails fails the run; its whole output is shown then.
# A skipped one is listed with its reason (and fails the run where it
# skipped through a gate on what EXECBOX_REQUIRE names, as a test does).
bench() {
	local t=$SECONDS
	if ! go test -run '^$' -count 1 -json "$@" 2>&1 | go run scripts/testreport.go; then
		echo "benchmark failed: go test $*" >&2
		return 1
	fi
	echo "($((SECONDS - t)) s: go test $*)"
}
# Five calls each: a Pod takes seconds, and the whole suite has an hour (a
# longer pass is `go test -bench` by hand). Not microvm here: under
# software emulation its numbers are the emulator's (seconds a call, 90 s
# of the hour); its Start benchmark below compares a boot with a warm VM.
bench -bench '(Python|Session|Tool)/^(bare|bwrap|docker|gvisor|kubernetes|native)$' -benchtime 5x ./backend/all/
# native-image beside native: an image of the store as the root against
# the host's view.
bench -bench Start -benchtime 100x ./backend/native/
# An image's first use: pull from a registry on loopback, verify, unpack.
bench -bench Pull -benchtime 3x ./internal/host/imagestore/
# A microVM's start: a cold boot against a warm VM from the pool; QEMU's RSS.
bench -bench Start -benchtime 5x ./backend/microvm/
# A sandbox Pod's start: one started for it against a warm one.
bench -bench Start -benchtime 5x ./backend/kubernetes/
# Nothing after this needs the cluster: down now, so that its daemons and
# Pods take no CPU from the benchmarks below and the release test (the
# exit's cleanup finds it down).
if $k8s; then ./scripts/k8s.sh down; fi
bench -bench . -benchtime 5x ./backend/docker/
# A run's engine cost with no event subscriber, one that never reads and
# one that takes 10 ms an event: a slow subscriber must not slow runs.
bench -bench Subscribers -benchtime 2000x ./engine/
# The E2B SDK beside execbox's TypeScript client, both built in the
# clients stage: a new sandbox to its first command's output.
(cd integration/e2b && EXECBOX_BINARY="$clients/execbox" E2B_BENCH_BACKENDS=native,gvisor,docker node bench.mjs) || {
	echo "benchmark failed: integration/e2b/bench.mjs" >&2
	exit 1
}
# execbox bench: one Python function call every way — bare exec, raw bwrap,
# the docker CLI, each backend cold and warm (a pooled sandbox), through
# the library and HTTP — interleaved; calls/s; an idle pooled sandbox's
# memory. Built as a release builds them (static, stripped: a cgo-linked
# init starts ~0.5 ms slower) with execbox-init beside execbox, as a release
# installs it.
benchbin=$(mktemp -d /var/tmp/execbox-bench.XXXXXX)
chmod 711 "$benchbin"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$benchbin/execbox" ./cmd/execbox
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$benchbin/execbox-init" ./cmd/execbox-init
t=$SECONDS
EXECBOX_WORK_ROOT="$benchbin/work" EXECBOX_STATE_DIR="$benchbin/state" "$benchbin/execbox" bench --rounds 6 --rate-time 2s --html "$benchbin/bench.html"
echo "($((SECONDS - t)) s: execbox bench)"
echo "(the chart: $benchbin/bench.html)"

# The release: bundles, image and .deb (built ahead, above), installed,
# upgraded, rolled back and removed by deploy.sh (scratch root, Docker, a
# real systemd) and dpkg. Its own script, so this block merges apart from
# the others. About 2 minutes; the build ahead is ~3 more with a warm Go
# build cache, up to ~9 cold (two architectures compiled, nfpm built from
# the module proxy).
stage "release bundle (scripts/test-release.sh)"
./scripts/test-release.sh --built "$relbuild"
