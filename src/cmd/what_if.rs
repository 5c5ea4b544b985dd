//! `rudder what-if -f change.yaml`: before a change is applied, which proxies' config it would
//! change and how, the admission warnings it gets, and the analysis messages it raises or clears.
//! The config is read as `rudder serve` would read it (files or Kubernetes); the proxies are those
//! connected to the running daemon (its `/debug/adsz`), or the ones named with `--proxy`.
//!
//! Exit codes: 0 the change is valid (whatever it changes); 1 admission would refuse it; 2 the
//! comparison could not run.

use super::serve::ServeArgs;
use crate::analysis::{Findings, Message};
use crate::compare::allow::AllowList;
use crate::compare::control_plane::{ServedProxy, proxies_of_adsz, proxy_name};
use crate::compare::local::Local;
use crate::compare::report::{CHANGE_WORDS, ProxyReport, Report};
use crate::config::{Config, ConfigKey};
use crate::source::file::check_text;
use envoy_types::pb::envoy::config::core::v3::Node;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;

pub const EXIT_VALID: i32 = 0;
pub const EXIT_INVALID: i32 = 1;
pub const EXIT_ERROR: i32 = 2;

#[derive(clap::Args, Debug)]
pub struct WhatIfArgs {
    /// The change: Istio (and Gateway API) objects to create or replace. Repeatable; `-` reads
    /// standard input.
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<PathBuf>,
    /// The objects of the files are removed instead.
    #[arg(long)]
    pub delete: bool,
    /// The running daemon's monitoring address, whose connected proxies are compared.
    #[arg(long, default_value = "127.0.0.1:15014")]
    pub daemon: String,
    /// A token of the system namespace for the daemon's debug pages (not needed on its host).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Compare this node (`sidecar~10.0.0.1~app-1.ns~ns.svc.cluster.local`) instead of the
    /// daemon's proxies. Repeatable.
    #[arg(long = "proxy")]
    pub proxies: Vec<String>,
    /// The report as JSON.
    #[arg(long)]
    pub json: bool,
    /// The config the change applies to and the mesh flags, as `rudder serve` takes them.
    #[command(
        flatten,
        next_help_heading = "Config source and mesh (as rudder serve)"
    )]
    pub source: Box<ServeArgs>,
}

pub async fn run(args: WhatIfArgs, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let change = match read_change(&args.files, &args.source.default_namespace) {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return EXIT_ERROR;
        }
    };
    for w in &change.warnings {
        let _ = writeln!(err, "warning: {w}");
    }
    if !change.errors.is_empty() {
        for e in &change.errors {
            let _ = writeln!(err, "error: {e}");
        }
        let _ = writeln!(err, "admission would refuse the change; nothing compared");
        return EXIT_INVALID;
    }
    match compare(&args, &change.configs).await {
        Ok(outcome) => {
            let _ = if args.json {
                let mut json = outcome.report.json();
                json["warnings"] = change.warnings.clone().into();
                json["analysis"] = serde_json::json!({
                    "raised": outcome.raised,
                    "cleared": outcome.cleared,
                });
                writeln!(out, "{json:#}")
            } else {
                let mut text = outcome.report.text();
                for (what, list) in [("raised", &outcome.raised), ("cleared", &outcome.cleared)] {
                    for m in list {
                        text.push_str(&format!("analysis {what}: {m}\n"));
                    }
                }
                write!(out, "{text}")
            };
            EXIT_VALID
        }
        Err(e) => {
            let _ = writeln!(err, "error: {e:#}");
            EXIT_ERROR
        }
    }
}

struct Change {
    configs: Vec<Config>,
    errors: Vec<String>,
    warnings: Vec<String>,
}

fn read_change(files: &[PathBuf], namespace: &str) -> Result<Change, String> {
    let mut change = Change {
        configs: Vec::new(),
        errors: Vec::new(),
        warnings: Vec::new(),
    };
    for path in files {
        let text = if path.as_os_str() == "-" {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .map_err(|e| format!("<stdin>: {e}"))?;
            text
        } else {
            std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?
        };
        let report = check_text(path, &text, namespace);
        let at = path.display();
        change
            .errors
            .extend(report.errors.iter().map(|e| format!("{at}: {e}")));
        change
            .warnings
            .extend(report.warnings.iter().map(|w| format!("{at}: {w}")));
        change.configs.extend(report.configs);
    }
    if change.configs.is_empty() && change.errors.is_empty() {
        return Err("the change holds no Istio or Gateway API object".into());
    }
    Ok(change)
}

struct Outcome {
    report: Report,
    raised: Vec<String>,
    cleared: Vec<String>,
}

async fn compare(args: &WhatIfArgs, change: &[Config]) -> anyhow::Result<Outcome> {
    let proxies = proxies(args)?;
    let loaded = super::config_source::load(&args.source).await?;
    let before = Local::new(&loaded.store.reader(), &loaded.mesh);
    for config in change {
        if args.delete {
            loaded.store.delete(&config.key());
        } else {
            loaded.store.upsert(config.clone());
        }
    }
    let after = Local::new(&loaded.store.reader(), &loaded.mesh);
    let none = AllowList::default();
    let reports = proxies
        .iter()
        .map(|p| {
            let id = p.node.id.as_str();
            let (was, proxy) = match (before.proxy(&p.node), after.proxy(&p.node)) {
                (Ok(was), Ok(proxy)) => (was, proxy),
                (Err(e), _) | (_, Err(e)) => return ProxyReport::unsupported(id, e.to_string()),
            };
            let (a, b) = (before.config(&was), after.config(&proxy));
            let notes = if p.partial {
                vec!["only this proxy's id is known: not its labels or metadata".into()]
            } else {
                Vec::new()
            };
            ProxyReport::compared(
                id,
                crate::compare::diff(&a, &b),
                &none,
                |d| {
                    let mut from = after.sources(&proxy, d.type_url, &d.resource);
                    if from.is_empty() {
                        from = before.sources(&was, d.type_url, &d.resource);
                    }
                    from
                },
                notes,
            )
        })
        .collect();
    let (was, now) = (findings(&before), findings(&after));
    Ok(Outcome {
        report: Report {
            left: "before".into(),
            right: "after".into(),
            words: CHANGE_WORDS,
            proxies: reports,
        },
        raised: now.difference(&was).cloned().collect(),
        cleared: was.difference(&now).cloned().collect(),
    })
}

/// The analysis messages of a state, one line each.
fn findings(local: &Local) -> BTreeSet<String> {
    let ctx = local.context();
    let found: Findings =
        crate::analysis::analyze(&ctx.snapshot, &ctx.registry, &ctx.mesh.domain_suffix);
    found
        .iter()
        .flat_map(|(key, messages): (&ConfigKey, &BTreeSet<Message>)| {
            messages
                .iter()
                .map(move |m| format!("{} {:?} {key}: {}", m.code, m.level, m.text))
        })
        .collect()
}

/// The proxies to compare: those named, else the daemon's.
fn proxies(args: &WhatIfArgs) -> anyhow::Result<Vec<ServedProxy>> {
    if !args.proxies.is_empty() {
        return Ok(args
            .proxies
            .iter()
            .map(|id| ServedProxy {
                name: proxy_name(id),
                node: Node {
                    id: id.clone(),
                    ..Default::default()
                },
                partial: true,
            })
            .collect());
    }
    let token = super::shadow::flag_file("token-file", args.token_file.as_deref())?;
    let (status, body) = super::http::request(&args.daemon, "GET", "/debug/adsz", token.as_deref())
        .map_err(|e| {
            anyhow::anyhow!(
                "--daemon {}: {e} (or name proxies with --proxy)",
                args.daemon
            )
        })?;
    if status != 200 {
        anyhow::bail!(
            "--daemon {}: /debug/adsz answered {status}: {}",
            args.daemon,
            body.trim()
        );
    }
    let page: serde_json::Value = serde_json::from_str(&body)
        .map_err(|e| anyhow::anyhow!("--daemon {}: /debug/adsz: {e}", args.daemon))?;
    Ok(proxies_of_adsz(&page, &args.source.domain_suffix))
}
