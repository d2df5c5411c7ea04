#!/usr/bin/env bash
# release.sh: build the release archives of the backlog command.
#
#   scripts/release.sh [--version vX.Y.Z] [--targets OS/ARCH,...] [--out DIR]
#
# For each target it builds ./cmd/backlog as a static binary (CGO_ENABLED=0,
# -trimpath, -ldflags "-s -w -X github.com/backlogq/backlog/cli.version=VERSION",
# so that `backlog version` prints VERSION) and packs it with LICENSE and
# README.md into DIR/backlog_VERSION_OS_ARCH.tar.gz (one top-level directory
# of the same name), then writes DIR/SHA256SUMS over the archives
# (`sha256sum -c SHA256SUMS` in DIR checks them).
#
#   --version  a semantic version with a leading v (v1.2.3, v1.2.3-rc.1);
#              default: the tag at HEAD when there is one, else the Go
#              pseudo-version of HEAD (v0.0.0-YYYYMMDDHHMMSS-abcdefabcdef,
#              commit time in UTC), with +dirty when the tree has changes
#   --targets  comma-separated GOOS/GOARCH pairs; default
#              linux/amd64,linux/arm64,darwin/amd64,darwin/arm64
#   --out      output directory, created when missing; default dist
#
# Archives are reproducible for one commit and Go version: files are sorted,
# owned by 0:0 and dated at the commit time, gzip stores no name or time.
# Environment: GO (default go).
set -euo pipefail

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
	exit 2
}
die() {
	echo "release: $*" >&2
	exit 1
}

root=$(cd "$(dirname "$0")/.." && pwd)
GO=${GO:-go}
version=
targets=linux/amd64,linux/arm64,darwin/amd64,darwin/arm64
out=dist
while [ $# -gt 0 ]; do
	case $1 in
	--version) [ $# -ge 2 ] || die "--version needs a value"; version=$2; shift 2 ;;
	--version=*) version=${1#*=}; shift ;;
	--targets) [ $# -ge 2 ] || die "--targets needs a value"; targets=$2; shift 2 ;;
	--targets=*) targets=${1#*=}; shift ;;
	--out) [ $# -ge 2 ] || die "--out needs a value"; out=$2; shift 2 ;;
	--out=*) out=${1#*=}; shift ;;
	-h | --help) usage ;;
	*) die "unknown argument \"$1\" (usage: scripts/release.sh [--version vX.Y.Z] [--targets OS/ARCH,...] [--out DIR])" ;;
	esac
done

for tool in tar gzip sha256sum git; do
	command -v "$tool" >/dev/null || die "$tool is needed and not installed"
done

# The commit time dates the archive entries; outside a git checkout the
# Unix epoch does.
epoch=0
if git -C "$root" rev-parse --verify -q HEAD >/dev/null 2>&1; then
	epoch=$(git -C "$root" show -s --format=%ct HEAD)
fi

if [ -z "$version" ]; then
	git -C "$root" rev-parse --verify -q HEAD >/dev/null 2>&1 ||
		die "not a git checkout: give --version vX.Y.Z"
	if ! version=$(git -C "$root" describe --tags --exact-match HEAD 2>/dev/null); then
		stamp=$(TZ=UTC git -C "$root" show -s --format=%cd --date=format-local:%Y%m%d%H%M%S HEAD)
		version="v0.0.0-$stamp-$(git -C "$root" rev-parse --short=12 HEAD)"
	fi
	if [ -n "$(git -C "$root" status --porcelain --untracked-files=no)" ]; then
		version+="+dirty"
	fi
fi
semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$'
[[ $version =~ $semver ]] ||
	die "version \"$version\" is not a semantic version with a leading v, such as v1.2.3 or v1.2.3-rc.1"

IFS=, read -r -a list <<<"$targets"
[ ${#list[@]} -gt 0 ] || die "--targets is empty"
for target in "${list[@]}"; do
	case $target in
	linux/amd64 | linux/arm64 | darwin/amd64 | darwin/arm64) ;;
	*) die "target \"$target\" is not one of linux/amd64, linux/arm64, darwin/amd64, darwin/arm64" ;;
	esac
done

mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

archives=()
for target in "${list[@]}"; do
	goos=${target%/*} goarch=${target#*/}
	name="backlog_${version}_${goos}_${goarch}"
	mkdir -p "$work/$name"
	echo "release: building $name" >&2
	(cd "$root" && CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch $GO build -trimpath \
		-ldflags "-s -w -X github.com/backlogq/backlog/cli.version=$version" \
		-o "$work/$name/backlog" ./cmd/backlog)
	cp "$root/LICENSE" "$root/README.md" "$work/$name/"
	tar -C "$work" --sort=name --owner=0 --group=0 --numeric-owner \
		--mtime="@$epoch" --mode='u+rwX,go+rX,go-w' -cf - "$name" |
		gzip -n -9 >"$out/$name.tar.gz"
	archives+=("$name.tar.gz")
done

(cd "$out" && sha256sum "${archives[@]}" >SHA256SUMS)
echo "release: wrote ${archives[*]} and SHA256SUMS to $out" >&2
