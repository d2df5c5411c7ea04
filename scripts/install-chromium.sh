#!/usr/bin/env bash
# Installs Debian's Chromium for the dashboard's browser test
# (adapters/dashboard) when /usr/bin/chromium is missing, apt-get is
# available and we are root; does nothing otherwise. Used by .ci/run and by
# `make test`. Without a browser the test skips, or fails when
# BACKLOG_REQUIRE_BROWSER=1.
set -u

say() { echo "install-chromium: $*" >&2; }

[ -x /usr/bin/chromium ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  say "/usr/bin/chromium is missing and apt-get is not available; the browser test will skip"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  say "/usr/bin/chromium is missing and we are not root; the browser test will skip (as root: apt-get install chromium)"
  exit 0
fi

say "installing chromium with apt-get"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get update -qq >&2; then
  say "apt-get update failed"
  exit 1
fi
if ! apt-get install -y -qq chromium >&2; then
  say "apt-get install chromium failed"
  exit 1
fi
if [ ! -x /usr/bin/chromium ]; then
  say "chromium installed but /usr/bin/chromium is missing"
  exit 1
fi
say "$(/usr/bin/chromium --version 2>/dev/null || echo installed)"
