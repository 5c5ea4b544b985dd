//! `rudder validate -f FILE|DIR|-`: Istio's validation, offline, with the same rules the daemon applies.
//!
//! Exit codes: 0 every object is valid; 1 some object or file is invalid; 2 an input could not be read
//! (or held no config files).

use crate::config::ConfigKey;
use crate::source::file::{FileReport, check_text, scan_dir};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

pub const EXIT_VALID: i32 = 0;
pub const EXIT_INVALID: i32 = 1;
pub const EXIT_UNREADABLE: i32 = 2;

/// Validates `inputs`, writing per-file results to `out` and errors to `err`. Returns the exit code.
pub fn run(
    inputs: &[PathBuf],
    default_namespace: &str,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let mut reports: Vec<FileReport> = Vec::new();
    let mut unreadable = false;
    for input in inputs {
        if input == Path::new("-") {
            let mut text = String::new();
            match std::io::stdin().read_to_string(&mut text) {
                Ok(_) => reports.push(check_text(Path::new("<stdin>"), &text, default_namespace)),
                Err(e) => {
                    let _ = writeln!(err, "error: <stdin>: {e}");
                    unreadable = true;
                }
            }
            continue;
        }
        let scan = scan_dir(input);
        if let Ok(scan) = &scan {
            // A config file that leads nowhere is not "no objects": say so, and fail.
            for (path, why) in &scan.dangling {
                let _ = writeln!(err, "error: {}: cannot be read ({why})", path.display());
                unreadable = true;
            }
        }
        let files = match scan.map(|s| s.files) {
            Ok(f) if f.is_empty() => {
                let _ = writeln!(
                    err,
                    "error: {}: no .yaml, .yml or .json files found",
                    input.display()
                );
                unreadable = true;
                continue;
            }
            Ok(f) => f,
            Err(e) => {
                let _ = writeln!(err, "error: {}: {e}", input.display());
                unreadable = true;
                continue;
            }
        };
        for file in files {
            match std::fs::read_to_string(&file) {
                Ok(text) => reports.push(check_text(&file, &text, default_namespace)),
                Err(e) => {
                    let _ = writeln!(err, "error: {}: {e}", file.display());
                    unreadable = true;
                }
            }
        }
    }

    // An object defined in two inputs would be a conflict for the daemon's file source too.
    let mut owners: HashMap<ConfigKey, PathBuf> = HashMap::new();
    for report in &mut reports {
        for config in &report.configs {
            if let Some(first) = owners.get(&config.key()) {
                if *first != report.path {
                    report.errors.push(crate::config::ConfigError::Invalid {
                        object: config.object_ref(),
                        field: "metadata.name".into(),
                        message: format!("already defined in {}", first.display()),
                    });
                }
            } else {
                owners.insert(config.key(), report.path.clone());
            }
        }
    }

    let (mut objects, mut bad_files) = (0, 0);
    for (path, warning) in gateway_api_warnings(&reports, &owners) {
        let _ = writeln!(err, "warning: {}: {warning}", path.display());
    }
    for report in &reports {
        for w in &report.warnings {
            let _ = writeln!(err, "warning: {}: {w}", report.path.display());
        }
        if report.errors.is_empty() {
            objects += report.configs.len();
            let _ = writeln!(
                out,
                "ok: {}: {} Istio object(s){}",
                report.path.display(),
                report.configs.len(),
                if report.skipped.is_empty() {
                    String::new()
                } else {
                    format!(", {} other object(s) skipped", report.skipped.len())
                }
            );
        } else {
            bad_files += 1;
            for e in &report.errors {
                let _ = writeln!(err, "error: {}: {e}", report.path.display());
            }
        }
    }
    if bad_files > 0 {
        let _ = writeln!(err, "{bad_files} of {} file(s) invalid", reports.len());
        EXIT_INVALID
    } else if unreadable {
        EXIT_UNREADABLE
    } else {
        let _ = writeln!(
            out,
            "{objects} object(s) in {} file(s) valid",
            reports.len()
        );
        EXIT_VALID
    }
}

/// What the Kubernetes Gateway API objects of the inputs amount to together, where the daemon's
/// files mode has no object status to write it to: each route parent that is not accepted (a
/// parent Service or ServiceEntry that does not exist, a listener that refuses the route) and
/// each route problem, as the route's status would carry it. `owners` says which file defines
/// each object.
fn gateway_api_warnings(
    reports: &[FileReport],
    owners: &HashMap<ConfigKey, PathBuf>,
) -> Vec<(PathBuf, String)> {
    let store = crate::store::StoreWriter::new(16);
    let changes = reports
        .iter()
        .flat_map(|r| &r.configs)
        .map(|c| crate::store::Change::Upsert(c.clone()))
        .collect();
    store.apply(changes);
    let suffix = crate::model::mesh::MeshSettings::default().domain_suffix;
    let translation = crate::model::gateway_api::translate(&store.snapshot(), &suffix);
    let mut out = Vec::new();
    for (key, outcome) in &translation.route_outcomes {
        let Some(path) = owners.get(key) else {
            continue;
        };
        let route = format!("{} {}/{}", key.kind.name(), key.namespace, key.name);
        for p in &outcome.parents {
            let parent = p.parent_ref.display(&key.namespace);
            if !p.accepted.status {
                out.push((
                    path.clone(),
                    format!(
                        "{route}: parent {parent} not accepted ({}): {}",
                        p.accepted.reason, p.accepted.message
                    ),
                ));
            }
            if let Some(e) = &p.route_error {
                out.push((
                    path.clone(),
                    format!("{route}: on parent {parent} ({}): {}", e.reason, e.message),
                ));
            }
        }
    }
    out
}
