//! EnvoyFilter patches read once per push context, and the patches that apply to a proxy.

use crate::config::networking::{
    ApplyTo, EnvoyConfigObjectMatch, EnvoyFilter, PatchContext, PatchOperation,
};
use crate::config::{ConfigKey, Kind, Spec};
use crate::envoy::proto_merge::{from_json, merge_plan};
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::types::TypeUrl;
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::listener::v3::{Filter, FilterChain, Listener};
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, VirtualHost};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpFilter;
use prost::{Message, Name};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One patch of one EnvoyFilter, its value read as its Envoy type.
#[derive(Debug)]
pub struct Patch {
    pub filter: ConfigKey,
    /// Its place in `configPatches`.
    pub index: usize,
    pub apply_to: ApplyTo,
    pub operation: PatchOperation,
    pub matching: EnvoyConfigObjectMatch,
    /// The value, encoded as the Envoy type `apply_to` names (empty for REMOVE).
    value: Vec<u8>,
    /// For a MERGE, the value prepared for merging ([`merge_plan`]).
    pub(super) plan: Vec<u8>,
    proxy_version: Option<regex::Regex>,
}

impl Patch {
    pub(super) fn value<M: Message + Default>(&self) -> M {
        M::decode(self.value.as_slice()).unwrap_or_default()
    }

    pub(super) fn context_matches(&self, context: PatchContext) -> bool {
        self.matching.context == PatchContext::ANY || self.matching.context == context
    }
}

/// A patch that is not applied, and why.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Skipped {
    pub envoy_filter: String,
    pub patch: usize,
    pub reason: String,
}

/// Every EnvoyFilter of a push context, read once.
#[derive(Debug, Default)]
pub struct Compiled {
    by_filter: BTreeMap<ConfigKey, Vec<Arc<Patch>>>,
    pub skipped: Vec<Skipped>,
}

/// The EnvoyFilters of `ctx`, compiled on first use and shared by every scope of the push.
pub fn compiled(ctx: &PushContext) -> Arc<Compiled> {
    ctx.derived(|ctx| {
        let mut out = Compiled::default();
        for e in ctx.snapshot.list(Kind::EnvoyFilter) {
            let Spec::EnvoyFilter(ef) = &e.config.spec else {
                continue;
            };
            let key = e.config.key();
            let patches = compile(&key, ef, &mut out.skipped);
            out.by_filter.insert(key, patches);
        }
        log_new(&out.skipped);
        out
    })
}

/// Logs each patch not applied once, not at every push: the set of those logged is bounded (at
/// its bound it starts again, so a long-broken patch is logged again now and then).
fn log_new(skipped: &[Skipped]) {
    static LOGGED: std::sync::Mutex<Option<std::collections::HashSet<String>>> =
        std::sync::Mutex::new(None);
    const BOUND: usize = 4096;
    let mut logged = LOGGED.lock().unwrap_or_else(|p| p.into_inner());
    let logged = logged.get_or_insert_with(Default::default);
    for s in skipped {
        if logged.len() >= BOUND {
            logged.clear();
        }
        if logged.insert(format!("{}#{}:{}", s.envoy_filter, s.patch, s.reason)) {
            tracing::warn!(envoy_filter = %s.envoy_filter, patch = s.patch, reason = %s.reason, "EnvoyFilter patch not applied");
        }
    }
}

fn compile(key: &ConfigKey, ef: &EnvoyFilter, skipped: &mut Vec<Skipped>) -> Vec<Arc<Patch>> {
    let mut out = Vec::new();
    for (index, cp) in ef.config_patches.iter().enumerate() {
        let mut skip = |reason: String| {
            skipped.push(Skipped {
                envoy_filter: format!("{}/{}", key.namespace, key.name),
                patch: index,
                reason,
            })
        };
        let Some(patch) = &cp.patch else {
            skip("no patch".into());
            continue;
        };
        let matching = cp.match_.clone().unwrap_or_default();
        // Fail closed: without its waypoint match read, the patch would apply to every
        // listener of every waypoint.
        if matching.waypoint.is_some() {
            skip("match.waypoint is not read yet: the patch applies nowhere".into());
            continue;
        }
        let proxy_version = match matching.proxy.as_ref().map(|p| p.proxy_version.as_str()) {
            Some(v) if !v.is_empty() => match regex::Regex::new(v) {
                Ok(r) => Some(r),
                Err(e) => {
                    skip(format!("proxyVersion is not a regular expression: {e}"));
                    continue;
                }
            },
            _ => None,
        };
        // As istiod: an insert where order means nothing is an ADD.
        let mut operation = patch.operation;
        let ordered = matches!(
            cp.apply_to,
            ApplyTo::HTTP_FILTER
                | ApplyTo::NETWORK_FILTER
                | ApplyTo::HTTP_ROUTE
                | ApplyTo::LISTENER_FILTER
        );
        if !ordered
            && matches!(
                operation,
                PatchOperation::INSERT_BEFORE
                    | PatchOperation::INSERT_AFTER
                    | PatchOperation::INSERT_FIRST
            )
        {
            operation = PatchOperation::ADD;
        }
        let value = match (&patch.value, operation) {
            (_, PatchOperation::REMOVE) => Ok((Vec::new(), Vec::new())),
            (None, _) => Err("the patch has no value".to_string()),
            (Some(v), _) => encode_value(cp.apply_to, v).and_then(|(value, name)| {
                let plan = if operation == PatchOperation::MERGE {
                    merge_plan(&name, &value).map_err(|e| e.to_string())?
                } else {
                    Vec::new()
                };
                Ok((value, plan))
            }),
        };
        match value {
            Ok((value, plan)) => out.push(Arc::new(Patch {
                filter: key.clone(),
                index,
                apply_to: cp.apply_to,
                operation,
                matching,
                value,
                plan,
                proxy_version,
            })),
            Err(reason) => skip(reason),
        }
    }
    out
}

/// A patch value read as the Envoy type its `applyTo` names: its encoding and the type's name.
fn encode_value(apply_to: ApplyTo, v: &serde_json::Value) -> Result<(Vec<u8>, String), String> {
    fn read<M: Message + Default + Name>(
        v: &serde_json::Value,
    ) -> Result<(Vec<u8>, String), String> {
        from_json::<M>(v)
            .map(|m| (m.encode_to_vec(), M::full_name()))
            .map_err(|e| format!("the value is not a valid {}: {e}", M::full_name()))
    }
    match apply_to {
        ApplyTo::CLUSTER => read::<Cluster>(v),
        ApplyTo::LISTENER => read::<Listener>(v),
        ApplyTo::FILTER_CHAIN => read::<FilterChain>(v),
        ApplyTo::NETWORK_FILTER => read::<Filter>(v),
        ApplyTo::HTTP_FILTER => read::<HttpFilter>(v),
        ApplyTo::ROUTE_CONFIGURATION => read::<RouteConfiguration>(v),
        ApplyTo::VIRTUAL_HOST => read::<VirtualHost>(v),
        ApplyTo::HTTP_ROUTE => read::<envoy_types::pb::envoy::config::route::v3::Route>(v),
        ApplyTo::LISTENER_FILTER => {
            read::<envoy_types::pb::envoy::config::listener::v3::ListenerFilter>(v)
        }
        ApplyTo::EXTENSION_CONFIG => {
            read::<envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig>(v)
        }
        other => Err(format!("applyTo {other:?} is not applied")),
    }
}

/// The patches that apply to `scope`'s proxy, in istiod's order.
pub fn patches_for(ctx: &PushContext, scope: &ScopeView) -> Vec<Arc<Patch>> {
    if ctx.snapshot.list(Kind::EnvoyFilter).next().is_none() {
        return Vec::new();
    }
    let compiled = compiled(ctx);
    let root = ctx.mesh.root_namespace.as_str();
    let mut filters: Vec<_> = ctx
        .selecting(scope, Kind::EnvoyFilter)
        .into_iter()
        .filter_map(|c| match &c.spec {
            Spec::EnvoyFilter(ef) => Some((c, ef.priority)),
            _ => None,
        })
        .collect();
    filters.sort_by(|(a, pa), (b, pb)| {
        let root_first = |c: &crate::config::Config| c.metadata.namespace != root;
        pa.cmp(pb)
            .then_with(|| root_first(a).cmp(&root_first(b)))
            .then_with(|| {
                a.metadata
                    .creation_timestamp
                    .cmp(&b.metadata.creation_timestamp)
            })
            .then_with(|| {
                (&a.metadata.name, &a.metadata.namespace)
                    .cmp(&(&b.metadata.name, &b.metadata.namespace))
            })
    });
    filters
        .into_iter()
        .filter_map(|(c, _)| compiled.by_filter.get(&c.key()))
        .flatten()
        .filter(|p| {
            p.proxy_version
                .as_ref()
                .is_none_or(|r| !scope.istio_version.is_empty() && r.is_match(&scope.istio_version))
        })
        // istiod's `proxyMatch`: every metadata entry equal (a missing key never matches).
        .filter(|p| {
            p.matching.proxy.as_ref().is_none_or(|m| {
                m.metadata
                    .iter()
                    .all(|(k, v)| scope.matched_metadata.get(k) == Some(v))
            })
        })
        .cloned()
        .collect()
}

/// Every EnvoyFilter of `ctx` (`namespace/name`) with its number of patches, for `/debug`.
pub fn envoy_filters(ctx: &PushContext) -> Vec<(String, usize)> {
    ctx.snapshot
        .list(Kind::EnvoyFilter)
        .map(|e| {
            let patches = match &e.config.spec {
                Spec::EnvoyFilter(ef) => ef.config_patches.len(),
                _ => 0,
            };
            (
                format!("{}/{}", e.config.metadata.namespace, e.config.metadata.name),
                patches,
            )
        })
        .collect()
}

/// The EnvoyFilters (`namespace/name`) whose patches reach resources of `type_url` for `scope`'s
/// proxy: when the proxy rejects such a resource, these are the first suspects.
pub fn patching(ctx: &PushContext, scope: &ScopeView, type_url: TypeUrl) -> Vec<String> {
    let kinds: &[ApplyTo] = match type_url {
        TypeUrl::Cluster => &[ApplyTo::CLUSTER],
        TypeUrl::Listener => &[
            ApplyTo::LISTENER,
            ApplyTo::FILTER_CHAIN,
            ApplyTo::NETWORK_FILTER,
            ApplyTo::HTTP_FILTER,
        ],
        TypeUrl::Route => &[
            ApplyTo::ROUTE_CONFIGURATION,
            ApplyTo::VIRTUAL_HOST,
            ApplyTo::HTTP_ROUTE,
        ],
        _ => return Vec::new(),
    };
    let mut out: Vec<String> = patches_for(ctx, scope)
        .iter()
        .filter(|p| kinds.contains(&p.apply_to))
        .map(|p| format!("{}/{}", p.filter.namespace, p.filter.name))
        .collect();
    out.dedup();
    out
}

/// The ECDS resource `name` an EXTENSION_CONFIG ADD patch of `scope`'s EnvoyFilters provides, as
/// istiod's `InsertedExtensionConfigurations` (any context: the proxy asks for it by name).
pub fn extension_config(
    ctx: &PushContext,
    scope: &ScopeView,
    name: &str,
) -> Option<crate::xds::generate::finish::Typed> {
    use crate::xds::generate::finish::{Class, Typed};
    use envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig;
    patches_for(ctx, scope)
        .iter()
        .filter(|p| p.apply_to == ApplyTo::EXTENSION_CONFIG && p.operation == PatchOperation::ADD)
        .map(|p| p.value::<TypedExtensionConfig>())
        .find(|c| c.name == name)
        .map(|c| Typed::new(name, Class::outbound(scope), c))
}
