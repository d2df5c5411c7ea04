#!/usr/bin/env bash
# Growth of backlog and River side by side: ROUNDS consecutive burn-downs of
# JOBS jobs each on one table with completed jobs kept (backlog: the
# engine's default retention; River: its own defaults), on one private
# PostgreSQL cluster with server defaults (autovacuum on), in one command.
# See docs/benchmarks.md ("Growth") and benchmarks/river/README.md.
#
#   scripts/bench-compare.sh                      # 5 × 50,000 jobs, 2,000 workers
#   ROUNDS=10 JOBS=100000 scripts/bench-compare.sh
#
# Environment (all optional):
#   ROUNDS        consecutive burn-downs per system         (5)
#   JOBS          jobs per burn-down                        (50000)
#   WORKERS       MaxWorkers of each system's queue         (2000)
#   PAUSE         wait after each round before sampling     (2s)
#   ORDER         who runs first: "backlog river" or "river backlog" (backlog river)
#   SERIES        how many times to run both, the order alternating (1)
#   PG_SET        settings of the private server, space-separated name=value
#                 (e.g. "autovacuum_naptime=10s shared_preload_libraries=pg_stat_statements")
#   BACKLOG_ARGS  extra `backlog bench growth` flags (e.g. "--max-claim 1000")
#   BACKLOG_PARAMS store URL parameters (e.g. "strategy=optimistic")
#   RIVER_ARGS    extra riverbench growth flags   (--fetch-cooldown 2ms --fetch-poll-interval 20ms,
#                 the fetch settings of River's own benchmark)
#   PG_URL        use this running server instead (postgres://USER@HOST:PORT, no
#                 database; PG_ADMIN_DB and PG_PARAMS as in benchmarks/river/run.sh)
#                 instead of a private cluster
#
# Each system runs in a database of its own, created for the series and
# dropped after it. Needs Go and PostgreSQL's server programs (initdb).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
self=$repo/scripts/bench-compare.sh

ROUNDS=${ROUNDS:-5}
JOBS=${JOBS:-50000}
WORKERS=${WORKERS:-2000}
PAUSE=${PAUSE:-2s}
ORDER=${ORDER:-backlog river}
SERIES=${SERIES:-1}
BACKLOG_ARGS=${BACKLOG_ARGS:-}
BACKLOG_PARAMS=${BACKLOG_PARAMS:-}
RIVER_ARGS=${RIVER_ARGS:---fetch-cooldown 2ms --fetch-poll-interval 20ms}

say() { printf '%s\n' "$*" >&2; }
load() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime; }

if [[ -z ${BENCH_COMPARE_BIN:-} ]]; then
	# Outer run: build both programs, then run the series next to a
	# private cluster (or on PG_URL when given).
	work=$(mktemp -d "${TMPDIR:-/tmp}/bench-compare.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	say "== building (go $(go env GOVERSION))"
	(cd "$repo" && go build -o "$work/backlog" ./cmd/backlog)
	(cd "$repo/benchmarks/river" && go build -o "$work/riverbench" ./riverbench)
	export BENCH_COMPARE_BIN=$work
	if [[ -n ${PG_URL:-} ]]; then
		"$self"
		exit
	fi
	pgset=()
	for kv in ${PG_SET:-}; do
		pgset+=(--pg-set "$kv")
	done
	"$work/backlog" bench with-postgres "${pgset[@]}" -- "$self"
	exit
fi

# Inner run: PG_URL, PG_ADMIN_DB, PG_PARAMS name the server.
bin=$BENCH_COMPARE_BIN
PG_ADMIN_DB=${PG_ADMIN_DB:-test}
PG_PARAMS=${PG_PARAMS:-sslmode=disable}
admin_url="$PG_URL/$PG_ADMIN_DB?$PG_PARAMS"
created=()
cleanup() {
	for db in "${created[@]}"; do
		"$bin/riverbench" dropdb --admin-url "$admin_url" "$db" || say "bench-compare: could not drop database $db"
	done
}
trap cleanup EXIT

run_backlog() {
	local db=$1
	local url="$PG_URL/$db?$PG_PARAMS${BACKLOG_PARAMS:+&$BACKLOG_PARAMS}"
	# shellcheck disable=SC2086
	"$bin/backlog" --db "$url" --log-level error bench growth --rounds "$ROUNDS" --jobs "$JOBS" --workers "$WORKERS" --pause "$PAUSE" $BACKLOG_ARGS
}

run_river() {
	local db=$1
	# shellcheck disable=SC2086
	"$bin/riverbench" growth --database-url "$PG_URL/$db?$PG_PARAMS" --rounds "$ROUNDS" --jobs "$JOBS" --workers "$WORKERS" --pause "$PAUSE" $RIVER_ARGS
}

say "== $(getconf _NPROCESSORS_ONLN) CPUs, PostgreSQL at $PG_URL, $ROUNDS rounds × $JOBS jobs, $WORKERS workers"
base=($ORDER)
for s in $(seq "$SERIES"); do
	order=("${base[@]}")
	if ((s % 2 == 0)); then
		order=("${base[1]}" "${base[0]}")
	fi
	for sys in "${order[@]}"; do
		db=growth_${sys}_${s}_$$
		"$bin/riverbench" createdb --admin-url "$admin_url" "$db"
		created+=("$db")
		echo
		echo "== $sys, series $s (load $(load))"
		"run_$sys" "$db"
		echo "   (load after: $(load))"
		"$bin/riverbench" dropdb --admin-url "$admin_url" "$db"
		created=("${created[@]:0:${#created[@]}-1}")
	done
done
