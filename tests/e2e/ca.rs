//! The CA on the TLS port, files mode: certificates a real TLS stack accepts, and clear refusals.

use crate::common::ca::{channel, create, csr, openssl_verify};
use crate::common::peers::{Envoy, peer};
use crate::common::{Daemon, eventually, http_get};
use std::sync::Arc;

const TOKEN: &str = "token-of-foo-bar";
const ID: &str = "spiffe://cluster.local/ns/foo/sa/bar";
const DOMAIN: &str = "istiod.istio-system.svc";

fn start() -> (tempfile::TempDir, Daemon, String) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cfg");
    std::fs::create_dir(&cfg).unwrap();
    let tokens = dir.path().join("tokens.yaml");
    std::fs::write(&tokens, format!("{TOKEN}: foo/bar\nother-token: foo/baz\n")).unwrap();
    let daemon = Daemon::start(
        &cfg,
        &[
            "--ca-token-file",
            tokens.to_str().unwrap(),
            "--max-workload-cert-ttl",
            "48h",
        ],
    );
    eventually(30, "ready", || {
        http_get(daemon.addr("http"), "/ready").0 == 200
    });
    let root = std::fs::read_to_string(daemon.ca_dir.path().join("root-cert.pem")).unwrap();
    (dir, daemon, root)
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn issues_chains_that_openssl_verifies_with_the_callers_identity() {
    let (dir, daemon, root) = start();
    let rt = rt();
    let chain = rt.block_on(async {
        let ch = channel(daemon.addr("grpc-xds-tls"), &root, DOMAIN, None)
            .await
            .expect("serving cert valid for istiod DNS name");
        create(ch, &csr(&[ID]).0, Some(TOKEN), 0).await.unwrap()
    });
    assert_eq!(chain.len(), 2, "leaf, root");
    assert_eq!(chain[1].trim(), root.trim(), "root last");
    let (ok, out) = openssl_verify(dir.path(), &chain);
    assert!(ok, "openssl verify: {out}");
    let text = std::process::Command::new("openssl")
        .args(["x509", "-noout", "-text", "-in"])
        .arg(dir.path().join("leaf.pem"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("URI:spiffe://cluster.local/ns/foo/sa/bar"),
        "{text}"
    );
    // The serving cert is valid for 127.0.0.1 too (local use).
    rt.block_on(async {
        channel(daemon.addr("grpc-xds-tls"), &root, "127.0.0.1", None)
            .await
            .expect("IP SAN 127.0.0.1")
    });
    let m = http_get(daemon.addr("monitoring"), "/metrics").1;
    assert!(
        m.contains("citadel_server_csr_count 1")
            && m.contains("citadel_server_success_cert_issuance_count 1"),
        "{m}"
    );
    // Expiry gauges as istiod exports them: the generated root lives ten years.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    for gauge in [
        "citadel_server_root_cert_expiry_timestamp",
        "citadel_server_cert_chain_expiry_timestamp",
    ] {
        let value: i64 = m
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{gauge} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{gauge} missing: {m}"));
        assert!(value > now + 9 * 365 * 86400, "{gauge} = {value}");
    }
}

#[test]
fn refusals_are_clear_and_sign_nothing() {
    let (_dir, daemon, root) = start();
    rt().block_on(async {
        let ch = channel(daemon.addr("grpc-xds-tls"), &root, DOMAIN, None).await.unwrap();
        let cases: Vec<(String, Option<&str>, tonic::Code, &str)> = vec![
            (csr(&["spiffe://cluster.local/ns/foo/sa/admin"]).0, Some(TOKEN), tonic::Code::PermissionDenied, "does not match the caller's identity"),
            ("-----BEGIN CERTIFICATE REQUEST-----\nZ2FyYmFnZQ==\n-----END CERTIFICATE REQUEST-----\n".into(), Some(TOKEN), tonic::Code::InvalidArgument, "invalid CSR"),
            ("not even pem".into(), Some(TOKEN), tonic::Code::InvalidArgument, "invalid CSR"),
            (csr(&[ID]).0, Some("stolen-token"), tonic::Code::Unauthenticated, "unknown token"),
            (csr(&[ID]).0, None, tonic::Code::Unauthenticated, "no credentials"),
        ];
        for (csr_pem, token, code, text) in cases {
            let err = create(ch.clone(), &csr_pem, token, 0).await.expect_err("refused");
            assert_eq!(err.code(), code, "{err:?}");
            assert!(err.message().contains(text), "{err:?}");
        }
        let huge = "A".repeat(200 * 1024);
        let err = create(ch.clone(), &huge, Some(TOKEN), 0).await.expect_err("oversize refused");
        assert!(matches!(err.code(), tonic::Code::OutOfRange | tonic::Code::ResourceExhausted), "{err:?}");
        // Still serving after all that.
        assert!(create(ch, &csr(&[ID]).0, Some(TOKEN), 0).await.is_ok());
    });
    let m = http_get(daemon.addr("monitoring"), "/metrics").1;
    assert!(
        m.contains("citadel_server_success_cert_issuance_count 1"),
        "only the last request was signed: {m}"
    );
    assert!(
        m.contains("citadel_server_csr_errors{reason=\"identity\"} 1")
            && m.contains("citadel_server_id_extraction_err_count 1"),
        "{m}"
    );
}

#[test]
fn ttl_is_capped_and_renewal_works_with_the_client_certificate() {
    let (dir, daemon, root) = start();
    rt().block_on(async {
        let ch = channel(daemon.addr("grpc-xds-tls"), &root, DOMAIN, None)
            .await
            .unwrap();
        let (csr_pem, key) = csr(&[ID]);
        let chain = create(ch, &csr_pem, Some(TOKEN), 30 * 86400).await.unwrap();
        std::fs::write(dir.path().join("capped.pem"), &chain[0]).unwrap();
        let out = std::process::Command::new("openssl")
            .args(["x509", "-noout", "-checkend"])
            .arg((49 * 3600).to_string())
            .arg("-in")
            .arg(dir.path().join("capped.pem"))
            .output()
            .unwrap();
        assert!(
            !out.status.success(),
            "30 days requested, 48h granted: the cert must end within 49h"
        );
        // Renewal: no token, authenticated by the certificate just issued.
        let mtls = channel(
            daemon.addr("grpc-xds-tls"),
            &root,
            DOMAIN,
            Some((&chain.join(""), &key)),
        )
        .await
        .unwrap();
        let renewed = create(mtls, &csr(&[ID]).0, None, 0)
            .await
            .expect("client certificate authenticates");
        assert_ne!(renewed[0], chain[0]);
    });
}

/// Two workloads' certificates from our CA establish mutual TLS through rustls/webpki; a certificate
/// from elsewhere does not.
#[test]
fn issued_certificates_work_for_mutual_tls() {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    let (_dir, daemon, root) = start();
    let rt = rt();
    let issue = |token: &str, id: &str| {
        rt.block_on(async {
            let ch = channel(daemon.addr("grpc-xds-tls"), &root, DOMAIN, None)
                .await
                .unwrap();
            let (c, key) = csr(&[id]);
            (create(ch, &c, Some(token), 0).await.unwrap(), key)
        })
    };
    let (server_chain, server_key) = issue(TOKEN, ID);
    let (client_chain, client_key) = issue("other-token", "spiffe://cluster.local/ns/foo/sa/baz");
    let certs = |chain: &[String]| -> Vec<CertificateDer<'static>> {
        chain[..chain.len() - 1]
            .iter()
            .map(|p| CertificateDer::from(pem::parse(p).unwrap().contents().to_vec()))
            .collect()
    };
    let key =
        |k: &str| PrivateKeyDer::try_from(pem::parse(k).unwrap().contents().to_vec()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(
            pem::parse(&root).unwrap().contents().to_vec(),
        ))
        .unwrap();
    let roots = Arc::new(roots);
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        roots.clone(),
        provider.clone(),
    )
    .build()
    .unwrap();
    let server_cfg = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs(&server_chain), key(&server_key))
        .unwrap();
    let client_cfg = |chain: Vec<CertificateDer<'static>>, k: PrivateKeyDer<'static>| {
        // SPIFFE certs carry no DNS names: verify the chain, and the identity separately.
        rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(SpiffeVerifier(
                rustls::client::WebPkiServerVerifier::builder_with_provider(
                    roots.clone(),
                    provider.clone(),
                )
                .build()
                .unwrap(),
            )))
            .with_client_auth_cert(chain, k)
            .unwrap()
    };
    let handshake = |client: rustls::ClientConfig| -> Result<Vec<CertificateDer<'static>>, String> {
        let mut s = rustls::ServerConnection::new(Arc::new(server_cfg.clone())).unwrap();
        let mut c = rustls::ClientConnection::new(
            Arc::new(client),
            ServerName::try_from("workload").unwrap(),
        )
        .unwrap();
        for _ in 0..10 {
            let mut buf = Vec::new();
            c.write_tls(&mut buf).unwrap();
            s.read_tls(&mut buf.as_slice()).unwrap();
            s.process_new_packets().map_err(|e| e.to_string())?;
            let mut buf = Vec::new();
            s.write_tls(&mut buf).unwrap();
            c.read_tls(&mut buf.as_slice()).unwrap();
            c.process_new_packets().map_err(|e| e.to_string())?;
            if !c.is_handshaking() && !s.is_handshaking() {
                return Ok(s.peer_certificates().unwrap().to_vec());
            }
        }
        Err("handshake did not finish".into())
    };
    let peer = handshake(client_cfg(certs(&client_chain), key(&client_key)))
        .expect("mutual TLS with our certificates");
    assert_eq!(
        rudder::ca::auth::from_client_cert(&peer[0]).unwrap().uri(),
        "spiffe://cluster.local/ns/foo/sa/baz"
    );
    // A certificate from another CA is refused by the server.
    let (other_cert, other_key) = rudder::ca::Authority::generate_root("evil.example").unwrap();
    let stranger = client_cfg(
        vec![CertificateDer::from(
            pem::parse(&other_cert).unwrap().contents().to_vec(),
        )],
        key(&other_key),
    );
    assert!(
        handshake(stranger).is_err(),
        "a foreign certificate must not be accepted"
    );
}

/// Verifies the server chain against our root, ignoring the (absent) DNS name, as Istio's SPIFFE
/// validation does; the SPIFFE identity is checked by the caller.
#[derive(Debug)]
struct SpiffeVerifier(Arc<rustls::client::WebPkiServerVerifier>);

impl rustls::client::danger::ServerCertVerifier for SpiffeVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        intermediates: &[rustls::pki_types::CertificateDer<'_>],
        server_name: &rustls::pki_types::ServerName<'_>,
        ocsp: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName))
            | Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(rustls::client::danger::ServerCertVerified::assertion()),
            other => other,
        }
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &rustls::pki_types::CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(m, c, d)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &rustls::pki_types::CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(m, c, d)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// An Envoy sidecar fetches its config over TLS on the secure port, trusting our root.
#[test]
fn envoy_receives_config_over_tls() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let (dir, daemon, _root) = start();
    let root_path = daemon.ca_dir.path().join("root-cert.pem");
    let tls = format!(
        "    transport_socket:\n      name: envoy.transport_sockets.tls\n      typed_config:\n        \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext\n        sni: {DOMAIN}\n        common_tls_context:\n          validation_context:\n            trusted_ca: {{filename: {}}}\n            match_typed_subject_alt_names: [{{san_type: DNS, matcher: {{exact: {DOMAIN}}}}}]\n",
        root_path.display()
    );
    let _envoy =
        Envoy::start_with_cluster_extra(&envoy_bin, daemon.addr("grpc-xds-tls"), "tls", &tls);
    eventually(30, "Envoy synced over TLS", || {
        let (_, syncz) = http_get(daemon.addr("monitoring"), "/debug/syncz");
        syncz.contains("\"cds\"") && syncz.contains("SYNCED")
    });
    drop(dir);
}
