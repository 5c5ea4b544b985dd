//! Real Istio YAML (modelled on Istio's docs and samples) parses unchanged and passes validation.

use rudder::config::networking::{ClientTlsMode, Resolution};
use rudder::config::security::{AuthorizationAction, MtlsMode};
use rudder::config::{Kind, Spec, parse_yaml};
use rudder::validation::validate;
use std::collections::BTreeMap;

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/istio/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn parse_clean(name: &str) -> Vec<rudder::config::Config> {
    let parsed = parse_yaml(&fixture(name), "default");
    assert!(parsed.errors.is_empty(), "{name}: {:#?}", parsed.errors);
    for c in &parsed.configs {
        if let Err(errs) = validate(c) {
            panic!("{name}: {} failed validation: {errs:#?}", c.key());
        }
    }
    parsed.configs
}

#[test]
fn every_fixture_parses_and_validates() {
    let mut kinds = BTreeMap::new();
    for name in [
        "bookinfo-gateway.yaml",
        "destination-rule-all.yaml",
        "virtual-service-routing.yaml",
        "egress.yaml",
        "security.yaml",
        "extensions.yaml",
    ] {
        for c in parse_clean(name) {
            *kinds.entry(c.kind).or_insert(0) += 1;
        }
    }
    for kind in Kind::ISTIO {
        assert!(kinds.contains_key(&kind), "no fixture covers {kind}");
    }
}

#[test]
fn bookinfo_weights_subsets_and_faults_are_typed() {
    let configs = parse_clean("virtual-service-routing.yaml");
    let reviews = configs
        .iter()
        .find(|c| c.metadata.name == "reviews")
        .unwrap();
    assert_eq!(reviews.metadata.namespace, "default", "namespace defaults");
    let Spec::VirtualService(vs) = &reviews.spec else {
        panic!()
    };
    let weights: Vec<_> = vs.http[1].route.iter().map(|d| d.weight).collect();
    assert_eq!(weights, [50, 50]);
    assert_eq!(
        vs.http[1].route[1].destination.as_ref().unwrap().subset,
        "v3"
    );

    let ratings = configs
        .iter()
        .find(|c| c.metadata.name == "ratings")
        .unwrap();
    let Spec::VirtualService(vs) = &ratings.spec else {
        panic!()
    };
    let delay = vs.http[0].fault.as_ref().unwrap().delay.as_ref().unwrap();
    assert_eq!(
        delay.fixed_delay.unwrap().as_std(),
        std::time::Duration::from_secs(7)
    );
    assert_eq!(
        vs.http[1]
            .fault
            .as_ref()
            .unwrap()
            .abort
            .as_ref()
            .unwrap()
            .http_status,
        Some(500)
    );
    assert_eq!(vs.http[2].retries.as_ref().unwrap().attempts, 3);
}

#[test]
fn destination_rules_keep_every_served_version() {
    let configs = parse_clean("destination-rule-all.yaml");
    let versions: Vec<_> = configs.iter().map(|c| c.api_version.as_str()).collect();
    assert_eq!(
        versions,
        [
            "networking.istio.io/v1",
            "networking.istio.io/v1",
            "networking.istio.io/v1beta1",
            "networking.istio.io/v1alpha3"
        ]
    );
    let Spec::DestinationRule(dr) = &configs[2].spec else {
        panic!()
    };
    assert_eq!(
        dr.traffic_policy
            .as_ref()
            .unwrap()
            .tls
            .as_ref()
            .unwrap()
            .mode,
        ClientTlsMode::ISTIO_MUTUAL
    );
    let Spec::DestinationRule(details) = &configs[3].spec else {
        panic!()
    };
    let od = details
        .traffic_policy
        .as_ref()
        .unwrap()
        .outlier_detection
        .as_ref()
        .unwrap();
    assert_eq!(od.consecutive_5xx_errors, Some(7));
    assert_eq!(
        od.base_ejection_time.unwrap().as_std().as_secs(),
        900,
        "Go-style 15m"
    );
}

#[test]
fn security_kinds_are_typed() {
    let configs = parse_clean("security.yaml");
    let Spec::PeerAuthentication(pa) = &configs[1].spec else {
        panic!()
    };
    assert_eq!(
        pa.port_level_mtls.as_ref().unwrap()["8080"].mode,
        MtlsMode::DISABLE
    );
    let Spec::AuthorizationPolicy(deny) = &configs[3].spec else {
        panic!()
    };
    assert_eq!(deny.action, AuthorizationAction::DENY);
    let Spec::AuthorizationPolicy(nothing) = &configs[4].spec else {
        panic!()
    };
    assert!(nothing.rules.is_none(), "allow-nothing keeps no rules");
}

#[test]
fn service_entries_and_envoy_filter_values() {
    let configs = parse_clean("egress.yaml");
    let Spec::ServiceEntry(se) = &configs[1].spec else {
        panic!()
    };
    assert_eq!(se.resolution, Resolution::STATIC);
    assert_eq!(se.endpoints.len(), 2);
    let ef = configs
        .iter()
        .find(|c| c.kind == Kind::EnvoyFilter)
        .unwrap();
    let Spec::EnvoyFilter(ef) = &ef.spec else {
        panic!()
    };
    let value = ef.config_patches[0]
        .patch
        .as_ref()
        .unwrap()
        .value
        .as_ref()
        .unwrap();
    assert_eq!(
        value["typed_config"]["stat_prefix"], "mongo",
        "Struct values are kept verbatim"
    );
}

#[test]
fn parsed_objects_serialize_back_to_istio_json() {
    let configs = parse_clean("virtual-service-routing.yaml");
    let json = serde_json::to_value(&configs[0]).unwrap();
    assert_eq!(json["apiVersion"], "networking.istio.io/v1");
    assert_eq!(json["kind"], "VirtualService");
    assert_eq!(
        json["spec"]["http"][0]["match"][0]["headers"]["end-user"]["exact"],
        "jason"
    );
    let back = parse_yaml(&serde_json::to_string(&json).unwrap(), "default");
    assert!(back.errors.is_empty(), "{:?}", back.errors);
    assert_eq!(
        back.configs[0], configs[0],
        "JSON output parses back to the same object"
    );
}

#[test]
fn multi_document_lists_and_foreign_kinds() {
    let text = r#"
apiVersion: v1
kind: List
items:
- apiVersion: networking.istio.io/v1
  kind: ServiceEntry
  metadata: {name: a, namespace: x}
  spec: {hosts: [a.example.com], ports: [{number: 80, name: http, protocol: HTTP}], resolution: DNS}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web}
---
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: b}
spec: {host: b}
"#;
    let parsed = parse_yaml(text, "ns1");
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    assert_eq!(parsed.configs.len(), 2);
    assert_eq!(parsed.configs[1].metadata.namespace, "ns1");
    assert_eq!(parsed.skipped.len(), 1);
    assert_eq!(parsed.skipped[0].kind, "Deployment");
}

#[test]
fn structural_errors_name_the_field() {
    let cases = [
        (
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: r}\nspec: {hosts: [r], htp: []}\n",
            "VirtualService default/r: spec.htp: unknown field `htp`",
        ),
        (
            "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: r}\nspec: {host: r, trafficPolicy: {tls: {mode: BOGUS}}}\n",
            "spec.trafficPolicy.tls.mode: unknown variant `BOGUS`",
        ),
        (
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: r}\nspec: {hosts: [r], http: [{timeout: 10}]}\n",
            "spec.http[0].timeout",
        ),
        (
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: r}\nspec: {hosts: [r], http: [{timeout: 10parsecs}]}\n",
            "unknown unit \"parsecs\"",
        ),
        (
            "apiVersion: networking.istio.io/v2\nkind: VirtualService\nmetadata: {name: r}\nspec: {}\n",
            "networking.istio.io/v2 is not served for VirtualService",
        ),
        (
            "apiVersion: networking.istio.io/v1\nkind: EnvoyFilter\nmetadata: {name: r}\nspec: {}\n",
            "is not served for EnvoyFilter; use one of networking.istio.io/v1alpha3",
        ),
        // The Gateway API's CRDs serve ListenerSet as v1 only.
        (
            "apiVersion: gateway.networking.k8s.io/v1alpha3\nkind: ListenerSet\nmetadata: {name: l}\nspec: {parentRef: {name: g}, listeners: []}\n",
            "is not served for ListenerSet; use one of gateway.networking.k8s.io/v1",
        ),
        (
            "apiVersion: networking.istio.io/v1\nkind: VirtualServce\nmetadata: {name: r}\n",
            "unknown Istio kind \"VirtualServce\"",
        ),
        (
            "apiVersion: networking.istio.io/v1\nkind: Gateway\nspec: {}\n",
            "metadata.name: name is required",
        ),
        (
            "kind: Gateway\nmetadata: {name: g}\n",
            "document 1: apiVersion is required",
        ),
        ("- just\n- a list\n", "expected a Kubernetes object"),
        ("key: [unclosed\n", "invalid YAML"),
        (
            "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: g}\nspecs: {}\n",
            "unknown field \"specs\"",
        ),
    ];
    for (yaml, want) in cases {
        let parsed = parse_yaml(yaml, "default");
        let msgs: Vec<String> = parsed.errors.iter().map(|e| e.to_string()).collect();
        assert!(
            msgs.iter().any(|m| m.contains(want)),
            "want {want:?} in {msgs:?} for\n{yaml}"
        );
        assert!(parsed.configs.is_empty());
    }
}

/// Generated config directories hold thousands of objects in one file.
#[test]
fn large_multi_document_files_parse() {
    let one = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: svc-@, namespace: ns}\nspec: {hosts: [svc@.example.com], ports: [{number: 80, name: http, protocol: HTTP}], resolution: DNS}\n";
    let text: String = (0..5000)
        .map(|i| format!("---\n{}", one.replace('@', &i.to_string())))
        .collect();
    let parsed = parse_yaml(&text, "default");
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors.first());
    assert_eq!(parsed.configs.len(), 5000);
}

/// The YAML limits that stop alias-expansion bombs are still in force.
#[test]
fn alias_expansion_bombs_are_refused() {
    let mut text = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 0..12 {
        let prev = if i == 0 {
            "a".to_string()
        } else {
            format!("l{}", i - 1)
        };
        text.push_str(&format!("l{i}: &l{i} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
    }
    let parsed = parse_yaml(&text, "default");
    assert!(
        matches!(
            parsed.errors.first(),
            Some(rudder::config::ConfigError::Syntax(_))
        ),
        "{:?}",
        parsed.errors
    );
}
