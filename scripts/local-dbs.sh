#!/usr/bin/env bash
# Starts this machine's PostgreSQL and MariaDB servers if they are installed
# and not answering, then prints the DSN exports the tests read. Used by
# .ci/run; developers can `eval "$(scripts/local-dbs.sh)"` before `make test`.
set -u

say() { echo "local-dbs: $*" >&2; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
  for _ in $(seq 1 60); do
    port_open "$1" && return 0
    sleep 0.5
  done
  return 1
}

if ! port_open 5432; then
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    say "starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start >&2 || say "PostgreSQL did not start"
    wait_port 5432 || say "PostgreSQL is not answering on 5432"
  else
    say "PostgreSQL is not installed here"
  fi
fi
if ! port_open 3306; then
  if [ -x /usr/sbin/mariadbd ]; then
    say "starting MariaDB"
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd >&2 || say "MariaDB did not start"
    wait_port 3306 || say "MariaDB is not answering on 3306"
  else
    say "MariaDB is not installed here"
  fi
fi

if port_open 5432; then
  echo "export BACKLOG_TEST_POSTGRES_DSN=\${BACKLOG_TEST_POSTGRES_DSN:-postgres://root@127.0.0.1:5432/test?sslmode=disable}"
fi
if port_open 3306; then
  echo "export BACKLOG_TEST_MYSQL_DSN=\${BACKLOG_TEST_MYSQL_DSN:-root@tcp(127.0.0.1:3306)/test}"
fi
