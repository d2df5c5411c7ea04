#!/usr/bin/env bash
# Side-by-side benchmark of backlog and River on one PostgreSQL server.
#
# Builds `backlog` (from this repository) and `riverbench` (this module,
# River v0.51.1), creates two scratch databases, runs burn-down and
# steady-state measurements alternating River / backlog, each mode with 100
# and 1,000 workers both tuned and at each system's defaults, prints one
# summary table and one line per mode and config (River's and backlog's
# median jobs/s and their ratio), and drops the databases again. See
# README.md.
#
# Environment (all optional):
#   PG_URL          server to use, without database   (postgres://root@127.0.0.1:5432)
#   PG_ADMIN_DB     existing database to connect to for CREATE/DROP DATABASE (test)
#   PG_PARAMS       URL query parameters               (sslmode=disable)
#   JOBS            jobs per burn-down run             (100000)
#   RUNS            tuned burn-down / steady runs per config (3)
#   DEFAULTS_RUNS   runs per mode and worker count with both systems at
#                   their defaults: River's library fetch settings,
#                   backlog without --max-claim (1; 0 skips)
#   STEADY_DURATION measured time of a steady run      (10s)
#   STEADY_RUNS     tuned steady runs per config       (RUNS)
#   RESULTS         keep the raw results (JSON records) in this file
#   MAX_LOAD        wait (up to 60 s) before a run while the 1-minute load
#                   average is above this              (2 × CPUs)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

PG_URL=${PG_URL:-postgres://root@127.0.0.1:5432}
PG_ADMIN_DB=${PG_ADMIN_DB:-test}
PG_PARAMS=${PG_PARAMS:-sslmode=disable}
JOBS=${JOBS:-100000}
RUNS=${RUNS:-3}
DEFAULTS_RUNS=${DEFAULTS_RUNS:-1}
STEADY_DURATION=${STEADY_DURATION:-10s}
STEADY_RUNS=${STEADY_RUNS:-$RUNS}
cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
MAX_LOAD=${MAX_LOAD:-$((2 * cpus))}

# River's fetch settings for the "tuned" configurations: the values River's
# own `river bench` command uses (library defaults: 100ms and 1s).
RIVER_TUNED=(--fetch-cooldown 2ms --fetch-poll-interval 20ms)
# backlog's tuned setting at 1,000 workers: claims of up to 1,000 jobs
# (the engine's default is 200).
BACKLOG_TUNED_1000=(--max-claim 1000)

tag=$$
river_db=river_bench_$tag
backlog_db=backlog_bench_$tag
admin_url="$PG_URL/$PG_ADMIN_DB?$PG_PARAMS"

work=$(mktemp -d "${TMPDIR:-/tmp}/backlog-river-bench.XXXXXX")
results=$work/results.jsonl
created=()
cleanup() {
	local rc=$?
	set +e
	if [[ -x $work/riverbench ]]; then
		for db in "${created[@]}"; do
			"$work/riverbench" dropdb --admin-url "$admin_url" "$db" || echo "run.sh: could not drop database $db" >&2
		done
	fi
	if [[ -n ${RESULTS:-} && -f $results ]]; then
		cp "$results" "$RESULTS"
	fi
	rm -rf "$work"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf '%s\n' "$*" >&2; }

load() {
	if [[ -r /proc/loadavg ]]; then
		cut -d' ' -f1-3 /proc/loadavg
	else
		uptime | sed 's/.*load averages*: *//; s/,//g'
	fi
}

# wait_for_calm waits up to 60 s while the 1-minute load is above MAX_LOAD.
wait_for_calm() {
	local i
	for i in $(seq 12); do
		if awk -v l="$(load | cut -d' ' -f1)" -v m="$MAX_LOAD" 'BEGIN { exit !(l > m) }'; then
			say "  load $(load) is above $MAX_LOAD; waiting…"
			sleep 5
		else
			return 0
		fi
	done
	say "  load still high ($(load)); running anyway"
}

with_timeout() {
	if command -v timeout >/dev/null; then
		timeout 15m "$@"
	else
		"$@"
	fi
}

river_url() { echo "$PG_URL/$river_db?$PG_PARAMS"; }
backlog_url() { echo "$PG_URL/$backlog_db?$PG_PARAMS&schema=$1"; }

# record MODE CONFIG SYSTEM RUN SCHEMA ARGS…: runs one measurement of SYSTEM
# (river or backlog) in a fresh schema SCHEMA of its database and appends a
# record with its JSON result and the load average before and after.
record() {
	local mode=$1 config=$2 system=$3 run=$4 schema=$5
	shift 5
	local cmd
	case $system in
	# River's run goes through backlog bench cpu, which adds the same
	# client/server CPU split backlog's own results carry.
	river) cmd=("$work/backlog" --db "$(river_url)" bench cpu -- "$work/riverbench" "$mode" --database-url "$(river_url)" --schema "$schema" "$@") ;;
	backlog) cmd=("$work/backlog" --db "$(backlog_url "$schema")" --log-level error -o json bench "$mode" "$@") ;;
	esac
	wait_for_calm
	local before after out
	before=$(load)
	say "$mode  $config  $system  run $run  (load $before)"
	if ! out=$(with_timeout "${cmd[@]}" 2>"$work/stderr"); then
		say "run.sh: $system $mode failed: ${cmd[*]}"
		cat "$work/stderr" >&2
		exit 1
	fi
	after=$(load)
	printf '{"mode":"%s","config":"%s","system":"%s","run":%d,"load_before":"%s","load_after":"%s","result":%s}\n' \
		"$mode" "$config" "$system" "$run" "$before" "$after" "$out" >>"$results"
}

# pair MODE WORKERS SETTINGS RUN ARGS…: one run of River, then one of
# backlog, with WORKERS workers at SETTINGS (tuned or defaults), recorded
# under the config "workers=WORKERS SETTINGS".
pair() {
	local mode=$1 workers=$2 settings=$3 run=$4
	shift 4
	local river_args=() backlog_args=()
	if [[ $settings == tuned ]]; then
		river_args=("${RIVER_TUNED[@]}")
		if ((workers >= 1000)); then
			backlog_args=("${BACKLOG_TUNED_1000[@]}")
		fi
	fi
	local tag=${mode:0:1}${settings:0:1}${workers}_$run
	record "$mode" "workers=$workers $settings" river "$run" "r$tag" "$@" --workers "$workers" ${river_args[@]+"${river_args[@]}"}
	record "$mode" "workers=$workers $settings" backlog "$run" "b$tag" "$@" --workers "$workers" ${backlog_args[@]+"${backlog_args[@]}"}
}

say "== building (go $(go env GOVERSION))"
(cd "$repo" && go build -o "$work/backlog" ./cmd/backlog)
(cd "$here" && go build -o "$work/riverbench" ./riverbench)

say "== preparing databases $river_db and $backlog_db on $PG_URL"
if ! "$work/riverbench" ping --admin-url "$admin_url" 2>"$work/stderr"; then
	say "run.sh: cannot reach PostgreSQL at $admin_url:"
	cat "$work/stderr" >&2
	say "(start it with e.g. pg_ctlcluster <version> main start)"
	exit 1
fi
for db in "$river_db" "$backlog_db"; do
	"$work/riverbench" createdb --admin-url "$admin_url" "$db"
	created+=("$db")
done

say "== machine: $cpus CPUs, load $(load)"
say "== burn-down: $JOBS jobs, $RUNS tuned and $DEFAULTS_RUNS default runs per config, River / backlog alternating"
for run in $(seq "$RUNS"); do
	pair burndown 100 tuned "$run" --jobs "$JOBS"
	pair burndown 1000 tuned "$run" --jobs "$JOBS"
done
for run in $(seq "$DEFAULTS_RUNS"); do
	pair burndown 100 defaults "$run" --jobs "$JOBS"
	pair burndown 1000 defaults "$run" --jobs "$JOBS"
done

say "== steady: $STEADY_DURATION, $STEADY_RUNS tuned and $DEFAULTS_RUNS default runs per config, 2 producers × 100-job batches, backlog ≤ 20000"
for run in $(seq "$STEADY_RUNS"); do
	pair steady 100 tuned "$run" --duration "$STEADY_DURATION"
	pair steady 1000 tuned "$run" --duration "$STEADY_DURATION"
done
for run in $(seq "$DEFAULTS_RUNS"); do
	pair steady 100 defaults "$run" --duration "$STEADY_DURATION"
	pair steady 1000 defaults "$run" --duration "$STEADY_DURATION"
done

say "== done, load $(load)"
echo
echo "backlog vs River $(cd "$here" && go list -m -f '{{.Version}}' github.com/riverqueue/river) — $cpus CPUs, PostgreSQL at $PG_URL"
echo "tuned: River ${RIVER_TUNED[*]}; backlog ${BACKLOG_TUNED_1000[*]} at 1000 workers (its defaults at 100)"
echo "defaults: River's library defaults (fetch cooldown 100ms, poll 1s); backlog with no flags"
echo
"$work/riverbench" summarize "$results"
