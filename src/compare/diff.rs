//! The semantic difference of two proxy configs: per resource, the field paths whose values
//! differ, where Envoy would behave differently. Order counts where Envoy reads in order (routes,
//! HTTP filters, listener filters); it does not where Envoy matches (filter chains and virtual
//! hosts, matched by name) or reads a set (domains, server names, prefix ranges, endpoints).
//! Defaults are already gone from both sides (`config`), so `0s` and a missing timeout agree.

use super::config::{COMPARED, ProxyConfig};
use crate::xds::types::TypeUrl;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// One difference: a resource only one side has (`path` empty), or one field of a resource both
/// have. `None` is "absent on this side".
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Difference {
    #[serde(rename = "type", serialize_with = "short")]
    pub type_url: TypeUrl,
    pub resource: String,
    pub path: String,
    pub left: Option<Value>,
    pub right: Option<Value>,
}

fn short<S: serde::Serializer>(t: &TypeUrl, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(t.short())
}

/// Fields whose lists Envoy reads as sets (or matches by name): their order is not compared.
const UNORDERED: &[&str] = &[
    "filterChains",
    "virtualHosts",
    "domains",
    "serverNames",
    "prefixRanges",
    "sourcePrefixRanges",
    "directSourcePrefixRanges",
    "sourcePorts",
    "applicationProtocols",
    "endpoints",
    "lbEndpoints",
    "matchSubjectAltNames",
    "clusters",
];

/// The differences of `left` and `right` in the types both hold, by type, resource and path.
pub fn diff(left: &ProxyConfig, right: &ProxyConfig) -> Vec<Difference> {
    let mut out = Vec::new();
    for type_url in COMPARED {
        if !(left.types.contains(&type_url) && right.types.contains(&type_url)) {
            continue;
        }
        let empty = BTreeMap::new();
        let l = left.resources.get(&type_url).unwrap_or(&empty);
        let r = right.resources.get(&type_url).unwrap_or(&empty);
        let names: BTreeSet<&String> = l.keys().chain(r.keys()).collect();
        for name in names {
            let mut found = Vec::new();
            match (l.get(name), r.get(name)) {
                (Some(a), Some(b)) => values(&mut String::new(), a, b, &mut found),
                (a, b) => found.push((String::new(), a.cloned(), b.cloned())),
            }
            out.extend(found.into_iter().map(|(path, left, right)| Difference {
                type_url,
                resource: name.clone(),
                path,
                left,
                right,
            }));
        }
    }
    out
}

type Found = Vec<(String, Option<Value>, Option<Value>)>;

fn values(path: &mut String, a: &Value, b: &Value, out: &mut Found) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for key in keys {
                let len = path.len();
                path.push('/');
                path.push_str(key);
                match (x.get(key), y.get(key)) {
                    (Some(p), Some(q)) => values(path, p, q, out),
                    (p, q) => out.push((path.clone(), p.cloned(), q.cloned())),
                }
                path.truncate(len);
            }
        }
        (Value::Array(x), Value::Array(y)) => lists(path, x, y, out),
        _ if a != b => out.push((path.clone(), Some(a.clone()), Some(b.clone()))),
        _ => {}
    }
}

/// The `name` of every element, when every element has one and no two share it.
fn names(list: &[Value]) -> Option<Vec<&str>> {
    let names: Vec<&str> = list
        .iter()
        .map(|v| v.get("name").and_then(Value::as_str))
        .collect::<Option<_>>()?;
    let unique: BTreeSet<&&str> = names.iter().collect();
    (unique.len() == names.len()).then_some(names)
}

fn field(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or_default()
}

fn lists(path: &mut String, x: &[Value], y: &[Value], out: &mut Found) {
    let unordered = UNORDERED.contains(&field(path));
    let by_name = match (names(x), names(y)) {
        // Named elements are matched by name where the lists share a name; an ordered list of
        // wholly other names is compared by position (Envoy reads it in order).
        (Some(xn), Some(yn)) if unordered || xn.iter().any(|n| yn.contains(n)) => Some((xn, yn)),
        _ => None,
    };
    if let Some((xn, yn)) = by_name {
        // The order, where it changed other than by elements leaving (which are reported).
        let kept: Vec<&&str> = xn.iter().filter(|n| yn.contains(n)).collect();
        if !unordered && yn.iter().collect::<Vec<_>>() != kept {
            let order =
                |n: &[&str]| Value::from(n.iter().map(|s| s.to_string()).collect::<Vec<_>>());
            out.push((format!("{path}[order]"), Some(order(&xn)), Some(order(&yn))));
        }
        let by_name = |list: &[Value]| -> BTreeMap<String, Value> {
            list.iter()
                .filter_map(|v| Some((v.get("name")?.as_str()?.to_string(), v.clone())))
                .collect()
        };
        let (a, b) = (by_name(x), by_name(y));
        let all: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
        for name in all {
            let len = path.len();
            path.push_str(&format!("[{name}]"));
            match (a.get(name), b.get(name)) {
                (Some(p), Some(q)) => values(path, p, q, out),
                (p, q) => out.push((path.clone(), p.cloned(), q.cloned())),
            }
            path.truncate(len);
        }
        return;
    }
    if unordered {
        let canonical = |list: &[Value]| -> BTreeMap<String, (usize, Value)> {
            let mut m: BTreeMap<String, (usize, Value)> = BTreeMap::new();
            for v in list {
                m.entry(v.to_string()).or_insert((0, v.clone())).0 += 1;
            }
            m
        };
        let (a, b) = (canonical(x), canonical(y));
        let only = |this: &BTreeMap<String, (usize, Value)>,
                    other: &BTreeMap<String, (usize, Value)>| {
            let mut rest = Vec::new();
            for (key, (n, v)) in this {
                let common = other.get(key).map_or(0, |(m, _)| *m);
                rest.extend(std::iter::repeat_n(v.clone(), n.saturating_sub(common)));
            }
            rest
        };
        let (left, right) = (only(&a, &b), only(&b, &a));
        path.push_str("[]");
        if let ([p], [q]) = (left.as_slice(), right.as_slice()) {
            // One element changed: say which field of it.
            values(path, p, q, out);
        } else {
            out.extend(left.into_iter().map(|v| (path.clone(), Some(v), None)));
            out.extend(right.into_iter().map(|v| (path.clone(), None, Some(v))));
        }
        path.truncate(path.len() - 2);
        return;
    }
    for i in 0..x.len().max(y.len()) {
        let len = path.len();
        path.push_str(&format!("[{i}]"));
        match (x.get(i), y.get(i)) {
            (Some(p), Some(q)) => values(path, p, q, out),
            (p, q) => out.push((path.clone(), p.cloned(), q.cloned())),
        }
        path.truncate(len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(type_url: TypeUrl, resources: &[Value]) -> ProxyConfig {
        let mut c = ProxyConfig::default();
        c.hold(type_url);
        for r in resources {
            c.insert_json(type_url, r.clone());
        }
        c
    }

    fn paths(d: &[Difference]) -> Vec<&str> {
        d.iter().map(|d| d.path.as_str()).collect()
    }

    #[test]
    fn identical_configs_in_another_order_do_not_differ() {
        let a = config(
            TypeUrl::Listener,
            &[
                json!({"name": "l1", "filterChains": [{"name": "a", "filterChainMatch": {"serverNames": ["x", "y"]}}, {"name": "b"}]}),
                json!({"name": "l2"}),
            ],
        );
        let b = config(
            TypeUrl::Listener,
            &[
                json!({"name": "l2"}),
                json!({"name": "l1", "filterChains": [{"name": "b"}, {"name": "a", "filterChainMatch": {"serverNames": ["y", "x"]}}]}),
            ],
        );
        assert_eq!(diff(&a, &b), vec![]);
    }

    #[test]
    fn route_order_and_filter_order_count() {
        let a = config(
            TypeUrl::Route,
            &[
                json!({"name": "80", "virtualHosts": [{"name": "v", "routes": [{"name": "r1"}, {"name": "r2"}]}]}),
            ],
        );
        let b = config(
            TypeUrl::Route,
            &[
                json!({"name": "80", "virtualHosts": [{"name": "v", "routes": [{"name": "r2"}, {"name": "r1"}]}]}),
            ],
        );
        let d = diff(&a, &b);
        assert_eq!(paths(&d), vec!["/virtualHosts[v]/routes[order]"]);
        assert_eq!(d[0].left, Some(json!(["r1", "r2"])));
    }

    #[test]
    fn a_route_removed_is_one_difference_and_one_added_in_front_moves_the_others() {
        let routes = |names: &[&str]| {
            let list: Vec<Value> = names.iter().map(|n| json!({"name": n})).collect();
            config(
                TypeUrl::Route,
                &[json!({"name": "80", "virtualHosts": [{"name": "v", "routes": list}]})],
            )
        };
        let d = diff(&routes(&["a", "b"]), &routes(&["b"]));
        assert_eq!(paths(&d), vec!["/virtualHosts[v]/routes[a]"]);
        assert_eq!(d[0].right, None);
        let d = diff(&routes(&["a", "b"]), &routes(&["c", "a", "b"]));
        assert_eq!(
            paths(&d),
            vec![
                "/virtualHosts[v]/routes[order]",
                "/virtualHosts[v]/routes[c]"
            ]
        );
        let d = diff(&routes(&["a"]), &routes(&["b"]));
        assert_eq!(paths(&d), vec!["/virtualHosts[v]/routes[0]/name"]);
    }

    #[test]
    fn a_changed_field_is_named_by_its_path_with_both_values() {
        let a = config(
            TypeUrl::Cluster,
            &[json!({"name": "c", "connectTimeout": "10s", "lbPolicy": "LEAST_REQUEST"})],
        );
        let b = config(
            TypeUrl::Cluster,
            &[json!({"name": "c", "connectTimeout": "1s"})],
        );
        let d = diff(&a, &b);
        assert_eq!(paths(&d), vec!["/connectTimeout", "/lbPolicy"]);
        assert_eq!(d[0].left, Some(json!("10s")));
        assert_eq!(d[0].right, Some(json!("1s")));
        assert_eq!(d[1].right, None);
    }

    #[test]
    fn a_resource_on_one_side_only_is_one_difference() {
        let a = config(
            TypeUrl::Cluster,
            &[json!({"name": "c"}), json!({"name": "only-a"})],
        );
        let b = config(TypeUrl::Cluster, &[json!({"name": "c"})]);
        let d = diff(&a, &b);
        assert_eq!(d.len(), 1);
        assert_eq!((d[0].resource.as_str(), d[0].path.as_str()), ("only-a", ""));
        assert!(d[0].right.is_none());
    }

    #[test]
    fn a_type_one_side_does_not_hold_is_not_compared() {
        let a = config(TypeUrl::Endpoint, &[json!({"clusterName": "c"})]);
        assert_eq!(diff(&a, &ProxyConfig::default()), vec![]);
        let mut held = ProxyConfig::default();
        held.hold(TypeUrl::Endpoint);
        assert_eq!(diff(&a, &held).len(), 1);
    }

    #[test]
    fn sets_compare_as_multisets_and_ordered_lists_by_position() {
        let a = config(
            TypeUrl::Endpoint,
            &[
                json!({"clusterName": "c", "endpoints": [{"lbEndpoints": [{"a": 1}, {"a": 2}]}],
                     "policy": {"dropOverloads": [1, 2]}}),
            ],
        );
        let b = config(
            TypeUrl::Endpoint,
            &[
                json!({"clusterName": "c", "endpoints": [{"lbEndpoints": [{"a": 3}, {"a": 1}]}],
                     "policy": {"dropOverloads": [2, 1]}}),
            ],
        );
        let d = diff(&a, &b);
        assert_eq!(
            paths(&d),
            vec![
                "/endpoints[]/lbEndpoints[]/a",
                "/policy/dropOverloads[0]",
                "/policy/dropOverloads[1]"
            ]
        );
    }
}
