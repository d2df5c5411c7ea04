#!/usr/bin/env bash
# Installs the Debian packages of the database topologies the tests build
# with internal/dbserver (PgBouncer, HAProxy, the Galera library and rsync
# for its state transfer) when one is missing, apt-get is available and we
# are root; does nothing otherwise. Used by .ci/run and by `make test`.
# Without them the topology tests skip, or fail when BACKLOG_REQUIRE_DBS=1.
set -u

say() { echo "install-cluster-packages: $*" >&2; }

missing=()
[ -x /usr/sbin/pgbouncer ] || missing+=(pgbouncer)
[ -x /usr/sbin/haproxy ] || missing+=(haproxy)
[ -f /usr/lib/galera/libgalera_smm.so ] || missing+=(galera-4)
command -v rsync >/dev/null 2>&1 || missing+=(rsync)
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  say "missing ${missing[*]} and apt-get is not available; the topology tests will skip"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  say "missing ${missing[*]} and we are not root; the topology tests will skip (as root: apt-get install ${missing[*]})"
  exit 0
fi

say "installing ${missing[*]} with apt-get"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get update -qq >&2; then
  say "apt-get update failed"
  exit 1
fi
# The packages' services are not started here (no init system); the tests
# run their own private processes.
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2; then
  say "apt-get install ${missing[*]} failed"
  exit 1
fi
say "installed ${missing[*]}"
