//! SDS and stream authentication against the fake API server (and a real one with KUBECONFIG): a
//! gateway authenticated on the TLS port gets its namespace's `credentialName` secrets, its workload
//! certificate for its own identity and the root; a gateway of another namespace, a node claiming
//! another namespace than its token's, a plaintext stream and a forged token get nothing.

use crate::common;
use crate::common::ads::Delta;
use crate::common::ca::channel;
use crate::common::cluster::Cluster;
use crate::common::{eventually, http_get};
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{Secret, secret};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse,
};
use prost::Message;
use serde_json::json;

const SDS: &str = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";
const DOMAIN: &str = "istiod.istio-system.svc";

fn ask(ns: &str, names: &[&str]) -> DeltaDiscoveryRequest {
    DeltaDiscoveryRequest {
        node: Some(Node {
            id: format!("router~10.0.0.7~gw-1.{ns}~{ns}.svc.cluster.local"),
            ..Default::default()
        }),
        type_url: SDS.into(),
        resource_names_subscribe: names.iter().map(|n| n.to_string()).collect(),
        ..Default::default()
    }
}

fn secrets(resp: &DeltaDiscoveryResponse) -> Vec<Secret> {
    resp.resources
        .iter()
        .filter_map(|r| r.resource.as_ref())
        .map(|a| Secret::decode(a.value.as_slice()).expect("secret"))
        .collect()
}

fn inline(ds: &Option<envoy_types::pb::envoy::config::core::v3::DataSource>) -> String {
    use envoy_types::pb::envoy::config::core::v3::data_source::Specifier;
    match ds.as_ref().and_then(|d| d.specifier.as_ref()) {
        Some(Specifier::InlineString(s)) => s.clone(),
        // istiod's SDS sends certificates and keys as inline bytes.
        Some(Specifier::InlineBytes(b)) => String::from_utf8(b.clone()).expect("PEM text"),
        other => panic!("expected inline data, got {other:?}"),
    }
}

#[test]
fn gateway_secrets_are_served_only_to_their_namespace() {
    for c in Cluster::all("sds") {
        let ns = c.ns.clone();
        let other = format!("{ns}-other");
        c.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}}));
        let (cert, key) = (
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
            "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n",
        );
        use base64::Engine;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        c.apply(
            json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": "gw-cert", "namespace": ns},
            "data": {"tls.crt": b64(cert), "tls.key": b64(key), "ca.crt": b64(cert)}}),
        );
        c.grant_secret_list(&ns, "gateway");
        c.refuse_secret_list(&ns, "unprivileged");
        let daemon = c.rudder(&[]);
        eventually(60, "rudder ready", || {
            http_get(daemon.addr("http"), "/ready").0 == 200
        });
        let root = c.ca_root();
        let own = c.token_in(&ns, "gateway");
        let foreign = c.token_in(&other, "gateway");
        let unprivileged = c.token_in(&ns, "unprivileged");
        c.rt.block_on(async {
            let tls = channel(daemon.addr("grpc-xds-tls"), &root, DOMAIN, None)
                .await
                .unwrap();
            let auth = format!("Bearer {own}");
            let names = [
                "kubernetes://gw-cert",
                "kubernetes://gw-cert-cacert",
                "default",
                "ROOTCA",
            ];
            let mut gw = Delta::open_on(
                tls.clone(),
                ask(&ns, &names),
                &[("authorization", auth.as_str())],
            )
            .await
            .unwrap();
            let resp = gw.recv().await;
            let got = secrets(&resp);
            let by_name = |n: &str| got.iter().find(|s| s.name == n).cloned();
            match by_name("kubernetes://gw-cert").and_then(|s| s.r#type) {
                Some(secret::Type::TlsCertificate(t)) => {
                    assert_eq!(inline(&t.certificate_chain), cert);
                    assert_eq!(inline(&t.private_key), key);
                }
                other => panic!("gw-cert: {other:?}"),
            }
            assert!(matches!(
                by_name("kubernetes://gw-cert-cacert").and_then(|s| s.r#type),
                Some(secret::Type::ValidationContext(_))
            ));
            match by_name("default").and_then(|s| s.r#type) {
                Some(secret::Type::TlsCertificate(t)) => {
                    let chain = inline(&t.certificate_chain);
                    let der = pem::parse(&chain).unwrap();
                    let (_, x) = x509_parser::parse_x509_certificate(der.contents()).unwrap();
                    let san = format!("{:?}", x.subject_alternative_name().unwrap().unwrap());
                    assert!(
                        san.contains(&format!("spiffe://cluster.local/ns/{ns}/sa/gateway")),
                        "the workload certificate names the stream's identity: {san}"
                    );
                }
                other => panic!("default: {other:?}"),
            }
            match by_name("ROOTCA").and_then(|s| s.r#type) {
                Some(secret::Type::ValidationContext(v)) => {
                    assert_eq!(inline(&v.trusted_ca), root)
                }
                other => panic!("ROOTCA: {other:?}"),
            }
            gw.ack(&resp).await;

            // A gateway of another namespace gets the root, not the secret.
            let auth = format!("Bearer {foreign}");
            let wanted = format!("kubernetes://{ns}/gw-cert");
            let mut intruder = Delta::open_on(
                tls.clone(),
                ask(&other, &[&wanted, "ROOTCA"]),
                &[("authorization", auth.as_str())],
            )
            .await
            .unwrap();
            let resp = intruder.recv().await;
            let names: Vec<String> = secrets(&resp).into_iter().map(|s| s.name).collect();
            assert_eq!(names, ["ROOTCA"]);
            assert_eq!(resp.removed_resources, std::slice::from_ref(&wanted));
            assert!(
                common::metric(
                    &daemon,
                    "rudder_xds_errors_total{reason=\"secret_unavailable\"}"
                ) >= 1.0,
                "a refused secret is counted"
            );

            // A gateway whose service account may not list its namespace's secrets (no RBAC)
            // gets the CA certificate, which is public, but not the key (istiod's
            // SubjectAccessReview).
            let auth = format!("Bearer {unprivileged}");
            let mut unprivileged_gw = Delta::open_on(
                tls.clone(),
                ask(
                    &ns,
                    &[
                        "kubernetes://gw-cert",
                        "kubernetes://gw-cert-cacert",
                        "ROOTCA",
                    ],
                ),
                &[("authorization", auth.as_str())],
            )
            .await
            .unwrap();
            let resp = unprivileged_gw.recv().await;
            let mut names: Vec<String> = secrets(&resp).into_iter().map(|s| s.name).collect();
            names.sort();
            assert_eq!(names, ["ROOTCA", "kubernetes://gw-cert-cacert"]);
            assert_eq!(resp.removed_resources, ["kubernetes://gw-cert"]);

            // A token of one namespace cannot speak for a node of another (istiod's identity check).
            let auth = format!("Bearer {own}");
            let claimed = Delta::open_on(
                tls.clone(),
                ask(&other, &["ROOTCA"]),
                &[("authorization", auth.as_str())],
            )
            .await;
            let err = match claimed {
                Ok(mut d) => d.rx.message().await.expect_err("refused"),
                Err(e) => e,
            };
            assert_eq!(err.code(), tonic::Code::PermissionDenied, "{err:?}");
            assert!(
                common::metric(
                    &daemon,
                    "rudder_xds_errors_total{reason=\"identity_mismatch\"}"
                ) >= 1.0,
                "a refused stream is counted"
            );

            // No identity, no workload certificate: plaintext port.
            let mut plain =
                Delta::open(daemon.addr("grpc-xds"), ask(&ns, &["default", "ROOTCA"])).await;
            let resp = plain.recv().await;
            let names: Vec<String> = secrets(&resp).into_iter().map(|s| s.name).collect();
            assert_eq!(names, ["ROOTCA"]);

            // A token TokenReview rejects closes the stream with UNAUTHENTICATED.
            let refused = Delta::open_on(
                tls,
                ask(&ns, &["default"]),
                &[("authorization", "Bearer forged")],
            )
            .await;
            let err = match refused {
                Ok(mut d) => d.rx.message().await.expect_err("refused"),
                Err(e) => e,
            };
            assert_eq!(err.code(), tonic::Code::Unauthenticated, "{err:?}");

            // The secret is rotated: the gateway gets the new version.
            let rotated = cert.replace("MIIB", "MIIC");
            c.put(
                json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": {"name": "gw-cert", "namespace": ns},
                "data": {"tls.crt": b64(&rotated), "tls.key": b64(key), "ca.crt": b64(cert)}}),
            )
            .await;
            let update = gw.recv().await;
            let got = secrets(&update);
            assert_eq!(got.len(), 1, "only the rotated secret is resent");
            match &got[0].r#type {
                Some(secret::Type::TlsCertificate(t)) => {
                    assert_eq!(inline(&t.certificate_chain), rotated)
                }
                other => panic!("{other:?}"),
            }
        });
        // A Secret change is an SDS-only push: proxies that did not ask for secrets are not woken.
        assert!(
            common::metric(&daemon, "pilot_push_triggers{type=\"secret\"}") >= 1.0,
            "secret changes are their own kind of push"
        );
        c.delete(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}}));
    }
}

/// A pod on `node` running as `ns/sa` (the API server sets the UID; the fake takes the one given).
fn pod_on(ns: &str, name: &str, sa: &str, node: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{ns}-{name}")},
        "spec": {"serviceAccountName": sa, "nodeName": node,
                 "containers": [{"name": "app", "image": "registry.example/app:1"}]}})
}

/// Node-mode ztunnel (istiod's node authorizer): the ztunnel of node A, with a token bound to its
/// pod, gets the certificate of a service account that runs on node A, and nothing for one that
/// runs only on node B; a workload that is not a node agent cannot impersonate at all.
#[test]
fn node_agents_get_certificates_only_for_pods_on_their_node() {
    use common::ca::{create_as, csr};
    for c in Cluster::all("nodeauth") {
        let ns = c.ns.clone();
        let apps = format!("{ns}-apps");
        c.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": apps}}));
        // A real API server admits pods only for service accounts that exist.
        if c.fake.is_none() {
            for (n, sa) in [(&ns, "ztunnel"), (&apps, "cart"), (&apps, "pay")] {
                c.apply(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                    "metadata": {"name": sa, "namespace": n}}));
            }
        }
        c.apply(pod_on(&ns, "ztunnel-a", "ztunnel", "node-a"));
        c.apply(pod_on(&apps, "cart-1", "cart", "node-a"));
        c.apply(pod_on(&apps, "pay-1", "pay", "node-b"));
        let daemon = c.rudder(&[]);
        eventually(60, "rudder ready", || {
            http_get(daemon.addr("http"), "/ready").0 == 200
        });
        let root = c.ca_root();
        let ztunnel = c.pod_token(&ns, "ztunnel", "ztunnel-a");
        let cart = format!("spiffe://cluster.local/ns/{apps}/sa/cart");
        let pay = format!("spiffe://cluster.local/ns/{apps}/sa/pay");
        let rt = tokio::runtime::Runtime::new().unwrap();
        let ask = |token: &str, id: &str| {
            rt.block_on(async {
                let ch = channel(daemon.addr("grpc-xds-tls"), &root, DOMAIN, None)
                    .await
                    .unwrap();
                create_as(ch, &csr(&[id]).0, Some(token), 3600, Some(id)).await
            })
        };
        // The pod view reaches the daemon through its watch: allow it a moment.
        let mut chain = Err(tonic::Status::unknown("not yet"));
        eventually(30, "the node agent gets its node's identity", || {
            chain = ask(&ztunnel, &cart);
            chain.is_ok()
        });
        let leaf = chain.unwrap()[0].clone();
        let der = pem::parse(&leaf).unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(der.contents()).unwrap();
        let san = cert.subject_alternative_name().unwrap().unwrap();
        assert!(
            format!("{:?}", san.value).contains(&cart),
            "{:?}",
            san.value
        );

        let refused = ask(&ztunnel, &pay).unwrap_err();
        assert_eq!(
            refused.code(),
            tonic::Code::Unauthenticated,
            "pay runs on node B"
        );
        let cart_token = c.token_in(&apps, "cart");
        let refused = ask(&cart_token, &pay).unwrap_err();
        assert_eq!(
            refused.code(),
            tonic::Code::Unauthenticated,
            "a workload is no node agent"
        );
    }
}

/// A self-signed root (Secret `istio-ca-secret`) entering the last fifth of its life is renewed
/// as istiod renews it: same key and subject, new validity, written back into the Secret. A
/// proxy already connected gets the new root over SDS (`ROOTCA`) and a workload certificate
/// whose chain ends at it; the root ConfigMaps follow; the old root keeps verifying.
#[test]
fn a_self_signed_root_near_its_end_is_renewed_and_pushed() {
    for c in Cluster::all("rootrotate") {
        let ns = c.ns.clone();
        c.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
        // Ten days of life; the last fifth (two days) starts 30 s from now: time enough for the
        // daemon to start and the proxy to connect first, even on a loaded machine.
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "cluster.local");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let now = time::OffsetDateTime::now_utc();
        let grace_starts = now + time::Duration::seconds(30);
        params.not_after = grace_starts + time::Duration::days(2);
        params.not_before = params.not_after - time::Duration::days(10);
        let old_root = params.self_signed(&key).unwrap().pem();
        use base64::Engine;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        c.apply(
            json!({"apiVersion": "v1", "kind": "Secret", "type": "istio.io/ca-root",
            "metadata": {"name": "istio-ca-secret", "namespace": ns},
            "data": {"ca-cert.pem": b64(&old_root), "ca-key.pem": b64(&key.serialize_pem()),
                     "cert-chain.pem": "", "root-cert.pem": ""}}),
        );
        let daemon = c.rudder(&["--self-signed-root-check-interval", "1s"]);
        eventually(60, "rudder ready", || {
            http_get(daemon.addr("http"), "/ready").0 == 200
        });
        assert_eq!(
            c.ca_root().trim(),
            old_root.trim(),
            "the persisted root is used"
        );
        let token = c.token_in(&ns, "gateway");
        let pushed_root = c.rt.block_on(async {
            let tls = channel(daemon.addr("grpc-xds-tls"), &old_root, DOMAIN, None)
                .await
                .unwrap();
            let auth = format!("Bearer {token}");
            let mut gw = Delta::open_on(
                tls,
                ask(&ns, &["default", "ROOTCA"]),
                &[("authorization", auth.as_str())],
            )
            .await
            .unwrap();
            let first = gw.recv().await;
            let root_of = |resp: &DeltaDiscoveryResponse| {
                secrets(resp)
                    .iter()
                    .find(|s| s.name == "ROOTCA")
                    .and_then(|s| match &s.r#type {
                        Some(secret::Type::ValidationContext(v)) => Some(inline(&v.trusted_ca)),
                        _ => None,
                    })
            };
            assert_eq!(
                root_of(&first).as_deref().map(str::trim),
                Some(old_root.trim()),
                "before the grace period"
            );
            gw.ack(&first).await;
            // The push that follows the rotation.
            let pushed = tokio::time::timeout(std::time::Duration::from_secs(60), gw.rx.message())
                .await
                .expect("a push after the rotation")
                .expect("stream open")
                .expect("a response");
            let root = root_of(&pushed).expect("ROOTCA pushed");
            let chain = secrets(&pushed)
                .iter()
                .find(|s| s.name == "default")
                .and_then(|s| match &s.r#type {
                    Some(secret::Type::TlsCertificate(t)) => Some(inline(&t.certificate_chain)),
                    _ => None,
                })
                .expect("a new workload chain");
            assert!(
                chain.trim_end().ends_with(root.trim()),
                "the chain ends at the new root"
            );
            root
        });
        assert_ne!(pushed_root.trim(), old_root.trim(), "a new root");
        assert_eq!(
            c.ca_root().trim(),
            pushed_root.trim(),
            "written to the Secret"
        );
        let parse = |text: &str| pem::parse(text).unwrap().into_contents();
        let (new_der, old_der) = (parse(&pushed_root), parse(&old_root));
        let (_, new) = x509_parser::parse_x509_certificate(&new_der).unwrap();
        let (_, old) = x509_parser::parse_x509_certificate(&old_der).unwrap();
        assert_eq!(new.subject(), old.subject());
        assert_eq!(new.public_key().raw, old.public_key().raw, "same key");
        assert!(new.validity().not_after > old.validity().not_after);
        eventually(20, "root ConfigMap follows", || {
            c.get_json(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "istio-ca-root-cert", "namespace": ns}}))
                .is_some_and(|cm| cm["data"]["root-cert.pem"] == pushed_root.as_str())
        });
        assert_eq!(
            common::metric(&daemon, "rudder_ca_root_rotations_total"),
            1.0
        );
        assert_eq!(
            common::metric(&daemon, "citadel_server_root_cert_expiry_timestamp"),
            new.validity().not_after.timestamp() as f64
        );
    }
}

const ECDS: &str = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig";

/// The registry credential in a served Wasm filter's VM environment (istio-agent's variable).
fn pull_credential(resp: &DeltaDiscoveryResponse) -> Option<String> {
    use envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig;
    use envoy_types::pb::envoy::extensions::filters::http::wasm::v3::Wasm;
    use envoy_types::pb::envoy::extensions::wasm::v3::plugin_config::Vm;
    let any = resp.resources.first()?.resource.as_ref()?;
    let typed = TypedExtensionConfig::decode(any.value.as_slice()).ok()?;
    let wasm = Wasm::decode(typed.typed_config?.value.as_slice()).ok()?;
    let Some(Vm::VmConfig(vm)) = wasm.config?.vm else {
        return None;
    };
    vm.environment_variables?
        .key_values
        .get("ISTIO_META_WASM_IMAGE_PULL_SECRET")
        .cloned()
}

/// A WasmPlugin's `imagePullSecret`, as istiod serves it: the proxy that authenticated on the
/// TLS port gets the Docker config of the Secret in the plugin's namespace over ECDS (for
/// istio-agent's registry pull), a plaintext stream an empty one, and a rotated Secret reaches
/// the subscribed proxy.
#[test]
fn wasm_pull_secrets_reach_authenticated_proxies_only() {
    use base64::Engine;
    for c in Cluster::all("wasm-pull") {
        let ns = c.ns.clone();
        let mut wasm_crd =
            common::cluster::istio_crd("extensions.istio.io", "wasmplugins", "WasmPlugin");
        wasm_crd["spec"]["versions"] =
            json!([{"name": "v1alpha1", "served": true, "storage": true}]);
        if !crate::kubernetes::crds_installed(&c, [wasm_crd]) {
            continue;
        }
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let registry_secret = |config: &str| {
            json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
                "metadata": {"name": "registry", "namespace": ns},
                "data": {".dockerconfigjson": b64(config)}})
        };
        let first = r#"{"auths":{"registry.example.com":{"auth":"dXNlcjpvbmU="}}}"#;
        c.apply(registry_secret(first));
        c.apply(
            json!({"apiVersion": "extensions.istio.io/v1alpha1", "kind": "WasmPlugin",
            "metadata": {"name": "auth", "namespace": ns},
            "spec": {"url": "oci://registry.example.com/auth:1", "imagePullSecret": "registry"}}),
        );
        let daemon = c.rudder(&[]);
        eventually(60, "rudder ready", || {
            http_get(daemon.addr("http"), "/ready").0 == 200
        });
        let root = c.ca_root();
        let token = c.token_in(&ns, "app");
        let name =
            format!("extensions.istio.io/trafficextension/{ns}.auth~istio-translated-wasmplugin");
        let request = DeltaDiscoveryRequest {
            node: Some(Node {
                id: format!("sidecar~10.0.0.8~app-1.{ns}~{ns}.svc.cluster.local"),
                ..Default::default()
            }),
            type_url: ECDS.into(),
            resource_names_subscribe: vec![name.clone()],
            ..Default::default()
        };
        c.rt.block_on(async {
            let tls = channel(daemon.addr("grpc-xds-tls"), &root, DOMAIN, None)
                .await
                .unwrap();
            let auth = format!("Bearer {token}");
            let mut proxy = None;
            // The WasmPlugin reaches the daemon's view shortly after it is ready.
            for _ in 0..50 {
                let mut s = Delta::open_on(
                    tls.clone(),
                    request.clone(),
                    &[("authorization", auth.as_str())],
                )
                .await
                .unwrap();
                let resp = s.recv().await;
                if !resp.resources.is_empty() {
                    s.ack(&resp).await;
                    proxy = Some((s, resp));
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            let (mut proxy, resp) = proxy.expect("the plugin is served");
            assert_eq!(pull_credential(&resp).as_deref(), Some(first));

            let mut plain = Delta::open(daemon.addr("grpc-xds"), request.clone()).await;
            let resp = plain.recv().await;
            assert_eq!(pull_credential(&resp).as_deref(), Some(""));

            let second = r#"{"auths":{"registry.example.com":{"auth":"dXNlcjp0d28="}}}"#;
            c.put(registry_secret(second)).await;
            // (A push already under way when the Secret changed may resend the first.)
            let mut seen = Vec::new();
            while seen.len() < 5 {
                let update = proxy.recv().await;
                proxy.ack(&update).await;
                seen.push(pull_credential(&update));
                if seen.last().cloned().flatten().as_deref() == Some(second) {
                    break;
                }
            }
            assert_eq!(
                seen.last().cloned().flatten().as_deref(),
                Some(second),
                "{seen:?}"
            );
        });
    }
}
