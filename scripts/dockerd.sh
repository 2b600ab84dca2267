#!/usr/bin/env bash
# Starts or stops a private Docker engine for execbox's tests, next to (never
# instead of) any system dockerd: its own socket, data root, exec root and
# pidfile. No bridge and no iptables rules: the docker backend runs its
# containers with network "none".
#
#   scripts/dockerd.sh start    start it (idempotent) and wait until it answers
#   scripts/dockerd.sh stop     stop it: only the PID in its pidfile
#   scripts/dockerd.sh status   exit 0 when it answers
#   scripts/dockerd.sh env      print the DOCKER_HOST line to export
#
# Override the locations with EXECBOX_DOCKERD_RUN (default /run/execbox-test)
# and EXECBOX_DOCKERD_DATA (default /var/lib/execbox-test/docker).
set -euo pipefail

run=${EXECBOX_DOCKERD_RUN:-/run/execbox-test}
data=${EXECBOX_DOCKERD_DATA:-/var/lib/execbox-test/docker}
sock=$run/docker.sock
pidfile=$run/dockerd.pid
log=$run/dockerd.log
dockerd=${DOCKERD:-/usr/bin/dockerd}
[ -x "$dockerd" ] || dockerd=/usr/sbin/dockerd

# answers reports whether the engine on $sock serves /_ping.
answers() {
	[ -S "$sock" ] || return 1
	python3 - "$sock" <<'EOF' 2>/dev/null
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(2)
s.connect(sys.argv[1])
s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
data = b""
while True:
    b = s.recv(4096)
    if not b:
        break
    data += b
sys.exit(0 if b" 200 " in data.split(b"\r\n")[0] else 1)
EOF
}

# ourpid prints the PID in the pidfile if that process is still a dockerd.
ourpid() {
	[ -f "$pidfile" ] || return 1
	local pid
	pid=$(cat "$pidfile")
	[ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
	case "$(tr '\0' ' ' <"/proc/$pid/cmdline")" in
	*dockerd*"$sock"*) echo "$pid" ;;
	*) return 1 ;;
	esac
}

# config is the engine's daemon.json for this PATH. gVisor, when
# installed, is the runtime "runsc" (docker.runtime: runsc): the first
# runsc in PATH (scripts/test.sh puts a current one there).
# --network=none: gVisor's own loopback-only stack; runsc refuses the
# network namespace Docker 20.10 makes for --network none.
# --oci-seccomp: without it runsc ignores the container's seccomp profile,
# and the docker backend's health refuses the runtime (the runtime
# "runsc-noseccomp" is that mistake, for the test that shows it).
config() {
	local runsc
	runsc=$(command -v runsc || true)
	if [ -n "$runsc" ]; then
		printf '{"runtimes": {"runsc": {"path": "%s", "runtimeArgs": ["--network=none", "--oci-seccomp"]}, "runsc-noseccomp": {"path": "%s", "runtimeArgs": ["--network=none"]}}}\n' "$runsc" "$runsc"
	else
		echo '{}'
	fi
}

start() {
	if ourpid >/dev/null && answers; then
		# One started with another PATH has another runsc: restarted, so
		# the tests never run on a runtime they did not ask for.
		if [ "$(config)" = "$(cat "$run/daemon.json" 2>/dev/null)" ]; then
			echo "dockerd already running (pid $(ourpid)) on unix://$sock"
			return 0
		fi
		echo "dockerd (pid $(ourpid)) runs with another runsc; restarting it"
		stop
	fi
	if [ ! -x "$dockerd" ]; then
		echo "dockerd.sh: $dockerd not found; install docker.io" >&2
		exit 1
	fi
	mkdir -p "$run" "$data"
	chmod 0711 "$run"
	rm -f "$sock"
	config >"$run/daemon.json"
	# setsid: the engine outlives this script, not the caller's session.
	setsid "$dockerd" --config-file "$run/daemon.json" \
		--host "unix://$sock" \
		--data-root "$data" \
		--exec-root "$run/exec" \
		--pidfile "$pidfile" \
		--iptables=false --ip6tables=false --ip-forward=false --ip-masq=false --bridge=none \
		--userland-proxy=false \
		--containerd-namespace execbox-test --containerd-plugins-namespace execbox-test-plugins \
		--log-level warn \
		</dev/null >"$log" 2>&1 &
	local pid=$!
	for _ in $(seq 1 300); do
		if answers; then
			echo "dockerd started (pid $pid) on unix://$sock; log $log"
			return 0
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "dockerd.sh: dockerd exited; last log lines:" >&2
			tail -n 30 "$log" >&2
			exit 1
		fi
		sleep 0.1
	done
	echo "dockerd.sh: dockerd (pid $pid) did not answer on $sock within 30 s; last log lines:" >&2
	tail -n 30 "$log" >&2
	exit 1
}

# unmount_runtime detaches what runtimes left mounted in the exec root once
# the engine is gone: a current runsc pins an empty network namespace
# there (<runtime root>/null-netns) for its next containers to join.
unmount_runtime() {
	local mp
	awk -v root="$run/exec/" 'index($5, root) == 1 { print $5 }' /proc/self/mountinfo | sort -r | while read -r mp; do
		umount -l "$mp" && echo "unmounted $mp"
	done
}

stop() {
	local pid
	if ! pid=$(ourpid); then
		echo "dockerd not running"
		rm -f "$pidfile"
		return 0
	fi
	kill -TERM "$pid"
	for _ in $(seq 1 150); do
		[ -d "/proc/$pid" ] || { echo "dockerd (pid $pid) stopped"; unmount_runtime; return 0; }
		sleep 0.1
	done
	echo "dockerd.sh: dockerd (pid $pid) ignored SIGTERM for 15 s; killing it" >&2
	kill -KILL "$pid" 2>/dev/null || true
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status) answers && echo "dockerd answers on unix://$sock" ;;
env) echo "export DOCKER_HOST=unix://$sock" ;;
*)
	echo "usage: $0 start|stop|status|env" >&2
	exit 2
	;;
esac
