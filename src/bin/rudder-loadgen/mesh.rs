//! The mesh the load generator writes into the daemon's config directory, and the churn steps and markers it reads back from what proxies receive.

use super::*;

pub(crate) fn ns(i: usize, n: usize) -> String {
    format!("load-{}", i % n.max(1))
}

pub(crate) fn host(i: usize, n: usize) -> String {
    format!("svc-{i}.{}.svc.cluster.local", ns(i, n))
}

/// Replaces the mesh file in one step (a hidden file renamed over it): the daemon's file watcher
/// could otherwise read it half written, and push the services missing from that half.
pub(crate) fn write_mesh(file: &std::path::Path, yaml: String) -> std::io::Result<()> {
    let staged = file.with_file_name(".loadgen-mesh.yaml.tmp");
    std::fs::write(&staged, yaml)?;
    std::fs::rename(&staged, file)
}

/// The churn services a mesh at step `churn` holds: all of them, or in a soak the last
/// `SOAK_CHURN_WINDOW`, so a full push still adds a service every proxy must learn (and drops the
/// oldest) while the mesh keeps one size and the daemon's memory can be judged flat or not.
pub(crate) fn churn_services(args: &LoadgenArgs, churn: usize) -> std::ops::RangeInclusive<usize> {
    let first = if args.soak_seconds > 0 {
        churn.saturating_sub(SOAK_CHURN_WINDOW - 1).max(1)
    } else {
        1
    };
    first..=churn
}

/// This run's id, in the names of what only this run writes: a daemon still serving an earlier
/// run's mesh (from the same config directory) shows neither this run's marker nor its churn
/// services. Set once, at start.
pub(crate) static RUN: std::sync::OnceLock<String> = std::sync::OnceLock::new();

pub(crate) fn run_id() -> &'static str {
    RUN.get_or_init(|| {
        use std::hash::BuildHasher;
        // Randomly seeded: two runs, even of one process, get different ids.
        let id = std::collections::hash_map::RandomState::new().hash_one(std::process::id());
        format!("{:08x}", id as u32)
    })
}

/// The port of every churn service.
pub(crate) const CHURN_PORT: u16 = 7000;

/// The host of churn step `step`'s service in `namespace`, in run `run`.
pub(crate) fn churn_host(step: usize, run: &str, namespace: &str) -> String {
    format!("churn-{step}-{run}.{namespace}.svc.cluster.local")
}

/// The churn step whose service cluster `cluster` is in this run (`outbound|7000||` and
/// `churn_host`); another run's churn services have none.
pub(crate) fn churn_step(cluster: &str) -> Option<u32> {
    churn_step_of(cluster, run_id())
}

pub(crate) fn churn_step_of(cluster: &str, run: &str) -> Option<u32> {
    let host = cluster.strip_prefix(&format!("outbound|{CHURN_PORT}||churn-"))?;
    let (step, rest) = host.split_once('-')?;
    let domain = rest.strip_prefix(run)?;
    if domain.starts_with('.') {
        step.parse().ok()
    } else {
        None
    }
}

/// The host of the marker ServiceEntry of run `run`: the daemon serves this run's mesh once its
/// registry has it. Exported to no namespace, so no proxy is sent anything for it.
pub(crate) fn marker_host(run: &str) -> String {
    format!("loadgen-run-{run}.loadgen.invalid")
}

/// How many churn services a soak's mesh keeps at once.
pub(crate) const SOAK_CHURN_WINDOW: usize = 5;

/// The moved endpoint's last octet: steps cycle through 200 addresses, so a long soak stays valid.
pub(crate) fn moved_octet(moved_endpoint: usize) -> usize {
    10 + moved_endpoint % 200
}

/// The cluster of service 0, whose endpoint each endpoint push moves.
pub(crate) fn moved_cluster(args: &LoadgenArgs) -> String {
    format!("outbound|8000||{}", host(0, args.namespaces))
}

/// `moved_cluster`, which the simulated proxies keep the body of (set once, at start).
pub(crate) static WATCHED_CLUSTER: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Whether an encoded ClusterLoadAssignment has service 0's endpoint as endpoint push `moved`
/// left it: its address as a whole string field (a length-prefixed `SocketAddress.address`), so
/// that 10.0.0.15 is not found in 10.0.0.150.
pub(crate) fn has_moved_endpoint(assignment: &[u8], moved: usize) -> bool {
    let address = endpoint_address(0, moved_octet(moved));
    let mut field = vec![0x12, address.len() as u8];
    field.extend_from_slice(address.as_bytes());
    assignment.windows(field.len()).any(|w| w == field)
}

/// The address of service `service`'s endpoint whose last octet is `last`.
pub(crate) fn endpoint_address(service: usize, last: usize) -> String {
    format!("10.{}.{}.{last}", (service / 250) % 250, service % 250)
}

pub(crate) fn mesh_yaml(args: &LoadgenArgs, churn: usize, moved_endpoint: usize) -> String {
    let mut y = String::with_capacity(args.services * 400);
    if args.sidecar_scope {
        for n in 0..args.namespaces {
            y.push_str(&format!(
                "---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: default, namespace: {}}}\nspec: {{egress: [{{hosts: [\"./*\"]}}]}}\n",
                ns(n, args.namespaces)
            ));
        }
    }
    if args.istio_proxy {
        y.push_str("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    defaultProviders: {metrics: [prometheus]}\n");
    }
    let run = run_id();
    y.push_str(&format!(
        "---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: loadgen-run, namespace: {}}}\nspec: {{hosts: [{}], exportTo: [\"~\"], ports: [{{number: 9, name: http, protocol: HTTP}}], resolution: STATIC}}\n",
        ns(0, args.namespaces),
        marker_host(run)
    ));
    // Churn step c adds one service in every namespace, so a full push reaches every proxy even
    // with Sidecar scoping.
    for c in churn_services(args, churn) {
        for n in 0..args.namespaces {
            let namespace = ns(n, args.namespaces);
            y.push_str(&format!(
                "---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: churn-{c}-{run}, namespace: {namespace}}}\nspec: {{hosts: [{}], ports: [{{number: {CHURN_PORT}, name: http, protocol: HTTP}}], resolution: STATIC, endpoints: [{{address: 10.254.{}.{n}}}]}}\n",
                churn_host(c, run, &namespace),
                c % 250
            ));
        }
    }
    if args.realistic {
        realistic_policies(args, &mut y);
    }
    if args.gateway_api_routes > 0 {
        gateway_api(args, &mut y);
    }
    for i in 0..args.services {
        let eps: Vec<String> = (0..args.endpoints_per_service)
            .map(|e| {
                let last = if i == 0 && e == 0 {
                    moved_octet(moved_endpoint)
                } else {
                    10 + e
                };
                let labels = if args.realistic {
                    format!(", labels: {{app: svc-{i}, version: v{}}}", 1 + e % 2)
                } else {
                    String::new()
                };
                format!("{{address: {}{labels}}}", endpoint_address(i, last))
            })
            .collect();
        if args.realistic {
            realistic_routing(args, i, &mut y);
        }
        y.push_str(&format!(
            "---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: svc-{i}, namespace: {}}}\nspec: {{hosts: [{}], ports: [{{number: {}, name: http, protocol: HTTP}}], resolution: STATIC, endpoints: [{}]}}\n",
            ns(i, args.namespaces),
            host(i, args.namespaces),
            8000 + (i % 50),
            eps.join(", ")
        ));
    }
    y
}

/// Service `i`'s VirtualService and DestinationRule in the realistic mesh.
pub(crate) fn realistic_routing(args: &LoadgenArgs, i: usize, y: &mut String) {
    let (namespace, host) = (ns(i, args.namespaces), host(i, args.namespaces));
    y.push_str(&format!(
        "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: svc-{i}, namespace: {namespace}}}\nspec:\n  host: {host}\n  trafficPolicy:\n    connectionPool: {{http: {{http1MaxPendingRequests: 100, maxRequestsPerConnection: 10}}}}\n    outlierDetection: {{consecutive5xxErrors: 5, interval: 10s, baseEjectionTime: 30s}}\n  subsets:\n  - {{name: v1, labels: {{version: v1}}}}\n  - {{name: v2, labels: {{version: v2}}, trafficPolicy: {{loadBalancer: {{simple: LEAST_REQUEST}}}}}}\n"
    ));
    y.push_str(&format!(
        "---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: svc-{i}, namespace: {namespace}}}\nspec:\n  hosts: [{host}]\n  http:\n  - match: [{{headers: {{x-canary: {{exact: \"1\"}}}}}}]\n    route: [{{destination: {{host: {host}, subset: v2}}}}]\n  - match: [{{uri: {{prefix: /api/}}}}]\n    route:\n    - {{destination: {{host: {host}, subset: v1}}, weight: 90}}\n    - {{destination: {{host: {host}, subset: v2}}, weight: 10}}\n    retries: {{attempts: 3, perTryTimeout: 2s, retryOn: \"5xx,reset\"}}\n    timeout: 10s\n  - route: [{{destination: {{host: {host}, subset: v1}}}}]\n"
    ));
}

/// The realistic mesh's namespace-wide AuthorizationPolicies, ingress Gateways and the
/// VirtualServices bound to them (each exposing ten services).
pub(crate) fn realistic_policies(args: &LoadgenArgs, y: &mut String) {
    for n in 0..args.namespaces {
        let namespace = ns(n, args.namespaces);
        y.push_str(&format!(
            "---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {{name: allow-mesh, namespace: {namespace}}}\nspec:\n  action: ALLOW\n  rules:\n  - from: [{{source: {{namespaces: [{namespace}, load-0]}}}}]\n    to: [{{operation: {{methods: [GET, POST], paths: [/api/*, /healthz]}}}}]\n"
        ));
    }
    let gateway_ns = ns(0, args.namespaces);
    for g in 0..3 {
        y.push_str(&format!(
            "---\napiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: ingress-{g}, namespace: {gateway_ns}}}\nspec:\n  selector: {{istio: ingressgateway}}\n  servers: [{{port: {{number: {}, name: http-{g}, protocol: HTTP}}, hosts: [\"*.example{g}.com\"]}}]\n",
            8080 + g
        ));
        let routes: Vec<String> = (0..10.min(args.services))
            .map(|k| {
                let i = g * 10 + k;
                format!(
                    "  - match: [{{uri: {{prefix: /svc-{i}/}}}}]\n    route: [{{destination: {{host: {}, port: {{number: {}}}}}}}]\n",
                    host(i % args.services.max(1), args.namespaces),
                    8000 + (i % args.services.max(1)) % 50
                )
            })
            .collect();
        y.push_str(&format!(
            "---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: ingress-{g}, namespace: {gateway_ns}}}\nspec:\n  hosts: [\"www.example{g}.com\"]\n  gateways: [ingress-{g}]\n  http:\n{}",
            routes.concat()
        ));
    }
}

/// The Gateway API part of the mesh: `--gateway-api-gateways` Gateways and
/// `--gateway-api-routes` HTTPRoutes dealt among them, backed by the mesh's services (as
/// `Hostname` backends: the mesh is ServiceEntries).
pub(crate) fn gateway_api(args: &LoadgenArgs, y: &mut String) {
    let namespace = ns(0, args.namespaces);
    let gateways = args.gateway_api_gateways.max(1);
    for g in 0..gateways {
        y.push_str(&format!(
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw-{g}, namespace: {namespace}}}\nspec:\n  gatewayClassName: istio\n  listeners:\n  - {{name: http, port: 80, protocol: HTTP, hostname: \"*.gw{g}.example\", allowedRoutes: {{namespaces: {{from: All}}}}}}\n"
        ));
    }
    let services = args.services.max(1);
    for r in 0..args.gateway_api_routes {
        let g = r % gateways;
        let route_ns = ns(r, args.namespaces);
        let backend = |i: usize| {
            format!(
                "{{group: networking.istio.io, kind: Hostname, name: {}, port: {}, weight: {}}}",
                host(i % services, args.namespaces),
                8000 + (i % services) % 50,
                if i == r { 90 } else { 10 }
            )
        };
        y.push_str(&format!(
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: route-{r}, namespace: {route_ns}}}\nspec:\n  parentRefs: [{{name: gw-{g}, namespace: {namespace}}}]\n  hostnames: [r{r}.gw{g}.example]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: /api}}, headers: [{{name: x-canary, value: \"1\"}}]}}]\n    backendRefs: [{}]\n  - matches: [{{path: {{type: PathPrefix, value: /}}}}]\n    filters: [{{type: RequestHeaderModifier, requestHeaderModifier: {{set: [{{name: x-route, value: route-{r}}}]}}}}]\n    backendRefs: [{}, {}]\n",
            backend(r + 1),
            backend(r),
            backend(r + 1)
        ));
    }
}
