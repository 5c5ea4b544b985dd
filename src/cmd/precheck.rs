//! `rudder precheck`: for a mesh about to switch from istiod, every Istio object read with what
//! Rudder would refuse or not honour in it, the istiod flags and environment in use that Rudder
//! does not act on, the revisions and tags installed, and a go/no-go.
//!
//! Exit codes: 0 go; 1 no-go (an object refused, a field or setting that changes proxies not
//! honoured); 2 the check could not run.

use super::serve::ServeArgs;
use crate::config::Kind;
use crate::source::file::{FileReport, check_text, scan_dir};
use crate::validation::unhonoured;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

pub const EXIT_GO: i32 = 0;
pub const EXIT_NO_GO: i32 = 1;
pub const EXIT_ERROR: i32 = 2;

const CLUSTER: &str = "the cluster";

#[derive(clap::Args, Debug)]
pub struct PrecheckArgs {
    /// istiod's Deployment as YAML (`kubectl get deploy istiod -o yaml`, or `helm template`'s
    /// output): its flags and environment are checked. In Kubernetes mode the system
    /// namespace's istiod Deployments are read as well.
    #[arg(long)]
    pub istiod_deployment: Vec<PathBuf>,
    /// With `--istiod`, each proxy's config is compared with istiod's, as `rudder shadow` does,
    /// and a proxy that differs is a blocker.
    #[command(flatten, next_help_heading = "istiod (as rudder shadow)")]
    pub istiod: super::shadow::IstiodArgs,
    /// The report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Where the mesh's config is, as `rudder serve` takes it.
    #[command(flatten, next_help_heading = "Config source (as rudder serve)")]
    pub source: Box<ServeArgs>,
}

/// What the check found.
#[derive(Debug, Default, serde::Serialize)]
struct Findings {
    /// Where the objects were read: a directory, or the cluster.
    source: String,
    /// Objects read, by kind.
    objects: BTreeMap<String, usize>,
    /// Objects admission would refuse: `object: why`.
    refused: Vec<String>,
    /// Fields set that Rudder accepts without honouring: `object: field: what happens`.
    unhonoured: Vec<String>,
    /// Other admission warnings.
    warnings: Vec<String>,
    /// istiod flags Rudder accepts without acting on, with why (no effect on proxies).
    flags_ignored: Vec<String>,
    /// istiod flags Rudder would refuse to start with.
    flags_refused: Vec<String>,
    /// istiod environment variables Rudder does not read.
    env_unread: Vec<String>,
    /// Control-plane revisions with an injection webhook, and the tags pointing at them.
    revisions: BTreeMap<String, Vec<String>>,
    /// Namespaces and the revision (or `istio-injection`) they ask for.
    namespaces: BTreeMap<String, String>,
    /// With `--istiod`: the proxies whose config differs from istiod's (differences the
    /// allow-list does not accept) and those not compared.
    #[serde(skip_serializing_if = "Option::is_none")]
    shadow: Option<ShadowSummary>,
}

#[derive(Debug, Default, serde::Serialize)]
struct ShadowSummary {
    proxies: usize,
    differing: Vec<String>,
    unsupported: Vec<String>,
    passes: bool,
}

impl Findings {
    /// Why not to switch yet; empty: go.
    fn blockers(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut say = |n: usize, what: &str| {
            if n > 0 {
                out.push(format!("{n} {what}"));
            }
        };
        say(self.refused.len(), "object(s) refused");
        say(self.unhonoured.len(), "field(s) not honoured");
        say(
            self.flags_refused.len(),
            "istiod flag(s) Rudder does not take",
        );
        say(self.env_unread.len(), "istiod variable(s) not read");
        if let Some(shadow) = self.shadow.as_ref().filter(|s| !s.passes) {
            out.push(format!(
                "{} of {} proxies differ from istiod and {} not compared (`rudder shadow` shows each difference)",
                shadow.differing.len(),
                shadow.proxies,
                shadow.unsupported.len()
            ));
        }
        out
    }
}

pub async fn run(args: PrecheckArgs, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let findings = match check(&args, err).await {
        Ok(f) => f,
        Err(e) => {
            let _ = writeln!(err, "error: {e:#}");
            return EXIT_ERROR;
        }
    };
    let blockers = findings.blockers();
    if args.json {
        let mut v = serde_json::to_value(&findings).unwrap_or_default();
        v["verdict"] = json!({"go": blockers.is_empty(), "blockers": blockers});
        let _ = writeln!(out, "{v:#}");
    } else {
        let _ = write!(out, "{}", text(&findings, &blockers));
    }
    if blockers.is_empty() {
        EXIT_GO
    } else {
        EXIT_NO_GO
    }
}

fn text(f: &Findings, blockers: &[String]) -> String {
    let mut out = String::new();
    let total: usize = f.objects.values().sum();
    let kinds: Vec<String> = f.objects.iter().map(|(k, n)| format!("{k} {n}")).collect();
    let by_kind = if kinds.is_empty() {
        String::new()
    } else {
        format!(" ({})", kinds.join(", "))
    };
    out.push_str(&format!(
        "Istio objects: {total} read from {}{by_kind}\n",
        f.source
    ));
    let sections: [(&str, &Vec<String>); 7] = [
        ("refused", &f.refused),
        ("not honoured", &f.unhonoured),
        ("warning", &f.warnings),
        ("istiod flag not taken", &f.flags_refused),
        ("istiod variable not read", &f.env_unread),
        ("istiod flag without effect", &f.flags_ignored),
        ("", &Vec::new()),
    ];
    for (label, lines) in sections {
        for line in lines {
            out.push_str(&format!("  {label}: {line}\n"));
        }
    }
    if f.revisions.is_empty() && f.source == CLUSTER {
        out.push_str("Revisions: no injection webhook found\n");
    }
    for (rev, tags) in &f.revisions {
        let tags = if tags.is_empty() {
            String::new()
        } else {
            format!(" (tags: {})", tags.join(", "))
        };
        out.push_str(&format!("Revision {rev}{tags}\n"));
    }
    for (ns, rev) in &f.namespaces {
        out.push_str(&format!("  namespace {ns}: {rev}\n"));
    }
    if let Some(shadow) = &f.shadow {
        out.push_str(&format!(
            "Shadow of istiod: {} proxies, {} differing, {} not compared\n",
            shadow.proxies,
            shadow.differing.len(),
            shadow.unsupported.len()
        ));
        for p in &shadow.differing {
            out.push_str(&format!("  differs: {p}\n"));
        }
        for p in &shadow.unsupported {
            out.push_str(&format!("  not compared: {p}\n"));
        }
    }
    if blockers.is_empty() {
        out.push_str("Verdict: GO\n");
    } else {
        out.push_str(&format!("Verdict: NO-GO ({})\n", blockers.join(", ")));
    }
    out
}

async fn check(args: &PrecheckArgs, err: &mut dyn Write) -> anyhow::Result<Findings> {
    let mut f = Findings::default();
    let ns = &args.source.default_namespace;
    let mut deployments: Vec<Value> = Vec::new();
    for path in &args.istiod_deployment {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("--istiod-deployment {}: {e}", path.display()))?;
        let docs = crate::config::yaml_documents(&text)
            .map_err(|e| anyhow::anyhow!("--istiod-deployment {}: {e}", path.display()))?;
        deployments.extend(deployments_of(docs));
    }
    if args.source.uses_kubernetes() {
        f.source = CLUSTER.into();
        let client = crate::k8s::client(args.source.kubeconfig.as_deref())
            .await
            .map_err(|e| anyhow::anyhow!("cannot reach Kubernetes: {e}"))?;
        for (origin, text) in cluster_objects(&client, &args.source).await? {
            add(&mut f, check_text(Path::new(&origin), &text, ns));
        }
        let system = &args.source.system_namespace;
        let list = |ar: ApiResource, namespace: Option<&str>, selector: &str| {
            let api: Api<DynamicObject> = match namespace {
                Some(n) => Api::namespaced_with(client.clone(), n, &ar),
                None => Api::all_with(client.clone(), &ar),
            };
            let params = ListParams::default().labels(selector);
            async move { api.list(&params).await.map(|l| l.items).unwrap_or_default() }
        };
        let deployment = ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "apps",
            "v1",
            "Deployment",
        ));
        for d in list(deployment, Some(system), "app=istiod").await {
            deployments.push(serde_json::to_value(d)?);
        }
        let webhook = ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            "MutatingWebhookConfiguration",
        ));
        for w in list(webhook, None, "istio.io/rev").await {
            let labels = w.metadata.labels.clone().unwrap_or_default();
            let rev = labels.get("istio.io/rev").cloned().unwrap_or_default();
            let entry = f.revisions.entry(rev).or_default();
            if let Some(tag) = labels.get("istio.io/tag") {
                entry.push(tag.clone());
            }
        }
        let namespace =
            ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk("", "v1", "Namespace"));
        for n in list(namespace.clone(), None, "istio.io/rev").await {
            let rev = n
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("istio.io/rev"))
                .cloned();
            f.namespaces.insert(
                n.metadata.name.clone().unwrap_or_default(),
                format!("istio.io/rev={}", rev.unwrap_or_default()),
            );
        }
        for n in list(namespace, None, "istio-injection").await {
            let v = n
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("istio-injection"))
                .cloned();
            f.namespaces
                .entry(n.metadata.name.clone().unwrap_or_default())
                .or_insert(format!("istio-injection={}", v.unwrap_or_default()));
        }
    } else {
        let dir = &args.source.config_dir;
        f.source = dir.display().to_string();
        let scan =
            scan_dir(dir).map_err(|e| anyhow::anyhow!("--config-dir {}: {e}", dir.display()))?;
        for file in scan.files {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            add(&mut f, check_text(&file, &text, ns));
        }
        if let Some(mesh) = &args.source.mesh_config {
            let text = std::fs::read_to_string(mesh)
                .map_err(|e| anyhow::anyhow!("--mesh-config {}: {e}", mesh.display()))?;
            let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "istio", "namespace": args.source.system_namespace},
                "data": {"mesh": text}});
            add(&mut f, check_text(mesh, &configmap.to_string(), ns));
        }
    }
    for d in &deployments {
        istiod_settings(&mut f, d);
    }
    if args.istiod.istiod.is_some() {
        use crate::compare::report::Outcome;
        let shadowed = super::shadow::compare(&args.istiod, &args.source, err).await?;
        let of = |outcome: Outcome| -> Vec<String> {
            shadowed
                .report
                .proxies
                .iter()
                .filter(|p| p.outcome == outcome)
                .map(|p| p.proxy.clone())
                .collect()
        };
        f.shadow = Some(ShadowSummary {
            proxies: shadowed.report.proxies.len(),
            differing: of(Outcome::Differing),
            unsupported: of(Outcome::Unsupported),
            passes: shadowed.passes,
        });
    }
    Ok(f)
}

/// One file's (or object's) verdicts into the findings.
fn add(f: &mut Findings, report: FileReport) {
    let at = report.path.display().to_string();
    for e in &report.errors {
        f.refused.push(format!("{at}: {e}"));
    }
    let mut unhonoured_fields = Vec::new();
    for config in &report.configs {
        *f.objects.entry(config.kind.qualified_name()).or_default() += 1;
        let object = config.key();
        for (field, note) in unhonoured::fields(config) {
            unhonoured_fields.push(field.clone());
            f.unhonoured.push(format!("{object}: {field}: {note}"));
        }
    }
    for w in &report.warnings {
        if !unhonoured_fields.contains(&w.field) {
            f.warnings.push(format!("{at}: {w}"));
        }
    }
}

/// Every object of Istio's and the Gateway API's kinds in the cluster, and the mesh ConfigMap,
/// as the text `check_text` reads (JSON is YAML), named `Kind/namespace/name`.
async fn cluster_objects(
    client: &kube::Client,
    args: &ServeArgs,
) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for kind in Kind::config_kinds() {
        for version in kind.served_versions() {
            let ar = ApiResource {
                group: kind.group().into(),
                version: version.to_string(),
                api_version: format!("{}/{version}", kind.group()),
                kind: kind.name().into(),
                plural: kind.plural(),
            };
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
            match api.list(&ListParams::default()).await {
                Ok(list) => {
                    for mut obj in list.items {
                        obj.types = Some(kube::api::TypeMeta {
                            api_version: ar.api_version.clone(),
                            kind: ar.kind.clone(),
                        });
                        let name = format!(
                            "{}/{}/{}",
                            kind.qualified_name(),
                            obj.metadata.namespace.clone().unwrap_or_default(),
                            obj.metadata.name.clone().unwrap_or_default()
                        );
                        out.push((name, serde_json::to_string(&obj)?));
                    }
                    break;
                }
                // This version is not served (or the CRD is not installed): the next one.
                Err(kube::Error::Api(e)) if e.code == 404 => continue,
                Err(e) => anyhow::bail!("listing {}: {e}", kind.qualified_name()),
            }
        }
    }
    let configmaps: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &args.system_namespace,
        &ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk("", "v1", "ConfigMap")),
    );
    let mesh = super::serve::mesh_configmap(&args.revision);
    if let Ok(Some(mut cm)) = configmaps.get_opt(&mesh).await {
        cm.types = Some(kube::api::TypeMeta {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        });
        out.push((
            format!("ConfigMap/{}/{mesh}", args.system_namespace),
            serde_json::to_string(&cm)?,
        ));
    }
    Ok(out)
}

/// The Deployments among YAML documents, those of `kind: List` included (`kubectl get -o yaml`).
fn deployments_of(docs: Vec<Value>) -> impl Iterator<Item = Value> {
    docs.into_iter()
        .flat_map(|d| match d.get("kind").and_then(Value::as_str) {
            Some("List") => d["items"].as_array().cloned().unwrap_or_default(),
            _ => vec![d],
        })
        .filter(|d| d["kind"] == "Deployment")
}

/// An istiod Deployment's `discovery` container: flags and variables Rudder does not act on.
fn istiod_settings(f: &mut Findings, deployment: &Value) {
    let name = format!(
        "Deployment {}/{}",
        deployment["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default(),
        deployment["metadata"]["name"].as_str().unwrap_or_default()
    );
    let containers = deployment
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for c in containers.iter().filter(|c| c["name"] == "discovery") {
        let args: Vec<std::ffi::OsString> = std::iter::once("rudder".into())
            .chain(
                c["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    // istiod's image runs `pilot-discovery discovery ...`.
                    .filter(|a| *a != "discovery")
                    .map(Into::into),
            )
            .collect();
        let (translated, ignored) = super::istiod_flags::translate(args);
        for (flag, why) in ignored {
            f.flags_ignored.push(format!("{name}: {flag}: {why}"));
        }
        // What the daemon's command line takes: serve's flags and the global log ones.
        let serve = <ServeArgs as clap::Args>::augment_args(clap::Command::new("rudder"))
            .arg(clap::Arg::new("log-level").long("log-level"))
            .arg(clap::Arg::new("log-format").long("log-format"));
        if let Err(e) = serve.try_get_matches_from(&translated) {
            let first = e.to_string().lines().next().unwrap_or_default().to_string();
            f.flags_refused.push(format!("{name}: {first}"));
        }
        let env = c["env"].as_array().into_iter().flatten().filter_map(|e| {
            let value = e["value"].as_str().unwrap_or_default().to_string();
            Some((e["name"].as_str()?.to_string(), value))
        });
        for variable in super::serve::unread_istiod_env(env) {
            f.env_unread.push(format!("{name}: {variable}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISTIOD: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: istiod, namespace: istio-system}
spec:
  template:
    spec:
      containers:
      - name: discovery
        args: [discovery, --monitoringAddr=:15014, --log_output_level=default:info, --domain, cluster.local,
               --keepaliveMaxServerConnectionAge, 30m, --log_as_json, --clusterRegistriesNamespace, istio-system,
               --someFutureFlag=1]
        env:
        - {name: PILOT_ENABLE_ANALYSIS, value: "true"}
        - {name: PILOT_ENABLE_STATUS, value: "true"}
        - {name: REVISION, value: default}
"#;

    #[test]
    fn an_istiod_deployments_flags_and_variables_are_sorted_by_what_rudder_does_with_them() {
        let mut f = Findings::default();
        let docs = crate::config::yaml_documents(&format!(
            "---\n{ISTIOD}---\napiVersion: v1\nkind: Service\n"
        ))
        .unwrap();
        assert_eq!(docs.len(), 2);
        let deployments: Vec<Value> = deployments_of(docs).collect();
        assert_eq!(deployments.len(), 1);
        // `kubectl get deploy -o yaml` wraps them in a List.
        let listed = crate::config::yaml_documents(&format!(
            "apiVersion: v1\nkind: List\nitems:\n- {}\n",
            serde_json::to_string(&deployments[0]).unwrap()
        ))
        .unwrap();
        assert_eq!(deployments_of(listed).count(), 1);
        istiod_settings(&mut f, &deployments[0]);
        assert_eq!(
            f.env_unread,
            ["Deployment istio-system/istiod: PILOT_ENABLE_STATUS"]
        );
        assert_eq!(f.flags_refused.len(), 1, "{f:?}");
        assert!(f.flags_refused[0].contains("--someFutureFlag"), "{f:?}");
        assert_eq!(f.flags_ignored.len(), 1, "{f:?}");
        assert!(
            f.flags_ignored[0].contains("--clusterRegistriesNamespace: remote secrets"),
            "{f:?}"
        );
        assert!(f.blockers().iter().any(|b| b.contains("variable")));
    }

    #[test]
    fn objects_are_counted_and_an_unhonoured_field_is_a_blocker() {
        let mut f = Findings::default();
        let yaml = r#"
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: r, namespace: default}
spec:
  host: r.default.svc.cluster.local
"#;
        add(&mut f, check_text(Path::new("r.yaml"), yaml, "default"));
        assert_eq!(f.objects.values().sum::<usize>(), 1);
        assert!(f.blockers().is_empty(), "{f:?}");
        add(
            &mut f,
            check_text(
                Path::new("bad.yaml"),
                "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: x}\nspec: {http: [{timeout: soon}]}\n",
                "default",
            ),
        );
        assert_eq!(f.blockers(), ["1 object(s) refused"]);
    }
}
