//! Where an Istio object the mesh derived comes from, and which semantics its routes take: the
//! Gateway API and Ingress translations say so in these types, and what reads them (a gateway's
//! visibility and binding, route semantics, provenance, `/debug`) reads the types.
//!
//! istiod says the same in annotations on its derived objects (`internal.istio.io/parents`,
//! `route-semantics`, `gateway-service`). They are still written, from an `Origin`
//! (`annotations`), so the derived objects read as istiod's; and read (`Origin::of`) on objects a
//! user writes, where istiod honours the semantics ones too.

use crate::config::{Config, Kind, ObjectMeta};
use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

pub use crate::config::internal_annotations::{GATEWAY_SERVICE, PARENTS, ROUTE_SEMANTICS};

/// How a VirtualService's routes read, where they differ from Istio's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteSemantics {
    /// The Gateway API's: path prefixes match whole segments, a missing backend is a 500, a
    /// redirect may replace a matched prefix (istiod's `UseGatewaySemantics`).
    Gateway,
    /// A Kubernetes Ingress's: path prefixes match whole segments (`UseIngressSemantics`).
    Ingress,
}

impl RouteSemantics {
    fn as_str(self) -> &'static str {
        match self {
            RouteSemantics::Gateway => "gateway",
            RouteSemantics::Ingress => "ingress",
        }
    }

    fn parse(s: &str) -> Option<RouteSemantics> {
        match s {
            "gateway" => Some(RouteSemantics::Gateway),
            "ingress" => Some(RouteSemantics::Ingress),
            _ => None,
        }
    }
}

/// One object a derived object comes from: a route, a Gateway's or ListenerSet's listener (its
/// `section`), an Ingress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub kind: Kind,
    pub name: String,
    pub section: Option<String>,
    pub namespace: String,
}

impl Source {
    pub fn new(kind: Kind, name: &str, section: Option<&str>, namespace: &str) -> Source {
        Source {
            kind,
            name: name.to_string(),
            section: section.map(str::to_string),
            namespace: namespace.to_string(),
        }
    }

    /// istiod's parent name: `Kind/name.namespace`, with `/section` before the namespace.
    pub fn parent_name(&self) -> String {
        let kind = self.kind.name();
        match &self.section {
            Some(s) => format!("{kind}/{}/{s}.{}", self.name, self.namespace),
            None => format!("{kind}/{}.{}", self.name, self.namespace),
        }
    }

    /// A parent name read back; a kind of the Gateway API's group before any other of that name
    /// (`Gateway` is the Gateway API's here, as istiod writes it).
    fn parse(s: &str) -> Option<Source> {
        let (kind, rest) = s.split_once('/')?;
        let (name, namespace) = rest.rsplit_once('.')?;
        let (name, section) = match name.split_once('/') {
            Some((name, section)) => (name, Some(section)),
            None => (name, None),
        };
        let kind = Kind::from_group_kind(crate::config::gateway_api::GROUP, kind)
            .or_else(|| Kind::ALL.iter().copied().find(|k| k.name() == kind))?;
        Some(Source::new(kind, name, section, namespace))
    }
}

/// What a derived object comes from and how it reads. The default is an object of a user's
/// own, with Istio's semantics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    /// Its routes' semantics, where not Istio's.
    pub route_semantics: Option<RouteSemantics>,
    /// The objects it comes from, in the order they were merged.
    pub sources: Vec<Source>,
    /// A Gateway API Gateway's Istio Gateway: the hostnames of the Services whose pods serve it
    /// (it applies to those pods, in its own namespace, not by selector alone).
    pub gateway_services: Option<Vec<String>>,
}

/// One shared `Origin` for every object that carries none of the annotations.
static USERS_OWN: LazyLock<Arc<Origin>> = LazyLock::new(Arc::default);

impl Origin {
    /// The origin an object of the store declares: none, unless it carries istiod's internal
    /// annotations (which istiod honours on any object).
    pub fn of(meta: &ObjectMeta) -> Arc<Origin> {
        let a = &meta.annotations;
        if ![ROUTE_SEMANTICS, PARENTS, GATEWAY_SERVICE]
            .iter()
            .any(|k| a.contains_key(*k))
        {
            return USERS_OWN.clone();
        }
        Arc::new(Origin {
            route_semantics: a
                .get(ROUTE_SEMANTICS)
                .and_then(|s| RouteSemantics::parse(s)),
            sources: a
                .get(PARENTS)
                .into_iter()
                .flat_map(|p| p.split(','))
                .filter_map(Source::parse)
                .collect(),
            gateway_services: a.get(GATEWAY_SERVICE).map(|s| {
                s.split(',')
                    .filter(|h| !h.is_empty())
                    .map(str::to_string)
                    .collect()
            }),
        })
    }

    /// The annotations istiod writes for it on a derived object.
    pub fn annotations(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        if let Some(s) = self.route_semantics {
            out.insert(ROUTE_SEMANTICS.to_string(), s.as_str().to_string());
        }
        if !self.sources.is_empty() {
            out.insert(PARENTS.to_string(), self.parent_names());
        }
        if let Some(services) = &self.gateway_services {
            out.insert(GATEWAY_SERVICE.to_string(), services.join(","));
        }
        out
    }

    /// The sources as istiod's comma-separated parent names.
    pub fn parent_names(&self) -> String {
        let names: Vec<String> = self.sources.iter().map(Source::parent_name).collect();
        names.join(",")
    }

    /// Derived from the Gateway API: a route's VirtualService or a Gateway's Istio Gateway.
    pub fn gateway_api(&self) -> bool {
        self.route_semantics == Some(RouteSemantics::Gateway) || self.gateway_services.is_some()
    }

    /// A path prefix matches whole segments (Gateway API and Ingress), not a string prefix.
    pub fn segment_prefixes(&self) -> bool {
        self.gateway_api() || self.route_semantics == Some(RouteSemantics::Ingress)
    }

    /// Derived from a ListenerSet's listener (its certificates are the ListenerSet's namespace's).
    pub fn from_listener_set(&self) -> bool {
        self.sources
            .first()
            .is_some_and(|s| s.kind == Kind::ListenerSet)
    }
}

/// An Istio object the mesh derived, with where it comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct Derived {
    pub config: Arc<Config>,
    pub origin: Arc<Origin>,
}

impl Derived {
    /// `config` from `origin`, annotated as istiod annotates its derived objects.
    pub fn new(mut config: Config, origin: Origin) -> Derived {
        config.metadata.annotations.extend(origin.annotations());
        Derived {
            config: Arc::new(config),
            origin: Arc::new(origin),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn derived_route() -> Origin {
        Origin {
            route_semantics: Some(RouteSemantics::Gateway),
            sources: vec![
                Source::new(Kind::HTTPRoute, "a.b", None, "shop"),
                Source::new(Kind::KubernetesGateway, "gw", Some("http"), "infra"),
                Source::new(Kind::ListenerSet, "ls", Some("https"), "team"),
                Source::new(Kind::Ingress, "web", None, "shop"),
            ],
            gateway_services: Some(vec!["gw-istio.infra.svc.cluster.local".into()]),
        }
    }

    /// What a derived object's annotations say reads back as the origin they were written
    /// from: an object a user writes with them means what a derived one does.
    #[test]
    fn annotations_read_back_as_the_origin_they_say() {
        let origin = derived_route();
        let meta = ObjectMeta {
            annotations: origin.annotations(),
            ..Default::default()
        };
        assert_eq!(
            meta.annotations[PARENTS],
            "HTTPRoute/a.b.shop,Gateway/gw/http.infra,ListenerSet/ls/https.team,Ingress/web.shop"
        );
        assert_eq!(*Origin::of(&meta), origin);
        assert!(Origin::of(&ObjectMeta::default()).sources.is_empty());
    }

    #[test]
    fn a_gateway_with_no_services_is_still_the_gateway_apis() {
        let origin = Origin {
            gateway_services: Some(Vec::new()),
            ..Default::default()
        };
        let meta = ObjectMeta {
            annotations: origin.annotations(),
            ..Default::default()
        };
        assert_eq!(meta.annotations[GATEWAY_SERVICE], "");
        assert!(Origin::of(&meta).gateway_api());
        assert!(!Origin::default().gateway_api());
    }
}
