//! Compiles the protos in `proto/` that Rudder defines itself, with protox (pure Rust, no system
//! protoc). Envoy's xDS types come from the envoy-types crate (see docs/decisions.md).
//!
//! Also writes the descriptors proto3 JSON needs (`/debug/config_dump` prints Envoy's messages as
//! istiod does): Rudder's own, and the set envoy-types ships with its generated code.

use prost::Message;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = [
        "proto/istio/v1/auth/ca.proto",
        "proto/istio/workload/workload.proto",
        "proto/istio/security/authorization.proto",
        "proto/istio/proxy/stats.proto",
        "proto/istio/proxy/peer_metadata.proto",
        "proto/istio/proxy/metadata_exchange.proto",
    ];
    for p in protos {
        println!("cargo:rerun-if-changed={p}");
    }
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let fds = protox::compile(protos, ["proto"])?;
    std::fs::write(out.join("rudder_descriptors.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    std::fs::copy(
        envoy_types_descriptors()?,
        out.join("envoy_descriptors.bin"),
    )?;
    Ok(())
}

/// The descriptor set envoy-types generated its code from (`src/generated/types.bin` of the
/// crate), found where Cargo keeps the dependency.
fn envoy_types_descriptors() -> Result<PathBuf, Box<dyn std::error::Error>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = std::env::var("CARGO_MANIFEST_DIR")?;
    let metadata = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--filter-platform",
        ])
        // Only this target's packages: the others (Windows-only crates, say) are never
        // downloaded by a build here, and --offline could not read their manifests.
        .arg(std::env::var("TARGET")?)
        .arg("--manifest-path")
        .arg(PathBuf::from(&manifest).join("Cargo.toml"))
        .output()?;
    if !metadata.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&metadata.stderr)
        )
        .into());
    }
    let text = String::from_utf8(metadata.stdout)?;
    const KEY: &str = "\"manifest_path\":\"";
    for (at, _) in text.match_indices(KEY) {
        let rest = &text[at + KEY.len()..];
        let Some(end) = rest.find('"') else { continue };
        let path = PathBuf::from(&rest[..end]);
        let Some(dir) = path.parent() else { continue };
        let is_envoy_types = dir
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("envoy-types-"))
            .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()));
        let descriptors = dir.join("src/generated/types.bin");
        if is_envoy_types && descriptors.is_file() {
            println!("cargo:rerun-if-changed={}", descriptors.display());
            return Ok(descriptors);
        }
    }
    Err("envoy-types' src/generated/types.bin not found through cargo metadata".into())
}
