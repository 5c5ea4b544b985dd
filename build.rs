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
        "proto/istio/networking/nds/v1/nds.proto",
        "proto/udpa/type/v1/typed_struct.proto",
    ];
    for p in protos {
        println!("cargo:rerun-if-changed={p}");
    }
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let fds = protox::compile(protos, ["proto"])?;
    std::fs::write(out.join("rudder_descriptors.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        // A stable encoding: the same map is the same bytes (a HashMap's order differs per
        // instance, so an unchanged workload's `services` would be a new version each push).
        .btree_map(".")
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
///
/// Cargo tells a build script nothing about where a dependency's sources are, so we ask
/// `cargo metadata` — but about a one-dependency manifest of our own (envoy-types at the version
/// our lock file pins), never about Rudder's: that would need every package of the lock file,
/// dev-dependencies included, which a plain `cargo build` never downloads, and `--offline` could
/// not read them on a machine that has only ever built the daemon. Run from this package's
/// directory, so its `.cargo/config.toml` (vendored sources, mirrors) applies as to the build.
fn envoy_types_descriptors() -> Result<PathBuf, Box<dyn std::error::Error>> {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let probe = PathBuf::from(std::env::var("OUT_DIR")?).join("envoy-types-probe");
    std::fs::create_dir_all(probe.join("src"))?;
    std::fs::write(probe.join("src/lib.rs"), "")?;
    let lock = manifest_dir.join("Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let requirement = match std::fs::read_to_string(&lock) {
        Ok(text) => {
            std::fs::write(probe.join("Cargo.lock"), &text)?;
            locked_version(&text, "envoy-types")
                .map(|v| format!("={v}"))
                .ok_or("Cargo.lock has no envoy-types package")?
        }
        // Without a lock file, the requirement Cargo.toml states.
        Err(_) => "0.7".to_string(),
    };
    std::fs::write(
        probe.join("Cargo.toml"),
        format!(
            "[package]\nname = \"envoy-types-probe\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n\
             [dependencies]\nenvoy-types = \"{requirement}\"\n\n[workspace]\n"
        ),
    )?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let metadata = std::process::Command::new(cargo)
        .current_dir(&manifest_dir)
        .args(["metadata", "--format-version", "1", "--offline"])
        // Only this target's packages: a build here never downloads the others.
        .arg("--filter-platform")
        .arg(std::env::var("TARGET")?)
        .arg("--manifest-path")
        .arg(probe.join("Cargo.toml"))
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
        let descriptors = dir.join("src/generated/types.bin");
        let is_envoy_types = dir
            .file_name()
            .and_then(|n| n.to_str())
            // `envoy-types-0.7.7` in a registry, `envoy-types` in a vendor directory.
            .and_then(|n| n.strip_prefix("envoy-types"))
            .is_some_and(|rest| {
                rest.is_empty()
                    || rest
                        .strip_prefix('-')
                        .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
            });
        if is_envoy_types && descriptors.is_file() {
            println!("cargo:rerun-if-changed={}", descriptors.display());
            return Ok(descriptors);
        }
    }
    Err("envoy-types' src/generated/types.bin not found through cargo metadata".into())
}

/// The version of `name` that a Cargo.lock pins.
fn locked_version(lock: &str, name: &str) -> Option<String> {
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == format!("name = \"{name}\"") {
            let version = lines.next()?.trim().strip_prefix("version = \"")?;
            return Some(version.trim_end_matches('"').to_string());
        }
    }
    None
}
