#!/usr/bin/env bash
# Runs Rudder's whole test suite: formatting, lints, unit and end-to-end tests.
# Fails when any step fails or when no test ran at all.
set -euo pipefail
cd "$(dirname "$0")/.."

log="$(mktemp)"
trap 'rm -f "$log"' EXIT

# Free disk decides whether the build can finish; print it so a failed run says why.
echo "== disk"
df -h . | tail -1
free_kib=$(df -Pk . | awk 'NR == 2 {print $4}')
if [ "${free_kib:-0}" -lt 3000000 ]; then
  echo "warning: under 3 GB free; a full test build needs about 3 GB" >&2
fi

# The README's first command on a machine that never built Rudder: the daemon's build (build
# script included) must need nothing but what `cargo build` itself downloads — not the
# dev-dependencies the tests bring, not the network from inside a build step. A Cargo home of its
# own, empty, proves it; `cargo check` runs the same build script and shares the dependencies'
# artifacts with clippy below, so this costs a download (about a minute), not a second build.
echo "== the daemon builds from an empty Cargo home"
fresh_home="$(mktemp -d)"
trap 'rm -f "$log"; rm -rf "$fresh_home"' EXIT
for f in config.toml config credentials.toml; do
  if [ -f "${CARGO_HOME:-$HOME/.cargo}/$f" ]; then cp "${CARGO_HOME:-$HOME/.cargo}/$f" "$fresh_home/"; fi
done
CARGO_HOME="$fresh_home" cargo check --locked --quiet --bin rudder
rm -rf "$fresh_home"

echo "== peers (Envoy, grpcio, grpc-js-xds)"
bash scripts/setup-peers.sh
# End-to-end tests must not skip for want of peers here.
export RUDDER_REQUIRE_PEERS=1

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy"
cargo clippy --all-targets --all-features --locked -- -D warnings

echo "== cargo test"
cargo test --all-targets --all-features --locked 2>&1 | tee "$log"

passed=$(grep -E '^test result: ok\.' "$log" | awk '{s += $4} END {print s + 0}')
failed=$(grep -E '^test result:' "$log" | awk '{s += $6} END {print s + 0}')
echo "$passed passed, $failed failed"
if [ "$passed" -eq 0 ]; then
  echo "error: no test ran" >&2
  exit 1
fi
