#!/usr/bin/env bash
# Runs execbox's whole test suite on a fresh Debian 12 machine, as root:
# installs what the tests need, then vet, the race-enabled tests and a short
# benchmark pass. Backends listed in EXECBOX_REQUIRE must really work here:
# a missing one fails the run instead of being skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
	echo "scripts/test.sh: run as root (the native backend's tests need namespaces and cgroups)" >&2
	exit 2
fi

export PATH="/usr/local/go/bin:$PATH"
export EXECBOX_REQUIRE="${EXECBOX_REQUIRE:-native,landlock,cgroups}"

need=()
for pkg in python3 nodejs bubblewrap; do
	dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
	echo "== installing ${need[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

echo "== go vet"
go vet ./...
echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change: $unformatted" >&2
	exit 1
fi

echo "== go test -race (EXECBOX_REQUIRE=$EXECBOX_REQUIRE)"
go test -race -count=1 -timeout 20m ./...

echo "== benchmarks (one short pass, side by side)"
go test -run '^$' -bench . -benchtime 200x -count 1 ./backend/native/ 2>&1 | grep -E '^(Benchmark|ok|FAIL|PASS)' || true
