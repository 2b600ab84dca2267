#!/usr/bin/env bash
# deploy.sh — installs and runs execbox from this release bundle, on the
# target machine, offline. Two modes:
#
#   systemd  the static binary under /opt/execbox and the unit
#            execbox.service (on a host or chroot where systemd is not
#            running, or under --root, deploy.sh starts and stops the
#            daemon itself)
#   docker   the bundle's image.tar, loaded into the local engine and run
#            as the container "execbox" with host networking
#
# Commands:
#   install     install this bundle and start it (again: no change)
#   upgrade     install this bundle in place of the running version; keep
#               that one for rollback; roll back by itself when the new one
#               does not become ready
#   rollback    swap the current and the previous version (again: undo)
#   start | stop | restart
#   status      version, mode, service state, /readyz (exit 0 when ready)
#   logs [-f]   the service's log
#   uninstall   remove the program; /etc/execbox and /var/lib/execbox
#               (configuration, audit log) stay unless --purge
#   check       verify this bundle (checksums, architecture, configuration)
#
# Options:
#   --mode systemd|docker  install: how to run it (default systemd)
#   --root DIR             work on a scratch root instead of / (tests): the
#                          files go below DIR; systemd mode starts the daemon
#                          itself, with its state, work and audit paths
#                          moved below DIR; docker mode mounts DIR's
#                          configuration and data into the container
#   --privileges namespaces|none
#                          docker mode: namespaces (default) lets the
#                          native and bwrap backends work inside the
#                          container: CAP_SYS_ADMIN, no seccomp or AppArmor
#                          profile, an unmasked /proc and a private, writable
#                          cgroup namespace; none adds nothing
#   --docker-socket PATH   docker mode: mount the engine's socket so that the
#                          docker backend works; this grants root on the host
#   --name NAME            docker mode: the container's name (default execbox)
#   --timeout SECONDS      how long to wait for /readyz (default 90)
#   --purge                uninstall: delete the configuration and data too
#   -f                     logs: follow
#
# Layout: /opt/execbox/releases/<version>/ (binary, unit, config default,
# README, deploy.sh), /opt/execbox/current and /opt/execbox/previous
# (symlinks), /usr/local/bin/execbox, /etc/systemd/system/execbox.service,
# /etc/execbox/{execbox.yaml,execbox.env}, /var/lib/execbox. deploy.sh
# removes only what it made: directories it creates carry a marker file.
set -euo pipefail

readonly marker=.execbox-deploy
bundle=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

root=/
mode=
privileges=
docker_socket=
name=
timeout=90
purge=0
follow=0
cmd=

die() {
	echo "deploy.sh: $*" >&2
	exit 1
}
say() { echo "deploy.sh: $*"; }

usage() {
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
	exit "${1:-2}"
}

while [ $# -gt 0 ]; do
	case $1 in
	--mode) mode=${2:?--mode needs a value}; shift ;;
	--mode=*) mode=${1#*=} ;;
	--root) root=${2:?--root needs a directory}; shift ;;
	--root=*) root=${1#*=} ;;
	--privileges) privileges=${2:?--privileges needs a value}; shift ;;
	--privileges=*) privileges=${1#*=} ;;
	--docker-socket) docker_socket=${2:?--docker-socket needs a path}; shift ;;
	--docker-socket=*) docker_socket=${1#*=} ;;
	--name) name=${2:?--name needs a value}; shift ;;
	--name=*) name=${1#*=} ;;
	--timeout) timeout=${2:?--timeout needs seconds}; shift ;;
	--timeout=*) timeout=${1#*=} ;;
	--purge) purge=1 ;;
	-f | --follow) follow=1 ;;
	-h | --help | help) usage 0 ;;
	-*) die "unknown option $1 (see deploy.sh --help)" ;;
	*)
		[ -z "$cmd" ] || die "one command at a time ($cmd, $1)"
		cmd=$1
		;;
	esac
	shift
done
[ -n "$cmd" ] || usage
case $timeout in '' | *[!0-9]*) die "--timeout wants whole seconds, not $timeout" ;; esac

# Paths on the target, and where they are under --root.
case $root in /*) ;; *) die "--root wants an absolute path, not $root" ;; esac
root=${root%/}
readonly root prefix=$root/opt/execbox
readonly etc=$root/etc/execbox state=$root/var/lib/execbox runtime=$root/run/execbox
readonly conf=$etc/execbox.yaml envfile=$etc/execbox.env
readonly unit=$root/etc/systemd/system/execbox.service
readonly link=$root/usr/local/bin/execbox
readonly deployconf=$prefix/deploy.conf
readonly pidfile=$runtime/deploy.pid logfile=$root/var/log/execbox/execbox.log
# What the installed unit runs, as a path on the target.
readonly target_bin=/opt/execbox/current/execbox

[ "$(id -u)" = 0 ] || [ -n "$root" ] || die "run as root"

# ---- small helpers ----------------------------------------------------------

# has_marker DIR: deploy.sh made DIR.
has_marker() { [ -f "$1/$marker" ]; }

# make_dir DIR MODE [GROUP]: create DIR if missing, marking it as ours.
make_dir() {
	local dir=$1 dmode=$2 group=${3:-root}
	if [ ! -d "$dir" ]; then
		mkdir -p "$dir"
		: >"$dir/$marker"
		chmod "$dmode" "$dir"
		if [ -z "$root" ] && getent group "$group" >/dev/null; then chgrp "$group" "$dir"; fi
	fi
}

# remove_ours DIR: rm -r DIR only when deploy.sh made it.
remove_ours() {
	local dir=$1
	[ -e "$dir" ] || return 0
	if has_marker "$dir"; then
		rm -rf -- "$dir"
	else
		say "leaving $dir: deploy.sh did not create it"
	fi
}

# conf_get KEY: a value of deploy.conf.
conf_get() {
	[ -f "$deployconf" ] || return 0
	sed -n "s/^$1=//p" "$deployconf" | tail -n 1
}

write_deployconf() {
	local tmp=$deployconf.tmp
	{
		echo "# written by deploy.sh; read by its later commands"
		echo "mode=$mode"
		echo "name=$name"
		echo "privileges=$privileges"
		echo "docker_socket=$docker_socket"
		echo "docker_host=${DOCKER_HOST:-}"
	} >"$tmp"
	mv -f "$tmp" "$deployconf"
}

# load_installed: the mode and options install chose.
load_installed() {
	[ -f "$deployconf" ] || return 1
	local m
	m=$(conf_get mode)
	if [ -n "$mode" ] && [ "$mode" != "$m" ]; then
		die "execbox is installed in $m mode, not $mode; uninstall first to switch"
	fi
	mode=$m
	name=${name:-$(conf_get name)}
	privileges=${privileges:-$(conf_get privileges)}
	docker_socket=${docker_socket:-$(conf_get docker_socket)}
	if [ -z "${DOCKER_HOST:-}" ] && [ -n "$(conf_get docker_host)" ]; then
		DOCKER_HOST=$(conf_get docker_host)
		export DOCKER_HOST
	fi
	return 0
}

defaults() {
	mode=${mode:-systemd}
	name=${name:-execbox}
	case $mode in
	systemd)
		privileges=''
		docker_socket=''
		;;
	docker)
		privileges=${privileges:-namespaces}
		case $privileges in namespaces | none) ;; *) die "--privileges is namespaces or none, not $privileges" ;; esac
		;;
	*) die "--mode is systemd or docker, not $mode" ;;
	esac
}

# systemd_running: systemctl can manage the unit (not under --root).
systemd_running() { [ -z "$root" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null; }

# uname_arch: this machine as Go names architectures.
uname_arch() {
	case $(uname -m) in
	x86_64 | amd64) echo amd64 ;;
	aarch64 | arm64) echo arm64 ;;
	*) uname -m ;;
	esac
}

# elf_arch FILE: the architecture an ELF binary is built for.
elf_arch() {
	local magic machine
	magic=$(od -An -c -N4 "$1" | tr -d ' ')
	[ "$magic" = '177ELF' ] || { echo "not-elf"; return; }
	machine=$(od -An -tu2 -j18 -N2 "$1" | tr -d ' ')
	case $machine in
	62) echo amd64 ;;
	183) echo arm64 ;;
	*) echo "elf-machine-$machine" ;;
	esac
}

# bin_version BIN: "1.2.0" from `BIN version`.
bin_version() { "$1" version | sed -n '1s/^execbox //p'; }

# read_env: the KEY=VALUE lines of execbox.env (systemd's EnvironmentFile
# syntax: comments, blank lines, optional quotes) into env_pairs.
env_pairs=()
read_env() {
	env_pairs=()
	[ -f "$envfile" ] || return 0
	local line k v n=0
	while IFS= read -r line || [ -n "$line" ]; do
		n=$((n + 1))
		[[ $line =~ ^[[:space:]]*(#.*)?$ ]] && continue
		[[ $line =~ ^[[:space:]]*(export[[:space:]]+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$ ]] ||
			die "$envfile:$n: want KEY=VALUE"
		k=${BASH_REMATCH[2]} v=${BASH_REMATCH[3]}
		if [[ $v =~ ^\"(.*)\"$ ]] || [[ $v =~ ^\'(.*)\'$ ]]; then v=${BASH_REMATCH[1]}; fi
		env_pairs+=("$k=$v")
	done <"$envfile"
}

# execbox_cfg BIN CONF KEY: the effective value of KEY for the daemon (file
# plus execbox.env), as `execbox config print` shows it.
execbox_cfg() {
	local out key value v=
	read_env
	out=$(env ${env_pairs[@]+"${env_pairs[@]}"} "$1" config print --config "$2")
	while read -r key value _; do
		if [ "$key" = "$3" ]; then v=$value; fi
	done <<<"$out"
	[ "$v" != '""' ] || v=
	echo "$v"
}

# probe_ready HOST:PORT: GET /readyz answers 200.
probe_ready() {
	local listen=$1 host port
	port=${listen##*:}
	host=${listen%:*}
	host=${host#[}
	host=${host%]}
	case $host in '' | 0.0.0.0) host=127.0.0.1 ;; '::') host=::1 ;; esac
	# shellcheck disable=SC2016 # expanded by the inner bash
	timeout 5 bash -c 'exec 3<>"/dev/tcp/$0/$1" || exit 1
		printf "GET /readyz HTTP/1.0\r\nHost: %s\r\n\r\n" "$0" >&3
		IFS= read -r line <&3 || exit 1
		case $line in "HTTP/1."?" 200 "*) exit 0 ;; esac
		exit 1' "$host" "$port" 2>/dev/null
}

current_version() {
	local t
	t=$(readlink "$prefix/current" 2>/dev/null) || return 0
	basename "$t"
}
previous_version() {
	local t
	t=$(readlink "$prefix/previous" 2>/dev/null) || return 0
	basename "$t"
}

# ---- the bundle -------------------------------------------------------------

bundle_version=
# check_bundle: checksums, architecture, the binary runs, the configuration
# the daemon will read loads with this version. Changes nothing.
check_bundle() {
	local f
	for f in execbox execbox-init execbox-guest execbox.yaml execbox.service deploy.sh SHA256SUMS; do
		[ -f "$bundle/$f" ] || die "$bundle is not a release bundle: $f is missing"
	done
	if [ "$mode" = docker ]; then
		[ -f "$bundle/image.tar" ] || die "$bundle has no image.tar (built without one); use --mode systemd"
	fi
	(cd "$bundle" && sha256sum --quiet --check --ignore-missing SHA256SUMS) || die "checksums in $bundle/SHA256SUMS do not match"
	local want have
	want=$(uname_arch)
	have=$(elf_arch "$bundle/execbox")
	[ "$have" = "$want" ] || die "this bundle is for linux/$have; this machine is linux/$want"
	bundle_version=$(bin_version "$bundle/execbox") || die "$bundle/execbox does not run"
	[ -n "$bundle_version" ] || die "$bundle/execbox version printed no version"
	local c=$conf
	[ -f "$c" ] || c=$bundle/execbox.yaml
	local out
	read_env
	if ! out=$(env ${env_pairs[@]+"${env_pairs[@]}"} "$bundle/execbox" config print --config "$c" 2>&1 >/dev/null); then
		die "execbox $bundle_version does not accept $c (with $envfile): $out"
	fi
	say "bundle $bundle_version (linux/$have) verified; configuration $c accepted"
}

# stage_release: copy the bundle (without image.tar) to releases/<version>.
stage_release() {
	local dest=$prefix/releases/$bundle_version
	if [ -d "$dest" ]; then
		if has_marker "$dest" && cmp -s "$dest/execbox" "$bundle/execbox"; then
			return 0
		fi
		die "$dest exists and differs from this bundle; remove it or bump the version"
	fi
	make_dir "$prefix" 0755
	make_dir "$prefix/releases" 0755
	local tmp=$dest.partial
	if [ -e "$tmp" ]; then
		# Left by an interrupted run of deploy.sh, else not ours.
		has_marker "$tmp" || die "$tmp exists and was not made by deploy.sh"
		rm -rf -- "$tmp"
	fi
	mkdir -p "$tmp"
	: >"$tmp/$marker"
	local f
	for f in execbox execbox-init execbox-guest execbox.yaml execbox.service deploy.sh README.md SHA256SUMS; do
		[ -f "$bundle/$f" ] && cp -p "$bundle/$f" "$tmp/$f"
	done
	mv -T "$tmp" "$dest"
}

# set_link NAME VERSION: point releases/NAME at VERSION, atomically.
set_link() {
	local lname=$1 v=$2
	if [ -z "$v" ]; then
		rm -f "$prefix/$lname"
		return
	fi
	ln -sfn "releases/$v" "$prefix/.$lname.new"
	mv -T "$prefix/.$lname.new" "$prefix/$lname"
}

# prune: keep only the current and the previous release.
prune() {
	local cur prev d
	cur=$(current_version)
	prev=$(previous_version)
	for d in "$prefix"/releases/*/; do
		[ -d "$d" ] || continue
		d=${d%/}
		case $(basename "$d") in "$cur" | "$prev") continue ;; esac
		if has_marker "$d"; then
			rm -rf -- "$d"
			if [ "$mode" = docker ]; then docker image rm "execbox:$(basename "$d")" >/dev/null 2>&1 || true; fi
		fi
	done
}

# ---- host setup (both modes) ------------------------------------------------

setup_host() {
	if [ -z "$root" ] && ! getent group execbox >/dev/null; then
		groupadd --system execbox
	fi
	if [ -z "$root" ] && ! getent passwd execbox >/dev/null; then
		useradd --system --gid execbox --home-dir /var/lib/execbox --no-create-home \
			--shell /usr/sbin/nologin --comment "execbox sandbox server" execbox
	fi
	make_dir "$etc" 0750 execbox
	make_dir "$state" 0750 execbox
	if [ ! -f "$conf" ]; then
		install -m 0640 "$bundle/execbox.yaml" "$conf"
		if [ -z "$root" ]; then chgrp execbox "$conf"; fi
		say "installed the default configuration $conf"
	elif ! cmp -s "$bundle/execbox.yaml" "$conf"; then
		install -m 0640 "$bundle/execbox.yaml" "$conf.dist"
		say "kept $conf; this version's default is in $conf.dist"
	fi
	if [ ! -f "$envfile" ]; then
		(
			umask 077
			printf '%s\n' "# Environment of execbox serve (KEY=VALUE), e.g. the API token:" \
				"# EXECBOX_TOKEN=<secret>" "# EXECBOX_LOG_LEVEL=debug" >"$envfile"
		)
	fi
}

# link_cli: /usr/local/bin/execbox → the current release, unless something
# else is there.
link_cli() {
	mkdir -p "$(dirname "$link")"
	if [ -e "$link" ] || [ -L "$link" ]; then
		case $(readlink "$link" || true) in
		/opt/execbox/*) ;;
		*)
			say "leaving $link: not deploy.sh's"
			return 0
			;;
		esac
	fi
	ln -sfn "$target_bin" "$link"
}

# ---- systemd mode -----------------------------------------------------------

# install_unit: the current release's unit, running the current binary.
install_unit() {
	local src=$prefix/current/execbox.service tmp=$unit.tmp
	mkdir -p "$(dirname "$unit")"
	{
		echo "# Installed by execbox's deploy.sh from $src; deploy.sh uninstall removes it."
		sed -e "s#^ExecStart=/usr/bin/execbox #ExecStart=$target_bin #" "$src"
	} >"$tmp"
	grep -q "^ExecStart=$target_bin " "$tmp" || die "$src has no ExecStart=/usr/bin/execbox line to point at $target_bin"
	if cmp -s "$tmp" "$unit"; then
		rm -f "$tmp"
		return 0
	fi
	mv -f "$tmp" "$unit"
	if systemd_running; then systemctl daemon-reload; fi
}

# direct_pid: the PID of the daemon deploy.sh started itself, if it runs.
direct_pid() {
	[ -f "$pidfile" ] || return 1
	local pid
	pid=$(cat "$pidfile")
	[ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
	case $(tr '\0' ' ' <"/proc/$pid/cmdline") in
	*"$prefix/"*" serve "*) echo "$pid" ;;
	*) return 1 ;;
	esac
}

# direct_start: no systemd to ask: run the unit's command under setsid,
# with execbox.env, and under --root the state, work and audit paths moved
# below the root.
direct_start() {
	if direct_pid >/dev/null; then return 0; fi
	local bin=$prefix/current/execbox k v
	read_env
	local extra=()
	if [ -n "$root" ]; then
		for k in state_dir work_root audit.path; do
			v=$(execbox_cfg "$bin" "$conf" "$k")
			[ -n "$v" ] || continue
			extra+=("EXECBOX_$(echo "$k" | tr '[:lower:].' '[:upper:]_')=$root$v")
		done
	fi
	mkdir -p "$(dirname "$logfile")" "$runtime"
	chmod 0711 "$runtime"
	env ${env_pairs[@]+"${env_pairs[@]}"} ${extra[@]+"${extra[@]}"} \
		setsid "$bin" serve --config "$conf" </dev/null >>"$logfile" 2>&1 &
	echo $! >"$pidfile"
}

direct_stop() {
	local pid
	pid=$(direct_pid) || {
		rm -f "$pidfile"
		return 0
	}
	kill -TERM "$pid"
	# As the unit's TimeoutStopSec: the drain and shutdown timeouts fit.
	local _
	for _ in $(seq 1 600); do
		[ -d "/proc/$pid" ] || break
		sleep 0.1
	done
	if [ -d "/proc/$pid" ]; then
		say "execbox (pid $pid) did not stop within 60 s; killing it"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$pidfile"
}

svc_start() {
	case $mode in
	systemd)
		if systemd_running; then systemctl start execbox.service; else direct_start; fi
		;;
	docker) docker_start ;;
	esac
}

svc_stop() {
	case $mode in
	systemd)
		if systemd_running; then systemctl stop execbox.service; else direct_stop; fi
		;;
	docker) docker stop -t 60 "$name" >/dev/null 2>&1 || true ;;
	esac
}

# svc_running: the service or container is up (ready or not).
svc_running() {
	case $mode in
	systemd)
		if systemd_running; then systemctl is-active --quiet execbox.service; else direct_pid >/dev/null; fi
		;;
	docker) [ "$(docker inspect -f '{{.State.Running}}' "$name" 2>/dev/null)" = true ] ;;
	esac
}

# ---- docker mode ------------------------------------------------------------

# docker_arch: the engine's architecture as Go names it.
docker_arch() {
	case $(docker info -f '{{.Architecture}}') in
	x86_64 | amd64) echo amd64 ;;
	aarch64 | arm64) echo arm64 ;;
	*) docker info -f '{{.Architecture}}' ;;
	esac
}

# load_image: image.tar into the engine as execbox:<version>; checked.
load_image() {
	local ref=execbox:$bundle_version
	docker load -i "$bundle/image.tar" >/dev/null || die "docker load -i $bundle/image.tar failed"
	docker image inspect "$ref" >/dev/null 2>&1 || die "image.tar did not hold $ref"
	local arch engine
	arch=$(docker image inspect -f '{{.Architecture}}' "$ref")
	engine=$(docker_arch)
	[ "$arch" = "$engine" ] || die "image $ref is linux/$arch; the engine is linux/$engine"
	# The configuration, as the new image will read it.
	local out
	if ! out=$(docker run --rm --network none --entrypoint /usr/bin/execbox --env-file "$(docker_env_file)" \
		-v "$etc:/etc/execbox:ro" "$ref" config print --config /etc/execbox/execbox.yaml 2>&1 >/dev/null); then
		die "image $ref does not accept $conf: $out"
	fi
}

# docker_env_file: execbox.env normalized (quotes removed, as systemd reads
# it) for docker run --env-file.
docker_env_file() {
	local f=$prefix/container.env
	make_dir "$prefix" 0755
	read_env
	(
		umask 077
		: >"$f"
		if [ ${#env_pairs[@]} -gt 0 ]; then printf '%s\n' "${env_pairs[@]}" >"$f"; fi
	)
	echo "$f"
}

# docker_create NAME VERSION: the container of one version, not started.
docker_create() {
	local cname=$1 v=$2 args
	args=(create --name "$cname"
		--label io.execbox.deploy=1 --label "io.execbox.version=$v"
		--restart unless-stopped --network host --stop-timeout 60
		--env-file "$(docker_env_file)"
		-v "$etc:/etc/execbox:ro" -v "$state:/var/lib/execbox")
	if [ "$privileges" = namespaces ]; then
		args+=(--cap-add SYS_ADMIN --security-opt seccomp=unconfined --security-opt apparmor=unconfined
			--security-opt systempaths=unconfined --cgroupns private)
	fi
	if [ -n "$docker_socket" ]; then
		[ -S "$docker_socket" ] || die "--docker-socket $docker_socket is not a socket"
		args+=(-v "$docker_socket:/var/run/docker.sock")
	fi
	case $(docker info -f '{{.LoggingDriver}}') in
	json-file | local) args+=(--log-opt max-size=20m --log-opt max-file=5) ;;
	esac
	docker "${args[@]}" "execbox:$v" >/dev/null
}

ours() { [ "$(docker inspect -f '{{index .Config.Labels "io.execbox.deploy"}}' "$1" 2>/dev/null)" = 1 ]; }
exists() { docker inspect "$1" >/dev/null 2>&1; }

docker_start() {
	exists "$name" || docker_create "$name" "$(current_version)"
	docker start "$name" >/dev/null
}

# docker_swap: "$name" ↔ "$name-previous".
docker_swap() {
	local tmp=$name-swap-$$
	docker rename "$name" "$tmp"
	if exists "$name-previous"; then docker rename "$name-previous" "$name"; fi
	docker rename "$tmp" "$name-previous"
}

# ---- readiness --------------------------------------------------------------

# wait_ready: /readyz at the configured address answers 200 within
# --timeout seconds; in docker mode the container must not be unhealthy.
wait_ready() {
	local listen deadline
	listen=$(execbox_cfg "$prefix/current/execbox" "$conf" server.listen)
	deadline=$((SECONDS + timeout))
	while [ $SECONDS -lt $deadline ]; do
		if probe_ready "$listen"; then
			say "execbox $(current_version) is ready on $listen"
			return 0
		fi
		if ! svc_running; then
			say "execbox $(current_version) is not running"
			return 1
		fi
		sleep 0.5
	done
	say "execbox $(current_version) did not answer /readyz on $listen within ${timeout}s"
	return 1
}

# ---- commands ---------------------------------------------------------------

cmd_check() {
	load_installed || true
	defaults
	check_bundle
}

cmd_install() {
	if load_installed; then
		local cur
		cur=$(current_version)
		defaults
		check_bundle
		if [ "$cur" != "$bundle_version" ]; then
			die "execbox $cur is installed; use upgrade to go to $bundle_version"
		fi
		say "execbox $cur is already installed ($mode mode); making sure it runs"
		setup_host
		link_cli
		if [ "$mode" = systemd ]; then install_unit; fi
		svc_running || svc_start
		wait_ready
		return
	fi
	defaults
	if [ "$mode" = systemd ] && [ -z "$root" ] && command -v dpkg-query >/dev/null &&
		dpkg-query -W -f '${Status}' execbox 2>/dev/null | grep -q ' installed'; then
		die "the Debian package execbox is installed; remove it first (its data stays) or upgrade the package"
	fi
	if [ "$mode" = docker ]; then
		command -v docker >/dev/null || die "docker mode needs the docker CLI and a running engine"
		if exists "$name"; then die "a container named $name exists already and was not made by deploy.sh"; fi
	fi
	check_bundle
	setup_host
	[ "$mode" != docker ] || load_image
	stage_release
	set_link current "$bundle_version"
	write_deployconf
	link_cli
	case $mode in
	systemd)
		install_unit
		if systemd_running; then systemctl enable --quiet execbox.service; fi
		;;
	docker) docker_create "$name" "$bundle_version" ;;
	esac
	svc_start
	wait_ready || die "installed, but not ready: see deploy.sh status and deploy.sh logs"
	say "installed execbox $bundle_version in $mode mode"
}

cmd_upgrade() {
	load_installed || die "execbox is not installed; use install"
	defaults
	check_bundle
	local old
	old=$(current_version)
	if [ "$old" = "$bundle_version" ]; then
		say "execbox $old is installed already"
		svc_running || svc_start
		wait_ready
		return
	fi
	[ "$mode" != docker ] || load_image
	setup_host
	stage_release
	write_deployconf # options given now (--privileges, --docker-socket) stay
	say "upgrading execbox $old to $bundle_version"
	case $mode in
	systemd)
		set_link previous "$old"
		set_link current "$bundle_version"
		install_unit
		if systemd_running; then systemctl restart execbox.service; else
			direct_stop
			direct_start
		fi
		;;
	docker)
		docker stop -t 60 "$name" >/dev/null 2>&1 || true
		if exists "$name-previous"; then
			ours "$name-previous" || die "$name-previous was not made by deploy.sh"
			docker rm -f "$name-previous" >/dev/null
		fi
		docker rename "$name" "$name-previous"
		set_link previous "$old"
		set_link current "$bundle_version"
		docker_create "$name" "$bundle_version"
		docker start "$name" >/dev/null
		;;
	esac
	if ! wait_ready; then
		say "rolling back to $old"
		do_rollback
		die "upgrade to $bundle_version failed; execbox $(current_version) runs again"
	fi
	prune
	say "upgraded execbox $old to $bundle_version; deploy.sh rollback goes back"
}

do_rollback() {
	local cur prev
	cur=$(current_version)
	prev=$(previous_version)
	if [ -z "$prev" ] || [ ! -d "$prefix/releases/$prev" ]; then
		die "no previous version to roll back to"
	fi
	case $mode in
	systemd)
		set_link current "$prev"
		set_link previous "$cur"
		install_unit
		if systemd_running; then systemctl restart execbox.service; else
			direct_stop
			direct_start
		fi
		;;
	docker)
		exists "$name-previous" || docker_create "$name-previous" "$prev"
		docker stop -t 60 "$name" >/dev/null 2>&1 || true
		docker_swap
		set_link current "$prev"
		set_link previous "$cur"
		docker start "$name" >/dev/null
		;;
	esac
}

cmd_rollback() {
	load_installed || die "execbox is not installed"
	defaults
	local cur
	cur=$(current_version)
	do_rollback
	wait_ready || die "execbox $(current_version) is not ready after the rollback"
	say "rolled back from $cur to $(current_version); deploy.sh rollback again undoes it"
}

cmd_status() {
	if ! load_installed; then
		echo "execbox is not installed (no $deployconf)"
		return 3
	fi
	defaults
	local cur prev listen
	cur=$(current_version)
	prev=$(previous_version)
	echo "execbox $cur, $mode mode, in $prefix${prev:+; previous $prev}"
	echo "configuration $conf, data $state"
	case $mode in
	systemd)
		if systemd_running; then
			echo "service: $(systemctl is-active execbox.service || true), $(systemctl is-enabled execbox.service 2>/dev/null || true)"
		elif direct_pid >/dev/null; then
			echo "service: running as pid $(direct_pid) (started by deploy.sh; log $logfile)"
		else
			echo "service: stopped"
		fi
		;;
	docker)
		echo "container $name: $(docker inspect -f '{{.State.Status}}{{if .State.Health}}, {{.State.Health.Status}}{{end}}, image {{.Config.Image}}' "$name" 2>/dev/null || echo missing)"
		;;
	esac
	svc_running || return 3
	listen=$(execbox_cfg "$prefix/current/execbox" "$conf" server.listen)
	if probe_ready "$listen"; then
		echo "ready: yes (http://$listen/readyz)"
		return 0
	fi
	echo "ready: no (http://$listen/readyz)"
	return 1
}

cmd_logs() {
	load_installed || die "execbox is not installed"
	defaults
	local f=()
	[ "$follow" = 0 ] || f=(-f)
	case $mode in
	systemd)
		if systemd_running; then journalctl -u execbox.service --no-pager ${f[@]+"${f[@]}"}; else tail -n 200 ${f[@]+"${f[@]}"} "$logfile"; fi
		;;
	docker) docker logs ${f[@]+"${f[@]}"} "$name" ;;
	esac
}

cmd_uninstall() {
	if load_installed; then
		defaults
		say "stopping and removing execbox $(current_version) ($mode mode)"
		case $mode in
		systemd)
			if systemd_running; then
				systemctl disable --now --quiet execbox.service 2>/dev/null || true
			else
				direct_stop
			fi
			if [ -f "$unit" ] && grep -q "^# Installed by execbox's deploy.sh" "$unit"; then
				rm -f "$unit"
				if systemd_running; then systemctl daemon-reload; fi
			fi
			;;
		docker)
			local c v
			for c in "$name" "$name-previous"; do
				if exists "$c" && ours "$c"; then docker rm -f "$c" >/dev/null; fi
			done
			for v in $(current_version) $(previous_version); do
				docker image rm "execbox:$v" >/dev/null 2>&1 || true
			done
			;;
		esac
	else
		say "execbox is not installed by deploy.sh here"
	fi
	case $(readlink "$link" 2>/dev/null || true) in /opt/execbox/*) rm -f "$link" ;; esac
	rm -f "$pidfile"
	remove_ours "$prefix"
	if [ "$purge" = 1 ]; then
		remove_ours "$etc"
		remove_ours "$state"
		say "purged the configuration and data"
	else
		say "kept $etc and $state (configuration, audit log); --purge deletes them"
	fi
}

case $cmd in
install) cmd_install ;;
upgrade) cmd_upgrade ;;
rollback) cmd_rollback ;;
start)
	load_installed || die "execbox is not installed"
	defaults
	svc_start
	wait_ready
	;;
stop)
	load_installed || die "execbox is not installed"
	defaults
	svc_stop
	say "stopped"
	;;
restart)
	load_installed || die "execbox is not installed"
	defaults
	svc_stop
	svc_start
	wait_ready
	;;
status) cmd_status ;;
logs) cmd_logs ;;
uninstall) cmd_uninstall ;;
check) cmd_check ;;
*) die "unknown command $cmd (see deploy.sh --help)" ;;
esac
