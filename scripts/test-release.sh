#!/usr/bin/env bash
# Tests the release as an operator meets it (issue 19's must-show steps), as
# root, against the private test dockerd (scripts/dockerd.sh; started if it
# is not running, never stopped here):
#
#   1. scripts/release.sh builds two versions: bundles for amd64 and arm64,
#      the image, the .deb; `execbox version` shows the stamps
#   2. shellcheck on every shell script shipped; systemd-analyze verify on
#      the unit
#   3. deploy.sh, systemd mode, in a scratch root (deploy.sh starts the
#      daemon itself): install, status, a run through the server, a refused
#      configuration, upgrade, rollback, uninstall keeping the data
#   4. deploy.sh, docker mode: the image loaded, its healthcheck healthy,
#      runs on native and docker inside the container, upgrade, rollback,
#      uninstall keeping the data
#   5. under a real systemd (a container whose PID 1 is systemd): deploy.sh
#      install with the hardened unit, every backend enforcing a cgroup
#      memory limit, a graceful stop finishing a running request,
#      upgrade, rollback, uninstall; then the .deb: dpkg -i, the stamped
#      version, the service up, an upgrade keeping a changed conffile,
#      dpkg -r keeping the data
#
# Everything it makes lives in one temp dir and in docker objects named
# after this run; both go at exit.
#
# Step 1's builds can be made apart, ahead: `--build DIR` only builds them
# into DIR (scripts/test.sh runs it niced beside a stage that leaves a core
# idle), and `--built DIR` then checks and uses them instead of building.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

# build DIR V1 V2: the two versions' release.sh outputs in DIR/dist1, DIR/dist2.
build() {
	./scripts/release.sh --version "$2" --out "$1/dist1" | sed 's/^/   /'
	./scripts/release.sh --version "$3" --arch amd64 --out "$1/dist2" | sed 's/^/   /'
}
built=''
case "${1:-}" in
--build)
	mkdir -p "$2"
	printf '%s\n' "1.0.0-rel$$.1" "1.0.0-rel$$.2" >"$2/versions"
	build "$2" "1.0.0-rel$$.1" "1.0.0-rel$$.2"
	exit
	;;
--built) built=$2 ;;
'') ;;
*)
	echo "usage: scripts/test-release.sh [--build DIR | --built DIR]" >&2
	exit 2
	;;
esac
[ "$(id -u)" = 0 ] || { echo "test-release.sh: run as root" >&2; exit 2; }

# Needs: shellcheck; systemd for systemd-analyze and the systemd-host fixture,
# which is made of this machine's packages (with bubblewrap and python3,
# which scripts/test.sh installs).
need=()
for pkg in shellcheck systemd bubblewrap python3; do
	dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
	echo "-- installing ${need[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
./scripts/dockerd.sh start >/dev/null
eval "$(./scripts/dockerd.sh env)"
sock=${DOCKER_HOST#unix://}

run=$$
v1=1.0.0-rel$run.1
v2=1.0.0-rel$run.2
if [ -n "$built" ]; then
	{ read -r v1 && read -r v2; } <"$built/versions" || { echo "test-release.sh: $built/versions: not built by --build" >&2; exit 2; }
fi
work=$(mktemp -d /tmp/execbox-release-test.XXXXXX)
containers=()
images=()
cleanup() {
	local rc=$?
	local c
	for c in ${containers[@]+"${containers[@]}"}; do docker rm -f "$c" >/dev/null 2>&1 || true; done
	for c in ${images[@]+"${images[@]}"}; do docker image rm "$c" >/dev/null 2>&1 || true; done
	# Daemons deploy.sh started in the scratch roots, if a step failed
	# before their uninstall.
	local pidf
	for pidf in "$work"/root*/run/execbox/deploy.pid; do
		if [ -f "$pidf" ]; then kill -TERM "$(cat "$pidf")" 2>/dev/null || true; fi
	done
	rm -rf -- "$work"
	exit "$rc"
}
trap cleanup EXIT

fail() {
	echo "test-release.sh: FAIL: $*" >&2
	exit 1
}
step() { echo "-- $*"; }
t0=$SECONDS
lap() { echo "   ($((SECONDS - t0))s)"; }

# memory_limit_run CMD…: CMD --json --explain --backend $backend --memory 64m with a
# program that wants 100 MiB; prints the backend that ran it, the result's
# reason and signal, and what enforced the memory limit. (execbox run exits
# 137 then, as the program did.)
memory_limit_run() {
	local json
	json=$("$@" --json --explain --backend "$backend" --memory 64m -- python3 -c 'x = bytearray(100 << 20)' || true)
	python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["backend"], d["reason"], d.get("signal", ""), "|", d["enforcement"]["memory"]) if "backend" in d else print("no result:", json.dumps(d))' <<<"$json"
}

# killed_at_limit BACKEND LINE: memory_limit_run's LINE says BACKEND ran the
# program and its memory limit ended it (reason memory_limit: a SIGKILL
# alone may be anything's).
killed_at_limit() {
	case $2 in "$1 memory_limit "*) return 0 ;; esac
	return 1
}

# free_port: a TCP port nothing listens on now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# ---- 1. build ---------------------------------------------------------------
step "release.sh: $v1 (amd64, arm64, image, .deb) and $v2 (amd64)"
if [ -n "$built" ]; then
	echo "   built ahead (--build): $built"
	mv "$built/dist1" "$built/dist2" "$work/"
else
	build "$work" "$v1" "$v2"
fi
images+=("execbox:$v1" "execbox:$v2")
(cd "$work/dist1" && sha256sum --quiet -c SHA256SUMS) || fail "dist SHA256SUMS"
for a in amd64 arm64; do
	tar -C "$work/dist1" -xzf "$work/dist1/execbox-$v1-linux-$a.tar.gz"
done
tar -C "$work/dist2" -xzf "$work/dist2/execbox-$v2-linux-amd64.tar.gz"
b1=$work/dist1/execbox-$v1-linux-amd64
b2=$work/dist2/execbox-$v2-linux-amd64
barm=$work/dist1/execbox-$v1-linux-arm64
for f in execbox execbox-init execbox-guest execbox.yaml execbox.service deploy.sh README.md SHA256SUMS image.tar; do
	[ -f "$b1/$f" ] || fail "the amd64 bundle lacks $f"
done
[ ! -e "$barm/image.tar" ] || fail "an arm64 image.tar from amd64 packages"
[ "$(od -An -tu2 -j18 -N2 "$barm/execbox" | tr -d ' ')" = 183 ] || fail "the arm64 execbox is not an aarch64 binary"
"$b1/execbox" version | sed 's/^/   /'
grep -qx "execbox $v1" <<<"$("$b1/execbox" version)" || fail "execbox version does not print $v1"
grep -q "^commit: $(git rev-parse HEAD)" <<<"$("$b1/execbox" version)" || fail "execbox version lacks the commit"
"$b1/execbox" version | grep -Eq '^built: [0-9]{4}-[0-9]{2}-[0-9]{2}T' || fail "execbox version lacks the build date"
file_size() { stat -c %s "$1"; }
echo "   sizes: bundle amd64 $(file_size "$work/dist1/execbox-$v1-linux-amd64.tar.gz"), arm64 $(file_size "$work/dist1/execbox-$v1-linux-arm64.tar.gz"), image.tar $(file_size "$b1/image.tar"), .deb $(file_size "$work/dist1/execbox_${v1}_amd64.deb") bytes"
lap

# ---- 2. static checks -------------------------------------------------------
step "shellcheck; systemd-analyze verify"
shellcheck deploy/deploy.sh deploy/image/entrypoint deploy/image/healthcheck deploy/debian/* \
	scripts/release.sh scripts/test-release.sh
# verify needs the unit's ExecStart to exist: point it at the built binary.
mkdir -p "$work/unit"
sed "s#^ExecStart=/usr/bin/execbox #ExecStart=$b1/execbox #" "$b1/execbox.service" >"$work/unit/execbox.service"
systemd-analyze verify "$work/unit/execbox.service" || fail "systemd-analyze verify execbox.service"
lap

# ---- 3. systemd mode in a scratch root --------------------------------------
step "deploy.sh, systemd mode, scratch root (no systemd: deploy.sh runs the daemon)"
root=$work/root1
port=$(free_port)
url=http://127.0.0.1:$port
mkdir -p "$root/etc/execbox"
# The operator's environment file: the port, a short drain (the shipped 5s
# is exercised under systemd below).
printf 'EXECBOX_SERVER_LISTEN="127.0.0.1:%s"\nEXECBOX_SERVER_DRAIN_DELAY=1s\n' "$port" >"$root/etc/execbox/execbox.env"
"$b1/deploy.sh" --root "$root" install | sed 's/^/   /'
"$b1/deploy.sh" --root "$root" install | sed 's/^/   /' # again: no change
"$b1/deploy.sh" --root "$root" status | sed 's/^/   /'
cli=$root/opt/execbox/current/execbox
out=$("$cli" run --remote "$url" -- python3 -c 'print(6 * 7)')
[ "$out" = 42 ] || fail "a run through the installed server printed $out"
[ -f "$root/var/lib/execbox/audit.db" ] || fail "no audit log in the state dir"
[ -f "$root/etc/execbox/execbox.yaml" ] || fail "no configuration installed"

# A configuration the new version refuses: nothing is replaced.
echo 'EXECBOX_LIMITS_MEMORY=lots' >>"$root/etc/execbox/execbox.env"
if "$b2/deploy.sh" --root "$root" upgrade >"$work/refused.out" 2>&1; then fail "upgrade accepted a bad configuration"; fi
grep -q "does not accept" "$work/refused.out" || fail "upgrade's refusal does not say why: $(cat "$work/refused.out")"
sed -i '/EXECBOX_LIMITS_MEMORY/d' "$root/etc/execbox/execbox.env"
grep -q "^execbox $v1," <<<"$("$b1/deploy.sh" --root "$root" status)" || fail "a refused upgrade changed the version"
# The other architecture's bundle is refused too.
if "$barm/deploy.sh" --root "$root" check >"$work/arch.out" 2>&1; then fail "an arm64 bundle passed the check here"; fi
grep -q "this bundle is for linux/arm64" "$work/arch.out" || fail "the arch refusal: $(cat "$work/arch.out")"

# An upgrade whose new version is not ready in time rolls itself back.
if "$b2/deploy.sh" --root "$root" --timeout 0 upgrade >"$work/norollout.out" 2>&1; then fail "an upgrade that was never ready succeeded"; fi
grep -q "rolling back to $v1" "$work/norollout.out" || fail "no automatic rollback: $(cat "$work/norollout.out")"
"$b1/deploy.sh" --root "$root" --timeout 30 start >/dev/null
grep -qx "execbox $v1" <<<"$("$cli" version)" || fail "the automatic rollback did not bring back $v1"
echo "   an upgrade not ready within --timeout rolled back to $v1 by itself"

"$b2/deploy.sh" --root "$root" upgrade | sed 's/^/   /'
grep -q "^execbox $v2, systemd mode.*previous $v1" <<<"$("$root/opt/execbox/current/deploy.sh" --root "$root" status)" || fail "status after the upgrade"
grep -qx "execbox $v2" <<<"$("$cli" version)" || fail "the installed CLI is not $v2"
[ "$("$cli" run --remote "$url" -- python3 -c 'print(1)')" = 1 ] || fail "a run after the upgrade"
"$root/opt/execbox/current/deploy.sh" --root "$root" rollback | sed 's/^/   /'
grep -qx "execbox $v1" <<<"$("$cli" version)" || fail "rollback did not bring back $v1"
grep -q "^ready: yes" <<<"$("$b1/deploy.sh" --root "$root" status)" || fail "not ready after the rollback"
[ "$("$cli" run --remote "$url" -- python3 -c 'print(2)')" = 2 ] || fail "a run after the rollback"
rows=$("$cli" audit --db "$root/var/lib/execbox/audit.db" --count)
[ "$rows" -ge 3 ] || fail "the audit log has $rows rows, want the runs of every version"
"$root/opt/execbox/current/deploy.sh" --root "$root" uninstall | sed 's/^/   /'
[ ! -e "$root/opt/execbox" ] || fail "uninstall left /opt/execbox"
[ -f "$root/etc/execbox/execbox.yaml" ] || fail "uninstall deleted the configuration"
[ -f "$root/var/lib/execbox/audit.db" ] || fail "uninstall deleted the audit log"
if "$b1/execbox" run --remote "$url" -- true 2>/dev/null; then fail "the server still answers after uninstall"; fi
lap

# ---- 4. docker mode ---------------------------------------------------------
step "deploy.sh, docker mode, on the test dockerd"
root=$work/root2
port=$(free_port)
url=http://127.0.0.1:$port
name=execbox-release-test-$run
containers+=("$name" "$name-previous")
mkdir -p "$root/etc/execbox"
printf 'EXECBOX_SERVER_LISTEN=127.0.0.1:%s\nEXECBOX_SERVER_DRAIN_DELAY=1s\n' "$port" >"$root/etc/execbox/execbox.env"
"$b1/deploy.sh" --root "$root" --mode docker --name "$name" --docker-socket "$sock" install | sed 's/^/   /'
health=
for _ in $(seq 1 60); do
	health=$(docker inspect -f '{{.State.Health.Status}}' "$name")
	[ "$health" = healthy ] && break
	sleep 1
done
[ "$health" = healthy ] || fail "the container's healthcheck says $health"
echo "   container $name: healthy ($(docker inspect -f '{{.Config.Image}}' "$name"))"
# deploy/kubernetes runs the image as uid 65532: its work root's parent.
[ "$(docker run --rm --network none --user 65532:65532 --entrypoint /bin/sh "execbox:$v1" -c 'mkdir /run/execbox-nonroot/work && stat -c %u:%a /run/execbox-nonroot')" = 65532:700 ] ||
	fail "the image has no /run/execbox-nonroot of uid 65532 (deploy/kubernetes' work root)"
cli=$root/opt/execbox/current/execbox
for backend in native bwrap docker; do
	r=$(memory_limit_run "$cli" run --remote "$url")
	echo "   in the container: $backend: $r"
	killed_at_limit "$backend" "$r" || fail "$backend inside the container did not enforce the memory limit: $r"
done
"$b2/deploy.sh" --root "$root" upgrade | sed 's/^/   /'
grep -qx "execbox:$v2" <<<"$(docker inspect -f '{{.Config.Image}}' "$name")" || fail "the container is not $v2 after the upgrade"
docker inspect "$name-previous" >/dev/null || fail "the upgrade kept no previous container"
[ "$("$cli" run --remote "$url" -- python3 -c 'print(3)')" = 3 ] || fail "a run after the docker upgrade"
"$root/opt/execbox/current/deploy.sh" --root "$root" rollback | sed 's/^/   /'
grep -qx "execbox:$v1" <<<"$(docker inspect -f '{{.Config.Image}}' "$name")" || fail "rollback did not bring back execbox:$v1"
"$b1/deploy.sh" --root "$root" status | sed 's/^/   /'
"$root/opt/execbox/current/deploy.sh" --root "$root" uninstall | sed 's/^/   /'
if docker inspect "$name" >/dev/null 2>&1; then fail "uninstall left the container"; fi
[ -f "$root/var/lib/execbox/audit.db" ] || fail "docker uninstall deleted the audit log"
lap

# ---- 5. a real systemd ------------------------------------------------------
step "under systemd as PID 1 (a container): deploy.sh and the .deb"
host=execbox-test-systemd-host:rel-$run
images+=("$host")
go run ./deploy/mkimage -flavor systemd-host -tag "$host" -out "$work/systemd-host.tar" | sed 's/^/   /'
docker load -i "$work/systemd-host.tar" >/dev/null
# Docker mounts the cgroup hierarchies read-only; in the container's own
# (private) cgroup namespace they may be made writable, as systemd and the
# backends' limits need. Never the host's: other execbox processes there
# must not meet these cgroups.
cat >"$work/init.sh" <<'EOF'
while read -r _ _ _ _ mp _ rest; do
	case "$mp $rest" in
	"/sys/fs/cgroup "* | *" - cgroup "* | *" - cgroup2 "*) mount -o remount,rw,bind "$mp" ;;
	esac
done </proc/self/mountinfo
exec /lib/systemd/systemd
EOF
extra=()
if command -v runsc >/dev/null; then extra+=(-v "$(command -v runsc):/usr/bin/runsc:ro"); fi
# start_host NAME: a fresh systemd host, up.
start_host() {
	containers+=("$1")
	docker run -d --name "$1" --network none --cgroupns private \
		--cap-add SYS_ADMIN --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
		--security-opt systempaths=unconfined --tmpfs /run --tmpfs /run/lock --tmpfs /tmp \
		-v "$work/init.sh:/init.sh:ro" -v "$sock:/var/run/docker.sock" ${extra[@]+"${extra[@]}"} \
		--entrypoint /bin/sh "$host" /init.sh >/dev/null
	local s=
	for _ in $(seq 1 100); do
		s=$(docker exec "$1" systemctl is-system-running 2>/dev/null || true)
		case $s in running | degraded) return 0 ;; esac
		sleep 0.2
	done
	fail "systemd in $1 did not come up ($s)"
}
sh1=execbox-release-systemd-$run
start_host "$sh1"
docker cp "$b1" "$sh1:/root/b1"
docker cp "$b2" "$sh1:/root/b2"
in1() { docker exec "$sh1" "$@"; }
in1 /root/b1/deploy.sh install | sed 's/^/   /'
in1 systemd-analyze verify /etc/systemd/system/execbox.service || fail "systemd-analyze verify of deploy.sh's unit"
in1 systemctl is-active --quiet execbox || fail "execbox.service is not active"
in1 /opt/execbox/current/deploy.sh status | sed 's/^/   /'
backends=(native bwrap docker)
if command -v runsc >/dev/null; then backends+=(gvisor); fi
for backend in "${backends[@]}"; do
	r=$(memory_limit_run in1 execbox run --remote http://127.0.0.1:8080)
	echo "   under the unit: $backend: $r"
	killed_at_limit "$backend" "$r" || fail "$backend under the hardened unit did not enforce the memory limit: $r"
done
# Graceful stop: a running request finishes, /readyz says 503 meanwhile.
# shellcheck disable=SC2016 # run by the container's bash
in1 bash -c 'execbox run --remote http://127.0.0.1:8080 --timeout 20s -- sh -c "sleep 4; echo finished" >/tmp/drain.out 2>&1 &
	sleep 1
	systemctl stop execbox & stop=$!
	sleep 1
	exec 3<>/dev/tcp/127.0.0.1/8080 && printf "GET /readyz HTTP/1.0\r\n\r\n" >&3 && head -n 1 <&3 >/tmp/readyz.out
	wait $stop
	wait'
in1 grep -qx finished /tmp/drain.out || fail "the request running at stop did not finish: $(in1 cat /tmp/drain.out)"
in1 grep -q " 503 " /tmp/readyz.out || fail "/readyz while draining: $(in1 cat /tmp/readyz.out)"
echo "   graceful stop: the running request finished; /readyz answered $(in1 cat /tmp/readyz.out | tr -d '\r')"
in1 /opt/execbox/current/deploy.sh start | sed 's/^/   /'
in1 /root/b2/deploy.sh upgrade | sed 's/^/   /'
grep -qx "execbox $v2" <<<"$(in1 execbox version)" || fail "not $v2 after the upgrade under systemd"
in1 /opt/execbox/current/deploy.sh rollback | sed 's/^/   /'
grep -qx "execbox $v1" <<<"$(in1 execbox version)" || fail "not $v1 after the rollback under systemd"
in1 /opt/execbox/current/deploy.sh uninstall | sed 's/^/   /'
in1 test -f /var/lib/execbox/audit.db || fail "uninstall under systemd deleted the audit log"
in1 test ! -e /etc/systemd/system/execbox.service || fail "uninstall left the unit"

step "the .deb under systemd"
docker cp "$work/dist1/execbox_${v1}_amd64.deb" "$sh1:/root/"
docker cp "$work/dist2/execbox_${v2}_amd64.deb" "$sh1:/root/"
in1 dpkg -i "/root/execbox_${v1}_amd64.deb" | sed 's/^/   /'
in1 execbox version | sed 's/^/   /'
grep -qx "execbox $v1" <<<"$(in1 execbox version)" || fail "the .deb's execbox version is not $v1"
in1 systemd-analyze verify /lib/systemd/system/execbox.service || fail "systemd-analyze verify of the .deb's unit"
in1 getent passwd execbox >/dev/null || fail "the .deb made no user execbox"
[ "$(in1 stat -c %G /etc/execbox/execbox.yaml)" = execbox ] || fail "/etc/execbox/execbox.yaml is not group execbox"
# shellcheck disable=SC2016 # dpkg-query's format
grep -q /etc/execbox/execbox.yaml <<<"$(in1 dpkg-query -W -f '${Conffiles}\n' execbox)" || fail "execbox.yaml is no conffile"
ready=
for _ in $(seq 1 50); do
	if in1 bash -c 'exec 3<>/dev/tcp/127.0.0.1/8080 && printf "GET /readyz HTTP/1.0\r\n\r\n" >&3 && head -n 1 <&3 | grep -q " 200 "' 2>/dev/null; then
		ready=1
		break
	fi
	sleep 0.2
done
[ -n "$ready" ] || fail "the .deb's service is not ready"
[ "$(in1 execbox run --remote http://127.0.0.1:8080 -- python3 -c 'print(4)')" = 4 ] || fail "a run through the .deb's service"
# The README's docker-only drop-in: the daemon as the user execbox, with
# the socket's group; systemd hands it the state directory.
in1 groupadd -g "$(stat -c %g "$sock")" docker
in1 mkdir -p /etc/systemd/system/execbox.service.d
printf '[Service]\nUser=execbox\nGroup=execbox\nSupplementaryGroups=docker\nEnvironment=EXECBOX_BACKEND=docker\n' |
	docker exec -i "$sh1" tee /etc/systemd/system/execbox.service.d/docker-only.conf >/dev/null
in1 systemctl daemon-reload
in1 systemctl restart execbox
[ "$(in1 stat -c %U "/proc/$(in1 systemctl show -p MainPID --value execbox)")" = execbox ] || fail "the drop-in did not run execbox as the user execbox"
[ "$(in1 stat -c %U /var/lib/execbox)" = execbox ] || fail "the state directory is not the user execbox's under the drop-in"
backend=docker
r=$(memory_limit_run in1 execbox run --remote http://127.0.0.1:8080)
echo "   docker-only drop-in (User=execbox): $r"
killed_at_limit "$backend" "$r" || fail "the docker backend as the user execbox: $r"
in1 rm -r /etc/systemd/system/execbox.service.d
in1 systemctl daemon-reload
in1 systemctl restart execbox

in1 sed -i 's/^  #timeout: 15s/  timeout: 20s/' /etc/execbox/execbox.yaml
in1 env DEBIAN_FRONTEND=noninteractive dpkg -i --force-confold "/root/execbox_${v2}_amd64.deb" | sed 's/^/   /'
grep -qx "execbox $v2" <<<"$(in1 execbox version)" || fail "dpkg -i did not upgrade to $v2"
in1 grep -q '^  timeout: 20s' /etc/execbox/execbox.yaml || fail "the upgrade replaced the changed conffile"
in1 systemctl is-active --quiet execbox || fail "execbox.service is not active after the package upgrade"
in1 dpkg -r execbox | sed 's/^/   /'
in1 test -f /etc/execbox/execbox.yaml || fail "dpkg -r deleted the configuration"
in1 test -f /var/lib/execbox/audit.db || fail "dpkg -r deleted the audit log"
lap
echo "== release: all steps passed in $((SECONDS - t0))s"
