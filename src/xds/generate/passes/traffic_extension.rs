//! TrafficExtensions and WasmPlugins, as istiod 1.30 builds them (`pilot/pkg/networking/core/
//! extension`, `model/extensions.go`, `config/kube/extensions`): a WasmPlugin is read as the
//! TrafficExtension istiod translates it into (named `<name>~istio-translated-wasmplugin`); the
//! extensions that attach to a proxy (the one attachment rule: its namespace, then the root
//! namespace; selector or targetRefs) are matched per HTTP connection manager by mode (CLIENT for
//! outbound and gateways, SERVER inbound) and port, ordered as istiod (namespace, oldest first,
//! then by `priority`, highest first) and inserted at their phase: AUTHN before request
//! authentication, AUTHZ before authorization, STATS and unspecified after it. A pass before
//! EnvoyFilter patches (which run last), so EnvoyFilters see them as istiod's do.
//!
//! Lua runs inline. A Wasm extension is a filter whose config the proxy asks for over ECDS
//! ([`extension_config`]): the Wasm filter with the module's data source as istiod writes it
//! (`file://` a local file; other URLs a remote source istio-agent fetches and rewrites, as under
//! istiod). Wasm extensions of type NETWORK go into the TCP proxy chains of sidecars and gateways;
//! at a waypoint only HTTP extensions run, in `main_internal`'s chains, as istiod's.

use crate::config::extensions::{
    EnvValueSource, ExtensionPhase, FailStrategy, PluginPhase, PluginType, PullPolicy,
    TrafficExtension, WasmConfig, WasmPlugin, WorkloadMode,
};
use crate::config::{Config, Kind, Spec};
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::encode::any;
use crate::xds::generate::finish::{Built, Class, Pass, Typed};
use crate::xds::generate::security::extauthz::{EXT_AUTHZ_FILTER, NETWORK_EXT_AUTHZ_FILTER};
use crate::xds::generate::security::jwt::JWT_FILTER;
use crate::xds::generate::security::rbac::{NETWORK_RBAC_FILTER, RBAC_FILTER};
use crate::xds::generate::shared::util::{ads, listener_port};
use crate::xds::generate::typed_listener::{ListenerRole, NetworkFilter};
use envoy_types::pb::envoy::config::core::v3::{
    AsyncDataSource, DataSource, ExtensionConfigSource, HttpUri, RemoteDataSource,
    TypedExtensionConfig, async_data_source, data_source, http_uri,
};
use envoy_types::pb::envoy::config::listener::v3::filter;
use envoy_types::pb::envoy::extensions::filters::http::lua::v3::Lua;
use envoy_types::pb::envoy::extensions::filters::http::wasm::v3::Wasm;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpFilter, http_filter,
};
use envoy_types::pb::envoy::extensions::filters::network::wasm::v3::Wasm as NetworkWasm;
use envoy_types::pb::envoy::extensions::wasm::v3::{
    EnvironmentVariables, FailurePolicy, PluginConfig, VmConfig, plugin_config,
};
use envoy_types::pb::google::protobuf::{Duration, StringValue};
use prost::Message;
use tracing::warn;

/// istiod's prefix of a TrafficExtension's filter name.
const NAME_PREFIX: &str = "extensions.istio.io/trafficextension/";
/// What istiod appends to the name of the TrafficExtension a WasmPlugin becomes.
const WASM_PLUGIN_MARKER: &str = "~istio-translated-wasmplugin";
const WASM_HTTP_FILTER_TYPE: &str =
    "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm";
const RBAC_HTTP_FILTER_TYPE: &str =
    "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC";
const WASM_NETWORK_FILTER_TYPE: &str =
    "type.googleapis.com/envoy.extensions.filters.network.wasm.v3.Wasm";
const RBAC_NETWORK_FILTER_TYPE: &str =
    "type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC";

/// A TrafficExtension, or a WasmPlugin read as one.
pub struct Extension<'a> {
    pub origin: &'a Config,
    /// The TrafficExtension's name (a WasmPlugin's with istiod's marker).
    pub name: String,
    pub spec: std::borrow::Cow<'a, TrafficExtension>,
}

impl Extension<'_> {
    /// The HTTP filter's name, which is also its ECDS resource name.
    pub fn filter_name(&self) -> String {
        format!(
            "{NAME_PREFIX}{}.{}",
            self.origin.metadata.namespace, self.name
        )
    }
}

/// istiod's translation of a WasmPlugin into a TrafficExtension.
fn from_wasm_plugin(w: &WasmPlugin) -> TrafficExtension {
    let mut target_refs = w.target_refs.clone();
    if target_refs.is_empty() {
        target_refs.extend(w.target_ref.clone());
    }
    TrafficExtension {
        selector: w.selector.clone(),
        target_refs,
        phase: w.phase.map(|p| match p {
            PluginPhase::AUTHN => ExtensionPhase::AUTHN,
            PluginPhase::AUTHZ => ExtensionPhase::AUTHZ,
            PluginPhase::STATS => ExtensionPhase::STATS,
            PluginPhase::UNSPECIFIED_PHASE => ExtensionPhase::UNSPECIFIED,
        }),
        priority: w.priority,
        matches: w.matches.clone(),
        wasm: Some(WasmConfig {
            url: w.url.clone(),
            sha256: w.sha256.clone(),
            image_pull_policy: w.image_pull_policy,
            image_pull_secret: w.image_pull_secret.clone(),
            verification_key: w.verification_key.clone(),
            plugin_config: w.plugin_config.clone(),
            plugin_name: w.plugin_name.clone(),
            fail_strategy: w.fail_strategy,
            vm_config: w.vm_config.clone(),
            plugin_type: w.plugin_type,
        }),
        lua: None,
    }
}

fn extension(c: &Config) -> Option<Extension<'_>> {
    match &c.spec {
        Spec::TrafficExtension(t) => Some(Extension {
            origin: c,
            name: c.metadata.name.clone(),
            spec: std::borrow::Cow::Borrowed(t),
        }),
        Spec::WasmPlugin(w) => Some(Extension {
            origin: c,
            name: format!("{}{WASM_PLUGIN_MARKER}", c.metadata.name),
            spec: std::borrow::Cow::Owned(from_wasm_plugin(w)),
        }),
        _ => None,
    }
}

/// Whether the extension is inserted into HTTP filter chains: Lua, or Wasm of type HTTP.
fn http_extension(t: &TrafficExtension) -> bool {
    match (&t.lua, &t.wasm) {
        (Some(_), None) => true,
        (None, Some(w)) => {
            matches!(
                w.plugin_type.unwrap_or(PluginType::UNSPECIFIED_PLUGIN_TYPE),
                PluginType::HTTP | PluginType::UNSPECIFIED_PLUGIN_TYPE
            ) && !w.url.is_empty()
        }
        _ => false,
    }
}

/// Whether the extension is a network (L4) Wasm filter, inserted into TCP filter chains.
fn network_extension(t: &TrafficExtension) -> bool {
    t.lua.is_none()
        && t.wasm
            .as_ref()
            .is_some_and(|w| w.plugin_type == Some(PluginType::NETWORK) && !w.url.is_empty())
}

/// The extensions that attach to `scope`'s proxy, in istiod's order.
fn extensions<'a>(ctx: &'a PushContext, scope: &ScopeView) -> Vec<Extension<'a>> {
    let any = [Kind::TrafficExtension, Kind::WasmPlugin]
        .iter()
        .any(|k| ctx.snapshot.list(*k).next().is_some());
    if !any {
        return Vec::new();
    }
    let mut found: Vec<Extension<'a>> = [Kind::TrafficExtension, Kind::WasmPlugin]
        .into_iter()
        .flat_map(|k| ctx.selecting(scope, k))
        .filter_map(extension)
        .filter(|e| http_extension(&e.spec) || network_extension(&e.spec))
        .collect();
    let own = |e: &Extension| e.origin.metadata.namespace != scope.namespace;
    found.sort_by(|a, b| {
        own(a).cmp(&own(b)).then_with(|| {
            (a.origin.metadata.creation_timestamp.as_deref(), &a.name)
                .cmp(&(b.origin.metadata.creation_timestamp.as_deref(), &b.name))
        })
    });
    // Stable: equal priorities keep the order above; unset is the lowest.
    found.sort_by_key(|e| std::cmp::Reverse(e.spec.priority.unwrap_or(i32::MIN)));
    found
}

/// Whether `t` applies to a connection manager of `class` on `port` (istiod's
/// `matchTrafficExtensionSelectors`: no match applies everywhere).
fn applies(t: &TrafficExtension, class: Class, port: Option<u32>) -> bool {
    // A waypoint takes its services' traffic: istiod matches its extensions as a server's.
    let mode = if matches!(class, Class::SidecarInbound | Class::Waypoint) {
        WorkloadMode::SERVER
    } else {
        WorkloadMode::CLIENT
    };
    t.matches.is_empty()
        || t.matches.iter().any(|m| {
            let mode_ok = match m.mode.unwrap_or(WorkloadMode::UNDEFINED) {
                WorkloadMode::UNDEFINED | WorkloadMode::CLIENT_AND_SERVER => true,
                other => other == mode,
            };
            let port_ok = m.ports.is_empty()
                || m.ports
                    .iter()
                    .any(|p| p.number != 0 && Some(p.number) == port);
            mode_ok && port_ok
        })
}

/// The HTTP filter of an extension: Lua inline, Wasm through ECDS (the proxy waits for it: no
/// initial fetch timeout, as istiod, since it may be a security filter).
fn http_filter(e: &Extension) -> HttpFilter {
    let name = e.filter_name();
    let config_type = match &e.spec.lua {
        Some(lua) => http_filter::ConfigType::TypedConfig(any(&Lua {
            default_source_code: Some(DataSource {
                specifier: Some(data_source::Specifier::InlineString(
                    lua.inline_code.clone(),
                )),
                ..Default::default()
            }),
            ..Default::default()
        })),
        None => {
            let mut source = ads();
            source.initial_fetch_timeout = Some(Duration::default());
            http_filter::ConfigType::ConfigDiscovery(ExtensionConfigSource {
                config_source: Some(source),
                type_urls: vec![WASM_HTTP_FILTER_TYPE.into(), RBAC_HTTP_FILTER_TYPE.into()],
                ..Default::default()
            })
        }
    };
    HttpFilter {
        name,
        config_type: Some(config_type),
        ..Default::default()
    }
}

/// The network filter of a network Wasm extension, its config over ECDS as for HTTP.
fn network_filter(e: &Extension) -> NetworkFilter {
    let mut source = ads();
    source.initial_fetch_timeout = Some(Duration::default());
    NetworkFilter::encoded(
        e.filter_name(),
        filter::ConfigType::ConfigDiscovery(ExtensionConfigSource {
            config_source: Some(source),
            type_urls: vec![
                WASM_NETWORK_FILTER_TYPE.into(),
                RBAC_NETWORK_FILTER_TYPE.into(),
            ],
            ..Default::default()
        }),
    )
}

/// The environment variable istio-agent takes a Wasm module's registry credential from (and
/// strips before the config reaches Envoy).
pub const PULL_SECRET_ENV: &str = "ISTIO_META_WASM_IMAGE_PULL_SECRET";
const DOCKER_CONFIG_TYPE: &str = "kubernetes.io/dockerconfigjson";
const DOCKER_CONFIG_KEY: &str = ".dockerconfigjson";

/// The ECDS resource `name`: the Wasm filter of the extension so named among those that attach
/// to `scope`'s proxy, as istiod builds it; `None` when none has that name (istiod serves a
/// proxy only its own extensions). `verified` says whether the asking proxy authenticated: only
/// such a proxy gets the registry credential of the plugin's `imagePullSecret` (istiod's
/// `GeneratePullSecrets`), any other an empty one.
pub fn extension_config(
    ctx: &PushContext,
    scope: &ScopeView,
    name: &str,
    verified: bool,
) -> Option<Typed> {
    let e = extensions(ctx, scope)
        .into_iter()
        .find(|e| e.spec.wasm.is_some() && e.filter_name() == name)?;
    let wasm = e.spec.wasm.as_ref()?;
    let mut config = plugin_config(&e, wasm);
    if let Some((namespace, secret)) = pull_secret(&e) {
        let credential = if verified {
            docker_credential(ctx, &namespace, &secret).unwrap_or_else(|why| {
                warn!(plugin = %name, "no registry credential for the Wasm module: {why}");
                String::new()
            })
        } else {
            String::new()
        };
        if let Some(plugin_config::Vm::VmConfig(vm)) = config.vm.as_mut() {
            vm.environment_variables
                .get_or_insert_with(Default::default)
                .key_values
                .insert(PULL_SECRET_ENV.to_string(), credential);
        }
    }
    let config = Some(config);
    let typed_config = if network_extension(&e.spec) {
        any(&NetworkWasm { config })
    } else {
        any(&Wasm { config })
    };
    let typed = TypedExtensionConfig {
        name: name.to_string(),
        typed_config: Some(typed_config),
    };
    Some(Typed::new(name, Class::outbound(scope), typed))
}

/// The Secret (namespace, name) a Wasm extension's `imagePullSecret` names, as istiod reads
/// it: a bare name or a `kubernetes://` (or other credential) reference, always in the
/// extension's own namespace whatever namespace the reference gives.
fn pull_secret(e: &Extension) -> Option<(String, String)> {
    let reference = e.spec.wasm.as_ref()?.image_pull_secret.as_str();
    if reference.is_empty() {
        return None;
    }
    let path = ["kubernetes-gateway://", "kubernetes://", "configmap://"]
        .iter()
        .find_map(|p| reference.strip_prefix(p))
        .unwrap_or(reference);
    let mut parts = path.split('/');
    let first = parts.next().unwrap_or_default();
    let name = parts.next().unwrap_or(first);
    Some((e.origin.metadata.namespace.clone(), name.to_string()))
}

/// The Docker config JSON of a `kubernetes.io/dockerconfigjson` Secret (istiod's
/// `GetDockerCredential`).
fn docker_credential(ctx: &PushContext, namespace: &str, name: &str) -> Result<String, String> {
    let entry = ctx
        .snapshot
        .get_named(Kind::Secret, namespace, name)
        .ok_or_else(|| format!("secret {namespace}/{name} not found"))?;
    let Spec::Secret(secret) = &entry.config.spec else {
        return Err(format!("{namespace}/{name} is not a Secret"));
    };
    if secret.type_.as_deref() != Some(DOCKER_CONFIG_TYPE) {
        return Err(format!(
            "type of secret {namespace}/{name} is not {DOCKER_CONFIG_TYPE}"
        ));
    }
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(DOCKER_CONFIG_KEY))
        .map(|v| String::from_utf8_lossy(&v.0).into_owned())
        .ok_or_else(|| format!("cannot find docker config at secret {namespace}/{name}"))
}

/// An ECDS resource as `/debug` shows it: the registry credential redacted, as istiod's debug
/// endpoints do.
pub fn redacted(
    resource: &envoy_types::pb::google::protobuf::Any,
) -> envoy_types::pb::google::protobuf::Any {
    let Ok(mut typed) = TypedExtensionConfig::decode(resource.value.as_slice()) else {
        return resource.clone();
    };
    let Some(inner) = typed.typed_config.as_ref() else {
        return resource.clone();
    };
    let redact = |config: &mut Option<PluginConfig>| {
        if let Some(plugin_config::Vm::VmConfig(vm)) = config.as_mut().and_then(|c| c.vm.as_mut())
            && let Some(value) = vm
                .environment_variables
                .as_mut()
                .and_then(|e| e.key_values.get_mut(PULL_SECRET_ENV))
            && !value.is_empty()
        {
            *value = "<Redacted>".into();
        }
    };
    let rewritten = if inner.type_url == WASM_HTTP_FILTER_TYPE {
        Wasm::decode(inner.value.as_slice()).ok().map(|mut w| {
            redact(&mut w.config);
            any(&w)
        })
    } else if inner.type_url == WASM_NETWORK_FILTER_TYPE {
        NetworkWasm::decode(inner.value.as_slice())
            .ok()
            .map(|mut w| {
                redact(&mut w.config);
                any(&w)
            })
    } else {
        None
    };
    match rewritten {
        Some(r) => {
            typed.typed_config = Some(r);
            any(&typed)
        }
        None => resource.clone(),
    }
}

/// istiod's `buildWasmConfig`.
fn plugin_config(e: &Extension, w: &WasmConfig) -> PluginConfig {
    let configuration = w.plugin_config.as_ref().filter(|c| !c.is_empty()).map(|c| {
        any(&StringValue {
            value: serde_json::Value::Object(c.clone()).to_string(),
        })
    });
    let mut env = std::collections::HashMap::new();
    if let Some(policy) = w
        .image_pull_policy
        .filter(|p| *p != PullPolicy::UNSPECIFIED_POLICY)
    {
        env.insert(
            "ISTIO_META_WASM_IMAGE_PULL_POLICY".to_string(),
            format!("{policy:?}"),
        );
    }
    env.insert(
        "ISTIO_META_WASM_PLUGIN_RESOURCE_VERSION".to_string(),
        e.origin.metadata.resource_version.clone(),
    );
    let mut host_env_keys = Vec::new();
    for v in w.vm_config.iter().flat_map(|c| &c.env) {
        match v.value_from.unwrap_or(EnvValueSource::INLINE) {
            EnvValueSource::INLINE => {
                env.insert(v.name.clone(), v.value.clone());
            }
            EnvValueSource::HOST => host_env_keys.push(v.name.clone()),
        }
    }
    let failure_policy = match w.fail_strategy {
        Some(FailStrategy::FAIL_OPEN) => FailurePolicy::FailOpen,
        Some(FailStrategy::FAIL_CLOSE) => FailurePolicy::FailClosed,
        Some(FailStrategy::FAIL_RELOAD) => FailurePolicy::FailReload,
        None => FailurePolicy::Unspecified,
    };
    PluginConfig {
        name: format!("{}.{}", e.origin.metadata.namespace, e.name),
        root_id: w.plugin_name.clone(),
        configuration,
        failure_policy: failure_policy as i32,
        vm: Some(plugin_config::Vm::VmConfig(VmConfig {
            runtime: "envoy.wasm.runtime.v8".into(),
            code: Some(data_source_of(&w.url, &w.sha256)),
            environment_variables: Some(EnvironmentVariables {
                host_env_keys,
                key_values: env,
            }),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// istiod's `buildDataSource`: a `file://` URL is a local file; anything else (`oci://` when no
/// scheme is given) a remote source whose cluster is `_`, since istio-agent fetches it.
fn data_source_of(url: &str, sha256: &str) -> AsyncDataSource {
    if let Some(path) = url.strip_prefix("file://") {
        return AsyncDataSource {
            specifier: Some(async_data_source::Specifier::Local(DataSource {
                specifier: Some(data_source::Specifier::Filename(path.to_string())),
                ..Default::default()
            })),
        };
    }
    let uri = if url.contains("://") {
        url.to_string()
    } else {
        format!("oci://{url}")
    };
    AsyncDataSource {
        specifier: Some(async_data_source::Specifier::Remote(RemoteDataSource {
            http_uri: Some(HttpUri {
                uri,
                timeout: Some(Duration {
                    seconds: 30,
                    nanos: 0,
                }),
                http_upstream_type: Some(http_uri::HttpUpstreamType::Cluster("_".into())),
            }),
            sha256: sha256.to_string(),
            ..Default::default()
        })),
    }
}

/// The filters an extension phase is placed around, as istiod builds a chain: custom
/// authorization, [AUTHN], request authentication, [AUTHZ], authorization, [STATS,
/// UNSPECIFIED], then the rest.
struct Anchors {
    custom_authz: &'static str,
    authn: &'static str,
    authz: &'static str,
}

const HTTP_ANCHORS: Anchors = Anchors {
    custom_authz: EXT_AUTHZ_FILTER,
    authn: JWT_FILTER,
    authz: RBAC_FILTER,
};

/// A TCP chain has no request authentication: AUTHN and AUTHZ extensions both go before
/// authorization.
const NETWORK_ANCHORS: Anchors = Anchors {
    custom_authz: NETWORK_EXT_AUTHZ_FILTER,
    authn: "",
    authz: NETWORK_RBAC_FILTER,
};

/// Inserts `extensions` into `filters` at their phases.
fn insert<F: Clone>(
    filters: &mut Vec<F>,
    name: fn(&F) -> &str,
    anchors: &Anchors,
    extensions: &[(ExtensionPhase, F)],
) {
    let run = |from: usize, wanted: &str, filters: &[F]| {
        from + filters[from..]
            .iter()
            .take_while(|f| !wanted.is_empty() && name(f) == wanted)
            .count()
    };
    let authn_at = run(0, anchors.custom_authz, filters);
    let authz_at = run(authn_at, anchors.authn, filters);
    let after_authz = run(authz_at, anchors.authz, filters);
    let of = |phases: &[ExtensionPhase]| -> Vec<F> {
        extensions
            .iter()
            .filter(|(p, _)| phases.contains(p))
            .map(|(_, f)| f.clone())
            .collect()
    };
    // From the back, so earlier positions stay valid.
    let late = [
        of(&[ExtensionPhase::STATS]),
        of(&[ExtensionPhase::UNSPECIFIED]),
    ]
    .concat();
    filters.splice(after_authz..after_authz, late);
    filters.splice(authz_at..authz_at, of(&[ExtensionPhase::AUTHZ]));
    filters.splice(authn_at..authn_at, of(&[ExtensionPhase::AUTHN]));
}

fn http_name(f: &HttpFilter) -> &str {
    &f.name
}

fn network_name(f: &NetworkFilter) -> &str {
    &f.name
}

/// The pass: extensions into the HTTP connection managers (and, network Wasm, the TCP chains) of
/// a scope's listeners.
pub struct TrafficExtensions;

impl Pass for TrafficExtensions {
    fn name(&self) -> &'static str {
        "traffic_extension"
    }

    fn applies(&self, ctx: &PushContext, scope: &ScopeView) -> bool {
        !extensions(ctx, scope).is_empty()
    }

    fn apply(&self, ctx: &PushContext, scope: &ScopeView, resources: &mut Vec<Typed>) {
        let found = extensions(ctx, scope);
        for r in resources.iter_mut() {
            let class = r.class;
            if matches!(class, Class::Proxyless | Class::ProxylessServer) {
                continue;
            }
            // At a waypoint, the HTTP chains of the services and workloads it serves (istiod's
            // buildWaypointHTTPFilters); never its tunnel ends, and no network filters (istiod
            // inserts none there either).
            let waypoint = class == Class::Waypoint;
            let Built::Listener(listener) = &mut r.built else {
                continue;
            };
            if waypoint && listener.role != ListenerRole::Destinations {
                continue;
            }
            let listener_port = listener_port(&listener.listener);
            for chain in listener.all_chains() {
                // On the virtual listeners the port is the filter chain's.
                let port = chain
                    .filter_chain_match
                    .as_ref()
                    .and_then(|m| m.destination_port)
                    .map(|p| p.value)
                    .or(listener_port);
                let phase = |e: &Extension| e.spec.phase.unwrap_or(ExtensionPhase::UNSPECIFIED);
                let matching = found.iter().filter(|e| applies(&e.spec, class, port));
                let http: Vec<(ExtensionPhase, HttpFilter)> = matching
                    .clone()
                    .filter(|e| http_extension(&e.spec))
                    .map(|e| (phase(e), http_filter(e)))
                    .collect();
                let network: Vec<(ExtensionPhase, NetworkFilter)> = matching
                    .filter(|e| network_extension(&e.spec))
                    .map(|e| (phase(e), network_filter(e)))
                    .collect();
                if !waypoint && !network.is_empty() && chain.proxies_tcp() {
                    insert(&mut chain.filters, network_name, &NETWORK_ANCHORS, &network);
                }
                if http.is_empty() {
                    continue;
                }
                for hcm in chain.http_connection_managers() {
                    insert(&mut hcm.http_filters, http_name, &HTTP_ANCHORS, &http);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xds::generate::typed_listener::TCP_PROXY;

    fn names(filters: &[HttpFilter]) -> Vec<&str> {
        filters.iter().map(|f| f.name.as_str()).collect()
    }

    fn named(n: &str) -> HttpFilter {
        HttpFilter {
            name: n.into(),
            ..Default::default()
        }
    }

    /// Each phase lands where istiod builds it, whatever security filters the chain has.
    #[test]
    fn phases_land_where_istiod_builds_them() {
        let ext = |p: ExtensionPhase, n: &str| (p, named(n));
        let all = [
            ext(ExtensionPhase::UNSPECIFIED, "plain"),
            ext(ExtensionPhase::AUTHN, "authn"),
            ext(ExtensionPhase::STATS, "stats"),
            ext(ExtensionPhase::AUTHZ, "authz"),
        ];
        let mut full: Vec<HttpFilter> =
            [EXT_AUTHZ_FILTER, JWT_FILTER, RBAC_FILTER, "cors", "router"]
                .iter()
                .map(|n| named(n))
                .collect();
        insert(&mut full, http_name, &HTTP_ANCHORS, &all);
        assert_eq!(
            names(&full),
            [
                EXT_AUTHZ_FILTER,
                "authn",
                JWT_FILTER,
                "authz",
                RBAC_FILTER,
                "stats",
                "plain",
                "cors",
                "router"
            ]
        );
        let tcp = |n: &str| NetworkFilter {
            name: n.into(),
            config: crate::xds::generate::typed_listener::FilterConfig::Encoded(None),
        };
        let mut chain = vec![tcp(NETWORK_RBAC_FILTER), tcp(TCP_PROXY)];
        let network = [
            (ExtensionPhase::STATS, tcp("stats")),
            (ExtensionPhase::AUTHN, tcp("authn")),
            (ExtensionPhase::AUTHZ, tcp("authz")),
        ];
        insert(&mut chain, network_name, &NETWORK_ANCHORS, &network);
        let chain: Vec<&str> = chain.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            chain,
            ["authn", "authz", NETWORK_RBAC_FILTER, "stats", TCP_PROXY]
        );
        let mut bare: Vec<HttpFilter> = ["cors", "router"].iter().map(|n| named(n)).collect();
        insert(&mut bare, http_name, &HTTP_ANCHORS, &all);
        assert_eq!(
            names(&bare),
            ["authn", "authz", "stats", "plain", "cors", "router"]
        );
    }

    /// The ECDS resource of a WasmPlugin as istiod builds it: the translated name, a remote
    /// source with cluster `_` and the sha256 for an OCI image (istio-agent fetches it), the
    /// plugin config as JSON text, the resource version and inline env in the VM's environment,
    /// host env keys, the failure policy; unknown names give nothing.
    /// The pull secret an authenticated proxy gets: the Docker config of the Secret of that
    /// name in the plugin's namespace, whatever namespace the reference names; an
    /// unauthenticated proxy, a missing Secret or one of another type gives an empty one; the
    /// debug dump redacts it.
    #[test]
    fn a_pull_secret_is_resolved_for_authenticated_proxies_only() {
        let ctx = crate::testing::push_context(
            r#"
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: auth, namespace: shop}
spec:
  url: registry.example.com/auth:1
  imagePullSecret: kubernetes://elsewhere/registry
---
apiVersion: extensions.istio.io/v1alpha1
kind: TrafficExtension
metadata: {name: opaque, namespace: shop}
spec:
  wasm: {url: registry.example.com/opaque:1, imagePullSecret: plain}
---
apiVersion: v1
kind: Secret
metadata: {name: registry, namespace: shop}
type: kubernetes.io/dockerconfigjson
data: {.dockerconfigjson: eyJhdXRocyI6e319}
---
apiVersion: v1
kind: Secret
metadata: {name: registry, namespace: elsewhere}
type: kubernetes.io/dockerconfigjson
data: {.dockerconfigjson: eyJvdGhlciI6e319}
---
apiVersion: v1
kind: Secret
metadata: {name: plain, namespace: shop}
type: Opaque
data: {.dockerconfigjson: eyJhdXRocyI6e319}
"#,
        );
        let scope = ctx.scope(&crate::testing::sidecar("shop", &[]));
        let credential = |name: &str, verified: bool| -> Option<String> {
            let r = extension_config(&ctx, &scope, name, verified)
                .expect("served")
                .encode();
            let typed = TypedExtensionConfig::decode(r.any.value.as_slice()).unwrap();
            let wasm = Wasm::decode(typed.typed_config.unwrap().value.as_slice()).unwrap();
            let Some(plugin_config::Vm::VmConfig(vm)) = wasm.config.unwrap().vm else {
                panic!("a VM config");
            };
            vm.environment_variables
                .unwrap()
                .key_values
                .get(PULL_SECRET_ENV)
                .cloned()
        };
        let plugin = "extensions.istio.io/trafficextension/shop.auth~istio-translated-wasmplugin";
        assert_eq!(credential(plugin, true).as_deref(), Some(r#"{"auths":{}}"#));
        assert_eq!(credential(plugin, false).as_deref(), Some(""));
        let opaque = "extensions.istio.io/trafficextension/shop.opaque";
        assert_eq!(credential(opaque, true).as_deref(), Some(""));

        let served = extension_config(&ctx, &scope, plugin, true)
            .unwrap()
            .encode();
        // A proxy of another namespace is not served the plugin (nor its credential).
        let foreign = ctx.scope(&crate::testing::sidecar("elsewhere", &[]));
        assert!(extension_config(&ctx, &foreign, plugin, true).is_none());
        let shown = redacted(&served.any);
        let typed = TypedExtensionConfig::decode(shown.value.as_slice()).unwrap();
        let wasm = Wasm::decode(typed.typed_config.unwrap().value.as_slice()).unwrap();
        let Some(plugin_config::Vm::VmConfig(vm)) = wasm.config.unwrap().vm else {
            panic!("a VM config");
        };
        assert_eq!(
            vm.environment_variables.unwrap().key_values[PULL_SECRET_ENV],
            "<Redacted>"
        );
    }

    #[test]
    fn a_wasm_plugin_is_served_as_istiod_builds_it() {
        let ctx = crate::testing::push_context(
            r#"
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: auth, namespace: shop}
spec:
  url: registry.example.com/auth:1
  sha256: "abababababababababababababababababababababababababababababababab"
  pluginName: root
  pluginConfig: {mode: strict}
  failStrategy: FAIL_OPEN
  imagePullPolicy: Always
  vmConfig: {env: [{name: A, value: b}, {name: HOME, valueFrom: HOST}]}
"#,
        );
        let name = "extensions.istio.io/trafficextension/shop.auth~istio-translated-wasmplugin";
        let scope = ctx.scope(&crate::testing::sidecar("shop", &[]));
        let r = extension_config(&ctx, &scope, name, true)
            .expect("served")
            .encode();
        let typed = TypedExtensionConfig::decode(r.any.value.as_slice()).unwrap();
        assert_eq!(typed.name, name);
        let wasm = Wasm::decode(typed.typed_config.unwrap().value.as_slice()).unwrap();
        let config = wasm.config.unwrap();
        assert_eq!(config.name, "shop.auth~istio-translated-wasmplugin");
        assert_eq!(config.root_id, "root");
        assert_eq!(config.failure_policy, FailurePolicy::FailOpen as i32);
        let text = StringValue::decode(config.configuration.unwrap().value.as_slice()).unwrap();
        assert_eq!(text.value, r#"{"mode":"strict"}"#);
        let Some(plugin_config::Vm::VmConfig(vm)) = config.vm else {
            panic!("a VM config");
        };
        assert_eq!(vm.runtime, "envoy.wasm.runtime.v8");
        let env = vm.environment_variables.unwrap();
        assert_eq!(env.key_values.get("A").map(String::as_str), Some("b"));
        assert_eq!(
            env.key_values
                .get("ISTIO_META_WASM_IMAGE_PULL_POLICY")
                .map(String::as_str),
            Some("Always")
        );
        assert!(
            env.key_values
                .contains_key("ISTIO_META_WASM_PLUGIN_RESOURCE_VERSION")
        );
        assert_eq!(env.host_env_keys, ["HOME"]);
        let Some(async_data_source::Specifier::Remote(remote)) = vm.code.unwrap().specifier else {
            panic!("a remote source");
        };
        let uri = remote.http_uri.unwrap();
        assert_eq!(uri.uri, "oci://registry.example.com/auth:1");
        assert_eq!(
            uri.http_upstream_type,
            Some(http_uri::HttpUpstreamType::Cluster("_".into()))
        );
        assert_eq!(remote.sha256.len(), 64);
        assert!(
            extension_config(
                &ctx,
                &scope,
                "extensions.istio.io/trafficextension/shop.other",
                true
            )
            .is_none()
        );
    }
}
