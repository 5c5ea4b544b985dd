//! Delegate VirtualServices: a root's `http[].delegate` route is replaced by the delegate's HTTP
//! routes, each narrowed by the root route's matches and inheriting what it does not set, as istiod
//! merges them. A delegate route whose matches contradict every root match is dropped; a delegate
//! that does not exist, has hosts, is not exported to the root's namespace or delegates again
//! contributes nothing (istiod allows one level).

use crate::config::common::StringMatch;
use crate::config::networking::{HttpMatchRequest, HttpRoute, VirtualService};
use crate::model::resolve_host;
use std::collections::BTreeMap;

/// `root` (in `root_ns`) with every delegate route expanded. `find(name, namespace)` returns a
/// delegate VirtualService that may serve `root_ns`.
pub fn expand(
    root_ns: &str,
    root: &VirtualService,
    domain_suffix: &str,
    find: &dyn Fn(&str, &str) -> Option<VirtualService>,
) -> VirtualService {
    let mut out = root.clone();
    out.http = Vec::new();
    for route in &root.http {
        let Some(d) = &route.delegate else {
            out.http.push(route.clone());
            continue;
        };
        let ns = if d.namespace.is_empty() {
            root_ns
        } else {
            d.namespace.as_str()
        };
        let Some(delegate) = find(&d.name, ns) else {
            tracing::debug!(delegate = %format!("{ns}/{}", d.name), "delegate VirtualService not found");
            continue;
        };
        for sub in &delegate.http {
            if sub.delegate.is_some() {
                continue;
            }
            let mut sub = sub.clone();
            resolve_destinations(&mut sub, ns, domain_suffix);
            if let Some(merged) = merge_route(route, sub) {
                out.http.push(merged);
            }
        }
    }
    out
}

/// Short destination hosts of a delegate are names in the delegate's namespace, not the root's.
fn resolve_destinations(route: &mut HttpRoute, ns: &str, suffix: &str) {
    for d in route
        .route
        .iter_mut()
        .filter_map(|r| r.destination.as_mut())
    {
        d.host = resolve_host(&d.host, ns, suffix);
    }
    if let Some(m) = route.mirror.as_mut() {
        m.host = resolve_host(&m.host, ns, suffix);
    }
    for m in route
        .mirrors
        .iter_mut()
        .filter_map(|m| m.destination.as_mut())
    {
        m.host = resolve_host(&m.host, ns, suffix);
    }
}

fn merge_route(root: &HttpRoute, mut sub: HttpRoute) -> Option<HttpRoute> {
    sub.matches = merge_matches(&root.matches, &sub.matches)?;
    sub.name = match (root.name.is_empty(), sub.name.is_empty()) {
        (_, true) => root.name.clone(),
        (false, false) => format!("{}-{}", root.name, sub.name),
        (true, false) => sub.name,
    };
    macro_rules! inherit {
        ($($field:ident),*) => {$(
            if sub.$field.is_none() {
                sub.$field = root.$field.clone();
            }
        )*};
    }
    inherit!(
        rewrite,
        direct_response,
        timeout,
        retries,
        fault,
        mirror,
        mirror_percent,
        mirror_percentage,
        cors_policy,
        headers
    );
    if sub.mirrors.is_empty() {
        sub.mirrors = root.mirrors.clone();
    }
    Some(sub)
}

/// Every delegate match must narrow at least one root match; `None` when one cannot.
fn merge_matches(
    root: &[HttpMatchRequest],
    sub: &[HttpMatchRequest],
) -> Option<Vec<HttpMatchRequest>> {
    if root.is_empty() {
        return Some(sub.to_vec());
    }
    if sub.is_empty() {
        return Some(root.to_vec());
    }
    let mut out = Vec::new();
    for s in sub {
        let merged: Vec<HttpMatchRequest> = root
            .iter()
            .filter(|r| !conflicts(r, s))
            .map(|r| merge_match(r, s))
            .collect();
        if merged.is_empty() {
            return None;
        }
        out.extend(merged);
    }
    Some(out)
}

fn merge_match(root: &HttpMatchRequest, sub: &HttpMatchRequest) -> HttpMatchRequest {
    let mut out = sub.clone();
    out.name = match (root.name.is_empty(), sub.name.is_empty()) {
        (_, true) => root.name.clone(),
        (false, false) => format!("{}-{}", root.name, sub.name),
        (true, false) => sub.name.clone(),
    };
    for (mine, theirs) in [
        (&mut out.uri, &root.uri),
        (&mut out.scheme, &root.scheme),
        (&mut out.method, &root.method),
        (&mut out.authority, &root.authority),
    ] {
        if mine.is_none() {
            mine.clone_from(theirs);
        }
    }
    let union = |a: &BTreeMap<String, StringMatch>, b: &BTreeMap<String, StringMatch>| {
        let mut m = a.clone();
        m.extend(b.iter().map(|(k, v)| (k.clone(), v.clone())));
        m
    };
    out.headers = union(&root.headers, &sub.headers);
    out.without_headers = union(&root.without_headers, &sub.without_headers);
    out.query_params = union(&root.query_params, &sub.query_params);
    let mut labels = root.source_labels.clone();
    labels.extend(sub.source_labels.clone());
    out.source_labels = labels;
    if out.port == 0 {
        out.port = root.port;
    }
    if out.source_namespace.is_empty() {
        out.source_namespace.clone_from(&root.source_namespace);
    }
    if out.gateways.is_empty() {
        out.gateways.clone_from(&root.gateways);
    }
    if out.stat_prefix.is_empty() {
        out.stat_prefix.clone_from(&root.stat_prefix);
    }
    out
}

/// The delegate match asks for something the root match excludes.
fn conflicts(root: &HttpMatchRequest, leaf: &HttpMatchRequest) -> bool {
    let pairs = [
        (&root.uri, &leaf.uri),
        (&root.scheme, &leaf.scheme),
        (&root.method, &leaf.method),
        (&root.authority, &leaf.authority),
    ];
    if pairs
        .iter()
        .any(|(r, l)| string_conflict(r.as_ref(), l.as_ref()))
    {
        return true;
    }
    let map_conflict = |r: &BTreeMap<String, StringMatch>, l: &BTreeMap<String, StringMatch>| {
        l.iter().any(|(k, v)| string_conflict(r.get(k), Some(v)))
    };
    map_conflict(&root.headers, &leaf.headers)
        || map_conflict(&root.without_headers, &leaf.without_headers)
        || map_conflict(&root.query_params, &leaf.query_params)
        || root.ignore_uri_case != leaf.ignore_uri_case
        || (root.port > 0 && leaf.port > 0 && root.port != leaf.port)
        || (!root.source_namespace.is_empty() && leaf.source_namespace != root.source_namespace)
        || leaf
            .source_labels
            .iter()
            .any(|(k, v)| root.source_labels.get(k).is_some_and(|r| r != v))
        || (!root.gateways.is_empty()
            && !leaf.gateways.is_empty()
            && !leaf.gateways.iter().all(|g| root.gateways.contains(g)))
}

/// A leaf string match is compatible when it narrows the root's: equal exact values, or a prefix
/// or exact value under the root's prefix; regular expressions only against nothing.
fn string_conflict(root: Option<&StringMatch>, leaf: Option<&StringMatch>) -> bool {
    let (Some(root), Some(leaf)) = (root, leaf) else {
        return false;
    };
    match (root, leaf) {
        // `{}` matches anything: a root's constrains nothing, a leaf's is wider than the root's.
        (StringMatch::Any, _) => false,
        (_, StringMatch::Any) => true,
        (StringMatch::Regex(_), _) | (_, StringMatch::Regex(_)) => true,
        (StringMatch::Exact(r), StringMatch::Exact(l)) => r != l,
        (StringMatch::Exact(_), StringMatch::Prefix(_)) => true,
        (StringMatch::Prefix(r), StringMatch::Prefix(l) | StringMatch::Exact(l)) => {
            !l.starts_with(r.as_str())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vs(yaml: &str) -> VirtualService {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn delegate_routes_are_narrowed_by_the_root_and_inherit_from_it() {
        let root = vs(
            "hosts: [shop.example.com]\ngateways: [gw]\nhttp:\n- name: cart\n  match: [{uri: {prefix: /cart}}]\n  timeout: 3s\n  delegate: {name: cart, namespace: team}\n- route: [{destination: {host: home}}]\n",
        );
        let delegate = vs(
            "http:\n- name: v2\n  match: [{uri: {prefix: /cart/v2}}]\n  route: [{destination: {host: cart-v2}}]\n- name: elsewhere\n  match: [{uri: {prefix: /other}}]\n  route: [{destination: {host: other}}]\n- route: [{destination: {host: cart}}]\n",
        );
        let find =
            |name: &str, ns: &str| (name == "cart" && ns == "team").then(|| delegate.clone());
        let out = expand("edge", &root, "cluster.local", &find);
        assert_eq!(
            out.http.len(),
            3,
            "/other cannot narrow /cart: that delegate route is dropped"
        );
        let first = &out.http[0];
        assert_eq!(first.name, "cart-v2");
        assert_eq!(
            first.matches[0].uri,
            Some(StringMatch::Prefix("/cart/v2".into()))
        );
        assert_eq!(first.timeout, root.http[0].timeout, "inherited");
        assert_eq!(
            first.route[0].destination.as_ref().unwrap().host,
            "cart-v2.team.svc.cluster.local",
            "short hosts are the delegate's namespace's"
        );
        assert_eq!(
            out.http[1].matches[0].uri,
            Some(StringMatch::Prefix("/cart".into())),
            "a delegate route without matches takes the root's"
        );
        assert_eq!(
            out.http[2].route[0].destination.as_ref().unwrap().host,
            "home"
        );
        // A missing delegate contributes nothing.
        let none = |_: &str, _: &str| None;
        assert_eq!(expand("edge", &root, "cluster.local", &none).http.len(), 1);
    }
}
