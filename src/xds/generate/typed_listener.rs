//! A listener as the generators build it and the finishing passes edit it: its HTTP connection
//! managers and TCP proxies stay typed until the one encode (`finish`), so no pass decodes and
//! re-encodes them; every other network filter is carried as it was built.

use crate::xds::generate::encode::any;
use envoy_types::pb::envoy::config::core::v3::TransportSocket;
use envoy_types::pb::envoy::config::listener::v3::{
    ApiListener, Filter, FilterChain, FilterChainMatch, Listener, filter,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::TcpProxy;
use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};

/// The name istiod gives the HTTP connection manager filter.
pub const HTTP_CONNECTION_MANAGER: &str = "envoy.filters.network.http_connection_manager";
/// The name istiod gives the TCP proxy filter.
pub const TCP_PROXY: &str = "envoy.filters.network.tcp_proxy";

/// What a network filter configures.
#[derive(Debug, Clone, PartialEq)]
pub enum FilterConfig {
    Http(Box<HttpConnectionManager>),
    Tcp(Box<TcpProxy>),
    /// Any other filter's config, as built.
    Encoded(Option<Box<filter::ConfigType>>),
}

impl Default for FilterConfig {
    fn default() -> FilterConfig {
        FilterConfig::Encoded(None)
    }
}

/// One network filter of a chain, by name.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NetworkFilter {
    pub name: String,
    pub config: FilterConfig,
}

impl NetworkFilter {
    /// The HTTP connection manager filter.
    pub fn http(hcm: HttpConnectionManager) -> NetworkFilter {
        NetworkFilter {
            name: HTTP_CONNECTION_MANAGER.into(),
            config: FilterConfig::Http(Box::new(hcm)),
        }
    }

    /// The TCP proxy filter.
    pub fn tcp(proxy: TcpProxy) -> NetworkFilter {
        NetworkFilter {
            name: TCP_PROXY.into(),
            config: FilterConfig::Tcp(Box::new(proxy)),
        }
    }

    /// A filter of any other kind, its config as built.
    pub fn encoded(name: impl Into<String>, config: filter::ConfigType) -> NetworkFilter {
        NetworkFilter {
            name: name.into(),
            config: FilterConfig::Encoded(Some(Box::new(config))),
        }
    }

    /// A filter given encoded (a patch's value, a listener a patch adds): its connection manager
    /// or TCP proxy decoded so later steps edit it as they edit built ones.
    pub fn decoded(filter: Filter) -> NetworkFilter {
        let config = match filter.config_type {
            Some(filter::ConfigType::TypedConfig(any)) => decode_config(any),
            other => FilterConfig::Encoded(other.map(Box::new)),
        };
        NetworkFilter {
            name: filter.name,
            config,
        }
    }

    pub fn http_connection_manager_mut(&mut self) -> Option<&mut HttpConnectionManager> {
        match &mut self.config {
            FilterConfig::Http(hcm) => Some(hcm),
            _ => None,
        }
    }

    pub fn tcp_proxy_mut(&mut self) -> Option<&mut TcpProxy> {
        match &mut self.config {
            FilterConfig::Tcp(tcp) => Some(tcp),
            _ => None,
        }
    }

    /// Its typed config packed as Envoy receives it.
    pub fn typed_config(&self) -> Option<Any> {
        match &self.config {
            FilterConfig::Http(hcm) => Some(any(hcm.as_ref())),
            FilterConfig::Tcp(tcp) => Some(any(tcp.as_ref())),
            FilterConfig::Encoded(Some(c)) => match c.as_ref() {
                filter::ConfigType::TypedConfig(a) => Some(a.clone()),
                _ => None,
            },
            FilterConfig::Encoded(None) => None,
        }
    }

    /// Replaces its typed config with `config` (decoded again when it is one of the typed kinds).
    pub fn set_typed_config(&mut self, config: Any) {
        self.config = decode_config(config);
    }

    pub fn encode(self) -> Filter {
        let config_type = match self.config {
            FilterConfig::Encoded(c) => c.map(|c| *c),
            _ => self.typed_config().map(filter::ConfigType::TypedConfig),
        };
        Filter {
            name: self.name,
            config_type,
        }
    }
}

fn decode_config(config: Any) -> FilterConfig {
    if let Some(hcm) = decoded_as::<HttpConnectionManager>(&config) {
        return FilterConfig::Http(Box::new(hcm));
    }
    if let Some(tcp) = decoded_as::<TcpProxy>(&config) {
        return FilterConfig::Tcp(Box::new(tcp));
    }
    FilterConfig::Encoded(Some(Box::new(filter::ConfigType::TypedConfig(config))))
}

/// The `M` that `config` packs, when it packs one that decodes.
fn decoded_as<M: Message + Default + Name>(config: &Any) -> Option<M> {
    if config.type_url != M::type_url() {
        return None;
    }
    M::decode(config.value.as_slice()).ok()
}

/// A filter chain: the fields generators set, its network filters typed, and whatever else an
/// EnvoyFilter gave it (`other`, whose own name, match, socket and filters stay empty). Kept
/// small: a sidecar builds one per service port, and the passes move them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Chain {
    pub name: String,
    pub filter_chain_match: Option<FilterChainMatch>,
    pub transport_socket: Option<TransportSocket>,
    pub filters: Vec<NetworkFilter>,
    /// The service (hostname) whose traffic it carries, on a listener of
    /// [`ListenerRole::Destinations`]: that service's Telemetry shapes its logs, tracing and stats.
    pub service: Option<String>,
    /// Boxed: only a chain an EnvoyFilter gave has any.
    pub other: Option<Box<FilterChain>>,
}

/// Which chain a connection manager or TCP proxy is in, for passes that treat chains apart.
#[derive(Debug, Clone, Copy, Default)]
pub struct ChainId<'a> {
    pub name: &'a str,
    pub service: Option<&'a str>,
}

/// What a listener is for: the passes act on this, never on its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ListenerRole {
    /// Traffic of its proxy's class: services' listeners, a gateway's servers, a sidecar's
    /// inbound chains.
    #[default]
    Traffic,
    /// Where captured connections land (`virtualOutbound`, `virtualInbound`): it logs
    /// connections itself, and EnvoyFilter matches a port per chain there, as istiod's.
    Capture,
    /// An end of an HBONE tunnel (`connect_originate`, `connect_terminate`): plumbing with no
    /// traffic of its own to report; the chains inside the tunnel report it.
    TunnelEnd,
    /// A waypoint's (or east-west gateway's) `main_internal`: a chain per destination it serves.
    Destinations,
}

impl Chain {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Who it is, for the passes.
    pub fn id(&self) -> ChainId<'_> {
        ChainId {
            name: &self.name,
            service: self.service.as_deref(),
        }
    }

    /// Who it is, beside its filters to edit.
    pub fn filters_mut(&mut self) -> (ChainId<'_>, &mut Vec<NetworkFilter>) {
        let id = ChainId {
            name: &self.name,
            service: self.service.as_deref(),
        };
        (id, &mut self.filters)
    }

    /// A chain given encoded: its filters decoded.
    pub fn decoded(mut chain: FilterChain) -> Chain {
        Chain {
            service: None,
            name: std::mem::take(&mut chain.name),
            filter_chain_match: chain.filter_chain_match.take(),
            transport_socket: chain.transport_socket.take(),
            filters: std::mem::take(&mut chain.filters)
                .into_iter()
                .map(NetworkFilter::decoded)
                .collect(),
            other: (chain != FilterChain::default()).then(|| Box::new(chain)),
        }
    }

    pub fn encode(self) -> FilterChain {
        FilterChain {
            name: self.name,
            filter_chain_match: self.filter_chain_match,
            transport_socket: self.transport_socket,
            filters: self
                .filters
                .into_iter()
                .map(NetworkFilter::encode)
                .collect(),
            ..self.other.map(|o| *o).unwrap_or_default()
        }
    }

    /// Lets `edit` change the chain as Envoy's proto (an EnvoyFilter merge of a whole chain),
    /// then takes it back typed.
    pub fn edit_encoded<T>(&mut self, edit: impl FnOnce(&mut FilterChain) -> T) -> T {
        let service = self.service.take();
        let mut proto = std::mem::take(self).encode();
        let out = edit(&mut proto);
        *self = Chain {
            service,
            ..Chain::decoded(proto)
        };
        out
    }

    /// Whether it proxies TCP (istiod's TCP chains: a TCP proxy among its filters).
    pub fn proxies_tcp(&self) -> bool {
        self.filters.iter().any(|f| f.name == TCP_PROXY)
    }

    /// Its HTTP connection managers.
    pub fn http_connection_managers(&mut self) -> impl Iterator<Item = &mut HttpConnectionManager> {
        self.filters
            .iter_mut()
            .filter_map(NetworkFilter::http_connection_manager_mut)
    }
}

/// A listener: everything but its filter chains and a proxyless API listener's connection
/// manager as Envoy's (`listener`, where those stay empty), those typed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TypedListener {
    pub listener: Listener,
    pub role: ListenerRole,
    pub chains: Vec<Chain>,
    pub default_chain: Option<Chain>,
    /// A proxyless gRPC client's API listener connection manager.
    pub api: Option<Box<HttpConnectionManager>>,
}

impl TypedListener {
    pub fn new(listener: Listener, chains: Vec<Chain>) -> TypedListener {
        debug_assert!(listener.filter_chains.is_empty() && listener.default_filter_chain.is_none());
        TypedListener {
            listener,
            role: ListenerRole::Traffic,
            chains,
            default_chain: None,
            api: None,
        }
    }

    /// As a listener of `role`.
    pub fn with_role(mut self, role: ListenerRole) -> TypedListener {
        self.role = role;
        self
    }

    /// A proxyless gRPC client's API listener of connection manager `hcm`.
    pub fn api(listener: Listener, hcm: HttpConnectionManager) -> TypedListener {
        TypedListener {
            api: Some(Box::new(hcm)),
            ..TypedListener::new(listener, Vec::new())
        }
    }

    /// With `default` taking what no chain matches.
    pub fn with_default_chain(mut self, default: Option<Chain>) -> TypedListener {
        self.default_chain = default;
        self
    }

    pub fn name(&self) -> &str {
        &self.listener.name
    }

    /// A listener given encoded: its chains and API listener decoded.
    pub fn decoded(mut listener: Listener) -> TypedListener {
        let chains = std::mem::take(&mut listener.filter_chains)
            .into_iter()
            .map(Chain::decoded)
            .collect();
        let default_chain = listener.default_filter_chain.take().map(Chain::decoded);
        let api = listener.api_listener.as_mut().and_then(|a| {
            let hcm = decoded_as::<HttpConnectionManager>(a.api_listener.as_ref()?)?;
            a.api_listener = None;
            Some(Box::new(hcm))
        });
        TypedListener {
            default_chain,
            api,
            ..TypedListener::new(listener, chains)
        }
    }

    pub fn encode(self) -> Listener {
        let mut listener = self.listener;
        listener.filter_chains = self.chains.into_iter().map(Chain::encode).collect();
        listener.default_filter_chain = self.default_chain.map(Chain::encode);
        if let Some(hcm) = self.api {
            listener
                .api_listener
                .get_or_insert_with(ApiListener::default)
                .api_listener = Some(any(hcm.as_ref()));
        }
        listener
    }

    /// Its chains, the default one last.
    pub fn all_chains(&mut self) -> impl Iterator<Item = &mut Chain> {
        self.chains.iter_mut().chain(self.default_chain.as_mut())
    }

    /// Lets `edit` change the listener as Envoy's proto (an EnvoyFilter merge of a whole
    /// listener), then takes it back typed.
    pub fn edit_encoded<T>(&mut self, edit: impl FnOnce(&mut Listener) -> T) -> T {
        let role = self.role;
        let mut proto = std::mem::take(self).encode();
        let out = edit(&mut proto);
        *self = TypedListener::decoded(proto).with_role(role);
        out
    }
}
