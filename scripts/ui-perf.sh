#!/usr/bin/env bash
# Measures the debug UI's endpoints while PROXIES (default 10,000) proxies are connected to a
# release daemon (scripts/perf.sh's 5,000-service mesh, pushing throughout): each path fetched
# five times, the median printed. Build first: cargo build --release
# Usage: scripts/ui-perf.sh [PROXIES]
set -euo pipefail
cd "$(dirname "$0")/.."
proxies=${1:-10000}
bash scripts/perf.sh "$proxies" --soak-seconds 150 > /tmp/ui-perf-loadgen.log 2>&1 &
loadgen=$!
connected=0
for _ in $(seq 1 240); do
  connected=$(curl -s 127.0.0.1:25014/metrics | awk '/^pilot_xds\{/ {s+=$2} END {print s+0}')
  [ "${connected:-0}" -ge $((proxies * 99 / 100)) ] && break
  sleep 1
done
echo "connected: $connected"
sleep 10
median() {
  for _ in 1 2 3 4 5; do
    curl -s -o /dev/null -w "%{size_download} %{time_total}\n" "127.0.0.1:25014$1"
  done | sort -k2 -n | sed -n 3p |
    awk -v p="$1" '{printf "%-50s %10d bytes %8.1f ms\n", p, $1, $2 * 1000}'
}
for path in /debug/ui/summary "/debug/ui/proxies?limit=100" "/debug/ui/proxies?limit=100&q=nack" \
  "/debug/ui/objects?limit=100" "/debug/ui/services?limit=100" "/debug/ui/search?q=svc-42" \
  /debug /debug/syncz /debug/connections /debug/configz; do
  median "$path"
done
envoy=$(curl -s "127.0.0.1:25014/debug/ui/proxies?limit=100" | python3 -c \
  'import json,sys; print([p["id"] for p in json.load(sys.stdin)["items"] if p["generator"] != "Grpc"][0])')
median "/debug/config_dump?proxyID=$envoy"
median "/debug/resourcez?proxyID=$envoy"
curl -s 127.0.0.1:25014/metrics | grep -E "^process_resident_memory_bytes"
wait "$loadgen"
