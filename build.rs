//! Compiles the protos in `proto/` that Rudder defines itself, with protox (pure Rust, no system
//! protoc). Envoy's xDS types come from the envoy-types crate (see docs/decisions.md).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = [
        "proto/istio/v1/auth/ca.proto",
        "proto/istio/workload/workload.proto",
        "proto/istio/security/authorization.proto",
    ];
    for p in protos {
        println!("cargo:rerun-if-changed={p}");
    }
    let fds = protox::compile(protos, ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
