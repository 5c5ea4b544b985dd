#!/usr/bin/env bash
# Builds a real ztunnel for the end-to-end tests that use one (RUDDER_ZTUNNEL), from a checkout of
# github.com/istio/ztunnel given as the argument: ring TLS, no jemalloc, and protoc from PyPI's
# grpcio-tools (this machine has no protoc package). CI cannot fetch ztunnel, so there those test
# steps skip; here:
#   scripts/build-ztunnel.sh ../ztunnel && RUDDER_ZTUNNEL=target/peers/ztunnel/ztunnel scripts/test.sh
# Nothing from the checkout is copied into this repository; the binary stays under target/.
# Where github.com cannot be reached, cargo cannot resolve ztunnel's optional git dependency
# `boring-rustls-provider` (FIPS builds only): drop that line, and its mention in the `tls-boring`
# feature, from the checkout's Cargo.toml first.
set -euo pipefail
cd "$(dirname "$0")/.."
checkout="$(cd "${1:?usage: scripts/build-ztunnel.sh ZTUNNEL_CHECKOUT}" && pwd)"
out="$PWD/target/peers/ztunnel"
mkdir -p "$out"
if [ ! -x "$out/venv/bin/python" ]; then
  python3 -m venv "$out/venv"
  "$out/venv/bin/pip" install -q grpcio-tools==1.85.1
fi
cat > "$out/protoc" <<PROTOC
#!/bin/sh
include="\$("$out/venv/bin/python" -c 'import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), "_proto"))')"
exec "$out/venv/bin/python" -m grpc_tools.protoc -I"\$include" "\$@"
PROTOC
chmod +x "$out/protoc"
(cd "$checkout" && PROTOC="$out/protoc" CARGO_TARGET_DIR="$out/target" \
  cargo build --no-default-features --features tls-ring --bin ztunnel)
cp "$out/target/debug/ztunnel" "$out/ztunnel"
echo "RUDDER_ZTUNNEL=$out/ztunnel"
