#!/usr/bin/env bash
# container-check.sh: check the Dockerfile: build the image, run it, see
# /healthz answer, stop it.
#
#   scripts/container-check.sh [--version VERSION] [--engine auto|none]
#
# When a container engine answers (`docker info` or `podman info` succeeds)
# and --engine is auto (the default), it builds the real image, runs it with
# a random BACKLOG_ADMIN_TOKEN and the port published on 127.0.0.1, waits
# for /healthz and for the engine to report the container healthy (the
# Dockerfile's HEALTHCHECK), checks `backlog version` inside the image,
# stops the container (it must exit with status 0) and removes the image.
#
# Without an engine (or with --engine none) it performs the Dockerfile's
# steps itself: it runs the build stage's RUN commands in this checkout
# (the build context) with /out/ mapped to a temporary root file system,
# copies the binary where the final stage's COPY --from=build puts it,
# checks that the binary is static, creates the VOLUME directory owned by
# the USER, and runs ENTRYPOINT + CMD as that user (setpriv, when running as
# root; as the current user otherwise) with the VOLUME path mapped into the
# temporary root and the listen port replaced by a free one; then it polls
# the HEALTHCHECK's URL on that port, sends SIGTERM (as `docker stop`
# does) and requires exit status 0. The final stage's RUN commands (user
# creation with the base image's tools) are not run.
#
# The last line says which ran: "container-check: ok: image built and run
# with ENGINE" or "container-check: ok: no container engine; the
# Dockerfile's steps ran without one (as uid N)".
# Environment: GO (default go). Needs curl or wget.
set -euo pipefail

die() {
	echo "container-check: $*" >&2
	exit 1
}
say() { echo "container-check: $*" >&2; }

root=$(cd "$(dirname "$0")/.." && pwd)
GO=${GO:-go}
version=v0.0.0-container-check
engine_mode=auto
while [ $# -gt 0 ]; do
	case $1 in
	--version) [ $# -ge 2 ] || die "--version needs a value"; version=$2; shift 2 ;;
	--engine) [ $# -ge 2 ] || die "--engine needs a value"; engine_mode=$2; shift 2 ;;
	*) die "unknown argument \"$1\" (usage: scripts/container-check.sh [--version VERSION] [--engine auto|none])" ;;
	esac
done
case $engine_mode in auto | none) ;; *) die "--engine must be auto or none, not \"$engine_mode\"" ;; esac
dockerfile="$root/Dockerfile"
[ -f "$dockerfile" ] || die "no Dockerfile in $root"

if command -v curl >/dev/null; then
	fetch() { curl -fsS -m 3 -o /dev/null "$1" 2>/dev/null; }
elif command -v wget >/dev/null; then
	fetch() { wget -q -T 3 -O /dev/null "$1" 2>/dev/null; }
else
	die "needs curl or wget to poll /healthz"
fi
token=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')

# --- With a container engine: the real image. -----------------------------
engine=
if [ "$engine_mode" = auto ]; then
	for e in docker podman; do
		if command -v "$e" >/dev/null && timeout 20 "$e" info >/dev/null 2>&1; then
			engine=$e
			break
		fi
	done
fi
if [ -n "$engine" ]; then
	tag="backlog-container-check:$$-$RANDOM"
	name="backlog-container-check-$$-$RANDOM"
	cleanup() {
		"$engine" rm -f "$name" >/dev/null 2>&1 || true
		"$engine" rmi -f "$tag" >/dev/null 2>&1 || true
	}
	trap cleanup EXIT
	say "building the image with $engine"
	# podman keeps HEALTHCHECK only in Docker-format images.
	format=()
	[ "$engine" = podman ] && format=(--format docker)
	"$engine" build "${format[@]}" --build-arg "VERSION=$version" -t "$tag" "$root" >&2
	out=$("$engine" run --rm --entrypoint /usr/local/bin/backlog "$tag" version)
	[[ $out == "backlog $version"* ]] || die "backlog version in the image printed \"$out\", not backlog $version"
	"$engine" run -d --name "$name" -e "BACKLOG_ADMIN_TOKEN=$token" -p 127.0.0.1::8080 "$tag" >/dev/null
	hostport=$("$engine" port "$name" 8080/tcp | head -n1)
	hostport=${hostport##*:}
	ok=
	for _ in $(seq 1 60); do
		if fetch "http://127.0.0.1:$hostport/healthz"; then ok=1; break; fi
		sleep 0.5
	done
	[ -n "$ok" ] || { "$engine" logs "$name" >&2 || true; die "/healthz did not answer within 30 s"; }
	if [ "$engine" = podman ]; then
		# podman runs health checks from systemd timers, which may be
		# absent: run the image's HEALTHCHECK once, now.
		podman healthcheck run "$name" >&2 || die "podman healthcheck run: the image's HEALTHCHECK failed"
	else
		health=
		for _ in $(seq 1 90); do
			health=$("$engine" inspect -f '{{.State.Health.Status}}' "$name" 2>/dev/null || true)
			[ "$health" = healthy ] && break
			sleep 1
		done
		[ "$health" = healthy ] || die "the engine reports the container \"$health\", not healthy (HEALTHCHECK)"
	fi
	"$engine" stop -t 30 "$name" >/dev/null
	code=$("$engine" inspect -f '{{.State.ExitCode}}' "$name")
	[ "$code" = 0 ] || { "$engine" logs "$name" >&2 || true; die "the container exited with status $code after docker stop"; }
	say "ok: image built and run with $engine"
	exit 0
fi

# --- Without an engine: the Dockerfile's steps, one by one. ---------------
# Logical lines of the Dockerfile: comments dropped, continuations joined.
mapfile -t lines < <(sed -e '/^[[:space:]]*#/d' "$dockerfile" |
	sed -e ':a' -e '/\\$/N; s/\\\n[[:space:]]*/ /; ta' | sed -e '/^[[:space:]]*$/d')

rootfs=$(mktemp -d)
chmod 0755 "$rootfs"
pid=
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
	rm -rf "$rootfs"
}
trap cleanup EXIT

# JSON array of strings (exec form) → one argument a line.
json_args() {
	local s=$1
	[[ $s =~ ^\[(.*)\]$ ]] || die "expected an exec-form JSON array, got: $s"
	s=${BASH_REMATCH[1]}
	while [[ $s =~ ^[[:space:]]*\"([^\"\\]*)\"[[:space:]]*,?(.*)$ ]]; do
		printf '%s\n' "${BASH_REMATCH[1]}"
		s=${BASH_REMATCH[2]}
	done
	[[ $s =~ ^[[:space:]]*$ ]] || die "cannot read the JSON array (escapes are not supported): $1"
}

stage=0
build_stage=
user=
volume=
entrypoint=()
cmd=()
health_url=
declare -A envs=()
export VERSION="$version"
for line in "${lines[@]}"; do
	instr=${line%%[[:space:]]*}
	args=${line#"$instr"}
	args=${args#"${args%%[![:space:]]*}"}
	case ${instr^^} in
	FROM)
		stage=$((stage + 1))
		if [[ $args =~ [[:space:]][Aa][Ss][[:space:]]+([^[:space:]]+) ]]; then
			[ $stage = 1 ] && build_stage=${BASH_REMATCH[1]}
		fi
		say "stage $stage: FROM $args"
		;;
	ARG)
		[ $stage = 1 ] || continue
		n=${args%%=*}
		if [[ $args == *=* ]] && [ -z "${!n:-}" ]; then export "$n=${args#*=}"; fi
		;;
	RUN)
		if [ $stage = 1 ]; then
			step=${args//\/out\//$rootfs\/out\/}
			say "RUN $step"
			mkdir -p "$rootfs/out"
			(cd "$root" && GO="$GO" PATH="$(dirname "$(command -v "$GO")"):$PATH" sh -c "$step") >&2
		else
			say "skipped (needs the base image's tools): RUN $args"
		fi
		;;
	COPY)
		if [[ $args =~ ^--from=([^[:space:]]+)[[:space:]]+([^[:space:]]+)[[:space:]]+([^[:space:]]+)$ ]]; then
			[ "${BASH_REMATCH[1]}" = "$build_stage" ] || die "COPY from unknown stage ${BASH_REMATCH[1]}"
			src=${BASH_REMATCH[2]} dst=${BASH_REMATCH[3]}
			mkdir -p "$(dirname "$rootfs$dst")"
			cp "$rootfs$src" "$rootfs$dst"
		elif [ $stage -gt 1 ]; then
			read -r src dst <<<"$args"
			mkdir -p "$(dirname "$rootfs$dst")"
			cp "$root/$src" "$rootfs$dst"
		fi
		;;
	ENV)
		[ $stage -gt 1 ] || continue
		envs[${args%%[= ]*}]=${args#*[= ]}
		;;
	USER) [ $stage -gt 1 ] && user=$args ;;
	VOLUME) volume=$args ;;
	ENTRYPOINT) mapfile -t entrypoint < <(json_args "$args") ;;
	CMD) mapfile -t cmd < <(json_args "$args") ;;
	HEALTHCHECK)
		[[ $args =~ (http://[^[:space:]]*/healthz) ]] || die "HEALTHCHECK does not poll /healthz: $args"
		health_url=${BASH_REMATCH[1]}
		;;
	esac
done
[ ${#entrypoint[@]} -gt 0 ] || die "the Dockerfile has no exec-form ENTRYPOINT"
[ ${#cmd[@]} -gt 0 ] || die "the Dockerfile has no exec-form CMD"
[ -n "$health_url" ] || die "the Dockerfile has no HEALTHCHECK on /healthz"
[ -n "$volume" ] || die "the Dockerfile has no VOLUME"
[ -n "$user" ] || die "the Dockerfile has no USER in its final stage"

bin=$rootfs${entrypoint[0]}
[ -x "$bin" ] || die "ENTRYPOINT ${entrypoint[0]} is not in the final stage"
static=$("$GO" version -m "$bin" | awk '$1 == "build" && $2 ~ /^CGO_ENABLED=/ {print $2}')
[ "$static" = CGO_ENABLED=0 ] || die "the binary was built with ${static:-no CGO_ENABLED setting}, not CGO_ENABLED=0"
if command -v file >/dev/null; then
	file -L "$bin" | grep -Eq 'statically linked|static-pie linked' || die "not a static binary: $(file -L "$bin")"
fi
out=$("$bin" version)
[[ $out == "backlog $version"* ]] || die "backlog version printed \"$out\", not backlog $version"

# The listen address keeps its host and gets port 0 (a free one, which
# serve prints); the health check's URL gets the same port.
argv=()
for a in "${entrypoint[@]}" "${cmd[@]}"; do
	a=${a//"$volume"\//"$rootfs$volume"/}
	[[ $a =~ ^(.*):8080$ ]] && a="${BASH_REMATCH[1]}:0"
	[ "$a" = "${entrypoint[0]}" ] && a=$bin
	argv+=("$a")
done

uid=${user%%:*} gid=${user#*:}
[ "$gid" != "$user" ] || gid=$uid
mkdir -p "$rootfs$volume"
runas=()
ranas=$(id -u)
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
	setpriv --reuid="$uid" --regid="$gid" --clear-groups test -x "$bin" 2>/dev/null; then
	chown "$uid:$gid" "$rootfs$volume"
	runas=(setpriv --reuid="$uid" --regid="$gid" --clear-groups)
	ranas=$uid
else
	say "running as uid $(id -u), not the Dockerfile's USER $user (needs root and setpriv, and a temporary directory others may enter)"
fi

envargs=(PATH=/usr/local/bin:/usr/bin:/bin HOME="$rootfs$volume" "BACKLOG_ADMIN_TOKEN=$token")
for k in "${!envs[@]}"; do envargs+=("$k=${envs[$k]}"); done
log=$rootfs/serve.log
say "running ${argv[*]} (uid $ranas)"
(cd "$rootfs$volume" && exec env -i "${envargs[@]}" "${runas[@]}" "${argv[@]}") >"$log" 2>&1 &
pid=$!
ok=
port=
for _ in $(seq 1 120); do
	if [ -z "$port" ] && [[ $(cat "$log") =~ API\ http://[^/[:space:]]*:([0-9]+)/ ]]; then
		port=${BASH_REMATCH[1]}
		health_url=${health_url/:8080\//:$port/}
	fi
	if [ -n "$port" ] && fetch "$health_url"; then ok=1; break; fi
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.25
done
if [ -z "$ok" ]; then
	cat "$log" >&2
	kill -0 "$pid" 2>/dev/null || die "serve exited before $health_url answered"
	die "$health_url did not answer within 30 s"
fi
say "$health_url answered"
kill -TERM "$pid"
code=0
wait "$pid" || code=$?
pid=
[ "$code" = 0 ] || { cat "$log" >&2; die "serve exited with status $code after SIGTERM"; }
[ -f "$rootfs$volume/backlog.db" ] || say "note: no backlog.db in the volume"
say "ok: no container engine; the Dockerfile's steps ran without one (as uid $ranas)"
