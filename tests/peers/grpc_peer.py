"""Python grpcio peer for Rudder's end-to-end tests.

  server NAME PORT      serve /rudder.test.Echo/Who, answering NAME (raw bytes, no generated stubs)
  xds-server NAME PORT  the same as a proxyless xDS server (GRPC_XDS_BOOTSTRAP): serves only once
                        its listener arrives, and enforces the RBAC filters in it
  client TARGET [AUTH]  read lines "N [key=value ...]" on stdin; for each, make N calls on ONE channel
                        (so config changes must reach the same xDS stream) and print a JSON tally
  xds-client TARGET     the same with xDS credentials: TLS as the control plane configures it, from
                        the bootstrap's certificate providers
"""
import json
import sys
from concurrent import futures

import grpc
import grpc.experimental

SERVICE, METHOD = "rudder.test.Echo", "Who"


def serve(name, port):
    def who(request, context):
        return name.encode()

    handler = grpc.method_handlers_generic_handler(
        SERVICE, {METHOD: grpc.unary_unary_rpc_method_handler(who)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    print("ready", flush=True)
    server.wait_for_termination()


def xds_serve(name, port):
    def who(request, context):
        return name.encode()

    handler = grpc.method_handlers_generic_handler(
        SERVICE, {METHOD: grpc.unary_unary_rpc_method_handler(who)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), xds=True)
    server.add_generic_rpc_handlers((handler,))
    creds = grpc.xds_server_credentials(grpc.insecure_server_credentials())
    server.add_secure_port(f"0.0.0.0:{port}", creds)
    server.start()
    print("ready", flush=True)
    server.wait_for_termination()


def client(target, authority=None, xds_credentials=False):
    options = [("grpc.default_authority", authority)] if authority else []
    if xds_credentials:
        creds = grpc.xds_channel_credentials(grpc.experimental.insecure_channel_credentials())
        channel = grpc.secure_channel(target, creds, options=options)
    else:
        channel = grpc.insecure_channel(target, options=options)
    call = channel.unary_unary(f"/{SERVICE}/{METHOD}")
    for line in sys.stdin:
        parts = line.split()
        if not parts:
            continue
        count, metadata = int(parts[0]), [tuple(p.split("=", 1)) for p in parts[1:]]
        tally = {}
        for _ in range(count):
            try:
                key = call(b"", timeout=10, metadata=metadata).decode()
            except grpc.RpcError as err:
                key = "error:" + err.code().name
            tally[key] = tally.get(key, 0) + 1
        print(json.dumps(tally), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        serve(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "xds-server":
        xds_serve(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "xds-client":
        client(sys.argv[2], xds_credentials=True)
    else:
        client(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
