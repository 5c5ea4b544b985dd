//! `rudder shadow --istiod HOST:PORT`: beside a live istiod, serving nobody, compare what istiod
//! sends each of its proxies with what Rudder would send the same node from the same config.
//!
//! Exit codes: 0 every proxy identical (differences and proxies the allow-list accepts aside);
//! 1 some proxy differs or could not be compared; 2 the comparison could not run.

use super::serve::ServeArgs;
use crate::compare::allow::AllowList;
use crate::compare::control_plane::{ControlPlane, ServedProxy, Source, Tls};
use crate::compare::local::Local;
use crate::compare::report::{ProxyReport, Report};
use futures::StreamExt;
use std::io::Write;
use std::path::PathBuf;

pub const EXIT_SAME: i32 = 0;
pub const EXIT_DIFFERENT: i32 = 1;
pub const EXIT_ERROR: i32 = 2;

/// Proxies compared at once: each is one stream to istiod.
const CONCURRENT: usize = 8;

/// How istiod is reached, and which differences are accepted (`shadow`, and `precheck`'s).
#[derive(clap::Args, Debug, Clone)]
pub struct IstiodArgs {
    /// istiod's xDS address: its TLS port (15012) with `--ca-file` and a token of a service account
    /// of the system namespace (`--token-file`), as istioctl connects; or its plaintext 15010 where
    /// istiod runs with `ENABLE_DEBUG_ENDPOINT_AUTH=false`.
    #[arg(long)]
    pub istiod: Option<String>,
    /// A service-account token istiod accepts (`kubectl create token -n istio-system istiod`).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// The root istiod's serving certificate chains to (ConfigMap `istio-ca-root-cert`'s
    /// `root-cert.pem`); given, the connection is TLS.
    #[arg(long)]
    pub ca_file: Option<PathBuf>,
    /// The name istiod's serving certificate is checked for (default `istiod.<system namespace>.svc`).
    #[arg(long)]
    pub tls_server_name: Option<String>,
    /// Differences (and proxies) accepted, with why: see `docs/install.md`.
    #[arg(long)]
    pub allow: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct ShadowArgs {
    #[command(flatten)]
    pub istiod: IstiodArgs,
    /// The report as JSON.
    #[arg(long)]
    pub json: bool,
    /// The config Rudder reads and its mesh flags, as `rudder serve` takes them.
    #[command(
        flatten,
        next_help_heading = "Config source and mesh (as rudder serve)"
    )]
    pub source: Box<ServeArgs>,
}

/// A shadow run's outcome: the report, and whether it passes under the allow-list.
pub struct Shadowed {
    pub report: Report,
    pub passes: bool,
}

pub async fn run(args: ShadowArgs, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    match compare(&args.istiod, &args.source, err).await {
        Ok(shadowed) => {
            let _ = if args.json {
                writeln!(out, "{:#}", shadowed.report.json())
            } else {
                write!(out, "{}", shadowed.report.text())
            };
            if shadowed.passes {
                EXIT_SAME
            } else {
                EXIT_DIFFERENT
            }
        }
        Err(e) => {
            let _ = writeln!(err, "error: {e:#}");
            EXIT_ERROR
        }
    }
}

/// Every proxy istiod serves, its config against what Rudder would send it from `source`.
pub async fn compare(
    args: &IstiodArgs,
    source: &ServeArgs,
    err: &mut dyn Write,
) -> anyhow::Result<Shadowed> {
    let Some(addr) = args.istiod.as_deref() else {
        anyhow::bail!(
            "--istiod: istiod's address is needed (HOST:15012 with --ca-file and --token-file)"
        );
    };
    let allow = match &args.allow {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| anyhow::anyhow!("--allow {}: {e}", path.display()))?;
            AllowList::parse(&text)
                .map_err(|e| anyhow::anyhow!("--allow {}: {e}", path.display()))?
        }
        None => AllowList::default(),
    };
    let token = flag_file("token-file", args.token_file.as_deref())?;
    let tls = flag_file("ca-file", args.ca_file.as_deref())?.map(|ca_pem| Tls {
        ca_pem,
        server_name: args
            .tls_server_name
            .clone()
            .unwrap_or_else(|| format!("istiod.{}.svc", source.system_namespace)),
    });
    let loaded = super::config_source::load(source).await?;
    let local = Local::new(&loaded.store.reader(), &loaded.mesh);
    let istiod = ControlPlane::connect(addr, &source.system_namespace, tls, token).await?;
    let proxies = istiod.proxies(&source.domain_suffix).await?;
    let _ = writeln!(
        err,
        "comparing {} proxies of {} with Rudder's config from {}",
        proxies.len(),
        istiod.addr(),
        loaded.described
    );
    let reports: Vec<ProxyReport> = futures::stream::iter(proxies.iter())
        .map(|p| one(&istiod, &local, p, &allow))
        .buffered(CONCURRENT)
        .collect()
        .await;
    let report = Report {
        left: "istiod".into(),
        right: "rudder".into(),
        words: crate::compare::report::SHADOW_WORDS,
        proxies: reports,
    };
    let passes = report.passes(|proxy| allow.allows_proxy(proxy).is_some());
    Ok(Shadowed { report, passes })
}

/// The contents of the file a flag names, if it names one; the error names the flag.
pub(super) fn flag_file(
    flag: &str,
    path: Option<&std::path::Path>,
) -> anyhow::Result<Option<String>> {
    path.map(|p| {
        std::fs::read_to_string(p).map_err(|e| anyhow::anyhow!("--{flag} {}: {e}", p.display()))
    })
    .transpose()
}

/// One proxy: istiod's config for its node against Rudder's.
async fn one(
    istiod: &ControlPlane,
    local: &Local,
    served: &ServedProxy,
    allow: &AllowList,
) -> ProxyReport {
    let id = served.node.id.as_str();
    let proxy = match local.proxy(&served.node) {
        Ok(p) => p,
        Err(e) => return ProxyReport::unsupported(id, e.to_string()),
    };
    let ours = local.config(&proxy);
    let (theirs, source) = match istiod.config(served).await {
        Ok(c) => c,
        Err(e) => return ProxyReport::unsupported(id, format!("istiod's config: {e}")),
    };
    let mut notes = Vec::new();
    if source == Source::ConfigDump {
        notes.push(
            "istiod does not serve this node to the token's identity: its config dump was compared (no endpoints)"
                .to_string(),
        );
    }
    if served.partial {
        notes.push(
            "istiod's adsz page did not give this proxy's address or metadata: it was compared by its name and type only"
                .to_string(),
        );
    }
    ProxyReport::compared(
        id,
        crate::compare::diff(&theirs, &ours),
        allow,
        |d| local.sources(&proxy, d.type_url, &d.resource),
        notes,
    )
}
