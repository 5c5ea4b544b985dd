#!/usr/bin/env bash
# Writes everything a varied set of proxies (sidecars, gateways, a waypoint, ztunnel, proxyless
# gRPC) receives from a varied mesh to FILE. A restructuring that must leave the output unchanged
# runs it before and after, then: cmp before.txt after.txt
# (Workload certificates are random per run, so SDS is left out.)
set -euo pipefail
out=${1:?usage: scripts/output-snapshot.sh FILE}
case $out in /*) ;; *) out=$PWD/$out ;; esac
cd "$(dirname "$0")/.."
RUDDER_OUTPUT_SNAPSHOT=$out cargo test --lib --quiet output_snapshot >/dev/null
echo "$(grep -c '^== ' "$out") resources written to $out"
