#!/usr/bin/env bash
# install-check.sh: prove that `go install github.com/backlogq/backlog/cmd/backlog@VERSION`
# works for this checkout, as it will for a user once the commit is published.
#
# It lays out a module proxy directory (GOPROXY protocol: list, .info, .mod,
# .zip) holding the checkout's files as the pseudo-version of HEAD, then runs
# `go install …/cmd/backlog@<pseudo-version>` into a temporary GOBIN with that
# directory as the first proxy — dependencies come from the module cache's
# download directory, then from the configured proxy — and runs
# `backlog version`. `go install pkg@version` refuses a module whose go.mod
# has replace or exclude directives, and fails when a dependency does not
# resolve from a module proxy: either fails this check. It takes about 15 s
# when the build cache is warm (the module's own packages are compiled anew
# from the module cache's copy).
#
# The module zip holds the tracked and untracked-but-not-ignored files of the
# working tree (uncommitted changes included), less nested modules
# (directories with their own go.mod), as the go command would publish them.
#
# Environment: GO (default go).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
module=github.com/backlogq/backlog

tmp=$(mktemp -d)
modcache=$($GO env GOMODCACHE)
version=
cleanup() {
	# The extracted copy of this module in the module cache is read-only and
	# named by the pseudo-version; remove it so runs do not pile up there.
	if [ -n "$version" ]; then
		chmod -R u+w "$modcache/$module@$version" 2>/dev/null || true
		rm -rf "$modcache/$module@$version" "$modcache/cache/download/$module/@v/$version".* \
			"$modcache/cache/download/$module/@v/list"
		rmdir -p "$modcache/cache/download/$module/@v" "$(dirname "$modcache/$module")" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

# The pseudo-version of HEAD: v0.0.0-<commit time, UTC>-<12 hex digits>.
if ! rev=$(git rev-parse --short=12 HEAD 2>/dev/null); then
	echo "install-check: not a git checkout: no commit to name a version after" >&2
	exit 1
fi
stamp=$(TZ=UTC git show -s --format=%cd --date=format-local:%Y%m%d%H%M%S HEAD)
version="v0.0.0-$stamp-$rev"
iso=$(TZ=UTC git show -s --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ HEAD)

# The proxy directory: <module>/@v/{list,VERSION.info,VERSION.mod,VERSION.zip}.
dir="$tmp/proxy/$module/@v"
mkdir -p "$dir" "$tmp/bin" "$tmp/zip"
echo "$version" >"$dir/list"
printf '{"Version":"%s","Time":"%s"}\n' "$version" "$iso" >"$dir/$version.info"
cp go.mod "$dir/$version.mod"

# The zip: every file under the prefix module@version/, nested modules left
# out. A tiny standard-library program writes it, so the check needs no
# dependency beyond the go command.
cat >"$tmp/zip/main.go" <<'EOF'
// Command zip writes a module zip: the files named on stdin (NUL-separated,
// relative to the current directory) under the prefix os.Args[1], to os.Args[2].
// Files inside a directory that holds its own go.mod (a nested module) and
// anything that is not a regular file are left out, as the go command does.
package main

import (
	"archive/zip"
	"bufio"
	"io"
	"log"
	"os"
	"path"
	"strings"
)

func main() {
	prefix, out := os.Args[1], os.Args[2]
	data, err := io.ReadAll(bufio.NewReader(os.Stdin))
	if err != nil {
		log.Fatal(err)
	}
	names := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
	nested := map[string]bool{}
	for _, n := range names {
		if path.Base(n) == "go.mod" && n != "go.mod" {
			nested[path.Dir(n)] = true
		}
	}
	f, err := os.Create(out)
	if err != nil {
		log.Fatal(err)
	}
	zw := zip.NewWriter(f)
names:
	for _, n := range names {
		for d := path.Dir(n); d != "."; d = path.Dir(d) {
			if nested[d] {
				continue names
			}
		}
		fi, err := os.Lstat(n)
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the working tree, or a symbolic link
		}
		w, err := zw.Create(prefix + n)
		if err != nil {
			log.Fatal(err)
		}
		src, err := os.Open(n)
		if err != nil {
			log.Fatal(err)
		}
		if _, err := io.Copy(w, src); err != nil {
			log.Fatal(err)
		}
		src.Close()
	}
	if err := zw.Close(); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}
EOF
git ls-files -z --cached --others --exclude-standard |
	GOFLAGS= GOWORK=off $GO run "$tmp/zip/main.go" "$module@$version/" "$dir/$version.zip"

# Install from the proxy directory only for this module: the module cache's
# download directory and then the configured proxy serve the dependencies.
# No checksum database knows this unpublished version; the module's go.sum
# still verifies every dependency.
proxy="file://$tmp/proxy,file://$modcache/cache/download"
upstream=$($GO env GOPROXY)
case "$upstream" in "" | off) ;; *) proxy="$proxy,$upstream" ;; esac
echo "install-check: go install $module/cmd/backlog@$version"
if ! (cd "$tmp" && GOPROXY="$proxy" GONOSUMDB="$module" GOFLAGS=-modcacherw GOWORK=off GOBIN="$tmp/bin" \
	$GO install "$module/cmd/backlog@$version"); then
	echo "install-check: FAIL: go install $module/cmd/backlog@<version> does not work for this checkout" >&2
	echo "install-check: (a replace or exclude directive in go.mod, or a dependency that does not resolve, breaks it)" >&2
	exit 1
fi
out=$("$tmp/bin/backlog" version)
echo "install-check: $out"
case "$out" in
"backlog $version "*) echo "install-check: ok" ;;
*)
	echo "install-check: FAIL: backlog version printed \"$out\", want \"backlog $version …\"" >&2
	exit 1
	;;
esac
