//! Validation parity with istiod 1.30, case by case: each case is named after the istiod rule it
//! mirrors (the function in istio's `pkg/config/validation`), written here in our own words, and
//! checked through both ways config enters Rudder — the file loader that `rudder validate` and
//! the file source share, and the validation webhook's handler — for the same verdict, message
//! and warnings. Where istiod admits something with a warning, so must Rudder.

use rudder::metrics::Registry;
use rudder::source::file::check_text;
use rudder::webhook::metrics::WebhookMetrics;
use serde_json::{Value, json};
use std::path::Path;

/// What istiod does with the object.
#[derive(Debug, Clone, Copy)]
enum Want {
    /// Admitted without warnings about the fragment's subject (other warnings may exist).
    Ok,
    /// Denied, with this message fragment.
    Deny(&'static str),
    /// Admitted, with a warning containing this fragment.
    Warn(&'static str),
}
use Want::*;

struct Case {
    rule: String,
    kind: &'static str,
    /// `metadata` fields beyond name and namespace, as YAML flow (`annotations: {…}`), or "".
    meta: &'static str,
    spec: String,
    want: Want,
}

fn case(rule: &str, kind: &'static str, spec: &str, want: Want) -> Case {
    Case {
        rule: rule.to_string(),
        kind,
        meta: "",
        spec: spec.to_string(),
        want,
    }
}

fn api_version(kind: &str) -> &'static str {
    match kind {
        "PeerAuthentication" | "AuthorizationPolicy" | "RequestAuthentication" => {
            "security.istio.io/v1"
        }
        "Telemetry" => "telemetry.istio.io/v1",
        "EnvoyFilter" => "networking.istio.io/v1alpha3",
        "WasmPlugin" | "TrafficExtension" => "extensions.istio.io/v1alpha1",
        "ProxyConfig" => "networking.istio.io/v1beta1",
        "GatewayClass"
        | "Gateway.gateway.networking.k8s.io"
        | "HTTPRoute"
        | "GRPCRoute"
        | "TLSRoute"
        | "BackendTLSPolicy"
        | "ListenerSet" => "gateway.networking.k8s.io/v1",
        "TCPRoute" => "gateway.networking.k8s.io/v1alpha2",
        _ => "networking.istio.io/v1",
    }
}

fn yaml(c: &Case) -> String {
    let indented: String = c.spec.lines().map(|l| format!("  {l}\n")).collect();
    let meta = if c.meta.is_empty() {
        String::new()
    } else {
        format!("  {}\n", c.meta)
    };
    format!(
        "apiVersion: {}\nkind: {}\nmetadata:\n  name: obj\n  namespace: ns\n{meta}spec:\n{indented}",
        api_version(c.kind),
        c.kind.split('.').next().unwrap_or(c.kind)
    )
}

/// (denied with, warnings) as the file loader sees it.
fn through_loader(text: &str) -> (Option<String>, Vec<String>) {
    let report = check_text(Path::new("case.yaml"), text, "default");
    let errors: Vec<String> = report.errors.iter().map(|e| e.to_string()).collect();
    let warnings = report.warnings.iter().map(|w| w.to_string()).collect();
    ((!errors.is_empty()).then(|| errors.join("; ")), warnings)
}

/// (denied with, warnings) as the validation webhook answers the API server.
fn through_webhook(c: &Case, text: &str) -> (Option<String>, Vec<String>) {
    // kubectl turns the YAML into JSON before the API server sees it; read it the same way.
    let object: Value = rudder::config::yaml_documents(text)
        .expect("case YAML")
        .remove(0);
    let (group, version) = api_version(c.kind).split_once('/').expect("group/version");
    let plural = format!("{}s", c.kind.to_lowercase());
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "1",
            "kind": {"group": group, "version": version, "kind": c.kind},
            "resource": {"group": group, "version": version, "resource": plural},
            "name": "obj",
            "namespace": "ns",
            "operation": "CREATE",
            "userInfo": {"username": "admin"},
            "object": object,
        }
    });
    let review: kube::core::admission::AdmissionReview<kube::core::DynamicObject> =
        serde_json::from_value(review).expect("review");
    let request = review.try_into().expect("request");
    let metrics = WebhookMetrics::register(&mut Registry::new());
    let response = rudder::webhook::validate::admit(&metrics, &request);
    let denied = (!response.allowed).then(|| response.result.message.clone());
    (denied, response.warnings.unwrap_or_default())
}

/// The problems with one case on one path, if any.
fn judge(c: &Case, path: &str, denied: Option<String>, warnings: &[String]) -> Option<String> {
    let name = format!("{} [{} via {path}]", c.rule, c.kind);
    match (c.want, denied) {
        (Ok, None) => None,
        (Warn(w), None) if warnings.iter().any(|x| x.contains(w)) => None,
        (Warn(w), None) => Some(format!("{name}: wanted warning {w:?}, got {warnings:?}")),
        (Deny(m), Some(got)) if got.contains(m) => None,
        (Deny(m), Some(got)) => Some(format!("{name}: wanted denial {m:?}, got {got:?}")),
        (Deny(m), None) => Some(format!("{name}: admitted, istiod denies ({m:?})")),
        (_, Some(got)) => Some(format!("{name}: denied ({got}), istiod admits")),
    }
}

fn run(cases: &[Case]) {
    let mut problems = Vec::new();
    for c in cases {
        let text = yaml(c);
        let (denied, warnings) = through_loader(&text);
        problems.extend(judge(c, "loader", denied, &warnings));
        // The Gateway API is validated by its CRDs in a cluster; istiod's webhook does not see it.
        if !api_version(c.kind).starts_with("gateway.networking.k8s.io") {
            let (denied, warnings) = through_webhook(c, &text);
            problems.extend(judge(c, "webhook", denied, &warnings));
        }
    }
    assert!(
        problems.is_empty(),
        "{} of {} cases differ from istiod:\n{}",
        problems.len(),
        cases.len(),
        problems.join("\n")
    );
}

const ROUTE: &str = "route: [{destination: {host: a.ns.svc.cluster.local}}]";

fn vs(http: &str) -> String {
    format!("hosts: [a.ns.svc.cluster.local]\nhttp: [{http}]")
}

fn virtual_services() -> Vec<Case> {
    let mut v = vec![
        // validateHTTPRouteDestinations: weights need not sum to 100 (istiod normalises them).
        case(
            "validateHTTPRouteDestinations/weights-below-100",
            "VirtualService",
            &vs(
                "{route: [{destination: {host: a}, weight: 30}, {destination: {host: b}, weight: 30}]}",
            ),
            Ok,
        ),
        case(
            "validateHTTPRouteDestinations/weights-above-100",
            "VirtualService",
            &vs(
                "{route: [{destination: {host: a}, weight: 150}, {destination: {host: b}, weight: 70}]}",
            ),
            Ok,
        ),
        case(
            "validateHTTPRouteDestinations/all-zero",
            "VirtualService",
            &vs(
                "{route: [{destination: {host: a}, weight: 0}, {destination: {host: b}, weight: 0}]}",
            ),
            Deny("total destination weight = 0"),
        ),
        case(
            "validateHTTPRouteDestinations/single-zero",
            "VirtualService",
            &vs("{route: [{destination: {host: a}, weight: 0}]}"),
            Ok,
        ),
        case(
            "validateWeight/negative",
            "VirtualService",
            &vs(
                "{route: [{destination: {host: a}, weight: -1}, {destination: {host: b}, weight: 101}]}",
            ),
            Deny("weight -1 < 0"),
        ),
        case(
            "validateHTTPRouteDestinations/destination-required",
            "VirtualService",
            &vs("{route: [{weight: 100}]}"),
            Deny("destination is required"),
        ),
        case(
            "validateRouteDestinations/tcp-weights",
            "VirtualService",
            "hosts: [a.ns.svc.cluster.local]\ntcp: [{route: [{destination: {host: a}, weight: 10}, {destination: {host: b}, weight: 10}]}]",
            Ok,
        ),
        case(
            "validateRouteDestinations/tcp-all-zero",
            "VirtualService",
            "hosts: [a.ns.svc.cluster.local]\ntcp: [{route: [{destination: {host: a}, weight: 0}, {destination: {host: b}, weight: 0}]}]",
            Deny("total destination weight = 0"),
        ),
        // ValidateHTTPRetry
        case(
            "ValidateHTTPRetry/attempts-zero-with-retry-on",
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, retries: {{attempts: 0, retryOn: 5xx}}}}"
            )),
            Deny("http retry policy configured when attempts are set to 0 (disabled)"),
        ),
        case(
            "ValidateHTTPRetry/attempts-zero-with-per-try-timeout",
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, retries: {{attempts: 0, perTryTimeout: 1s}}}}"
            )),
            Deny("http retry policy configured when attempts are set to 0"),
        ),
        case(
            "ValidateHTTPRetry/attempts-zero-with-remote-localities",
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, retries: {{attempts: 0, retryRemoteLocalities: true}}}}"
            )),
            Deny("http retry policy configured when attempts are set to 0"),
        ),
        case(
            "ValidateHTTPRetry/attempts-zero-alone",
            "VirtualService",
            &vs(&format!("{{{ROUTE}, retries: {{attempts: 0}}}}")),
            Ok,
        ),
        case(
            "ValidateHTTPRetry/negative",
            "VirtualService",
            &vs(&format!("{{{ROUTE}, retries: {{attempts: -1}}}}")),
            Deny("attempts cannot be negative"),
        ),
        case(
            "ValidateHTTPRetry/status-codes",
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, retries: {{attempts: 3, retryOn: \"503,gateway-error,retriable-status-codes\"}}}}"
            )),
            Ok,
        ),
        case(
            "ValidateHTTPRetry/unknown-policy",
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, retries: {{attempts: 3, retryOn: \"5xx,sometimes\"}}}}"
            )),
            Deny("\"sometimes\" is not a valid retryOn policy"),
        ),
        // validateHTTPDirectResponse
        case(
            "validateHTTPDirectResponse/status-range",
            "VirtualService",
            &vs("{directResponse: {status: 199}}"),
            Deny("HTTP status 199 is not in range 200-599"),
        ),
        case(
            "validateHTTPDirectResponse/body",
            "VirtualService",
            &vs("{directResponse: {status: 503, body: {string: \"unavailable\"}}}"),
            Ok,
        ),
        // ValidateHTTPHeaderValue and header names
        case(
            "ValidateHTTPHeaderValue/unescaped-percent",
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, headers: {{request: {{set: {{x-a: \"100%\"}}}}}}}}"
            )),
            Deny("Un-escaped %"),
        ),
        case(
            "ValidateHTTPHeaderValue/escaped-percent",
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, headers: {{request: {{set: {{x-a: \"100%%\"}}}}}}}}"
            )),
            Ok,
        ),
        case(
            "ValidateHTTPHeaderValue/variable",
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, headers: {{response: {{add: {{x-host: \"%HOSTNAME%\"}}}}}}}}"
            )),
            Ok,
        ),
        case(
            "ValidateHTTPHeaderValue/variable-with-args",
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, headers: {{request: {{add: {{x-t: \"%START_TIME(%s)%\"}}}}}}}}"
            )),
            Ok,
        ),
        case(
            "ValidateHTTPHeaderValue/unterminated-variable",
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, headers: {{request: {{add: {{x-t: \"abc%123\"}}}}}}}}"
            )),
            Deny("Un-terminated variable expression"),
        ),
        case(
            "ValidateHTTPHeaderValue/trailing-percent-after-variable",
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, headers: {{request: {{add: {{x-t: \"%START_TIME%%\"}}}}}}}}"
            )),
            Deny("Un-escaped %"),
        ),
        case(
            "ValidateHTTPHeaderWithAuthorityOperationName/authority",
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, headers: {{request: {{set: {{\":authority\": example.com}}}}}}}}"
            )),
            Ok,
        ),
        case(
            "ValidateHTTPHeaderWithAuthorityOperationName/pseudo",
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, headers: {{request: {{set: {{\":path\": /x}}}}}}}}"
            )),
            Deny("header cannot have \":\" prefix"),
        ),
        case(
            "ValidateHTTPHeaderOperationName/response-host",
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, headers: {{response: {{set: {{Host: x}}}}}}}}"
            )),
            Deny("cannot set Host header"),
        ),
        case(
            "ValidateHTTPHeaderOperationName/remove-host",
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, headers: {{request: {{remove: [host]}}}}}}"
            )),
            Deny("cannot set Host header"),
        ),
        case(
            "ValidateHTTPHeaderOperationName/destination-headers",
            "VirtualService",
            &vs("{route: [{destination: {host: a}, headers: {response: {add: {x-b: \"50%\"}}}}]}"),
            Deny("Un-escaped %"),
        ),
        // validateSniHost
        case(
            "validateSniHost/ip-is-a-warning",
            "VirtualService",
            "hosts: [\"*\"]\ngateways: [gw]\ntls: [{match: [{sniHosts: [1.2.3.4]}], route: [{destination: {host: a.example.com}}]}]",
            Warn("goes against SNI spec"),
        ),
        case(
            "validateSniHost/generated-sni-on-gateway",
            "VirtualService",
            "hosts: [\"*.mesh\"]\ngateways: [gw]\ntls: [{match: [{sniHosts: [outbound_.80_._.e2e.foobar.mesh]}], route: [{destination: {host: e2e.foobar.mesh}}]}]",
            Ok,
        ),
        case(
            "validateSniHost/underscore-in-mesh-vs",
            "VirtualService",
            "hosts: [\"*.example.com\"]\ntls: [{match: [{sniHosts: [my_host.example.com]}], route: [{destination: {host: a.example.com}}]}]",
            Deny("label \"my_host\" invalid"),
        ),
        case(
            "validateSniHost/not-a-subset",
            "VirtualService",
            "hosts: [a.example.com]\ntls: [{match: [{sniHosts: [b.example.com]}], route: [{destination: {host: a.example.com}}]}]",
            Deny("is not a compatible subset"),
        ),
        // ValidateVirtualService: hosts and gateways
        case(
            "ValidateVirtualService/mesh-wildcard",
            "VirtualService",
            &format!("hosts: [\"*\"]\nhttp: [{{{ROUTE}}}]"),
            Deny("wildcard host * is not allowed"),
        ),
        case(
            "ValidateVirtualService/gateway-wildcard",
            "VirtualService",
            &format!("hosts: [\"*\"]\ngateways: [gw]\nhttp: [{{{ROUTE}}}]"),
            Ok,
        ),
        case(
            "ValidateVirtualService/no-routes",
            "VirtualService",
            "hosts: [a]",
            Deny("http, tcp or tls must be provided"),
        ),
        case(
            "ValidateVirtualService/delegate-without-gateways",
            "VirtualService",
            "hosts: []\ngateways: [gw]\nhttp: [{route: [{destination: {host: a}}]}]",
            Deny("delegate virtual service must have no gateways specified"),
        ),
        case(
            "validateGatewayNames/namespaced",
            "VirtualService",
            &format!("hosts: [a]\ngateways: [istio-system/gw, mesh]\nhttp: [{{{ROUTE}}}]"),
            Ok,
        ),
        case(
            "validateGatewayNames/bad-namespace",
            "VirtualService",
            &format!("hosts: [a]\ngateways: [\"bad_ns/gw\"]\nhttp: [{{{ROUTE}}}]"),
            Deny("invalid value for namespace: \"bad_ns\""),
        ),
        // validateHTTPFaultInjection
        case(
            "validateHTTPFaultInjectionAbort/status",
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, fault: {{abort: {{httpStatus: 503, percentage: {{value: 10}}}}}}}}"
            )),
            Ok,
        ),
        case(
            "validatePercentage/too-small",
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, fault: {{abort: {{httpStatus: 503, percentage: {{value: 0.00001}}}}}}}}"
            )),
            Deny("percentage"),
        ),
        // validateHTTPRedirect and direct responses
        case(
            "validateHTTPRoute/redirect-and-route",
            "VirtualService",
            &vs(&format!("{{redirect: {{uri: /x}}, {ROUTE}}}")),
            Deny("HTTP route cannot contain both route and redirect"),
        ),
        // validateHTTPRewrite
        case(
            "validateHTTPRewrite/uri-and-regex",
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, rewrite: {{uri: /a, uriRegexRewrite: {{match: a, rewrite: b}}}}}}"
            )),
            Deny("rewrite may only contain one of URI or UriRegexRewrite"),
        ),
        // accepted but not honoured: each is a warning, never silence
        case(
            "honoured/corsPolicy",
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, corsPolicy: {{allowOrigins: [{{exact: \"https://a.example\"}}]}}}}"
            )),
            Ok,
        ),
        case(
            "honoured/tcp-on-sidecars",
            "VirtualService",
            "hosts: [a.ns.svc.cluster.local]\ntcp: [{match: [{destinationSubnets: [10.0.0.0/8]}], route: [{destination: {host: a}}]}]",
            Ok,
        ),
        case(
            "honoured/tls-routes",
            "VirtualService",
            "hosts: [\"*.example.com\"]\ngateways: [gw, mesh]\ntls: [{match: [{sniHosts: [a.example.com]}], route: [{destination: {host: a.example.com}}]}]",
            Ok,
        ),
        case(
            "unhonoured/tls-destinationSubnets-on-gateways",
            "VirtualService",
            "hosts: [\"*.example.com\"]\ngateways: [gw]\ntls: [{match: [{sniHosts: [a.example.com], destinationSubnets: [10.0.0.0/8]}], route: [{destination: {host: a.example.com}}]}]",
            Warn("TLS routes on gateways match on SNI and port only"),
        ),
    ];
    let mut more = vec![
        case(
            "validateGatewayNames/namespaced-name-is-a-label",
            "VirtualService",
            &format!("hosts: [a]\ngateways: [istio-system/gw.example.com]\nhttp: [{{{ROUTE}}}]"),
            Deny("invalid value for gateway name: \"gw.example.com\""),
        ),
        case(
            "validateGatewayNames/legacy-fqdn-warns",
            "VirtualService",
            &format!(
                "hosts: [a]\ngateways: [gw.istio-system.svc.cluster.local]\nhttp: [{{{ROUTE}}}]"
            ),
            Warn("using legacy gatewayName format"),
        ),
        case(
            "validateGatewayNames/upper-case-namespace",
            "VirtualService",
            &format!("hosts: [a]\ngateways: [\"Bad/gw\"]\nhttp: [{{{ROUTE}}}]"),
            Ok,
        ),
        case(
            "validateHTTPRouteConflict/root-with-route",
            "VirtualService",
            "hosts: [a.example.com]\ngateways: [gw]\nhttp: [{name: r, delegate: {name: b}, route: [{destination: {host: a}}]}]",
            Deny("root HTTP route r must not specify route"),
        ),
        case(
            "validateHTTPRouteConflict/delegate-in-delegate",
            "VirtualService",
            "hosts: []\nhttp: [{delegate: {name: c}}]",
            Deny("delegate HTTP route cannot contain delegate"),
        ),
        case(
            "validateHTTPRouteConflict/delegate-on-mesh",
            "VirtualService",
            "hosts: [a.example.com]\nhttp: [{delegate: {name: b}}]",
            Ok,
        ),
        case(
            "validateHTTPRouteConflict/mirror-and-mirrors",
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, mirror: {{host: b}}, mirrors: [{{destination: {{host: c}}}}]}}"
            )),
            Deny("HTTP route cannot contain both mirror and mirrors"),
        ),
        case(
            "validateHTTPRouteConflict/fault-and-redirect",
            "VirtualService",
            &vs("{redirect: {uri: /x}, fault: {abort: {httpStatus: 500, percentage: {value: 1}}}}"),
            Deny("HTTP route cannot contain both fault and redirect"),
        ),
        case(
            "validateHTTPRouteConflict/rewrite-and-direct-response",
            "VirtualService",
            &vs("{directResponse: {status: 200}, rewrite: {uri: /x}}"),
            Deny("HTTP route rule cannot contain both rewrite and direct_response"),
        ),
        case(
            "ValidateVirtualService/jwt-claim-routing-needs-gateway",
            "VirtualService",
            &vs(&format!(
                "{{match: [{{headers: {{\"@request.auth.claims.group\": {{exact: admin}}}}}}], {ROUTE}}}"
            )),
            Deny(
                "JWT claim based routing (key: @request.auth.claims.group) is only supported for gateway",
            ),
        ),
        case(
            "ValidateVirtualService/jwt-claim-routing-on-gateway",
            "VirtualService",
            &format!(
                "hosts: [a.example.com]\ngateways: [gw]\nhttp: [{{match: [{{headers: {{\"@request.auth.claims.group\": {{exact: admin}}}}}}], {ROUTE}}}]"
            ),
            Ok,
        ),
        case(
            "analyzeUnreachableHTTPRules/after-catch-all",
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}}}, {{name: late, match: [{{uri: {{prefix: /a}}}}], {ROUTE}}}"
            )),
            Warn("virtualService rule \"late\" not used (route without matches defined before)"),
        ),
        case(
            "analyzeUnreachableHTTPRules/two-catch-alls",
            "VirtualService",
            &vs(&format!("{{{ROUTE}}}, {{{ROUTE}}}")),
            Warn("virtualService rule #1 not used (only the last rule can have no matches)"),
        ),
        case(
            "analyzeUnreachableHTTPRules/duplicate-match",
            "VirtualService",
            &vs(&format!(
                "{{name: a, match: [{{uri: {{exact: /x}}}}], {ROUTE}}}, {{name: b, match: [{{uri: {{exact: /x}}}}], {ROUTE}}}"
            )),
            Warn("virtualService rule \"b\" not used (all matches used by prior rules)"),
        ),
        case(
            "analyzeUnreachableHTTPRules/covered-prefix",
            "VirtualService",
            &vs(&format!(
                "{{name: all, match: [{{uri: {{prefix: /api}}}}], {ROUTE}}}, {{name: v2, match: [{{uri: {{prefix: /api/v2}}}}], {ROUTE}}}"
            )),
            Warn(
                "virtualService rule \"v2\" match #0 of prefix /api/v2 is not used (duplicate/overlapping match in rule #0 of prefix /api on \"all\")",
            ),
        ),
        case(
            "analyzeUnreachableHTTPRules/prefix-narrowed-by-header",
            "VirtualService",
            &vs(&format!(
                "{{match: [{{uri: {{prefix: /api}}, headers: {{x-team: {{exact: a}}}}}}], {ROUTE}}}, {{match: [{{uri: {{prefix: /api/v2}}}}], {ROUTE}}}"
            )),
            Ok,
        ),
        case(
            "analyzeUnreachableTCPRules/duplicate-port",
            "VirtualService",
            "hosts: [a]\ngateways: [gw]\ntcp: [{match: [{port: 80}], route: [{destination: {host: a}}]}, {match: [{port: 80}], route: [{destination: {host: b}}]}]",
            Warn(
                "virtualService rule #1 match #0 is not used (duplicate/overlapping match in rule #0)",
            ),
        ),
        case(
            "validateStringMatch/empty-prefix-uri",
            "VirtualService",
            &vs(&format!("{{match: [{{uri: {{prefix: \"\"}}}}], {ROUTE}}}")),
            Ok,
        ),
        case(
            "validateStringMatch/empty-prefix-method",
            "VirtualService",
            &vs(&format!(
                "{{match: [{{method: {{prefix: \"\"}}}}], {ROUTE}}}"
            )),
            Deny("prefix string match should not be empty"),
        ),
        case(
            "validateStringMatchRegexp/invalid",
            "VirtualService",
            &vs(&format!("{{match: [{{uri: {{regex: \"(\"}}}}], {ROUTE}}}")),
            Deny("RE2"),
        ),
        case(
            "validateStringMatchRegexp/too-long",
            "VirtualService",
            &vs(&format!(
                "{{match: [{{uri: {{regex: \"{}\"}}}}], {ROUTE}}}",
                "a".repeat(1100)
            )),
            Deny("regex is too large, max length allowed is 1024"),
        ),
        case(
            "validateHTTPRouteMatchRequest/source-namespace",
            "VirtualService",
            &vs(&format!(
                "{{match: [{{sourceNamespace: Bad_NS}}], {ROUTE}}}"
            )),
            Deny("sourceNamespace match Bad_NS is invalid"),
        ),
        case(
            "validateHTTPRouteMatchRequest/port",
            "VirtualService",
            &vs(&format!("{{match: [{{port: 70000}}], {ROUTE}}}")),
            Deny("must be in the range 1..65535"),
        ),
        case(
            "validateAuthorityRewrite/twice",
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, rewrite: {{authority: a.example.com}}, headers: {{request: {{set: {{\":authority\": b.example.com}}}}}}}}"
            )),
            Deny("authority header cannot be set multiple times"),
        ),
    ];
    v.append(&mut more);
    // Direct response bodies: istiod warns past 100 KiB and denies past 1 MiB.
    let kib = |n: usize| "x".repeat(n * 1024);
    v.push(case(
        "validateHTTPDirectResponse/large-body-warns",
        "VirtualService",
        &vs(&format!(
            "{{directResponse: {{status: 200, body: {{string: \"{}\"}}}}}}",
            kib(200)
        )),
        Warn("large direct_responses may impact control plane performance"),
    ));
    v.push(case(
        "validateHTTPDirectResponse/body-over-1MiB",
        "VirtualService",
        &vs(&format!(
            "{{directResponse: {{status: 200, body: {{string: \"{}\"}}}}}}",
            kib(1100)
        )),
        Deny("must be less than 1MB"),
    ));
    // Every retryOn policy Envoy knows is accepted.
    for policy in [
        "5xx",
        "gateway-error",
        "reset",
        "reset-before-request",
        "connect-failure",
        "envoy-ratelimited",
        "retriable-4xx",
        "refused-stream",
        "retriable-status-codes",
        "retriable-headers",
        "http3-post-connect-failure",
        "cancelled",
        "deadline-exceeded",
        "internal",
        "resource-exhausted",
        "unavailable",
    ] {
        v.push(case(
            &format!("ValidateHTTPRetry/retryOn-{policy}"),
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, retries: {{attempts: 2, retryOn: {policy}}}}}"
            )),
            Ok,
        ));
    }
    v
}

fn destination_rules() -> Vec<Case> {
    let tp = |policy: &str| format!("host: a.ns.svc.cluster.local\ntrafficPolicy: {policy}");
    vec![
        // ValidateTLS (agent): DestinationRule tls
        case(
            "ValidateTLS/insecure-skip-verify-with-ca",
            "DestinationRule",
            &tp("{tls: {mode: SIMPLE, insecureSkipVerify: true, caCertificates: /etc/ca.pem}}"),
            Deny(
                "cannot specify CaCertificates or CredentialName or SubjectAltNames when InsecureSkipVerify is set true",
            ),
        ),
        case(
            "ValidateTLS/insecure-skip-verify-with-san",
            "DestinationRule",
            &tp(
                "{tls: {mode: SIMPLE, insecureSkipVerify: true, subjectAltNames: [a.example.com]}}",
            ),
            Deny("when InsecureSkipVerify is set true"),
        ),
        case(
            "ValidateTLS/insecure-skip-verify-mutual-with-ca",
            "DestinationRule",
            &tp(
                "{tls: {mode: MUTUAL, insecureSkipVerify: true, caCertificates: /ca.pem, clientCertificate: /c.pem, privateKey: /k.pem}}",
            ),
            Deny(
                "cannot specify CaCertificates or SubjectAltNames when InsecureSkipVerify is set true",
            ),
        ),
        case(
            "ValidateTLS/insecure-skip-verify-alone",
            "DestinationRule",
            &tp("{tls: {mode: SIMPLE, insecureSkipVerify: true}}"),
            Ok,
        ),
        case(
            "ValidateTLS/credential-name-with-files",
            "DestinationRule",
            &tp("{tls: {mode: SIMPLE, credentialName: c, caCertificates: /ca.pem}}"),
            Deny(
                "cannot specify client certificates or CA certificate or CA CRL If credentialName is set",
            ),
        ),
        case(
            "ValidateTLS/mutual-needs-certificate",
            "DestinationRule",
            &tp("{tls: {mode: MUTUAL, privateKey: /k.pem}}"),
            Deny("client certificate required for mutual tls"),
        ),
        case(
            "ValidateTLS/mutual-with-credential-name",
            "DestinationRule",
            &tp("{tls: {mode: MUTUAL, credentialName: client-cert}}"),
            Ok,
        ),
        case(
            "ValidateTLS/istio-mutual-ignores-files",
            "DestinationRule",
            &tp("{tls: {mode: ISTIO_MUTUAL, sni: a.example.com}}"),
            Ok,
        ),
        // validateLoadBalancer: warmup
        case(
            "validateLoadBalancer/warmup-needs-duration",
            "DestinationRule",
            &tp("{loadBalancer: {simple: ROUND_ROBIN, warmup: {minimumPercent: 10}}}"),
            Deny("duration is required"),
        ),
        case(
            "validateLoadBalancer/warmup-minimum-percent",
            "DestinationRule",
            &tp(
                "{loadBalancer: {simple: ROUND_ROBIN, warmup: {duration: 60s, minimumPercent: 120}}}",
            ),
            Deny("minimumPercent value should be less than or equal to 100"),
        ),
        case(
            "validateLoadBalancer/warmup-aggression",
            "DestinationRule",
            &tp("{loadBalancer: {simple: ROUND_ROBIN, warmup: {duration: 60s, aggression: 0}}}"),
            Deny("aggression should be greater than or equal to 1"),
        ),
        case(
            "validateLoadBalancer/warmup-valid",
            "DestinationRule",
            &tp(
                "{loadBalancer: {simple: ROUND_ROBIN, warmup: {duration: 60s, minimumPercent: 10, aggression: 1.5}}}",
            ),
            Ok,
        ),
        case(
            "validateLoadBalancer/maglev-prime",
            "DestinationRule",
            &tp("{loadBalancer: {consistentHash: {httpHeaderName: x, maglev: {tableSize: 1000}}}}"),
            Deny("tableSize must be a prime number for maglev"),
        ),
        // ValidateDestinationRule basics
        case(
            "ValidateDestinationRule/host-required",
            "DestinationRule",
            "host: \"\"",
            Deny("host"),
        ),
        case(
            "ValidateDestinationRule/subsets",
            "DestinationRule",
            "host: a\nsubsets: [{name: v1, labels: {version: v1}}, {name: v2, labels: {version: v2}}]",
            Ok,
        ),
        case(
            "validateSubset/name-required",
            "DestinationRule",
            "host: a\nsubsets: [{labels: {version: v1}}]",
            Deny("name"),
        ),
        case(
            "validateConnectionPool/pool-valid",
            "DestinationRule",
            &tp(
                "{connectionPool: {tcp: {maxConnections: 100, connectTimeout: 30ms}, http: {http2MaxRequests: 1000, maxRequestsPerConnection: 10}}}",
            ),
            Ok,
        ),
        case(
            "validateConnectionPool/negative",
            "DestinationRule",
            &tp("{connectionPool: {tcp: {maxConnections: -1}}}"),
            Deny("max connections"),
        ),
        case(
            "validateOutlierDetection/valid",
            "DestinationRule",
            &tp(
                "{outlierDetection: {consecutive5xxErrors: 7, interval: 5m, baseEjectionTime: 15m}}",
            ),
            Ok,
        ),
        // accepted but not honoured
        case(
            "honoured/locality-lb",
            "DestinationRule",
            &tp(
                "{loadBalancer: {simple: ROUND_ROBIN, localityLbSetting: {enabled: true}}, outlierDetection: {consecutive5xxErrors: 1}}",
            ),
            Ok,
        ),
        case(
            "honoured/workload-selector",
            "DestinationRule",
            "host: a\nworkloadSelector: {matchLabels: {app: a}}",
            Ok,
        ),
        case(
            "honoured/subset-level",
            "DestinationRule",
            "host: a\nsubsets: [{name: v1, labels: {v: '1'}, trafficPolicy: {tunnel: {targetHost: b.example.com, targetPort: 8443}}}]",
            Ok,
        ),
    ]
}

fn service_entries() -> Vec<Case> {
    let mut v = vec![
        case(
            "ValidateServiceEntry/no-ports",
            "ServiceEntry",
            "hosts: [a.example.com]\nresolution: DNS",
            Ok,
        ),
        case(
            "ValidateProtocol/unset-means-sniffing",
            "ServiceEntry",
            "hosts: [a.example.com]\naddresses: [10.0.0.1]\nports: [{number: 80, name: http}]\nresolution: DNS",
            Ok,
        ),
        case(
            "ValidateProtocol/unknown",
            "ServiceEntry",
            "hosts: [a.example.com]\nports: [{number: 80, name: p, protocol: SMTP}]\nresolution: DNS",
            Deny("unsupported protocol: SMTP"),
        ),
        case(
            "ValidateProtocol/hbone-is-not-a-port-protocol",
            "ServiceEntry",
            "hosts: [a.example.com]\nports: [{number: 80, name: p, protocol: HBONE}]\nresolution: DNS",
            Deny("unsupported protocol: HBONE"),
        ),
        case(
            "ValidatePortName/underscore",
            "ServiceEntry",
            "hosts: [a.example.com]\nports: [{number: 80, name: http_1, protocol: HTTP}]\nresolution: DNS",
            Deny("invalid port name: http_1"),
        ),
        case(
            // IP auto-allocation (on by default in 1.30) gives these hosts addresses.
            "ValidateServiceEntry/tcp-without-addresses-is-auto-allocated",
            "ServiceEntry",
            "hosts: [db.example.com]\nports: [{number: 5432, name: tcp, protocol: TCP}]\nresolution: DNS",
            Ok,
        ),
        case(
            "ValidateServiceEntry/unset-protocol-without-addresses-is-auto-allocated",
            "ServiceEntry",
            "hosts: [db.example.com]\nports: [{number: 5432, name: db}]\nresolution: DNS",
            Ok,
        ),
        case(
            // Resolution NONE cannot honour an allocated address: none is allocated, so warn.
            "ValidateServiceEntry/tcp-without-addresses-resolution-none-warns",
            "ServiceEntry",
            "hosts: [db.example.com]\nports: [{number: 5432, name: tcp, protocol: TCP}]\nresolution: NONE",
            Warn("addresses are required for ports serving TCP (or unset) protocol"),
        ),
        case(
            "ValidateServiceEntry/dynamic-dns",
            "ServiceEntry",
            "hosts: [\"*.example.org\"]\nports: [{number: 443, name: tls, protocol: TLS}]\nresolution: DYNAMIC_DNS",
            Warn("DYNAMIC_DNS"),
        ),
        annotated(
            "ValidateServiceEntry/dynamic-dns-mesh-internal-with-waypoint",
            "ServiceEntry",
            "labels: {istio.io/use-waypoint: egress}",
            "hosts: [\"*.example.org\"]\nports: [{number: 443, name: tls, protocol: TLS}]\nresolution: DYNAMIC_DNS\nlocation: MESH_INTERNAL",
            Deny(
                "location MESH_INTERNAL with resolution type DYNAMIC_DNS is not supported when using waypoints",
            ),
        ),
        annotated(
            "ValidateServiceEntry/dynamic-dns-mesh-internal-waypoint-none",
            "ServiceEntry",
            "labels: {istio.io/use-waypoint: none}",
            "hosts: [\"*.example.org\"]\nports: [{number: 443, name: tls, protocol: TLS}]\nresolution: DYNAMIC_DNS\nlocation: MESH_INTERNAL",
            Warn("DYNAMIC_DNS"),
        ),
        case(
            "ValidateServiceEntry/dynamic-dns-needs-wildcards",
            "ServiceEntry",
            "hosts: [a.example.org]\nports: [{number: 443, name: tls, protocol: TLS}]\nresolution: DYNAMIC_DNS",
            Deny("host must be wildcarded for resolution mode DYNAMIC_DNS"),
        ),
        case(
            "ValidateServiceEntry/dynamic-dns-protocols",
            "ServiceEntry",
            "hosts: [\"*.example.org\"]\nports: [{number: 5432, name: tcp, protocol: TCP}]\nresolution: DYNAMIC_DNS",
            Deny("only HTTP, TLS, GRPC, and HTTP2 protocols are supported"),
        ),
        case(
            "ValidateServiceEntry/dynamic-dns-no-endpoints",
            "ServiceEntry",
            "hosts: [\"*.example.org\"]\nports: [{number: 443, name: tls, protocol: TLS}]\nresolution: DYNAMIC_DNS\nendpoints: [{address: 1.1.1.1}]",
            Deny("endpoints cannot be set for resolution type DYNAMIC_DNS"),
        ),
        case(
            "ValidateServiceEntry/cidr-only-static-or-none",
            "ServiceEntry",
            "hosts: [a.example.com]\naddresses: [10.0.0.0/16]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: DNS",
            Deny("CIDR addresses are allowed only for NONE/STATIC resolution types"),
        ),
        case(
            "ValidateServiceEntry/dns-wildcard-without-endpoints",
            "ServiceEntry",
            "hosts: [\"*.example.com\"]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: DNS",
            Deny("hosts must be FQDN or contain only prefix wildcards"),
        ),
        case(
            "ValidateServiceEntry/dns-round-robin-one-endpoint",
            "ServiceEntry",
            "hosts: [a.example.com]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: DNS_ROUND_ROBIN\nendpoints: [{address: a1.example.com}, {address: a2.example.com}]",
            Deny("there must only be 0 or 1 endpoint for resolution mode DNS_ROUND_ROBIN"),
        ),
        case(
            "ValidateServiceEntry/none-with-endpoints",
            "ServiceEntry",
            "hosts: [a.example.com]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: NONE\nendpoints: [{address: 1.1.1.1}]",
            Deny("no endpoints should be provided for resolution type none"),
        ),
        case(
            "ValidateServiceEntry/multiple-hosts-tcp",
            "ServiceEntry",
            "hosts: [a.example.com, b.example.com]\naddresses: [10.0.0.1]\nports: [{number: 9000, name: tcp, protocol: TCP}]\nresolution: STATIC\nendpoints: [{address: 10.1.1.1}]",
            Deny("multiple hosts provided with non-HTTP, non-TLS ports"),
        ),
        case(
            "ValidateServiceEntry/duplicate-port",
            "ServiceEntry",
            "hosts: [a.example.com]\nports: [{number: 80, name: http, protocol: HTTP}, {number: 80, name: http2, protocol: HTTP}]\nresolution: DNS",
            Deny("service entry port 80 already defined"),
        ),
        case(
            "ValidateServiceEntry/wildcard-host",
            "ServiceEntry",
            "hosts: [\"*\"]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: NONE",
            Deny("invalid host *"),
        ),
        case(
            "ValidatePartialWildCard/warns",
            "ServiceEntry",
            "hosts: [\"*foo.example.com\"]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: NONE",
            Warn("partial wildcard"),
        ),
        case(
            "validateWorkloadEntry/unix-endpoint-with-ports",
            "ServiceEntry",
            "hosts: [a.example.com]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: STATIC\nendpoints: [{address: unix:///var/run/a.sock, ports: {http: 8080}}]",
            Deny("must not include ports"),
        ),
        case(
            "validateWorkloadEntry/unix-endpoint",
            "ServiceEntry",
            "hosts: [a.example.com]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: STATIC\nendpoints: [{address: unix:///var/run/a.sock}]",
            Ok,
        ),
        case(
            "validateWorkloadEntry/static-needs-ip",
            "ServiceEntry",
            "hosts: [a.example.com]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: STATIC\nendpoints: [{address: a.example.com}]",
            Deny("is not a valid IP address"),
        ),
        case(
            "validateWorkloadEntry/unknown-port-name",
            "ServiceEntry",
            "hosts: [a.example.com]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: STATIC\nendpoints: [{address: 1.1.1.1, ports: {grpc: 9090}}]",
            Deny("endpoint port 9090 is not defined by the service entry"),
        ),
        case(
            "ValidateServiceEntry/selector-or-endpoints",
            "ServiceEntry",
            "hosts: [a.example.com]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: STATIC\nworkloadSelector: {labels: {app: a}}\nendpoints: [{address: 1.1.1.1}]",
            Deny("only one of WorkloadSelector or Endpoints is allowed"),
        ),
        case(
            "ServiceEntry/subjectAltNames",
            "ServiceEntry",
            "hosts: [a.example.com]\nports: [{number: 443, name: tls, protocol: TLS}]\nresolution: DNS\nsubjectAltNames: [spiffe://cluster.local/ns/a/sa/a]",
            Ok,
        ),
    ];
    for proto in [
        "HTTP",
        "HTTPS",
        "HTTP2",
        "HTTP_PROXY",
        "GRPC",
        "GRPC-WEB",
        "TLS",
        "http",
        "grpc",
    ] {
        v.push(case(&format!("ValidateProtocol/{proto}"), "ServiceEntry",
            &format!("hosts: [a.example.com]\nports: [{{number: 8080, name: p, protocol: {proto}}}]\nresolution: DNS"), Ok));
    }
    for proto in ["TCP", "MONGO", "REDIS", "MYSQL", "UDP"] {
        v.push(case(&format!("ValidateProtocol/{proto}-with-address"), "ServiceEntry",
            &format!("hosts: [a.example.com]\naddresses: [10.0.0.1]\nports: [{{number: 8080, name: p, protocol: {proto}}}]\nresolution: DNS"), Ok));
    }
    for port in [0, 65536, 100000] {
        v.push(case(&format!("ValidatePort/{port}"), "ServiceEntry",
            &format!("hosts: [a.example.com]\nports: [{{number: {port}, name: p, protocol: HTTP}}]\nresolution: DNS"),
            Deny("must be in the range 1..65535")));
    }
    v
}

fn workload_entries_and_groups() -> Vec<Case> {
    vec![
        case(
            "ValidateWorkloadEntry/ip",
            "WorkloadEntry",
            "address: 10.0.0.1\nlabels: {app: a}",
            Ok,
        ),
        case(
            "ValidateWorkloadEntry/fqdn",
            "WorkloadEntry",
            "address: vm1.example.com",
            Ok,
        ),
        case(
            "ValidateWorkloadEntry/address-required",
            "WorkloadEntry",
            "labels: {app: a}",
            Deny("address is required"),
        ),
        case(
            "ValidateWorkloadEntry/network-only-warns",
            "WorkloadEntry",
            "network: remote",
            Warn("address is unset with network \"remote\""),
        ),
        case(
            "ValidateWorkloadEntry/unix-with-ports",
            "WorkloadEntry",
            "address: unix:///var/run/a.sock\nports: {http: 80}",
            Deny("must not include ports"),
        ),
        case(
            "ValidateWorkloadEntry/service-account-any-form",
            "WorkloadEntry",
            "address: 10.0.0.1\nserviceAccount: My_Account",
            Ok,
        ),
        case(
            "ValidateWorkloadGroup/template-address",
            "WorkloadGroup",
            "metadata: {labels: {app: x}}\ntemplate: {address: 1.2.3.4, serviceAccount: default}",
            Ok,
        ),
        case(
            "ValidateWorkloadGroup/template-required",
            "WorkloadGroup",
            "metadata: {labels: {app: x}}",
            Deny("template is required"),
        ),
        case(
            "validateReadinessProbe/http",
            "WorkloadGroup",
            "template: {serviceAccount: default}\nprobe: {httpGet: {port: 8080, path: /ready}}",
            Ok,
        ),
        case(
            "ValidateProbeHeaderName/kubernetes-pattern",
            "WorkloadGroup",
            "template: {serviceAccount: default}\nprobe: {httpGet: {port: 8080, httpHeaders: [{name: x_user, value: a}]}}",
            Deny("header name x_user is not a valid header name"),
        ),
        case(
            "ValidateProbeHeaderName/dashes",
            "WorkloadGroup",
            "template: {serviceAccount: default}\nprobe: {httpGet: {port: 8080, httpHeaders: [{name: X-User-1, value: a}]}}",
            Warn("the health checks a probe asks for are not"),
        ),
        case(
            "validateReadinessProbe/scheme",
            "WorkloadGroup",
            "template: {serviceAccount: default}\nprobe: {httpGet: {port: 8080, scheme: FTP}}",
            Deny("httpGet.scheme must be one of"),
        ),
        case(
            "validateReadinessProbe/exec-command",
            "WorkloadGroup",
            "template: {serviceAccount: default}\nprobe: {exec: {command: []}}",
            Deny("exec.command is required"),
        ),
        case(
            "validateReadinessProbe/negative-period",
            "WorkloadGroup",
            "template: {serviceAccount: default}\nprobe: {periodSeconds: -1, tcpSocket: {port: 80}}",
            Deny("periodSeconds must be non-negative"),
        ),
        case(
            "validateReadinessProbe/no-method",
            "WorkloadGroup",
            "template: {serviceAccount: default}\nprobe: {periodSeconds: 5}",
            Deny("unknown health check method"),
        ),
    ]
}

fn gateways() -> Vec<Case> {
    let server = |hosts: &str| {
        format!("servers: [{{port: {{number: 80, name: http, protocol: HTTP}}, hosts: [{hosts}]}}]")
    };
    vec![
        case(
            "validateSidecarOrGatewayHostnamePart/partial-wildcard",
            "Gateway",
            &server("\"*bar.com\""),
            Deny("partial wildcard \"*bar.com\" not allowed"),
        ),
        case(
            "validateSidecarOrGatewayHostnamePart/wildcard",
            "Gateway",
            &server("\"*.bar.com\""),
            Ok,
        ),
        case(
            "validateSidecarOrGatewayHostnamePart/ip",
            "Gateway",
            &server("1.2.3.4"),
            Ok,
        ),
        case(
            "validateSidecarOrGatewayHostnamePart/short-name",
            "Gateway",
            &server("foo"),
            Deny("short names (non FQDN) are not allowed"),
        ),
        case(
            "ValidateNamespaceSlashWildcardHostname/namespaced",
            "Gateway",
            &server("\"prod/*.bar.com\""),
            Ok,
        ),
        case(
            "ValidateNamespaceSlashWildcardHostname/exclusion-not-in-gateways",
            "Gateway",
            &server("\"~/*.bar.com\""),
            Deny("invalid namespace value \"~\" in gateway"),
        ),
        case(
            "validateServerPort/protocol-required",
            "Gateway",
            "servers: [{port: {number: 80, name: http}, hosts: [\"*\"]}]",
            Deny("invalid protocol \"\""),
        ),
        case(
            "validateServer/https-needs-tls",
            "Gateway",
            "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: [\"*\"]}]",
            Deny("server must have TLS settings for HTTPS/TLS protocols"),
        ),
        case(
            "validateServer/https-with-credential",
            "Gateway",
            "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: [\"*\"], tls: {mode: SIMPLE, credentialName: cert}}]",
            Ok,
        ),
        case(
            "ValidateGateway/no-servers",
            "Gateway",
            "servers: []",
            Deny("gateway must have at least one server"),
        ),
        case(
            "unhonoured/server-bind",
            "Gateway",
            "servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [\"*\"], bind: 10.0.0.1}]",
            Warn("spec.servers[0].bind: accepted but not honoured"),
        ),
        case(
            "honoured/tls-versions",
            "Gateway",
            "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: [\"*\"], tls: {mode: SIMPLE, credentialName: c, minProtocolVersion: TLSV1_2}}]",
            Ok,
        ),
    ]
}

fn sidecars() -> Vec<Case> {
    let ingress = |tls: &str, proto: &str| {
        format!(
            "ingress: [{{port: {{number: 8443, name: https, protocol: {proto}}}, defaultEndpoint: \"127.0.0.1:8080\", tls: {tls}}}]"
        )
    };
    vec![
        case(
            "ValidateNamespaceSlashWildcardHostname/excluded-namespace",
            "Sidecar",
            "egress: [{hosts: [\"~ns1/*\", \"./*\"]}]",
            Ok,
        ),
        case(
            "ValidateNamespaceSlashWildcardHostname/bad-namespace",
            "Sidecar",
            "egress: [{hosts: [\"Bad_NS/*\"]}]",
            Deny("invalid namespace value \"Bad_NS\" in sidecar"),
        ),
        case(
            "ValidateNamespaceSlashWildcardHostname/form",
            "Sidecar",
            "egress: [{hosts: [\"*\"]}]",
            Deny("host must be of form namespace/dnsName"),
        ),
        case(
            "ValidateSidecar/duplicate-host-warns",
            "Sidecar",
            "egress: [{hosts: [\"ns1/a.example.com\", \"ns1/*\"]}]",
            Warn("duplicated egress host: ns1/*"),
        ),
        case(
            "ValidateSidecar/all-and-more-warns",
            "Sidecar",
            "egress: [{hosts: [\"*/*\", \"ns1/a.example.com\"]}]",
            Warn("`*/*` host select all resources, no other hosts can be added"),
        ),
        case(
            "ValidateSidecar/empty",
            "Sidecar",
            "workloadSelector: {labels: {app: a}}",
            Deny("sidecar: empty configuration provided"),
        ),
        case(
            "ValidateSidecar/only-inbound-pool",
            "Sidecar",
            "inboundConnectionPool: {http: {http1MaxPendingRequests: 100}}",
            Ok,
        ),
        case(
            "ValidateSidecar/ingress-tls-san",
            "Sidecar",
            &ingress(
                "{mode: SIMPLE, serverCertificate: /c.pem, privateKey: /k.pem, subjectAltNames: [a]}",
                "HTTPS",
            ),
            Deny("sidecar: subjectAltNames is not supported in ingress tls"),
        ),
        case(
            "ValidateSidecar/ingress-tls-credential",
            "Sidecar",
            &ingress("{mode: SIMPLE, credentialName: c}", "HTTPS"),
            Deny("sidecar: credentialName is not currently supported"),
        ),
        case(
            "ValidateSidecar/ingress-tls-istio-mutual",
            "Sidecar",
            &ingress("{mode: ISTIO_MUTUAL}", "HTTPS"),
            Deny("cannot set mode to ISTIO_MUTUAL in sidecar ingress tls"),
        ),
        case(
            "ValidateSidecar/ingress-tls-redirect",
            "Sidecar",
            &ingress(
                "{mode: SIMPLE, httpsRedirect: true, serverCertificate: /c.pem, privateKey: /k.pem}",
                "HTTPS",
            ),
            Deny("sidecar: httpsRedirect is not supported"),
        ),
        case(
            "ValidateSidecar/ingress-tls-plain-port",
            "Sidecar",
            &ingress(
                "{mode: SIMPLE, serverCertificate: /c.pem, privateKey: /k.pem}",
                "HTTP",
            ),
            Deny("server cannot have TLS settings for non HTTPS/TLS ports"),
        ),
        case(
            "ValidateSidecar/ingress-tls-simple",
            "Sidecar",
            &ingress(
                "{mode: SIMPLE, serverCertificate: /c.pem, privateKey: /k.pem}",
                "HTTPS",
            ),
            Warn("spec.ingress[0].tls: accepted but not honoured"),
        ),
        case(
            "unhonoured/sidecar-ingress-bind",
            "Sidecar",
            "ingress: [{port: {number: 9080, protocol: HTTP, name: http}, bind: 10.0.0.1, captureMode: NONE, defaultEndpoint: 127.0.0.1:8080}]",
            Warn("ingress listeners take captured traffic"),
        ),
        case(
            "unhonoured/sidecar-ingress-bind-only",
            "Sidecar",
            "ingress: [{port: {number: 9080, protocol: HTTP, name: http}, bind: 10.0.0.1, defaultEndpoint: 127.0.0.1:8080}]",
            Warn("ingress listeners take traffic captured for every address"),
        ),
        case(
            "ValidateSidecar/target-port",
            "Sidecar",
            "egress: [{port: {number: 80, name: http, protocol: HTTP, targetPort: 8080}, hosts: [\"./*\"]}]",
            Deny("targetPort has no impact on Sidecars"),
        ),
        case(
            "ValidateSidecar/catch-all-last",
            "Sidecar",
            "egress: [{hosts: [\"./*\"]}, {port: {number: 80, name: http, protocol: HTTP}, hosts: [\"./*\"]}]",
            Deny("the egress listener with empty port should be the last listener in the list"),
        ),
        case(
            "validateSidecarOutboundTrafficPolicy/egress-proxy-mode",
            "Sidecar",
            "outboundTrafficPolicy: {mode: REGISTRY_ONLY, egressProxy: {host: proxy.example.com, port: {number: 3128}}}",
            Deny("egress_proxy must be set only with ALLOW_ANY"),
        ),
        case(
            "unhonoured/outboundTrafficPolicy",
            "Sidecar",
            "outboundTrafficPolicy: {mode: ALLOW_ANY, egressProxy: {host: proxy.example.com, port: {number: 3128}}}",
            Warn("no egress proxy"),
        ),
    ]
}

fn security() -> Vec<Case> {
    let allow = |rules: &str| format!("action: ALLOW\nrules: {rules}");
    vec![
        case(
            "validatePolicyTargetReference/namespace",
            "AuthorizationPolicy",
            "targetRefs: [{kind: Service, name: a, namespace: other}]",
            Deny(
                "targetRef namespace must not be set; cross namespace referencing is not supported",
            ),
        ),
        case(
            "validatePolicyTargetReference/kind",
            "AuthorizationPolicy",
            "targetRefs: [{kind: Deployment, group: apps, name: a}]",
            Deny("targetRef must be to one of"),
        ),
        case(
            "validatePolicyTargetReference/gateway",
            "AuthorizationPolicy",
            "targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: waypoint}]",
            Ok,
        ),
        case(
            "validatePolicyTargetReference/service-entry",
            "AuthorizationPolicy",
            "targetRef: {kind: ServiceEntry, group: networking.istio.io, name: ext}",
            Ok,
        ),
        case(
            "validatePolicyTargetReference/name",
            "AuthorizationPolicy",
            "targetRef: {kind: Service, group: \"\", name: \"\"}",
            Deny("targetRef name must be set"),
        ),
        case(
            "validateOneOfSelectorType",
            "AuthorizationPolicy",
            "selector: {matchLabels: {app: a}}\ntargetRef: {kind: Service, name: a}",
            Deny("only one of targetRefs or workloadSelector can be set"),
        ),
        case(
            "validateWorkloadSelector/no-labels-warns",
            "AuthorizationPolicy",
            &format!("selector: {{}}\n{}", allow("[{}]")),
            Warn("workload selector specified without labels"),
        ),
        case(
            "validateWorkloadSelector/wildcard",
            "AuthorizationPolicy",
            "selector: {matchLabels: {app: \"a*\"}}",
            Deny("wildcard is not supported in selector"),
        ),
        case(
            "ValidateAuthorizationPolicy/allow-all",
            "AuthorizationPolicy",
            &allow("[{}]"),
            Ok,
        ),
        case(
            "ValidateAuthorizationPolicy/deny-by-path",
            "AuthorizationPolicy",
            "action: DENY\nrules: [{to: [{operation: {paths: [/admin]}}]}]",
            Warn("configured AuthorizationPolicy will deny all traffic to TCP ports"),
        ),
        case(
            "ValidateRequestAuthentication/space-delimited-claims",
            "RequestAuthentication",
            "jwtRules: [{issuer: \"https://example.com\", spaceDelimitedClaims: [scope]}]",
            Ok,
        ),
        case(
            "validateJwtRule/issuer",
            "RequestAuthentication",
            "jwtRules: [{issuer: \"\"}]",
            Deny("issuer or jwksUri must be non-empty string"),
        ),
        case(
            "ValidatePeerAuthentication/port-level-needs-selector",
            "PeerAuthentication",
            "mtls: {mode: PERMISSIVE}\nportLevelMtls: {8080: {mode: DISABLE}}",
            Deny("portLevelMtls"),
        ),
        case(
            "ValidatePeerAuthentication/strict",
            "PeerAuthentication",
            "mtls: {mode: STRICT}",
            Ok,
        ),
    ]
}

fn extensions() -> Vec<Case> {
    vec![
        // istiod's ValidateTrafficExtension (Istio 1.30).
        case(
            "ValidateTrafficExtension/lua",
            "TrafficExtension",
            "selector: {matchLabels: {app: web}}\nphase: AUTHN\nlua: {inlineCode: 'function envoy_on_request(h) end'}",
            Ok,
        ),
        case(
            "ValidateTrafficExtension/wasm",
            "TrafficExtension",
            "wasm: {url: oci://example.com/filter:1, vmConfig: {env: [{name: A, value: b}]}}",
            Ok,
        ),
        case(
            "honoured/trafficextension-network-wasm",
            "TrafficExtension",
            "wasm: {url: oci://example.com/filter:1, type: NETWORK}",
            Ok,
        ),
        case(
            "honoured/trafficextension-pull-secret",
            "TrafficExtension",
            "wasm: {url: oci://example.com/filter:1, imagePullSecret: creds}",
            Ok,
        ),
        case(
            "unhonoured/trafficextension-target-service",
            "TrafficExtension",
            "targetRefs: [{kind: Service, group: \"\", name: web}]\nlua: {inlineCode: x}",
            Warn("is enforced nowhere"),
        ),
        case(
            "unhonoured/trafficextension-target-serviceentry",
            "TrafficExtension",
            "targetRefs: [{kind: ServiceEntry, group: networking.istio.io, name: web}]\nlua: {inlineCode: x}",
            Warn("is enforced nowhere"),
        ),
        case(
            "unhonoured/trafficextension-target-gatewayclass",
            "TrafficExtension",
            "targetRefs: [{kind: GatewayClass, group: gateway.networking.k8s.io, name: istio-waypoint}]\nlua: {inlineCode: x}",
            Warn("is enforced nowhere"),
        ),
        case(
            "ValidateTrafficExtension/neither",
            "TrafficExtension",
            "phase: STATS",
            Deny("exactly one of wasm or lua must be set"),
        ),
        case(
            "ValidateTrafficExtension/both",
            "TrafficExtension",
            "lua: {inlineCode: x}\nwasm: {url: oci://example.com/f:1}",
            Deny("exactly one of wasm or lua must be set"),
        ),
        case(
            "validateLuaConfig/empty",
            "TrafficExtension",
            "lua: {inlineCode: ''}",
            Deny("lua.inlineCode cannot be empty"),
        ),
        case(
            "ValidateTrafficExtension/selector-and-targetRefs",
            "TrafficExtension",
            "selector: {matchLabels: {app: web}}\ntargetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: gw}]\nlua: {inlineCode: x}",
            Deny("only one of targetRefs or workloadSelector can be set"),
        ),
        case(
            "validateWasmConfigSHA/short",
            "TrafficExtension",
            "wasm: {url: oci://example.com/f:1, sha256: abc}",
            Deny("sha256 field must be 64 characters long"),
        ),
        case(
            "ValidateWasmPlugin/oci",
            "WasmPlugin",
            "url: oci://example.com/plugin:1",
            Ok,
        ),
        case(
            "honoured/wasmplugin-network",
            "WasmPlugin",
            "url: oci://example.com/filter:1\ntype: NETWORK",
            Ok,
        ),
        case(
            "honoured/wasmplugin-pull-secret",
            "WasmPlugin",
            "url: oci://example.com/filter:1\nimagePullSecret: creds",
            Ok,
        ),
        case(
            "unhonoured/wasmplugin-target-service",
            "WasmPlugin",
            "url: oci://example.com/filter:1\ntargetRefs: [{kind: Service, group: \"\", name: web}]",
            Warn("is enforced nowhere"),
        ),
        case(
            "unhonoured/wasmplugin-target-serviceentry",
            "WasmPlugin",
            "url: oci://example.com/filter:1\ntargetRefs: [{kind: ServiceEntry, group: networking.istio.io, name: web}]",
            Warn("is enforced nowhere"),
        ),
        case(
            "unhonoured/wasmplugin-target-gatewayclass",
            "WasmPlugin",
            "url: oci://example.com/filter:1\ntargetRefs: [{kind: GatewayClass, group: gateway.networking.k8s.io, name: istio-waypoint}]",
            Warn("is enforced nowhere"),
        ),
        case(
            "unhonoured/wasmplugin-targetref-service",
            "WasmPlugin",
            "url: oci://example.com/filter:1\ntargetRef: {kind: Service, group: \"\", name: web}",
            Warn("is enforced nowhere"),
        ),
        case(
            "unhonoured/wasmplugin-targetref-serviceentry",
            "WasmPlugin",
            "url: oci://example.com/filter:1\ntargetRef: {kind: ServiceEntry, group: networking.istio.io, name: web}",
            Warn("is enforced nowhere"),
        ),
        case(
            "unhonoured/wasmplugin-targetref-gatewayclass",
            "WasmPlugin",
            "url: oci://example.com/filter:1\ntargetRef: {kind: GatewayClass, group: gateway.networking.k8s.io, name: istio-waypoint}",
            Warn("is enforced nowhere"),
        ),
        case(
            "validateWasmPluginURL/bare-image",
            "WasmPlugin",
            "url: example.com/plugin:1",
            Ok,
        ),
        case(
            "validateWasmPluginURL/required",
            "WasmPlugin",
            "pluginName: x",
            Deny("url field needs to be set"),
        ),
        case(
            "validateWasmPluginURL/scheme",
            "WasmPlugin",
            "url: ftp://example.com/a.wasm",
            Deny("url contains unsupported scheme: ftp"),
        ),
        case(
            "validateWasmPluginSHA/length",
            "WasmPlugin",
            "url: https://example.com/a.wasm\nsha256: abc",
            Deny("sha256 field must be 64 characters long"),
        ),
        case(
            "validateWasmPluginSHA/pattern",
            "WasmPlugin",
            &format!(
                "url: https://example.com/a.wasm\nsha256: {}",
                "Z".repeat(64)
            ),
            Deny("sha256 field must match [a-f0-9]{64} pattern"),
        ),
        case(
            "validateWasmPluginVMConfig/duplicate",
            "WasmPlugin",
            "url: oci://a/b\nvmConfig: {env: [{name: A, value: p}, {name: A, value: q}]}",
            Deny("duplicate env"),
        ),
        case(
            "validateWasmPluginVMConfig/host-value",
            "WasmPlugin",
            "url: oci://a/b\nvmConfig: {env: [{name: A, valueFrom: HOST, value: x}]}",
            Deny("value may only be set when valueFrom is INLINE"),
        ),
        case(
            "validateWasmPluginMatch/port",
            "WasmPlugin",
            "url: oci://a/b\nmatch: [{mode: SERVER, ports: [{number: 70000}]}]",
            Deny("is out of range: 70000"),
        ),
        case(
            "validateOneOfSelectorType/wasm",
            "WasmPlugin",
            "url: oci://a/b\nselector: {matchLabels: {app: a}}\ntargetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: gw}]",
            Deny("only one of targetRefs or workloadSelector can be set"),
        ),
        case(
            "ValidateProxyConfig/concurrency",
            "ProxyConfig",
            "concurrency: -1",
            Deny("concurrency must be greater than or equal to 0"),
        ),
        case(
            "ValidateProxyConfig/valid",
            "ProxyConfig",
            "selector: {matchLabels: {app: a}}\nconcurrency: 2\nenvironmentVariables: {A: b}\nimage: {imageType: distroless}",
            Ok,
        ),
        case(
            "ValidateEnvoyFilter/waypoint-match",
            "EnvoyFilter",
            "configPatches: [{applyTo: HTTP_FILTER, match: {context: WAYPOINT, waypoint: {portNumber: 8080}}, patch: {operation: INSERT_BEFORE, value: {name: x}}}]",
            Warn("EnvoyFilter exposes internal implementation details"),
        ),
        case(
            "validateListenerMatchName/deprecated",
            "EnvoyFilter",
            "configPatches: [{applyTo: HTTP_FILTER, match: {listener: {filterChain: {filter: {name: envoy.http_connection_manager, subFilter: {name: envoy.router}}}}}, patch: {operation: INSERT_BEFORE, value: {name: envoy.filters.http.lua}}}]",
            Warn(
                "using deprecated filter name \"envoy.router\"; use \"envoy.filters.http.router\" instead",
            ),
        ),
        case(
            "ValidateEnvoyFilter/missing-apply-to",
            "EnvoyFilter",
            "configPatches: [{patch: {operation: MERGE, value: {}}}]",
            Deny("Envoy filter: missing applyTo"),
        ),
        case(
            "ValidateEnvoyFilter/value-not-its-type",
            "EnvoyFilter",
            "configPatches: [{applyTo: CLUSTER, patch: {operation: MERGE, value: {connect_timeout: soon}}}]",
            Deny("Envoy filter:"),
        ),
        case(
            "ValidateEnvoyFilter/unknown-any-type",
            "EnvoyFilter",
            "configPatches: [{applyTo: HTTP_FILTER, patch: {operation: ADD, value: {name: x, typed_config: {\"@type\": type.googleapis.com/no.such.Filter}}}}]",
            Deny("no.such.Filter"),
        ),
        case(
            "ValidateEnvoyFilter/unknown-field-warns",
            "EnvoyFilter",
            "configPatches: [{applyTo: CLUSTER, patch: {operation: MERGE, value: {connect_timeout: 1s, no_such_field: 1}}}]",
            Warn("no_such_field"),
        ),
        case(
            "ValidateEnvoyFilter/filter-by-name-without-typed-config",
            "EnvoyFilter",
            "configPatches: [{applyTo: HTTP_FILTER, patch: {operation: INSERT_BEFORE, value: {name: envoy.filters.http.lua}}}]",
            Warn("using deprecated types by name without typed_config; envoy.filters.http.lua"),
        ),
        case(
            "ValidateEnvoyFilter/ecds-filter-has-no-typed-config",
            "EnvoyFilter",
            "configPatches: [{applyTo: HTTP_FILTER, patch: {operation: INSERT_BEFORE, value: {name: ext, config_discovery: {config_source: {ads: {}}, type_urls: [type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua]}}}}]",
            Ok,
        ),
        case(
            "ValidateEnvoyFilter/v2-type",
            "EnvoyFilter",
            "configPatches: [{applyTo: NETWORK_FILTER, patch: {operation: INSERT_BEFORE, value: {name: ext, typed_config: {\"@type\": type.googleapis.com/envoy.config.filter.network.ext_authz.v2.ExtAuthz}}}}]",
            Deny("hint: try using the v3 XDS API"),
        ),
        case(
            "ValidateEnvoyFilter/typed-value-admitted",
            "EnvoyFilter",
            "configPatches: [{applyTo: HTTP_FILTER, patch: {operation: INSERT_BEFORE, value: {name: envoy.filters.http.lua, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua, defaultSourceCode: {inlineString: \"function envoy_on_request(h) end\"}}}}}]",
            Ok,
        ),
    ]
}

fn annotated(rule: &str, kind: &'static str, meta: &'static str, spec: &str, want: Want) -> Case {
    Case {
        meta,
        ..case(rule, kind, spec, want)
    }
}

fn metadata() -> Vec<Case> {
    let allow = "action: ALLOW\nrules: [{from: [{source: {namespaces: [a]}}]}]";
    vec![
        annotated(
            "checkDryRunAnnotation/invalid-value",
            "AuthorizationPolicy",
            "annotations: {istio.io/dry-run: maybe}",
            allow,
            Deny("has annotation istio.io/dry-run with invalid value (maybe)"),
        ),
        annotated(
            "checkDryRunAnnotation/true",
            "AuthorizationPolicy",
            "annotations: {istio.io/dry-run: \"true\"}",
            allow,
            Ok,
        ),
        annotated(
            "checkDryRunAnnotation/false",
            "AuthorizationPolicy",
            "annotations: {istio.io/dry-run: \"false\"}",
            allow,
            Ok,
        ),
        annotated(
            "checkDryRunAnnotation/custom",
            "AuthorizationPolicy",
            "annotations: {istio.io/dry-run: \"true\"}",
            "action: CUSTOM\nprovider: {name: ext}\nrules: [{}]",
            Deny("currently only supports action ALLOW/DENY"),
        ),
        annotated(
            "checkDryRunAnnotation/other-kinds",
            "PeerAuthentication",
            "annotations: {istio.io/dry-run: \"true\"}",
            "mtls: {mode: STRICT}",
            Deny("has unsupported annotation istio.io/dry-run"),
        ),
        annotated(
            "validateMetadata/always-reject",
            "DestinationRule",
            "annotations: {internal.istio.io/webhook-always-reject: \"true\"}",
            "host: a",
            Deny("\"internal.istio.io/webhook-always-reject\" annotation found, rejecting"),
        ),
        annotated(
            "validateMetadata/internal-parents",
            "VirtualService",
            "annotations: {internal.istio.io/parents: \"Gateway/a\"}",
            &vs(&format!("{{{ROUTE}}}")),
            Deny("this may not be set by users"),
        ),
    ]
}

#[test]
fn virtual_services_as_istiod_judges_them() {
    run(&virtual_services());
}

#[test]
fn destination_rules_as_istiod_judges_them() {
    run(&destination_rules());
}

#[test]
fn service_entries_as_istiod_judges_them() {
    run(&service_entries());
}

#[test]
fn workload_entries_and_groups_as_istiod_judges_them() {
    run(&workload_entries_and_groups());
}

#[test]
fn gateways_as_istiod_judges_them() {
    run(&gateways());
}

#[test]
fn sidecars_as_istiod_judges_them() {
    run(&sidecars());
}

#[test]
fn security_policies_as_istiod_judges_them() {
    run(&security());
}

#[test]
fn wasm_plugins_proxy_configs_and_envoy_filters_as_istiod_judges_them() {
    run(&extensions());
}

#[test]
fn traffic_policies_and_server_tls_as_istiod_judges_them() {
    run(&traffic_policies_and_server_tls());
}

#[test]
fn operations_and_redirects_as_istiod_judges_them() {
    run(&operations_and_redirects());
}

#[test]
fn families_of_values_as_istiod_judges_them() {
    run(&families());
}

#[test]
fn annotations_as_istiod_judges_them() {
    run(&metadata());
}

/// kubectl and istioctl read `[1.2.3.4, 2001:db8::]` as two strings; so must we.
#[test]
fn flow_sequences_read_as_kubectl_reads_them() {
    let c = case(
        "yaml/flow-sequence-ipv6",
        "ServiceEntry",
        "hosts: [a.example.com]\naddresses: [1.2.3.4, 2001:db8::]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: STATIC\nendpoints: [{address: 2001:db8::1}]",
        Ok,
    );
    run(std::slice::from_ref(&c));
    let parsed = rudder::config::parse_yaml(&yaml(&c), "default");
    let rudder::config::Spec::ServiceEntry(se) = &parsed.configs[0].spec else {
        panic!("not a ServiceEntry");
    };
    assert_eq!(se.addresses, ["1.2.3.4", "2001:db8::"]);
}

/// Families of cases over the values istiod distinguishes, one case per value.
fn families() -> Vec<Case> {
    let mut v = Vec::new();
    let when = |key: &str, values: &str| {
        format!(
            "action: DENY\nrules: [{{to: [{{operation: {{ports: [\"8080\"]}}}}], when: [{{key: \"{key}\", values: {values}}}]}}]"
        )
    };
    // ValidateAttribute: condition keys.
    for (key, values) in [
        ("request.headers[x-user]", "[alice]"),
        ("source.ip", "[10.0.0.0/8]"),
        ("remote.ip", "[1.2.3.4]"),
        ("source.namespace", "[prod]"),
        ("source.principal", "[cluster.local/ns/a/sa/b]"),
        ("source.serviceAccount", "[prod/reviews]"),
        ("source.trustDomain", "[\"*.corp\"]"),
        ("request.auth.principal", "[\"issuer/subject\"]"),
        ("request.auth.audiences", "[app]"),
        ("request.auth.presenter", "[client]"),
        ("request.auth.claims[groups]", "[admins]"),
        ("destination.ip", "[10.1.0.0/16]"),
        ("destination.port", "[\"443\"]"),
        ("connection.sni", "[a.example.com]"),
        (
            "experimental.envoy.filters.network.mysql_proxy[db.table]",
            "[\"[update]\"]",
        ),
    ] {
        v.push(case(
            &format!("ValidateAttribute/{key}"),
            "AuthorizationPolicy",
            &when(key, values),
            Ok,
        ));
    }
    for (key, msg) in [
        (
            "destination.namespace",
            "is replaced by the metadata.namespace",
        ),
        (
            "destination.labels[app]",
            "is replaced by the workload selector",
        ),
        ("destination.name", "only supported in v1alpha1"),
        ("destination.user", "only supported in v1alpha1"),
        (
            "request.experimental.auth.claims[a]",
            "unknown attribute: request.experimental.auth.claims[a]",
        ),
        ("source.color", "unknown attribute: source.color"),
        (
            "request.headers",
            "bad key (request.headers): should have format a[b]",
        ),
        ("request.auth.claims[]", "should have format a[b]"),
        ("experimental.envoy.filters.x", "should have format a[b]"),
    ] {
        v.push(case(
            &format!("ValidateAttribute/{key}"),
            "AuthorizationPolicy",
            &when(key, "[x]"),
            Deny(msg),
        ));
    }
    for (key, values, msg) in [
        ("source.ip", "[\"10.0.0.0/33\"]", "10.0.0.0/33"),
        ("destination.port", "[\"70000\"]", "70000"),
        (
            "source.serviceAccount",
            "[\"a/b/c\"]",
            "expected format 'serviceAccount' or 'namespace/serviceAccount'",
        ),
        (
            "source.serviceAccount",
            "[\"ns/*\"]",
            "wildcard not allowed",
        ),
        (
            "source.trustDomain",
            "[\"a*b\"]",
            "wildcard is only allowed at the start or end",
        ),
    ] {
        v.push(case(
            &format!("ValidateAttribute/{key}-values"),
            "AuthorizationPolicy",
            &when(key, values),
            Deny(msg),
        ));
    }
    // Sources.
    let from = |src: &str| format!("rules: [{{from: [{{source: {src}}}]}}]");
    for src in [
        "{principals: [cluster.local/ns/a/sa/b]}",
        "{notPrincipals: [\"*\"]}",
        "{namespaces: [prod, \"dev-*\"]}",
        "{ipBlocks: [10.0.0.0/8, 1.2.3.4]}",
        "{remoteIpBlocks: [\"2001:db8::/32\"]}",
        "{requestPrincipals: [\"*\"]}",
        "{serviceAccounts: [prod/reviews, ratings]}",
        "{notServiceAccounts: [prod/reviews]}",
        "{trustDomains: [\"*.corp\", cluster.local]}",
        "{notTrustDomains: [\"legacy.*\"]}",
    ] {
        v.push(case(
            &format!("ValidateAuthorizationPolicy/source-{src}"),
            "AuthorizationPolicy",
            &from(src),
            Ok,
        ));
    }
    for (src, msg) in [
        (
            "{serviceAccounts: [a], namespaces: [b]}",
            "cannot set serviceAccounts with namespaces or principals",
        ),
        (
            "{serviceAccounts: [a], principals: [b]}",
            "cannot set serviceAccounts with namespaces or principals",
        ),
        ("{serviceAccounts: [\"\"]}", "empty value"),
        ("{serviceAccounts: [\"/sa\"]}", "found empty namespace"),
        (
            "{trustDomains: [\"a/b\"]}",
            "trust domain must not contain '/'",
        ),
        (
            "{trustDomains: [\"*a*\"]}",
            "at most one wildcard is allowed",
        ),
        ("{ipBlocks: [\"300.0.0.1\"]}", "300.0.0.1"),
        ("{}", "`from.source` must not be empty"),
    ] {
        v.push(case(
            &format!("ValidateAuthorizationPolicy/source-{src}"),
            "AuthorizationPolicy",
            &from(src),
            Deny(msg),
        ));
    }
    // Ports everywhere a port number appears.
    for (port, ok) in [
        (1, true),
        (80, true),
        (65535, true),
        (0, false),
        (65536, false),
    ] {
        let want = if ok {
            Ok
        } else {
            Deny("must be in the range 1..65535")
        };
        v.push(case(&format!("ValidatePort/gateway-{port}"), "Gateway",
            &format!("servers: [{{port: {{number: {port}, name: http, protocol: HTTP}}, hosts: [\"*\"]}}]"), want));
        v.push(case(&format!("ValidatePort/sidecar-egress-{port}"), "Sidecar",
            &format!("egress: [{{port: {{number: {port}, name: http, protocol: HTTP}}, hosts: [\"./*\"]}}]"),
            match (ok, port) {
                (true, _) => Ok,
                (false, 0) => Deny("ports with 0 value must have a unix domain socket bind address"),
                (false, _) => Deny("must be in the range 1..65535"),
            }));
        v.push(case(
            &format!("ValidatePort/workload-entry-{port}"),
            "WorkloadEntry",
            &format!("address: 10.0.0.1\nports: {{http: {port}}}"),
            want,
        ));
    }
    // Durations: istiod wants at least 1ms, whole milliseconds.
    for (d, ok) in [
        ("1ms", true),
        ("2s", true),
        ("1h", true),
        ("0s", false),
        ("500us", false),
    ] {
        let want = if ok { Ok } else { Deny("duration") };
        v.push(case(
            &format!("ValidateDuration/route-timeout-{d}"),
            "VirtualService",
            &vs(&format!("{{{ROUTE}, timeout: {d}}}")),
            want,
        ));
        v.push(case(
            &format!("ValidateDuration/per-try-{d}"),
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, retries: {{attempts: 2, perTryTimeout: {d}}}}}"
            )),
            want,
        ));
    }
    // Hostnames, as VirtualService hosts and DestinationRule hosts.
    for (h, ok) in [
        ("reviews", true),
        ("reviews.prod.svc.cluster.local", true),
        ("*.example.com", true),
        ("*", false),
        ("foo.*.com", false),
        ("bad_host.example.com", false),
        ("-a.example.com", false),
    ] {
        let vs_want = if ok {
            Ok
        } else if h == "*" {
            Deny("wildcard host * is not allowed")
        } else {
            Deny("invalid")
        };
        v.push(case(
            &format!("ValidateWildcardDomain/vs-{h}"),
            "VirtualService",
            &format!("hosts: [\"{h}\"]\nhttp: [{{{ROUTE}}}]"),
            vs_want,
        ));
        // istiod checks a DestinationRule host as a wildcard domain: `*` passes.
        let dr_want = if ok || h == "*" { Ok } else { Deny("invalid") };
        v.push(case(
            &format!("ValidateWildcardDomain/dr-{h}"),
            "DestinationRule",
            &format!("host: \"{h}\""),
            dr_want,
        ));
    }
    // Gateway server hosts.
    for (h, ok) in [
        ("*", true),
        ("*.example.com", true),
        ("a.example.com", true),
        ("ns/a.example.com", true),
        ("./*", true),
        ("*/a.example.com", true),
        ("1.2.3.4", true),
        ("*example.com", false),
        ("a*.example.com", false),
        ("example", false),
        ("Bad_NS/a.example.com", false),
    ] {
        v.push(case(
            &format!("ValidateNamespaceSlashWildcardHostname/gateway-{h}"),
            "Gateway",
            &format!(
                "servers: [{{port: {{number: 80, name: http, protocol: HTTP}}, hosts: [\"{h}\"]}}]"
            ),
            if ok { Ok } else { Deny("") },
        ));
    }
    // Sidecar egress hosts.
    for (h, ok) in [
        ("*/*", true),
        ("./*", true),
        ("ns/*", true),
        ("~ns/*", true),
        ("ns/a.example.com", true),
        ("ns/*.example.com", true),
        ("*/a.example.com", true),
        ("a.example.com", false),
        ("ns/a", false),
        ("ns/*a.example.com", false),
        ("/a.example.com", false),
    ] {
        v.push(case(
            &format!("ValidateNamespaceSlashWildcardHostname/sidecar-{h}"),
            "Sidecar",
            &format!("egress: [{{hosts: [\"{h}\"]}}]"),
            if ok { Ok } else { Deny("") },
        ));
    }
    // exportTo.
    for (e, ok) in [
        ("[\".\"]", true),
        ("[\"*\"]", true),
        ("[prod, dev]", true),
        ("[\"~\"]", false),
        ("[\"Bad_NS\"]", false),
    ] {
        v.push(case(
            &format!("validateExportTo/vs-{e}"),
            "VirtualService",
            &format!("hosts: [a]\nexportTo: {e}\nhttp: [{{{ROUTE}}}]"),
            if ok { Ok } else { Deny("exportTo") },
        ));
    }
    v.push(case("validateExportTo/se-tilde", "ServiceEntry",
        "hosts: [a.example.com]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: DNS\nexportTo: [\"~\"]", Ok));
    // Load-balancer algorithms.
    for lb in [
        "ROUND_ROBIN",
        "LEAST_REQUEST",
        "RANDOM",
        "PASSTHROUGH",
        "LEAST_CONN",
        "UNSPECIFIED",
    ] {
        v.push(case(
            &format!("validateLoadBalancer/simple-{lb}"),
            "DestinationRule",
            &format!("host: a\ntrafficPolicy: {{loadBalancer: {{simple: {lb}}}}}"),
            Ok,
        ));
    }
    for size in [65537u32, 1021, 4093] {
        v.push(case(&format!("validateLoadBalancer/maglev-{size}"), "DestinationRule",
            &format!("host: a\ntrafficPolicy: {{loadBalancer: {{consistentHash: {{httpHeaderName: x, maglev: {{tableSize: {size}}}}}}}}}"), Ok));
    }
    // Mirror percentages and fault percentages.
    for (pct, ok) in [
        ("0", true),
        ("50.5", true),
        ("100", true),
        ("101", false),
        ("-1", false),
    ] {
        v.push(case(
            &format!("ValidateVirtualService/mirror-percentage-{pct}"),
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, mirror: {{host: b}}, mirrorPercentage: {{value: {pct}}}}}"
            )),
            if ok { Ok } else { Deny("mirror_percentage") },
        ));
    }
    v
}

/// DestinationRule traffic policies and Gateway TLS options, rule by rule.
fn traffic_policies_and_server_tls() -> Vec<Case> {
    let tp = |policy: &str| format!("host: a.ns.svc.cluster.local\ntrafficPolicy: {policy}");
    let tls = |t: &str, proto: &str| {
        format!(
            "servers: [{{port: {{number: 443, name: https, protocol: {proto}}}, hosts: [\"*\"], tls: {t}}}]"
        )
    };
    vec![
        case(
            "validateTrafficPolicy/empty",
            "DestinationRule",
            &tp("{}"),
            Deny("traffic policy must have at least one field"),
        ),
        case(
            "validateTrafficPolicy/tunnel-and-proxy-protocol",
            "DestinationRule",
            &tp(
                "{tunnel: {targetHost: a.example.com, targetPort: 8080}, proxyProtocol: {version: V1}}",
            ),
            Deny("tunnel and proxyProtocol must not be set together"),
        ),
        case(
            "validateTunnelSettings/protocol",
            "DestinationRule",
            &tp("{tunnel: {protocol: PUT, targetHost: a.example.com, targetPort: 8080}}"),
            Deny("tunnel protocol must be \"CONNECT\" or \"POST\""),
        ),
        case(
            "validateTunnelSettings/target",
            "DestinationRule",
            &tp("{tunnel: {targetHost: \"bad host\", targetPort: 8080}}"),
            Deny("tunnel target host must be valid FQDN or IP address"),
        ),
        case(
            "validateTunnelSettings/port",
            "DestinationRule",
            &tp("{tunnel: {targetHost: 10.0.0.1, targetPort: 0}}"),
            Deny("tunnel target port is invalid"),
        ),
        case(
            "validateConnectionPool/empty",
            "DestinationRule",
            &tp("{connectionPool: {}}"),
            Deny("connection pool must have at least one field"),
        ),
        case(
            "validateConnectionPool/upgrade-and-client-protocol",
            "DestinationRule",
            &tp("{connectionPool: {http: {h2UpgradePolicy: UPGRADE, useClientProtocol: true}}}"),
            Deny("use client protocol must not be true when H2UpgradePolicy is UPGRADE"),
        ),
        case(
            "validateConnectionPool/negative-pending",
            "DestinationRule",
            &tp("{connectionPool: {http: {http1MaxPendingRequests: -1}}}"),
            Deny("http1 max pending requests must be non-negative"),
        ),
        case(
            "validateConnectionPool/tcp-idle-zero",
            "DestinationRule",
            &tp("{connectionPool: {tcp: {idleTimeout: 0s}}}"),
            Ok,
        ),
        case(
            "validateConnectionPool/keepalive",
            "DestinationRule",
            &tp("{connectionPool: {tcp: {tcpKeepalive: {time: 7200s, interval: 75s, probes: 9}}}}"),
            Ok,
        ),
        case(
            "validateOutlierDetection/local-origin-without-split",
            "DestinationRule",
            &tp("{outlierDetection: {consecutiveLocalOriginFailures: 5}}"),
            Deny(
                "outlier detection consecutive local origin failures is specified, but split external local origin errors is set to false",
            ),
        ),
        case(
            "validateOutlierDetection/local-origin-with-split",
            "DestinationRule",
            &tp(
                "{outlierDetection: {consecutiveLocalOriginFailures: 5, splitExternalLocalOriginErrors: true}}",
            ),
            Ok,
        ),
        case(
            "validateOutlierDetection/max-ejection",
            "DestinationRule",
            &tp("{outlierDetection: {maxEjectionPercent: 150}}"),
            Deny("percentage 150 is not in range 0..100"),
        ),
        case(
            "validatePortTrafficPolicies/port-required",
            "DestinationRule",
            &tp("{portLevelSettings: [{loadBalancer: {simple: RANDOM}}]}"),
            Deny("portTrafficPolicy must have valid port"),
        ),
        case(
            "validatePortTrafficPolicies/empty",
            "DestinationRule",
            &tp("{portLevelSettings: [{port: {number: 80}}]}"),
            Deny("port traffic policy must have at least one field"),
        ),
        case(
            "validateLoadBalancer/cookie-name",
            "DestinationRule",
            &tp("{loadBalancer: {consistentHash: {httpCookie: {ttl: 0s}}}}"),
            Deny("name required for HttpCookie"),
        ),
        case(
            "validateLoadBalancer/cookie-attribute-duplicate",
            "DestinationRule",
            &tp(
                "{loadBalancer: {consistentHash: {httpCookie: {name: c, attributes: [{name: a}, {name: a}]}}}}",
            ),
            Deny("duplicate cookie attribute name: a"),
        ),
        case(
            "validateLoadBalancer/minimum-ring-size-deprecated",
            "DestinationRule",
            &tp("{loadBalancer: {consistentHash: {httpHeaderName: x, minimumRingSize: 1024}}}"),
            Warn("consistent hash MinimumRingSize is deprecated"),
        ),
        case(
            "validateSubset/labels",
            "DestinationRule",
            "host: a\nsubsets: [{name: v1, labels: {\"bad key!\": a}}]",
            Deny(""),
        ),
        case(
            "ValidateDestinationRule/duplicate-subsets",
            "DestinationRule",
            "host: a\nsubsets: [{name: v1, labels: {v: a}}, {name: v1, labels: {v: b}}]",
            Deny("duplicate subset names: v1"),
        ),
        case(
            "validateTLSOptions/istio-mutual-with-certificate",
            "Gateway",
            &tls("{mode: ISTIO_MUTUAL, serverCertificate: /c.pem}", "HTTPS"),
            Deny("ISTIO_MUTUAL TLS cannot have associated server certificate"),
        ),
        case(
            "validateTLSOptions/istio-mutual-with-credential",
            "Gateway",
            &tls("{mode: ISTIO_MUTUAL, credentialName: c}", "HTTPS"),
            Deny("ISTIO_MUTUAL TLS cannot have associated credentialName"),
        ),
        case(
            "validateTLSOptions/passthrough-with-certificates-warns",
            "Gateway",
            &tls("{mode: PASSTHROUGH, credentialName: c}", "TLS"),
            Warn("PASSTHROUGH mode does not use certificates, they will be ignored"),
        ),
        case(
            "validateTLSOptions/two-sources",
            "Gateway",
            &tls(
                "{mode: SIMPLE, credentialName: c, serverCertificate: /c.pem, privateKey: /k.pem}",
                "HTTPS",
            ),
            Deny(
                "only one of credential_name, credential_names, server_certificate/private_key, tls_certificates should be specified",
            ),
        ),
        case(
            "validateTLSOptions/simple-needs-key",
            "Gateway",
            &tls("{mode: SIMPLE, serverCertificate: /c.pem}", "HTTPS"),
            Deny("SIMPLE TLS requires a private key"),
        ),
        case(
            "validateTLSOptions/mutual-needs-ca",
            "Gateway",
            &tls(
                "{mode: MUTUAL, serverCertificate: /c.pem, privateKey: /k.pem}",
                "HTTPS",
            ),
            Deny("MUTUAL TLS requires a client CA bundle"),
        ),
        case(
            "validateTLSOptions/mutual-with-credential",
            "Gateway",
            &tls("{mode: MUTUAL, credentialName: c}", "HTTPS"),
            Ok,
        ),
        case(
            "validateTLSOptions/crl-with-simple",
            "Gateway",
            &tls(
                "{mode: SIMPLE, serverCertificate: /c.pem, privateKey: /k.pem, caCrl: /crl.pem}",
                "HTTPS",
            ),
            Deny("CRL is not supported with SIMPLE TLS"),
        ),
        case(
            "validateTLSOptions/invalid-cipher-warns",
            "Gateway",
            &tls(
                "{mode: SIMPLE, credentialName: c, cipherSuites: [NOT-A-CIPHER]}",
                "HTTPS",
            ),
            Warn("ignoring invalid cipher suites: [NOT-A-CIPHER]"),
        ),
        case(
            "validateTLSOptions/old-tls-warns",
            "Gateway",
            &tls(
                "{mode: SIMPLE, credentialName: c, minProtocolVersion: TLSV1_0}",
                "HTTPS",
            ),
            Warn("TLS version below TLSV1_2 require setting compatible ciphers"),
        ),
        case(
            "ValidateGateway/duplicate-port-names",
            "Gateway",
            "servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [a.example.com]}, {port: {number: 8080, name: http, protocol: HTTP}, hosts: [b.example.com]}]",
            Deny("port names in servers must be unique: duplicate name http"),
        ),
        case(
            "ValidateGateway/https-redirect-on-tls-warns",
            "Gateway",
            &tls(
                "{mode: SIMPLE, credentialName: c, httpsRedirect: true}",
                "HTTPS",
            ),
            Warn("tls.httpsRedirect should only be used with http servers"),
        ),
        case(
            "validateServer/http-with-redirect-only",
            "Gateway",
            "servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [\"*\"], tls: {httpsRedirect: true}}]",
            Ok,
        ),
        case(
            "validateServer/http-with-certificates",
            "Gateway",
            "servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [\"*\"], tls: {httpsRedirect: true, serverCertificate: /c.pem}}]",
            Deny("server cannot have TLS settings for plain text HTTP ports"),
        ),
        case(
            "validateServer/tcp-with-tls",
            "Gateway",
            "servers: [{port: {number: 9000, name: tcp, protocol: TCP}, hosts: [\"*\"], tls: {httpsRedirect: true}}]",
            Deny("server cannot have TLS settings for non HTTPS/TLS ports"),
        ),
        case(
            "validateServerPort/target-port",
            "Gateway",
            "servers: [{port: {number: 80, name: http, protocol: HTTP, targetPort: 8080}, hosts: [\"*\"]}]",
            Deny("targetPort has no impact on Gateways"),
        ),
        case(
            "validateServerBind/ip",
            "Gateway",
            "servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [\"*\"], bind: not-an-ip}]",
            Deny(""),
        ),
        case(
            "validateServerBind/unix",
            "Gateway",
            "servers: [{port: {number: 0, name: http, protocol: HTTP}, hosts: [\"*\"], bind: \"unix:///var/run/gw.sock\"}]",
            Warn("servers listen on every address"),
        ),
    ]
}

/// Authorization ports and paths, redirects, mirrors and regex rewrites.
fn operations_and_redirects() -> Vec<Case> {
    let allow = |rules: &str| format!("action: ALLOW\nrules: {rules}");
    vec![
        case(
            "ValidatePorts/zero",
            "AuthorizationPolicy",
            &allow("[{to: [{operation: {ports: [\"0\", \"8080\"]}}]}]"),
            Ok,
        ),
        case(
            "ValidatePorts/too-large",
            "AuthorizationPolicy",
            &allow("[{to: [{operation: {ports: [\"70000\"]}}]}]"),
            Deny("bad port (70000)"),
        ),
        case(
            "ValidatePorts/not-a-number",
            "AuthorizationPolicy",
            &allow("[{to: [{operation: {notPorts: [http]}}]}]"),
            Deny("bad port (http)"),
        ),
        case(
            "CheckValidPathTemplate/match-one",
            "AuthorizationPolicy",
            &allow("[{to: [{operation: {paths: [\"/api/{*}/users\"]}}]}]"),
            Ok,
        ),
        case(
            "CheckValidPathTemplate/match-any-last",
            "AuthorizationPolicy",
            &allow("[{to: [{operation: {paths: [\"/api/{**}\"]}}]}]"),
            Ok,
        ),
        case(
            "CheckValidPathTemplate/match-any-not-last",
            "AuthorizationPolicy",
            &allow("[{to: [{operation: {paths: [\"/api/{**}/{*}\"]}}]}]"),
            Deny("{**} is not the last operator"),
        ),
        case(
            "CheckValidPathTemplate/brace",
            "AuthorizationPolicy",
            &allow("[{to: [{operation: {paths: [\"/api/{id}\"]}}]}]"),
            Deny("Contains '{' or '}' beyond a supported path template"),
        ),
        case(
            "CheckEmptyValues/methods",
            "AuthorizationPolicy",
            &allow("[{to: [{operation: {methods: [\"\"]}}]}]"),
            Deny("empty value"),
        ),
        case(
            "validateHTTPRedirect/code",
            "VirtualService",
            &vs("{redirect: {uri: /x, redirectCode: 200}}"),
            Deny("200 is not a valid redirect code, must be 3xx"),
        ),
        case(
            "validateHTTPRedirect/scheme",
            "VirtualService",
            &vs("{redirect: {scheme: ftp}}"),
            Deny("invalid redirect scheme, must be \"http\" or \"https\""),
        ),
        case(
            "validateHTTPRedirect/nothing",
            "VirtualService",
            &vs("{redirect: {redirectCode: 302}}"),
            Deny("redirect must specify URI, authority, scheme, or port"),
        ),
        case(
            "validateHTTPRedirect/derive-port",
            "VirtualService",
            &vs("{redirect: {derivePort: FROM_REQUEST_PORT, scheme: https}}"),
            Ok,
        ),
        case(
            "validateHTTPMirrors/percentage",
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, mirrors: [{{destination: {{host: b}}, percentage: {{value: 150}}}}]}}"
            )),
            Deny("mirror percentage must have a max value of 100"),
        ),
        case(
            "validateHTTPMirrors/destination",
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, mirrors: [{{percentage: {{value: 5}}}}]}}"
            )),
            Deny("destination is required for mirrors"),
        ),
        case(
            "validateURIRegexRewrite/both-fields",
            "VirtualService",
            &vs(&format!(
                "{{{ROUTE}, rewrite: {{uriRegexRewrite: {{match: \"^/a\"}}}}}}"
            )),
            Deny("UriRegexRewrite requires both Rewrite and Match fields to be specified"),
        ),
    ]
}

fn all_cases() -> Vec<Case> {
    [
        operations_and_redirects(),
        traffic_policies_and_server_tls(),
        families(),
        virtual_services(),
        destination_rules(),
        service_entries(),
        workload_entries_and_groups(),
        gateways(),
        sidecars(),
        security(),
        extensions(),
        metadata(),
        unhonoured_fields(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// One case per entry of the "accepted but not honoured" list not covered above.
fn unhonoured_fields() -> Vec<Case> {
    let r = ROUTE;
    vec![
        case("honoured/delegate", "VirtualService",
            "hosts: [a.example.com]
gateways: [gw]
http: [{delegate: {name: b, namespace: ns}}]", Ok),
        case("honoured/retryRemoteLocalities", "VirtualService",
            &vs(&format!("{{{r}, retries: {{attempts: 2, retryRemoteLocalities: true}}}}")), Ok),
        case("honoured/backoff", "VirtualService",
            &vs(&format!("{{{r}, retries: {{attempts: 2, backoff: 1s}}}}")), Ok),
        case("validateHTTPFaultInjectionAbort/http2-error", "VirtualService",
            &vs(&format!("{{{r}, fault: {{abort: {{http2Error: REFUSED_STREAM, percentage: {{value: 1}}}}}}}}")),
            Deny("HTTP/2 abort fault injection not supported yet")),
        case("validateHTTPFaultInjectionAbort/no-type-warns", "VirtualService",
            &vs(&format!("{{{r}, fault: {{abort: {{percentage: {{value: 1}}}}}}}}")), Warn("abort configured, but error type not set")),
        case("validateHTTPFaultInjectionAbort/grpc-status", "VirtualService",
            &vs(&format!("{{{r}, fault: {{abort: {{grpcStatus: UNAVAILABLE}}}}}}")), Ok),
        case("validateGRPCStatus/unknown", "VirtualService",
            &vs(&format!("{{{r}, fault: {{abort: {{grpcStatus: \"14\"}}}}}}")), Deny("gRPC status \"14\" is not supported")),
        case("validateHTTPFaultInjectionDelay/exponential", "VirtualService",
            &vs(&format!("{{{r}, fault: {{delay: {{exponentialDelay: 1s}}}}}}")), Deny("exponentialDelay not supported yet")),
        case("validateHTTPFaultInjectionDelay/no-type", "VirtualService",
            &vs(&format!("{{{r}, fault: {{delay: {{percentage: {{value: 5}}}}}}}}")), Ok),
        case("validateCORSPolicy/empty-origin", "VirtualService",
            &vs(&format!("{{{r}, corsPolicy: {{allowOrigins: [{{exact: \"\"}}]}}}}")), Deny("is not a valid match type for CORS allow origins")),
        case("validateCORSPolicy/header-name", "VirtualService",
            &vs(&format!("{{{r}, corsPolicy: {{allowHeaders: [\"x y\"]}}}}")), Deny("header name x y is not a valid header name")),
        case("validateCORSPolicy/wildcard-header", "VirtualService",
            &vs(&format!("{{{r}, corsPolicy: {{allowHeaders: [\"*\"], exposeHeaders: [x-id]}}}}")), Ok),
        case("validateCORSPolicy/max-age-precision", "VirtualService",
            &vs(&format!("{{{r}, corsPolicy: {{maxAge: 1500ms}}}}")), Deny("max_age duration is accurate only to seconds precision")),
        case("unhonoured/destinationSubnets", "VirtualService",
            "hosts: [a.ns.svc.cluster.local]
gateways: [gw]
tcp: [{match: [{destinationSubnets: [10.0.0.0/8]}], route: [{destination: {host: a}}]}]",
            Warn("TCP routes on gateways match on port only")),
        case("unhonoured/sourceSubnet", "VirtualService",
            "hosts: [a.ns.svc.cluster.local]
gateways: [gw]
tcp: [{match: [{sourceSubnet: 10.0.0.0/8}], route: [{destination: {host: a}}]}]",
            Warn("TCP routes do not match on the client's address")),
        case("honoured/tunnel", "DestinationRule",
            "host: a
trafficPolicy: {tunnel: {targetHost: b.example.com, targetPort: 8443}}", Ok),
        case("honoured/retryBudget", "DestinationRule",
            "host: a
trafficPolicy: {retryBudget: {percent: 20}}", Ok),
        case("honoured/warmupDurationSecs", "DestinationRule",
            "host: a
trafficPolicy: {loadBalancer: {simple: LEAST_REQUEST, warmupDurationSecs: 60s}}", Ok),
        case("honoured/cookie-attributes", "DestinationRule",
            "host: a
trafficPolicy: {loadBalancer: {consistentHash: {httpCookie: {name: c, ttl: 0s, attributes: [{name: SameSite, value: Strict}]}}}}",
            Ok),
        case("honoured/tcp-idleTimeout", "DestinationRule",
            "host: a
trafficPolicy: {connectionPool: {tcp: {idleTimeout: 1h}}}", Ok),
        case("unhonoured/defaultEndpoint", "Gateway",
            "servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [\"*\"], defaultEndpoint: \"127.0.0.1:8080\"}]", Warn("not used by gateways")),
        case("honoured/gateway-caCrl", "Gateway",
            "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: [\"*\"], tls: {mode: MUTUAL, credentialName: c, caCrl: /crl.pem}}]",
            Ok),
        case("honoured/credentialNames", "Gateway",
            "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: [\"*\"], tls: {mode: SIMPLE, credentialNames: [a, b]}}]",
            Ok),
        case("honoured/spki", "Gateway",
            "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: [\"*\"], tls: {mode: MUTUAL, credentialName: c, verifyCertificateSpki: [abc]}}]",
            Ok),
        case("honoured/hash", "Gateway",
            "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: [\"*\"], tls: {mode: MUTUAL, credentialName: c, verifyCertificateHash: [abc]}}]",
            Ok),
        case("honoured/maxProtocolVersion", "Gateway",
            "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: [\"*\"], tls: {mode: SIMPLE, credentialName: c, maxProtocolVersion: TLSV1_3}}]",
            Ok),
        case("honoured/cipherSuites", "Gateway",
            "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: [\"*\"], tls: {mode: SIMPLE, credentialName: c, cipherSuites: [ECDHE-RSA-AES256-GCM-SHA384]}}]",
            Ok),
        case("honoured/caCertCredentialName", "Gateway",
            "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: [\"*\"], tls: {mode: MUTUAL, credentialName: c, caCertCredentialName: ca}}]",
            Ok),
        case("honoured/caCertCredentialName-configmap", "Gateway",
            "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: [\"*\"], tls: {mode: MUTUAL, credentialName: c, caCertCredentialName: \"configmap://ns/ca\"}}]",
            Ok),
        case("unhonoured/credentialName-sds", "Gateway",
            "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: [\"*\"], tls: {mode: SIMPLE, credentialName: \"sds://my-cert\"}}]",
            Warn("external SDS (sds://) is not served")),
        case("unhonoured/credentialNames-sds", "Gateway",
            "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: [\"*\"], tls: {mode: SIMPLE, credentialNames: [a, \"sds://my-cert\"]}}]",
            Warn("spec.servers[0].tls.credentialNames[1]: accepted but not honoured")),
        case("cipherSuites/expression-not-sent", "Gateway",
            "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: [\"*\"], tls: {mode: SIMPLE, credentialName: c, cipherSuites: [\"-NOT-A-CIPHER\", \"-AES128-SHA\"]}}]",
            Warn("not sent to Envoy, which may reject them: [-NOT-A-CIPHER]")),
        case("unhonoured/jwt-issuer-only", "RequestAuthentication",
            "jwtRules: [{issuer: \"https://accounts.example.com\"}]",
            Warn("no OIDC discovery of the issuer's jwksUri")),
        case("honoured/ap-targetRefs-service", "AuthorizationPolicy",
            "targetRefs: [{kind: Service, group: \"\", name: web}]\naction: DENY\nrules: [{to: [{operation: {paths: [/admin]}}]}]",
            Warn("will deny all traffic to TCP ports")),
        case("honoured/ap-targetRef-serviceentry", "AuthorizationPolicy",
            "targetRef: {kind: ServiceEntry, group: networking.istio.io, name: web}", Ok),
        case("honoured/ap-targetRefs-gatewayclass", "AuthorizationPolicy",
            "targetRefs: [{kind: GatewayClass, group: gateway.networking.k8s.io, name: istio-waypoint}]", Ok),
        case("honoured/ap-targetRef-service", "AuthorizationPolicy",
            "targetRef: {kind: Service, group: \"\", name: web}", Ok),
        case("honoured/ap-targetRefs-serviceentry", "AuthorizationPolicy",
            "targetRefs: [{kind: ServiceEntry, group: networking.istio.io, name: web}]", Ok),
        case("honoured/ap-targetRef-gatewayclass", "AuthorizationPolicy",
            "targetRef: {kind: GatewayClass, group: gateway.networking.k8s.io, name: istio-waypoint}", Ok),
        case("honoured/ap-targetRefs-gateway", "AuthorizationPolicy",
            "targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: ingress}]",
            Ok),
        case("honoured/ra-targetRefs-service", "RequestAuthentication",
            "targetRefs: [{kind: Service, group: \"\", name: web}]\njwtRules: [{issuer: a, jwksUri: \"https://a.example.com/keys\"}]", Ok),
        case("honoured/ra-targetRefs-serviceentry", "RequestAuthentication",
            "targetRefs: [{kind: ServiceEntry, group: networking.istio.io, name: web}]\njwtRules: [{issuer: a, jwksUri: \"https://a.example.com/keys\"}]", Ok),
        case("honoured/ra-targetRefs-gatewayclass", "RequestAuthentication",
            "targetRefs: [{kind: GatewayClass, group: gateway.networking.k8s.io, name: web}]\njwtRules: [{issuer: a, jwksUri: \"https://a.example.com/keys\"}]", Ok),
        case("honoured/ra-targetRef-service", "RequestAuthentication",
            "targetRef: {kind: Service, group: \"\", name: web}\njwtRules: [{issuer: a, jwksUri: \"https://a.example.com/keys\"}]", Ok),
        case("honoured/ra-targetRef-serviceentry", "RequestAuthentication",
            "targetRef: {kind: ServiceEntry, group: networking.istio.io, name: web}\njwtRules: [{issuer: a, jwksUri: \"https://a.example.com/keys\"}]", Ok),
        case("honoured/ra-targetRef-gatewayclass", "RequestAuthentication",
            "targetRef: {kind: GatewayClass, group: gateway.networking.k8s.io, name: web}\njwtRules: [{issuer: a, jwksUri: \"https://a.example.com/keys\"}]", Ok),
        case("honoured/egress-port", "Sidecar",
            "egress: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [\"./*\"]}]", Ok),
        case("unhonoured/egress-bind", "Sidecar",
            "egress: [{port: {number: 80, name: http, protocol: HTTP}, bind: 127.0.0.1, hosts: [\"./*\"]}]", Warn("egress listeners bind as the interception mode says")),
        case("unhonoured/egress-captureMode", "Sidecar",
            "egress: [{port: {number: 80, name: http, protocol: HTTP}, captureMode: NONE, hosts: [\"./*\"]}]", Warn("egress listeners bind as the interception mode says")),
        case("honoured/envoyfilter", "EnvoyFilter",
            "configPatches: [{applyTo: CLUSTER, patch: {operation: ADD, value: {name: x}}}]", Ok),
        case("honoured/envoyfilter-listener-filter", "EnvoyFilter",
            "configPatches: [{applyTo: LISTENER_FILTER, patch: {operation: REMOVE}}]", Ok),
        case("honoured/envoyfilter-extension-config", "EnvoyFilter",
            "configPatches: [{applyTo: EXTENSION_CONFIG, patch: {operation: ADD, value: {name: x}}}]", Ok),
        case("unhonoured/envoyfilter-bootstrap", "EnvoyFilter",
            "configPatches: [{applyTo: BOOTSTRAP, patch: {operation: MERGE, value: {}}}]", Warn("BOOTSTRAP patches are not applied")),
        case("unhonoured/envoyfilter-filter-class-authn", "EnvoyFilter",
            "configPatches: [{applyTo: HTTP_FILTER, patch: {operation: ADD, filterClass: AUTHN, value: {name: x}}}]", Warn("filterClass is not acted on")),
        case("unhonoured/envoyfilter-filter-class-authz", "EnvoyFilter",
            "configPatches: [{applyTo: HTTP_FILTER, patch: {operation: ADD, filterClass: AUTHZ, value: {name: x}}}]", Warn("filterClass is not acted on")),
        case("unhonoured/envoyfilter-filter-class-stats", "EnvoyFilter",
            "configPatches: [{applyTo: HTTP_FILTER, patch: {operation: ADD, filterClass: STATS, value: {name: x}}}]", Warn("filterClass is not acted on")),
        case("unhonoured/envoyfilter-match-waypoint", "EnvoyFilter",
            "configPatches: [{applyTo: HTTP_FILTER, match: {context: WAYPOINT, waypoint: {portNumber: 8080}}, patch: {operation: INSERT_BEFORE, value: {name: x}}}]", Warn("the waypoint match (portNumber, filter, route) is not read yet")),
        case("honoured/envoyfilter-waypoint", "EnvoyFilter",
            "configPatches: [{applyTo: CLUSTER, match: {context: WAYPOINT}, patch: {operation: REMOVE}}]", Ok),
        case("unhonoured/envoyfilter-target-service", "EnvoyFilter",
            "targetRefs: [{kind: Service, group: \"\", name: web}]\nconfigPatches: [{applyTo: CLUSTER, patch: {operation: REMOVE}}]", Warn("is enforced nowhere")),
        case("unhonoured/envoyfilter-target-serviceentry", "EnvoyFilter",
            "targetRefs: [{kind: ServiceEntry, group: networking.istio.io, name: web}]\nconfigPatches: [{applyTo: CLUSTER, patch: {operation: REMOVE}}]", Warn("is enforced nowhere")),
        case("honoured/envoyfilter-target-gatewayclass", "EnvoyFilter",
            "targetRefs: [{kind: GatewayClass, group: gateway.networking.k8s.io, name: istio-waypoint}]\nconfigPatches: [{applyTo: CLUSTER, patch: {operation: REMOVE}}]", Ok),
        case("honoured/envoyfilter-proxy-metadata", "EnvoyFilter",
            "configPatches: [{applyTo: CLUSTER, match: {proxy: {metadata: {A: b}}}, patch: {operation: REMOVE}}]", Ok),
        case("honoured/telemetry-access-logging", "Telemetry",
            "accessLogging: [{providers: [{name: envoy}]}]", Ok),
        case("honoured/telemetry-metrics", "Telemetry",
            "metrics: [{providers: [{name: prometheus}], overrides: [{match: {metric: REQUEST_COUNT}, tagOverrides: {a: {value: b}}}]}]", Ok),
        case("honoured/telemetry-tracing", "Telemetry",
            "tracing: [{providers: [{name: zipkin}], randomSamplingPercentage: 10}]", Ok),
        case("honoured/telemetry-tracing-request-id", "Telemetry",
            "tracing: [{useRequestIdForTraceSampling: false}]", Ok),
        case("honoured/telemetry-tracing-context", "Telemetry",
            "tracing: [{disableContextPropagation: true}]", Ok),
        case("honoured/telemetry-targetRefs-gateway", "Telemetry",
            "targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: gw}]\naccessLogging: [{}]", Ok),
        case("honoured/telemetry-targetRefs-service", "Telemetry",
            "targetRefs: [{kind: Service, group: \"\", name: web}]\naccessLogging: [{}]", Ok),
        case("honoured/telemetry-targetRefs-serviceentry", "Telemetry",
            "targetRefs: [{kind: ServiceEntry, group: networking.istio.io, name: web}]\naccessLogging: [{}]", Ok),
        case("honoured/telemetry-targetRefs-gatewayclass", "Telemetry",
            "targetRefs: [{kind: GatewayClass, group: gateway.networking.k8s.io, name: istio-waypoint}]\naccessLogging: [{}]", Ok),
        case("unhonoured/gatewayclass-parametersRef", "GatewayClass",
            "controllerName: istio.io/gateway-controller\nparametersRef: {group: '', kind: ConfigMap, name: p, namespace: ns}",
            Warn("a class's deployment defaults come from a ConfigMap of the system namespace")),
        case("honoured/gateway-infrastructure-parametersRef", "Gateway.gateway.networking.k8s.io",
            "gatewayClassName: istio\nlisteners: [{name: http, port: 80, protocol: HTTP}]\ninfrastructure: {parametersRef: {group: '', kind: ConfigMap, name: p}}",
            Ok),
        case("honoured/gateway-infrastructure-labels", "Gateway.gateway.networking.k8s.io",
            "gatewayClassName: istio\nlisteners: [{name: http, port: 80, protocol: HTTP}]\ninfrastructure: {labels: {team: web}}",
            Ok),
        case("honoured/gateway-allowedListeners", "Gateway.gateway.networking.k8s.io",
            "gatewayClassName: istio\nlisteners: [{name: http, port: 80, protocol: HTTP}]\nallowedListeners: {namespaces: {from: Same}}",
            Ok),
        case("gateway-api/listenerset-ok", "ListenerSet",
            "parentRef: {name: gw}\nlisteners: [{name: extra, port: 8081, protocol: HTTP}]",
            Ok),
        case("gateway-api/listenerset-unique-names", "ListenerSet",
            "parentRef: {name: gw}\nlisteners: [{name: a, port: 8081, protocol: HTTP}, {name: a, port: 8082, protocol: HTTP}]",
            Deny("Listener name must be unique")),
        case("gateway-api/listenerset-no-listeners", "ListenerSet",
            "parentRef: {name: gw}\nlisteners: []",
            Deny("a ListenerSet has 1 to 64 listeners")),
        case("unhonoured/gateway-tls-backend", "Gateway.gateway.networking.k8s.io",
            "gatewayClassName: istio\nlisteners: [{name: http, port: 80, protocol: HTTP}]\ntls: {backend: {clientCertificateRef: {name: c}}}",
            Warn("no client certificate is presented to backends")),
        case("honoured/gateway-tls-frontend", "Gateway.gateway.networking.k8s.io",
            "gatewayClassName: istio\nlisteners: [{name: http, port: 80, protocol: HTTP}]\ntls: {frontend: {default: {validation: {caCertificateRefs: [{group: '', kind: ConfigMap, name: ca}]}}}}",
            Ok),
        case("unhonoured/gateway-tls-frontend-fallback", "Gateway.gateway.networking.k8s.io",
            "gatewayClassName: istio\nlisteners: [{name: http, port: 80, protocol: HTTP}]\ntls: {frontend: {default: {validation: {caCertificateRefs: [{group: '', kind: ConfigMap, name: ca}], mode: AllowInsecureFallback}}}}",
            Warn("nor does istiod fall back")),
        case("unhonoured/gateway-tls-frontend-fallback-per-port", "Gateway.gateway.networking.k8s.io",
            "gatewayClassName: istio\nlisteners: [{name: http, port: 80, protocol: HTTP}]\ntls: {frontend: {perPort: [{port: 443, tls: {validation: {caCertificateRefs: [{group: '', kind: ConfigMap, name: ca}], mode: AllowInsecureFallback}}}]}}",
            Warn("nor does istiod fall back")),
        case("unhonoured/gateway-defaultScope", "Gateway.gateway.networking.k8s.io",
            "gatewayClassName: istio\nlisteners: [{name: http, port: 80, protocol: HTTP}]\ndefaultScope: All",
            Warn("default Gateways are not served")),
        case("unhonoured/httproute-sessionPersistence", "HTTPRoute",
            "parentRefs: [{name: gw}]\nrules: [{backendRefs: [{name: a, port: 80}], sessionPersistence: {sessionName: s}}]",
            Warn("sessions are not made sticky")),
        case("unhonoured/grpcroute-sessionPersistence", "GRPCRoute",
            "parentRefs: [{name: gw}]\nrules: [{backendRefs: [{name: a, port: 80}], sessionPersistence: {sessionName: s}}]",
            Warn("sessions are not made sticky")),
        case("unhonoured/httproute-useDefaultGateways", "HTTPRoute",
            "useDefaultGateways: All\nrules: [{backendRefs: [{name: a, port: 80}]}]",
            Warn("default Gateways are not served")),
        case("unhonoured/grpcroute-useDefaultGateways", "GRPCRoute",
            "useDefaultGateways: All\nrules: [{backendRefs: [{name: a, port: 80}]}]",
            Warn("default Gateways are not served")),
        case("unhonoured/tcproute-useDefaultGateways", "TCPRoute",
            "useDefaultGateways: All\nrules: [{backendRefs: [{name: a, port: 80}]}]",
            Warn("default Gateways are not served")),
        case("unhonoured/tlsroute-useDefaultGateways", "TLSRoute",
            "useDefaultGateways: All\nrules: [{backendRefs: [{name: a, port: 80}]}]",
            Warn("default Gateways are not served")),
        case("gateway-api/path-must-be-absolute", "HTTPRoute",
            "parentRefs: [{name: gw}]\nrules: [{matches: [{path: {type: Exact, value: api}}], backendRefs: [{name: a, port: 80}]}]",
            Deny("must be an absolute path")),
        case("gateway-api/tls-on-http-listener", "Gateway.gateway.networking.k8s.io",
            "gatewayClassName: istio\nlisteners: [{name: http, port: 80, protocol: HTTP, tls: {certificateRefs: [{name: c}]}}]",
            Deny("tls must not be specified for protocols")),
        case("gateway-api/listener-names-unique", "Gateway.gateway.networking.k8s.io",
            "gatewayClassName: istio\nlisteners: [{name: a, port: 80, protocol: HTTP}, {name: a, port: 81, protocol: HTTP}]",
            Deny("Listener name must be unique")),
        case("gateway-api/redirect-with-backends", "HTTPRoute",
            "parentRefs: [{name: gw}]\nrules: [{filters: [{type: RequestRedirect, requestRedirect: {statusCode: 301}}], backendRefs: [{name: a, port: 80}]}]",
            Deny("RequestRedirect filter must not be used together with backendRefs")),
        case("gateway-api/filter-type-names-its-field", "HTTPRoute",
            "parentRefs: [{name: gw}]\nrules: [{filters: [{type: RequestHeaderModifier}], backendRefs: [{name: a, port: 80}]}]",
            Deny("filter.requestHeaderModifier must be specified")),
        case("gateway-api/backend-tls-ok", "BackendTLSPolicy",
            "targetRefs: [{group: \"\", kind: Service, name: api, sectionName: https}]\nvalidation: {caCertificateRefs: [{group: \"\", kind: ConfigMap, name: ca}], hostname: api.example.com, subjectAltNames: [{type: URI, uri: \"spiffe://td/ns/a/sa/b\"}]}",
            Ok),
        case("gateway-api/backend-tls-system-ok", "BackendTLSPolicy",
            "targetRefs: [{group: \"\", kind: Service, name: api}]\nvalidation: {wellKnownCACertificates: System, hostname: api.example.com}",
            Ok),
        case("unhonoured/backend-tls-options", "BackendTLSPolicy",
            "targetRefs: [{group: \"\", kind: Service, name: api}]\nvalidation: {wellKnownCACertificates: System, hostname: api.example.com}\noptions: {example.com/x: \"v\"}",
            Warn("implementation-specific TLS options")),
        case("gateway-api/backend-tls-both-cas", "BackendTLSPolicy",
            "targetRefs: [{group: \"\", kind: Service, name: api}]\nvalidation: {caCertificateRefs: [{group: \"\", kind: ConfigMap, name: ca}], wellKnownCACertificates: System, hostname: api.example.com}",
            Deny("must not contain both CACertificateRefs and WellKnownCACertificates")),
        case("gateway-api/backend-tls-no-ca", "BackendTLSPolicy",
            "targetRefs: [{group: \"\", kind: Service, name: api}]\nvalidation: {hostname: api.example.com}",
            Deny("must specify either CACertificateRefs or WellKnownCACertificates")),
        case("gateway-api/backend-tls-wildcard-hostname", "BackendTLSPolicy",
            "targetRefs: [{group: \"\", kind: Service, name: api}]\nvalidation: {wellKnownCACertificates: System, hostname: \"*.example.com\"}",
            Deny("a precise hostname is required")),
        case("gateway-api/backend-tls-san-type", "BackendTLSPolicy",
            "targetRefs: [{group: \"\", kind: Service, name: api}]\nvalidation: {wellKnownCACertificates: System, hostname: a.example.com, subjectAltNames: [{type: Hostname, uri: \"spiffe://x\"}]}",
            Deny("SubjectAltName element must contain Hostname")),
        case("gateway-api/backend-tls-same-target-twice", "BackendTLSPolicy",
            "targetRefs: [{group: \"\", kind: Service, name: api}, {group: \"\", kind: Service, name: api, sectionName: https}]\nvalidation: {wellKnownCACertificates: System, hostname: a.example.com}",
            Deny("sectionName must be specified when targetRefs includes 2 or more references")),
        case("honoured/telemetry-targetRef-gateway", "Telemetry",
            "targetRef: {kind: Gateway, group: gateway.networking.k8s.io, name: gw}\naccessLogging: [{}]", Ok),
        case("honoured/telemetry-targetRef-service", "Telemetry",
            "targetRef: {kind: Service, group: \"\", name: web}\naccessLogging: [{}]", Ok),
        case("honoured/telemetry-targetRef-serviceentry", "Telemetry",
            "targetRef: {kind: ServiceEntry, group: networking.istio.io, name: web}\naccessLogging: [{}]", Ok),
        case("honoured/telemetry-targetRef-gatewayclass", "Telemetry",
            "targetRef: {kind: GatewayClass, group: gateway.networking.k8s.io, name: istio-waypoint}\naccessLogging: [{}]", Ok),
    ]
}

#[test]
fn fields_rudder_does_not_honour_warn_and_every_entry_has_a_case() {
    let cases = unhonoured_fields();
    run(&cases);
    let mut missing = Vec::new();
    for u in rudder::validation::unhonoured::UNHONOURED {
        let covered = all_cases().iter().any(|c| {
            c.kind == u.kind.qualified_name()
                && through_loader(&yaml(c))
                    .1
                    .iter()
                    .any(|w| w.contains(u.note))
        });
        if !covered {
            missing.push(format!("{} {:?}", u.kind, u.path));
        }
    }
    assert!(missing.is_empty(), "entries no case triggers: {missing:?}");
}

#[test]
fn the_suite_is_several_hundred_cases() {
    let n = all_cases().len() + 1;
    assert!(n >= 300, "only {n} cases");
    println!("{n} cases");
}
