#!/usr/bin/env bash
# Builds execbox's release artifacts into dist/, offline but for the Go
# module proxy (the .deb packager is built from it once, then cached):
#
#   dist/execbox-<version>-linux-<arch>.tar.gz   the bundle deploy.sh installs:
#       execbox, execbox-init   static binaries, version/commit/date stamped
#       execbox-guest           the microvm backend's VM init (static)
#       execbox.yaml            the default configuration, commented
#       execbox.service         the systemd unit
#       deploy.sh, README.md    install/upgrade/… and the operator's guide
#       image.tar               the container image (docker load); only for
#                               the architecture of this machine, whose
#                               Debian packages make its userland
#       SHA256SUMS
#   dist/execbox_<version>_<arch>.deb            the Debian package (nfpm)
#   dist/SHA256SUMS
#
# Usage: scripts/release.sh [--version V] [--arch amd64,arm64] [--out DIR]
#                           [--no-image] [--no-deb]
#
# The version defaults to the tag vX.Y.Z on HEAD, else 0.0.0-dev.<commit
# time>.<short commit>. SOURCE_DATE_EPOCH, when set, is the build date
# (else now) and every file's time in the archives.
#
# Needs: go, git, tar, gzip, sha256sum; for image.tar the Debian packages of
# the image's userland (python3, bash, coreutils, bubblewrap, mount, …)
# installed on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

# The Debian packager, built from the module proxy; not linked into execbox.
readonly nfpm=github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.48.0

version=
arches=amd64,arm64
out=dist
image=1
deb=1
while [ $# -gt 0 ]; do
	case $1 in
	--version) version=${2:?}; shift ;;
	--arch) arches=${2:?}; shift ;;
	--out) out=${2:?}; shift ;;
	--no-image) image=0 ;;
	--no-deb) deb=0 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "release.sh: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done

commit=$(git rev-parse HEAD)
dirty=
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then dirty=.dirty; fi
if [ -z "$version" ]; then
	if tag=$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null); then
		version=${tag#v}$dirty
	else
		version=0.0.0-dev.$(TZ=UTC git log -1 --date=format-local:%Y%m%d%H%M%S --format=%cd).$(git rev-parse --short=12 HEAD)$dirty
	fi
fi
case $version in
[0-9]*) ;;
*) echo "release.sh: the version must start with a digit (Debian's rule), not $version" >&2; exit 2 ;;
esac
case $version in *[!A-Za-z0-9.+~-]*) echo "release.sh: version $version: only letters, digits and . + ~ -" >&2; exit 2 ;; esac
epoch=${SOURCE_DATE_EPOCH:-$(date +%s)}
date=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
hostarch=$(go env GOARCH)

mkdir -p "$out"
out=$(cd "$out" && pwd)
ldflags="-s -w -X main.version=$version -X main.commit=$commit$dirty -X main.date=$date"
start=$SECONDS
echo "== execbox $version ($commit$dirty, $date) for ${arches//,/ }"

IFS=, read -r -a archlist <<<"$arches"
artifacts=()
for arch in "${archlist[@]}"; do
	case $arch in amd64 | arm64) ;; *) echo "release.sh: unsupported arch $arch (amd64, arm64)" >&2; exit 2 ;; esac
	name=execbox-$version-linux-$arch
	stage=$out/$name
	rm -rf -- "$stage"
	mkdir -p "$stage"
	echo "-- $name: static binaries"
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$stage/execbox" ./cmd/execbox
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -buildvcs=false -ldflags "-s -w" -o "$stage/execbox-init" ./cmd/execbox-init
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -buildvcs=false -ldflags "-s -w" -o "$stage/execbox-guest" ./cmd/execbox-guest
	install -m 0644 deploy/execbox.yaml deploy/execbox.service "$stage/"
	install -m 0644 deploy/README.md "$stage/README.md"
	install -m 0755 deploy/deploy.sh "$stage/deploy.sh"
	if [ "$image" = 1 ] && [ "$arch" = "$hostarch" ]; then
		echo "-- $name: image.tar (execbox:$version, offline from this host's packages)"
		SOURCE_DATE_EPOCH=$epoch go run ./deploy/mkimage -flavor server -arch "$arch" \
			-execbox "$stage/execbox" -execbox-init "$stage/execbox-init" \
			-config deploy/execbox.yaml -healthcheck deploy/image/healthcheck -entrypoint deploy/image/entrypoint \
			-version "$version" -commit "$commit$dirty" -tag "execbox:$version" -out "$stage/image.tar"
	elif [ "$image" = 1 ]; then
		echo "-- $name: no image.tar: its userland comes from this machine's Debian packages, which are $hostarch (build on an $arch machine for one)"
	fi
	(cd "$stage" && find . -type f -printf '%P\n' | LC_ALL=C sort | xargs sha256sum >"$out/.SHA256SUMS.$arch" && mv "$out/.SHA256SUMS.$arch" SHA256SUMS)
	find "$stage" -exec touch -h -d "@$epoch" {} +
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" -C "$out" -cf - "$name" | gzip -n >"$out/$name.tar.gz"
	artifacts+=("$name.tar.gz")

	if [ "$deb" = 1 ]; then
		echo "-- $name: Debian package"
		debfile=execbox_${version}_$arch.deb
		# nfpm expands no variables in contents: it packs files named
		# relative to where it runs, a tree of fixed names.
		pkg=$out/.deb-$arch
		rm -rf -- "$pkg"
		mkdir -p "$pkg/debian"
		cp -p "$stage/execbox" "$stage/execbox-init" "$stage/execbox-guest" "$stage/execbox.yaml" "$stage/execbox.service" "$stage/README.md" "$pkg/"
		cp -p deploy/debian/preinst deploy/debian/postinst deploy/debian/prerm deploy/debian/postrm "$pkg/debian/"
		(cd "$pkg" && VERSION=$version ARCH=$arch SOURCE_DATE_EPOCH=$epoch \
			go run "$nfpm" package --config "$OLDPWD/deploy/nfpm.yaml" --packager deb --target "$out/$debfile" >/dev/null)
		rm -rf -- "$pkg"
		artifacts+=("$debfile")
	fi
	rm -rf -- "$stage"
done

(cd "$out" && sha256sum "${artifacts[@]}" >SHA256SUMS)
echo "== done in $((SECONDS - start))s: $out"
(cd "$out" && stat -c '   %10s  %n' "${artifacts[@]}" SHA256SUMS)
