#!/usr/bin/env bash
# Runs every cargo-fuzz target for a bounded time (FUZZ_SECONDS each, default 60).
# Works on the stable toolchain (no sanitizer: `-s none`). Seeds come from examples/ and tests/fixtures/.
# A crash is copied into fuzz/regressions/<target>/ (replayed by tests/library/fuzz_regressions.rs) and the
# script fails; fix the bug, keep the reproducer.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${FUZZ_SECONDS:-60}"
TARGETS=(config_yaml discovery_request csr admission_review)
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked --version 0.13.2

# Seeds.
mkdir -p fuzz/corpus/{config_yaml,discovery_request,csr,admission_review}
cp examples/*.yaml tests/fixtures/istio/*.yaml fuzz/corpus/config_yaml/
cp tests/fixtures/inject/*.input.json fuzz/corpus/admission_review/ 2>/dev/null || true
if command -v openssl >/dev/null; then
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout /dev/null \
    -subj "/" -addext "subjectAltName=URI:spiffe://cluster.local/ns/default/sa/sleep" \
    -out fuzz/corpus/csr/p256.pem 2>/dev/null || true
fi

cd fuzz
cargo fuzz build -s none
status=0
for t in "${TARGETS[@]}"; do
  echo "== fuzzing $t for ${SECONDS_EACH}s"
  if ! cargo fuzz run -s none "$t" "corpus/$t" -- -max_total_time="$SECONDS_EACH" -max_len=65536 \
      -rss_limit_mb=4096 -print_final_stats=1 2>"artifacts-$t.log"; then
    status=1
    tail -40 "artifacts-$t.log"
  fi
  grep -E "stat::number_of_executed_units|stat::new_units_added" "artifacts-$t.log" || true
  for crash in artifacts/"$t"/crash-* artifacts/"$t"/oom-* artifacts/"$t"/timeout-*; do
    [ -e "$crash" ] || continue
    cp "$crash" "regressions/$t/"
    echo "reproducer saved: fuzz/regressions/$t/$(basename "$crash")"
    status=1
  done
done
exit "$status"
