#!/usr/bin/env bash
# Runs a release daemon on a fresh config directory and `rudder-loadgen` against it, as
# docs/performance.md does: scripts/perf.sh PROXIES [more loadgen flags, e.g. --replay].
# The mesh is 5,000 services in 50 Sidecar-scoped namespaces; with UNSCOPED=1, the load generator's
# own shape (1,000 services in 10 namespaces, no Sidecar) unless flags say otherwise. Later flags
# override earlier ones. Build first: cargo build --release
# The daemon's ports (250xx) are below the ephemeral range (32768 and up), so the thousands of
# connections a previous run left in TIME_WAIT cannot hold one of them.
set -euo pipefail
proxies=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/cfg"
bin="$(dirname "$0")/../target/release/rudder"
# DAEMON_BIN=path runs another daemon build against this load generator (an A/B comparison),
# LOADGEN_BIN=path another load generator build against this daemon; DAEMON_ARGS adds flags to the
# daemon's command line.
# shellcheck disable=SC2086
"${DAEMON_BIN:-$bin}" serve --config-source files --config-dir "$work/cfg" --ca-dir "$work/ca" \
  --grpc-addr 127.0.0.1:25010 --secure-grpc-addr 127.0.0.1:25012 --https-addr 127.0.0.1:25017 \
  --monitoring-addr 127.0.0.1:25014 --http-addr 127.0.0.1:25080 --log-level warn \
  --max-requests-per-second 1000000 ${DAEMON_ARGS:-} &
daemon=$!
sleep 2
status=0
shape=(--services 5000 --namespaces 50 --sidecar-scope)
if [[ "${UNSCOPED:-0}" == 1 ]]; then shape=(); fi
"${LOADGEN_BIN:-$bin-loadgen}" --xds-addr 127.0.0.1:25010 --monitoring-addr 127.0.0.1:25014 \
  --config-dir "$work/cfg" "${shape[@]}" --proxies "$proxies" "$@" || status=$?
kill "$daemon"
wait "$daemon" 2>/dev/null || true
exit "$status"
