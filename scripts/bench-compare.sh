#!/usr/bin/env bash
# Growth of backlog and River side by side: ROUNDS consecutive burn-downs of
# JOBS jobs each on one table with completed jobs kept (backlog: the
# engine's default retention; River: its own defaults), on one private
# PostgreSQL cluster with server defaults (autovacuum on), in one command.
# backlog runs twice: with its default claim strategy (skip-locked, or
# what BACKLOG_PARAMS says) and with strategy=optimistic. At the end it
# prints one line per series and round, e.g.
#   growth series 1 round 3: River 7.9k, backlog 14.1k, ratio 1.78x; optimistic 12.0k, ratio 1.52x
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
#   ORDER         who runs, in this order: backlog, optimistic (backlog with
#                 strategy=optimistic), river; series 2, 4, … reverse it
#                 (backlog optimistic river)
#   SERIES        how many times to run both, the order alternating (1)
#   PG_SET        settings of the private server, space-separated name=value
#                 (e.g. "autovacuum_naptime=10s shared_preload_libraries=pg_stat_statements")
#   BACKLOG_ARGS  extra `backlog bench growth` flags (e.g. "--max-claim 1000")
#   BACKLOG_PARAMS store URL parameters of both backlog runs (e.g.
#                 "pool_max_conns=8"; a strategy= here applies to the
#                 "backlog" run only)
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
ORDER=${ORDER:-backlog optimistic river}
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

# run_optimistic is run_backlog with the optimistic claim strategy.
run_optimistic() {
	local params
	params=$(tr '&' '\n' <<<"$BACKLOG_PARAMS" | grep -v '^strategy=' | paste -sd'&' || true)
	BACKLOG_PARAMS="${params:+$params&}strategy=optimistic" run_backlog "$1"
}

run_river() {
	local db=$1
	# shellcheck disable=SC2086
	"$bin/riverbench" growth --database-url "$PG_URL/$db?$PG_PARAMS" --rounds "$ROUNDS" --jobs "$JOBS" --workers "$WORKERS" --pause "$PAUSE" $RIVER_ARGS
}

say "== $(getconf _NPROCESSORS_ONLN) CPUs, PostgreSQL at $PG_URL, $ROUNDS rounds × $JOBS jobs, $WORKERS workers"
base=($ORDER)
for sys in "${base[@]}"; do
	case $sys in
	backlog | optimistic | river) ;;
	*)
		say "bench-compare: ORDER: unknown system $sys (backlog, optimistic, river)"
		exit 2
		;;
	esac
done
rates=$(mktemp "${TMPDIR:-/tmp}/bench-compare-rates.XXXXXX")
trap 'cleanup; rm -f "$rates" "$rates.out"' EXIT
for s in $(seq "$SERIES"); do
	order=("${base[@]}")
	if ((s % 2 == 0)); then
		order=()
		for ((i = ${#base[@]} - 1; i >= 0; i--)); do
			order+=("${base[i]}")
		done
	fi
	for sys in "${order[@]}"; do
		db=growth_${sys}_${s}_$$
		"$bin/riverbench" createdb --admin-url "$admin_url" "$db"
		created+=("$db")
		echo
		echo "== $sys, series $s (load $(load))"
		# Keep each round's jobs/s (the first two columns of the table)
		# for the summary.
		"run_$sys" "$db" | tee "$rates.out"
		awk -v s="$s" -v sys="$sys" '$1 == "round" { t = 1; next } t && $1 ~ /^[0-9]+$/ { print s, sys, $1, $2 }' "$rates.out" >>"$rates"
		echo "   (load after: $(load))"
		"$bin/riverbench" dropdb --admin-url "$admin_url" "$db"
		created=("${created[@]:0:${#created[@]}-1}")
	done
done

# One line per series and round: each system's jobs/s, backlog's ratios to
# River's.
echo
echo "== growth, jobs/s per round (backlog ÷ River)"
awk '
function k(v) { return v == "" ? "-" : (v < 1000 ? sprintf("%.0f", v) : sprintf("%.1fk", v / 1000)) }
function r(v, w) { return (v == "" || w == "" || w == 0) ? "ratio -" : sprintf("ratio %.2fx", v / w) }
{ v[$1, $2, $3] = $4; if (!(($1, $3) in seen)) { seen[$1, $3] = 1; order[++n] = $1 SUBSEP $3 } }
END {
	for (i = 1; i <= n; i++) {
		split(order[i], p, SUBSEP)
		rv = v[p[1], "river", p[2]]; bv = v[p[1], "backlog", p[2]]; ov = v[p[1], "optimistic", p[2]]
		line = sprintf("growth series %s round %s: River %s", p[1], p[2], k(rv))
		if ((p[1], "backlog", p[2]) in v) line = line sprintf(", backlog %s, %s", k(bv), r(bv, rv))
		if ((p[1], "optimistic", p[2]) in v) line = line sprintf("; optimistic %s, %s", k(ov), r(ov, rv))
		print line
	}
}' <(sort -k1,1n -k3,3n "$rates")
