#!/usr/bin/env bash
# Builds a current gVisor runsc from the Go module proxy into a cache and
# prints its path. Debian 12's runsc (2022) lacks statx and is slow at
# output; this one has neither gap.
#
#   scripts/runsc.sh            build (or reuse) and print the binary's path
#
# The build must be static (CGO_ENABLED=0): runsc pivots into an empty root
# and re-executes itself through /proc/self/exe, and a dynamically linked
# runsc then fails with "fork/exec /proc/self/exe: no such file or
# directory" (the ELF interpreter is not in that root).
#
# The module version is stamped into the binary, so `runsc --version` (and
# execbox's health) names it; a cached binary without it is rebuilt.
#
# Override the cache with EXECBOX_RUNSC_CACHE (default /var/cache/execbox-test).
set -euo pipefail

version=${EXECBOX_RUNSC_VERSION:-v0.0.0-20260905035102-160fafc42237}
cache=${EXECBOX_RUNSC_CACHE:-/var/cache/execbox-test}/runsc-$version
bin=$cache/runsc

if [ ! -x "$bin" ] || [ "$("$bin" --version 2>/dev/null | head -1)" != "runsc version $version" ]; then
	mkdir -p "$cache"
	tmp=$(mktemp -d "$cache/build.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	echo "scripts/runsc.sh: building gvisor.dev/gvisor/runsc@$version (static)" >&2
	# Outside the module, so execbox's go.mod is not touched.
	(cd "$tmp" && CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS=-mod=mod go install \
		-ldflags "-X gvisor.dev/gvisor/runsc/version.version=$version" \
		"gvisor.dev/gvisor/runsc@$version") >&2
	mv "$tmp/runsc" "$bin"
fi
# It must really run a program, not only start. Its stdin is a pipe of its
# own: runsc chowns the stdio files it is handed to its sandbox's user, and
# this script's stdin may be the host's /dev/null.
if ! out=$(: | timeout 60 "$bin" --network=none do /bin/echo ok 2>&1) || [ "$out" != ok ]; then
	echo "scripts/runsc.sh: $bin does not run here: $out" >&2
	exit 1
fi
echo "$bin"
