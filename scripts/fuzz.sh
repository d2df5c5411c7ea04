#!/usr/bin/env bash
# Runs every fuzz target of the module for a bounded time each.
#
#   scripts/fuzz.sh [FUZZTIME]      FUZZTIME as for go test -fuzztime (default 20000x)
#
# The default is a number of executions, not a duration: with a duration,
# Go's fuzzing coordinator (before Go 1.27, go.dev/issue/75804) can report
# "context deadline exceeded" as a failure when the time runs out while a
# worker is busy, with no failing input. A count has no deadline to race.
#
# The seed corpora (testdata/fuzz/FuzzXxx/) also run as plain tests in
# `go test ./...`; this script is the coverage-guided part. A failing input
# is written under the package's testdata/fuzz/ by go test: commit it as a
# seed once the bug is fixed. make test runs it when BACKLOG_FUZZTIME is set
# (.ci/run sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${1:-${BACKLOG_FUZZTIME:-20000x}}"
go="${GO:-go}"
status=0
# Every "func FuzzXxx(f *testing.F)" in a _test.go file, with its package directory.
while IFS=: read -r file name; do
	dir="./$(dirname "$file")"
	echo "fuzz: $name in $dir for $fuzztime"
	if ! "$go" test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$dir"; then
		echo "fuzz: $name FAILED"
		status=1
	fi
done < <(git ls-files '*_test.go' | xargs grep -oE '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' | sed -E 's/\(f \*testing\.F\)$//; s/:func /:/' | sort -u)
exit $status
