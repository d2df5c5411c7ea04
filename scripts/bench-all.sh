#!/usr/bin/env bash
# Every benchmark mode in one command: burn-down, steady (throughput and
# insert commit → handler start latency under load), wake-up latency with
# idle workers, and growth, for backlog beside River on one private
# PostgreSQL cluster, then for backlog alone on SQLite and MariaDB. Each
# run gets a fresh database (PostgreSQL), file (SQLite) or table prefix
# (MariaDB), removed afterwards. See docs/benchmarks.md ("All modes in one
# command").
#
#   scripts/bench-all.sh                                   # ≈ 6 minutes
#   STORES=postgres MODES="steady latency" RUNS=3 scripts/bench-all.sh
#   JOBS=5000 GROWTH_JOBS=5000 ROUNDS=2 DURATION=2s LATENCY_JOBS=50 scripts/bench-all.sh   # smoke test
#
# Environment (all optional):
#   STORES        any of postgres sqlite mariadb               (all three)
#   MODES         any of burndown steady paced latency growth  (all five;
#                 paced = steady with the producers held at RATE jobs/s)
#   RATE          paced: inserted jobs per second in all        (10000)
#   RUNS          runs of burndown / steady / latency per store (1); on
#                 PostgreSQL River and backlog alternate who goes first
#   WORKERS       MaxWorkers of the queue, every mode           (1000)
#   JOBS          jobs per burn-down                            (50000)
#   DURATION      steady: measured time                         (10s)
#   PRODUCERS     steady: goroutines inserting                  (2)
#   BATCH         steady: jobs per insert call                  (100)
#   BACKLOG_CAP   steady: producers pause above this many pending jobs (20000)
#   LATENCY_JOBS  latency: jobs inserted one by one             (200)
#   INTERVAL      latency: pause between inserts                (10ms)
#   ROUNDS        growth: consecutive burn-downs                (5)
#   GROWTH_JOBS   growth: jobs per round                        (50000)
#   BACKLOG_ARGS  extra `backlog bench` flags for every mode (e.g. "--max-claim 1000")
#   RIVER_ARGS    extra riverbench flags (--fetch-cooldown 2ms --fetch-poll-interval 20ms,
#                 the fetch settings of River's own benchmark)
#   PG_SET        settings of the private PostgreSQL, space-separated name=value
#   PG_URL        use this running PostgreSQL instead (postgres://USER@HOST:PORT, no
#                 database; PG_ADMIN_DB, PG_PARAMS as in benchmarks/river/run.sh)
#   MARIADB_URL   MariaDB store URL (mysql://root@127.0.0.1:3306/test); the
#                 tables of each run are dropped afterwards with the mariadb
#                 client when it is installed
#   RESULTS       keep the raw per-run JSON records in this file
#
# Needs Go; for PostgreSQL its server programs (initdb) unless PG_URL is
# given. The machine's load average is printed with every run.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
self=$repo/scripts/bench-all.sh

STORES=${STORES:-postgres sqlite mariadb}
MODES=${MODES:-burndown steady paced latency growth}
RATE=${RATE:-10000}
RUNS=${RUNS:-1}
WORKERS=${WORKERS:-1000}
JOBS=${JOBS:-50000}
DURATION=${DURATION:-10s}
PRODUCERS=${PRODUCERS:-2}
BATCH=${BATCH:-100}
BACKLOG_CAP=${BACKLOG_CAP:-20000}
LATENCY_JOBS=${LATENCY_JOBS:-200}
INTERVAL=${INTERVAL:-10ms}
ROUNDS=${ROUNDS:-5}
GROWTH_JOBS=${GROWTH_JOBS:-50000}
BACKLOG_ARGS=${BACKLOG_ARGS:-}
RIVER_ARGS=${RIVER_ARGS:---fetch-cooldown 2ms --fetch-poll-interval 20ms}
MARIADB_URL=${MARIADB_URL:-mysql://root@127.0.0.1:3306/test}

say() { printf '%s\n' "$*" >&2; }
load() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime; }
has() { [[ " $1 " == *" $2 "* ]]; }

# mode_args MODE: the flags of one burndown / steady / latency run (both
# tools take the same names).
mode_args() {
	case $1 in
	burndown) echo --jobs "$JOBS" --workers "$WORKERS" ;;
	steady) echo --duration "$DURATION" --producers "$PRODUCERS" --batch "$BATCH" --backlog-cap "$BACKLOG_CAP" --workers "$WORKERS" ;;
	paced) echo --duration "$DURATION" --producers "$PRODUCERS" --batch "$BATCH" --backlog-cap "$BACKLOG_CAP" --workers "$WORKERS" --rate "$RATE" ;;
	latency) echo --jobs "$LATENCY_JOBS" --interval "$INTERVAL" ;;
	esac
}

# cmd_of MODE: the subcommand of both tools that runs MODE (paced is
# steady at a fixed insert rate).
cmd_of() { if [[ $1 == paced ]]; then echo steady; else echo "$1"; fi; }

# record MODE CONFIG SYSTEM RUN CMD…: runs CMD (which prints one JSON
# result) and appends a record with it and the load before and after to
# $BENCH_ALL_RESULTS, in the format `riverbench summarize` reads.
record() {
	local mode=$1 config=$2 system=$3 run=$4
	shift 4
	local before after out
	before=$(load)
	say "$mode  $config  $system  run $run  (load $before)"
	if ! out=$("$@" 2>"$BENCH_ALL_BIN/stderr"); then
		say "bench-all: $system $mode failed: $*"
		cat "$BENCH_ALL_BIN/stderr" >&2
		exit 1
	fi
	after=$(load)
	printf '{"mode":"%s","config":"%s","system":"%s","run":%d,"load_before":"%s","load_after":"%s","result":%s}\n' \
		"$mode" "$config" "$system" "$run" "$before" "$after" "$out" >>"$BENCH_ALL_RESULTS"
}

if [[ ${BENCH_ALL_STAGE:-} == postgres ]]; then
	# Inner run next to the PostgreSQL server named by PG_URL.
	bin=$BENCH_ALL_BIN
	PG_ADMIN_DB=${PG_ADMIN_DB:-test}
	PG_PARAMS=${PG_PARAMS:-sslmode=disable}
	admin_url="$PG_URL/$PG_ADMIN_DB?$PG_PARAMS"
	created=()
	cleanup() {
		for db in "${created[@]}"; do
			"$bin/riverbench" dropdb --admin-url "$admin_url" "$db" || say "bench-all: could not drop database $db"
		done
	}
	trap cleanup EXIT
	# pg_run MODE SYSTEM RUN: one run of SYSTEM in a database of its own.
	pg_run() {
		local mode=$1 sys=$2 run=$3 db=bench_all_$2_$1_$3_$$
		"$bin/riverbench" createdb --admin-url "$admin_url" "$db"
		created+=("$db")
		local url="$PG_URL/$db?$PG_PARAMS"
		# shellcheck disable=SC2046,SC2086
		case $sys in
		river) record "$mode" "postgres,workers=$WORKERS" river "$run" "$bin/riverbench" "$(cmd_of "$mode")" --database-url "$url" $(mode_args "$mode") $RIVER_ARGS ;;
		backlog) record "$mode" "postgres,workers=$WORKERS" backlog "$run" "$bin/backlog" --db "$url" --log-level error -o json bench "$(cmd_of "$mode")" $(mode_args "$mode") $BACKLOG_ARGS ;;
		esac
		"$bin/riverbench" dropdb --admin-url "$admin_url" "$db"
		created=("${created[@]:0:${#created[@]}-1}")
	}
	say "== PostgreSQL at $PG_URL, backlog and River"
	for mode in burndown steady paced latency; do
		has "$MODES" "$mode" || continue
		for run in $(seq "$RUNS"); do
			if ((run % 2 == 1)); then order=(river backlog); else order=(backlog river); fi
			for sys in "${order[@]}"; do
				pg_run "$mode" "$sys" "$run"
			done
		done
	done
	if has "$MODES" growth; then
		# bench-compare.sh's inner run, on this server with these programs.
		BENCH_COMPARE_BIN=$bin ROUNDS=$ROUNDS JOBS=$GROWTH_JOBS WORKERS=$WORKERS \
			BACKLOG_ARGS=$BACKLOG_ARGS RIVER_ARGS=$RIVER_ARGS "$repo/scripts/bench-compare.sh"
	fi
	exit 0
fi

# Outer run: build, PostgreSQL (next to a private cluster unless PG_URL is
# given), then SQLite and MariaDB.
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-all.XXXXXX")
export BENCH_ALL_BIN=$work BENCH_ALL_RESULTS=$work/results.jsonl
: >"$BENCH_ALL_RESULTS"
# MariaDB runs use the table prefixes ba<pid>_<mode>_<run>_.
mariadb_prefix=ba$$_
mariadb_used=
cleanup() {
	local rc=$?
	set +e
	if [[ -n $mariadb_used ]]; then
		# mysql://user[:password]@host[:port]/db[?…]
		local rest=${MARIADB_URL#*://} user=root host port=3306 db
		rest=${rest%%\?*}
		db=${rest#*/}
		rest=${rest%%/*}
		if [[ $rest == *@* ]]; then
			user=${rest%@*}
			rest=${rest##*@}
		fi
		host=${rest%%:*}
		[[ $rest == *:* ]] && port=${rest##*:}
		local pw=
		[[ $user == *:* ]] && pw=${user#*:} && user=${user%%:*}
		if command -v mariadb >/dev/null; then
			local tables
			tables=$(MYSQL_PWD=$pw mariadb -u"$user" -h"$host" -P"$port" -N -e "SELECT GROUP_CONCAT(CONCAT('\`', table_name, '\`')) FROM information_schema.tables WHERE table_schema = '$db' AND table_name LIKE '${mariadb_prefix//_/\\_}%'")
			if [[ -n $tables && $tables != NULL ]]; then
				MYSQL_PWD=$pw mariadb -u"$user" -h"$host" -P"$port" "$db" -e "SET FOREIGN_KEY_CHECKS=0; DROP TABLE $tables" || say "bench-all: could not drop the tables ${mariadb_prefix}* in $db"
			fi
		else
			say "bench-all: no mariadb client: drop the tables ${mariadb_prefix}* in $db yourself"
		fi
	fi
	if [[ -n ${RESULTS:-} ]]; then
		cp "$BENCH_ALL_RESULTS" "$RESULTS"
	fi
	rm -rf "$work"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "== building (go $(go env GOVERSION))"
(cd "$repo" && go build -o "$work/backlog" ./cmd/backlog)
(cd "$repo/benchmarks/river" && go build -o "$work/riverbench" ./riverbench)
say "== machine: $(getconf _NPROCESSORS_ONLN) CPUs, load $(load); stores: $STORES; modes: $MODES; $RUNS run(s) each"

if has "$STORES" postgres; then
	if [[ -n ${PG_URL:-} ]]; then
		BENCH_ALL_STAGE=postgres "$self"
	else
		pgset=()
		for kv in ${PG_SET:-}; do
			pgset+=(--pg-set "$kv")
		done
		BENCH_ALL_STAGE=postgres "$work/backlog" bench with-postgres "${pgset[@]}" -- "$self"
	fi
fi

# backlog_alone NAME URL-FUNCTION: every mode of backlog on one store;
# URL-FUNCTION MODE RUN prints the store URL of a fresh run.
backlog_alone() {
	local name=$1 urlfn=$2 mode run
	say "== $name, backlog"
	for mode in burndown steady paced latency; do
		has "$MODES" "$mode" || continue
		for run in $(seq "$RUNS"); do
			# shellcheck disable=SC2046,SC2086
			record "$mode" "$name,workers=$WORKERS" backlog "$run" "$work/backlog" --db "$("$urlfn" "$mode" "$run")" --log-level error -o json bench "$(cmd_of "$mode")" $(mode_args "$mode") $BACKLOG_ARGS
		done
	done
	if has "$MODES" growth; then
		echo
		echo "== $name, backlog growth (load $(load))"
		# shellcheck disable=SC2086
		"$work/backlog" --db "$("$urlfn" growth 1)" --log-level error bench growth --rounds "$ROUNDS" --jobs "$GROWTH_JOBS" --workers "$WORKERS" $BACKLOG_ARGS
		echo "   (load after: $(load))"
	fi
}

sqlite_url() { echo "sqlite:$work/$1_$2.db"; }
mariadb_url() {
	local p=$mariadb_prefix$1_$2_
	local sep='?'
	[[ $MARIADB_URL == *\?* ]] && sep='&'
	echo "$MARIADB_URL${sep}prefix=$p"
}

if has "$STORES" sqlite; then
	backlog_alone sqlite sqlite_url
fi
if has "$STORES" mariadb; then
	mariadb_used=1
	backlog_alone mariadb mariadb_url
fi

echo
echo "== burn-down, steady and latency: jobs/s, insert/s and insert commit → start (steady) or insert → start (latency, idle workers)"
"$work/riverbench" summarize "$BENCH_ALL_RESULTS"
