#!/bin/sh
# curl-worker.sh — a backlog remote worker in plain POSIX sh.
#
# Requires: curl (7.55+) and jq (1.6+) on PATH.
#
# Usage:
#   BACKLOG_URL=http://127.0.0.1:8080 QUEUE=default sh curl-worker.sh COMMAND [ARG...]
#
# Environment:
#   BACKLOG_URL    the job server's base URL (required)
#   BACKLOG_TOKEN  a worker-role bearer token (optional; sent from a private
#                  file, never on the command line of curl)
#   QUEUE          the queue to work (default "default")
#   WORKER_ID      this worker's id (default <hostname>-<pid>)
#   WAIT_SECONDS   long-poll wait of a claim (default 20)
#
# For each claimed job it runs COMMAND [ARG...] with the job's args JSON on
# stdin (plus a newline) and BACKLOG_JOB_ID, BACKLOG_JOB_KIND,
# BACKLOG_JOB_QUEUE, BACKLOG_JOB_ATTEMPT, BACKLOG_JOB_MAX_ATTEMPTS in its
# environment. Exit 0 completes the job with stdout as its result (a JSON
# string); any other exit fails the attempt ("exit status N: <last line of
# stderr>", with the stderr tail as the trace) and the server retries it by
# its policy. Every claim records a heartbeat; while a command runs, a
# background loop heartbeats at the server's interval, naming the job's
# lease token (which renews that lease; a heartbeat renews only the leases
# it names).
#
# SIGTERM/SIGINT: stop claiming, let the current job finish and report it,
# deregister, exit 0.

set -u

: "${BACKLOG_URL:?set BACKLOG_URL to the job server, e.g. http://127.0.0.1:8080}"
[ "$#" -gt 0 ] || { echo "usage: curl-worker.sh COMMAND [ARG...]" >&2; exit 2; }
command -v curl >/dev/null 2>&1 || { echo "curl-worker: curl is required" >&2; exit 2; }
command -v jq >/dev/null 2>&1 || { echo "curl-worker: jq is required" >&2; exit 2; }

QUEUE=${QUEUE:-default}
WORKER_ID=${WORKER_ID:-$(hostname 2>/dev/null || echo host)-$$}
WAIT_SECONDS=${WAIT_SECONDS:-20}
base=${BACKLOG_URL%/}/v1
wid=$(jq -rn --arg s "$WORKER_ID" '$s|@uri')

tmp=$(mktemp -d "${TMPDIR:-/tmp}/curl-worker.XXXXXX") || exit 1
umask 077
: >"$tmp/auth"
if [ -n "${BACKLOG_TOKEN:-}" ]; then
	printf 'Authorization: Bearer %s\n' "$BACKLOG_TOKEN" >"$tmp/auth"
fi

log() { printf 'curl-worker %s: %s\n' "$WORKER_ID" "$*" >&2; }

# api METHOD PATH [BODYFILE] [MAXTIME]: the response body goes to
# $tmp/resp, the HTTP status (000 when there was no answer) to $status.
api() {
	_m=$1 _p=$2 _b=${3:-} _t=${4:-30}
	set -- -sS -o "$tmp/resp" -w '%{http_code}' -X "$_m" --max-time "$_t" \
		-H @"$tmp/auth" -H 'Accept: application/json'
	if [ -n "$_b" ]; then
		set -- "$@" -H 'Content-Type: application/json' --data-binary @"$_b"
	fi
	status=$(curl "$@" "$base$_p" 2>"$tmp/curlerr") || status=000
	case $status in 2??) return 0 ;; esac
	return 1
}

# problem: a one-line description of the last error response.
problem() {
	if [ "$status" = 000 ]; then
		printf 'no answer (%s)' "$(tail -n 1 "$tmp/curlerr" 2>/dev/null)"
	else
		printf '%s %s' "$status" "$(jq -r '(.type // "" | sub(".*/"; "")) + ": " + (.detail // .title // "")' "$tmp/resp" 2>/dev/null)"
	fi
}

stop=0
trap 'stop=1' TERM INT

# pause SECONDS: sleep, but return early on a signal.
pause() {
	sleep "$1" &
	wait $! 2>/dev/null
	kill $! 2>/dev/null
	return 0
}

heartbeat=10
register() {
	jq -n --arg name "$(hostname 2>/dev/null || echo host)" --arg q "$QUEUE" \
		'{name: $name, queues: [$q]}' >"$tmp/register.json"
	delay=1
	until api PUT "/workers/$wid" "$tmp/register.json"; do
		case $status in
		401 | 403 | 400 | 404 | 405 | 415 | 422) log "registration refused: $(problem)"; return 1 ;;
		esac
		log "cannot register yet: $(problem); retrying in ${delay}s"
		[ "$stop" = 1 ] && return 1
		pause "$delay"
		[ "$delay" -lt 16 ] && delay=$((delay * 2))
	done
	heartbeat=$(jq -r '.heartbeat_interval_seconds // 10' "$tmp/resp")
	return 0
}

# wait_for PID: wait until the process ends (signals interrupt wait, so
# retry while it lives) and set $rc to its exit status.
wait_for() {
	while :; do
		wait "$1"
		rc=$?
		kill -0 "$1" 2>/dev/null || return 0
	done
}

# deliver ENDPOINT BODYFILE: post an outcome until it applies, the lease is
# found lost (409) or the job is gone (404); transient failures are retried.
deliver() {
	tries=0
	while :; do
		if api POST "/jobs/$id/$1" "$2"; then return 0; fi
		case $status in
		409 | 404) log "job $id: $1 not applied: $(problem)"; return 0 ;;
		400 | 401 | 403 | 413 | 415 | 422)
			log "job $id: $1 refused: $(problem); the job comes back when its lease ends"
			return 1 ;;
		esac
		tries=$((tries + 1))
		if [ "$tries" -ge 60 ]; then
			log "job $id: giving up on $1 after $tries tries: $(problem)"
			return 1
		fi
		log "job $id: $1 failed: $(problem); retrying"
		sleep 1
	done
}

# run_job: run the command for the claimed job in $tmp/claim.json and
# report its outcome.
run_job() {
	jq -r '.jobs[0] | [.id, .lease_token, .kind, .queue, .attempt, .max_attempts] | @tsv' "$tmp/claim.json" >"$tmp/fields"
	IFS=$(printf '\t') read -r id token kind queue attempt max_attempts <"$tmp/fields"
	jq -c '.jobs[0].args' "$tmp/claim.json" >"$tmp/args"

	# Heartbeat while the command runs (claims do it otherwise), naming
	# the one job this worker holds.
	# Its output goes nowhere, so a sleep it leaves behind holds no pipe.
	(
		while sleep "$heartbeat"; do
			curl -sS -o /dev/null --max-time 10 -X POST -H @"$tmp/auth" -H 'Content-Type: application/json' \
				--data-binary "{\"leases\":[\"$token\"]}" "$base/workers/$wid/heartbeat"
		done
	) </dev/null >/dev/null 2>&1 &
	hb=$!

	(
		BACKLOG_JOB_ID=$id BACKLOG_JOB_KIND=$kind BACKLOG_JOB_QUEUE=$queue \
			BACKLOG_JOB_ATTEMPT=$attempt BACKLOG_JOB_MAX_ATTEMPTS=$max_attempts
		export BACKLOG_JOB_ID BACKLOG_JOB_KIND BACKLOG_JOB_QUEUE BACKLOG_JOB_ATTEMPT BACKLOG_JOB_MAX_ATTEMPTS
		exec "$@" <"$tmp/args" >"$tmp/out" 2>"$tmp/err"
	) &
	wait_for $!
	# SIGKILL: a TERM arriving before the subshell dropped the parent's
	# trap would only set its copy of $stop.
	kill -9 "$hb" 2>/dev/null
	wait "$hb" 2>/dev/null

	if [ "$rc" -eq 0 ]; then
		# The tail of stdout, so the result stays within the server's limit.
		tail -c 60000 "$tmp/out" | jq -Rs --arg t "$token" '{lease_token: $t, result: .}' >"$tmp/outcome.json"
		deliver complete "$tmp/outcome.json" && return 0
		[ "$status" = 400 ] || return 0
		# The server refused the result: fail the attempt instead of
		# leaving the job running.
		jq -n --arg t "$token" --arg e "completion refused: $(problem)" \
			'{lease_token: $t, error: $e, action: "retry"}' >"$tmp/outcome.json"
		deliver fail "$tmp/outcome.json"
	else
		tail -c 4096 "$tmp/err" >"$tmp/trace"
		last=$(grep -v '^[[:space:]]*$' "$tmp/trace" | tail -n 1 | cut -c 1-200)
		msg="exit status $rc"
		[ -n "$last" ] && msg="$msg: $last"
		jq -n --arg t "$token" --arg e "$msg" --rawfile trace "$tmp/trace" \
			'{lease_token: $t, error: $e, action: "retry"} + (if $trace == "" then {} else {trace: $trace} end)' >"$tmp/outcome.json"
		deliver fail "$tmp/outcome.json"
	fi
	return 0
}

cleanup() {
	api DELETE "/workers/$wid" "" 10 || log "deregister failed: $(problem)"
	rm -rf "$tmp"
}

register || { rm -rf "$tmp"; exit 1; }
log "registered for queue $QUEUE at $BACKLOG_URL (heartbeat every ${heartbeat}s)"

jq -n --argjson w "$WAIT_SECONDS" '{limit: 1, wait_seconds: $w}' >"$tmp/claimreq.json"
delay=1
while [ "$stop" = 0 ]; do
	# curl runs in the background so that a signal interrupts the long poll.
	curl -sS -o "$tmp/resp" -w '%{http_code}' -X POST --max-time $((WAIT_SECONDS + 20)) \
		-H @"$tmp/auth" -H 'Accept: application/json' -H 'Content-Type: application/json' \
		--data-binary @"$tmp/claimreq.json" "$base/workers/$wid/claim" >"$tmp/status" 2>"$tmp/curlerr" &
	claim=$!
	wait "$claim"
	# A signal interrupts the wait: abandon the long poll (the server hands
	# back whatever it claims for a client that went away).
	[ "$stop" = 1 ] && kill "$claim" 2>/dev/null
	wait_for "$claim"
	status=$(cat "$tmp/status" 2>/dev/null)
	[ -n "$status" ] || status=000
	case $status in
	2??)
		delay=1
		cp "$tmp/resp" "$tmp/claim.json"
		# A job claimed just before a signal is still run and reported.
		if [ "$(jq '.jobs | length' "$tmp/claim.json")" -gt 0 ]; then
			run_job "$@"
		fi
		;;
	404)
		log "the server does not know this worker: $(problem); registering again"
		register || break
		;;
	*)
		[ "$stop" = 1 ] && break
		log "claim failed: $(problem); retrying in ${delay}s"
		pause "$delay"
		[ "$delay" -lt 16 ] && delay=$((delay * 2))
		;;
	esac
done

log "stopping"
cleanup
exit 0
