#!/usr/bin/env bash
# go-versions.sh: prove the Go versions the module claims to support.
#
# The oldest supported Go is the release named by go.mod's `go` line (1.26.0
# means go1.26.0); README.md's Requirements line states the range. 1.26.0 is
# what the code needs (new(expr) with an expression in storetest,
# errors.AsType in cli) and what dependencies' go.mod lines demand
# (pressly/goose v3.28.0, prometheus/client_golang v1.25.0, modernc.org/sqlite
# v1.61.1, golang.org/x/sys v0.49.0 all say go 1.26.0). For that
# release and for each one in BACKLOG_GO_VERSIONS (default: go1.27.4, the
# newest release checked), this runs `go vet ./...` — every package with its
# tests, type-checked and vetted by that toolchain — with GOTOOLCHAIN set to
# it. The go command fetches the toolchain from the module proxy
# (golang.org/toolchain) on first use and keeps it in the module cache.
#
# A toolchain that cannot be obtained here (no proxy, a version the proxy
# does not hold) is skipped with a message, unless
# BACKLOG_REQUIRE_TOOLCHAINS=1 (set by .ci/run), which makes it a failure.
# Once a toolchain's build cache is warm the check takes seconds; a cold
# cache costs a few minutes per toolchain.
#
# Environment: GO (default go), BACKLOG_GO_VERSIONS, BACKLOG_REQUIRE_TOOLCHAINS.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

goline=$(awk '$1 == "go" { print $2; exit }' go.mod)
if [ -z "$goline" ]; then
	echo "go-versions: go.mod has no go line" >&2
	exit 1
fi
case "$goline" in
*.*.*) oldest="go$goline" ;;
*) oldest="go$goline.0" ;; # "go 1.26" means the first release, go1.26.0
esac

status=0
for tc in "$oldest" ${BACKLOG_GO_VERSIONS-go1.27.4}; do
	# The first use prints "go: downloading …" before the version line.
	if ! got=$(GOTOOLCHAIN=$tc GOFLAGS= $GO version 2>&1) || [[ "$(tail -1 <<<"$got")" != "go version $tc "* ]]; then
		msg="go-versions: toolchain $tc cannot be obtained here: $(tail -1 <<<"$got")"
		if [ "${BACKLOG_REQUIRE_TOOLCHAINS:-}" = 1 ]; then
			echo "$msg (BACKLOG_REQUIRE_TOOLCHAINS=1 makes this a failure)" >&2
			status=1
		else
			echo "$msg: SKIP" >&2
		fi
		continue
	fi
	echo "go-versions: GOTOOLCHAIN=$tc go vet ./..."
	if GOTOOLCHAIN=$tc $GO vet ./...; then
		echo "go-versions: $tc ok"
	else
		echo "go-versions: FAIL: the module does not vet with $tc (go.mod says go $goline)" >&2
		status=1
	fi
done
exit $status
