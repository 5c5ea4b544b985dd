//! SDS: the secrets a proxy names in its TLS contexts. `default` (its workload certificate, for the
//! identity its stream proved), `ROOTCA` (the mesh root), and `kubernetes://[<namespace>/]<name>`
//! (`credentialName`: a Kubernetes Secret, `-cacert` for its CA bundle). As in istiod, a Kubernetes
//! Secret goes only to a verified proxy of the Secret's own namespace.

use crate::config::{ConfigKey, Kind, Spec};
use crate::xds::context::PushContext;
use crate::xds::generate::finish::{Class, Typed};
use crate::xds::proxy::Proxy;
use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, Secret, TlsCertificate, secret,
};
use std::collections::BTreeSet;
use tracing::warn;

pub const WORKLOAD_CERT: &str = "default";
pub const ROOT_CA: &str = "ROOTCA";
const KUBERNETES_PREFIX: &str = "kubernetes://";
const CACERT_SUFFIX: &str = "-cacert";

fn inline(text: &str) -> Option<DataSource> {
    Some(DataSource {
        specifier: Some(data_source::Specifier::InlineString(text.to_string())),
        ..Default::default()
    })
}

fn certificate(name: &str, chain: &str, key: &str) -> Secret {
    certificate_with_staple(name, chain, key, None)
}

fn certificate_with_staple(
    name: &str,
    chain: &str,
    key: &str,
    ocsp_staple: Option<&[u8]>,
) -> Secret {
    Secret {
        name: name.into(),
        r#type: Some(secret::Type::TlsCertificate(TlsCertificate {
            certificate_chain: inline(chain),
            private_key: inline(key),
            ocsp_staple: ocsp_staple.map(inline_bytes),
            ..Default::default()
        })),
    }
}

fn validation(name: &str, ca: &str) -> Secret {
    validation_with_crl(name, ca.as_bytes(), None)
}

/// A CA bundle, with the revocation list a client certificate is also checked against.
fn validation_with_crl(name: &str, ca: &[u8], crl: Option<&[u8]>) -> Secret {
    Secret {
        name: name.into(),
        r#type: Some(secret::Type::ValidationContext(
            CertificateValidationContext {
                trusted_ca: Some(inline_bytes(ca)),
                crl: crl.map(inline_bytes),
                ..Default::default()
            },
        )),
    }
}

fn inline_bytes(bytes: &[u8]) -> DataSource {
    DataSource {
        specifier: Some(data_source::Specifier::InlineBytes(bytes.to_vec())),
        ..Default::default()
    }
}

/// The secrets among `names` this proxy may have. Secrets it may not have, or that do not exist,
/// are left out (logged): the proxy keeps waiting for them, as with istiod. They carry `class`
/// (a sidecar's certificates serve both directions; its outbound class stands for both).
///
/// `verified` holds the `kubernetes-gateway://` names the Gateways this proxy serves reference
/// (istiod's `VerifiedCertificateReferences`): those, and only those, it may read without a
/// Secret permission of its own.
pub fn secrets(
    ctx: &PushContext,
    proxy: &Proxy,
    class: Class,
    names: Option<&BTreeSet<String>>,
    verified: &BTreeSet<String>,
) -> Vec<Typed> {
    names
        .into_iter()
        .flatten()
        .filter_map(|name| match secret_for(ctx, proxy, name, verified) {
            Ok(r) => Some(Typed::new(name, class, r)),
            Err(why) => {
                warn!(proxy = %proxy.id, secret = %name, "not sending secret: {why}");
                None
            }
        })
        .collect()
}

fn secret_for(
    ctx: &PushContext,
    proxy: &Proxy,
    name: &str,
    verified: &BTreeSet<String>,
) -> Result<Secret, String> {
    let issuer = ctx.certificates.as_ref();
    if name == ROOT_CA {
        let issuer = issuer.ok_or("the CA is not running")?;
        return Ok(validation(name, &issuer.root_pem()));
    }
    // `configmap://ns/name`: a ConfigMap's `ca.crt` (BackendTLSPolicy), for any proxy, as
    // istiod serves it: a CA bundle is not secret, and the client reads the server's.
    if let Some(reference) =
        name.strip_prefix(crate::model::gateway_api::backend_tls::CONFIGMAP_CREDENTIAL)
    {
        let (namespace, cm_name) = reference
            .split_once('/')
            .ok_or("a configmap:// name is namespace/name")?;
        let ca =
            crate::model::gateway_api::backend_tls::ca_bundle(&ctx.snapshot, namespace, cm_name)
                .ok_or_else(|| format!("ConfigMap {reference} has no PEM ca.crt"))?;
        return Ok(validation(name, ca));
    }
    let identity = proxy.identity.as_ref().ok_or(
        "the stream is not authenticated (connect to the TLS port with a token or certificate)",
    )?;
    if name == WORKLOAD_CERT {
        let issuer = issuer.ok_or("the CA is not running")?;
        let (chain, key) = issuer.certificate(identity).map_err(|e| e.to_string())?;
        return Ok(certificate(name, &chain, &key));
    }
    // `kubernetes-gateway://ns/name`: a Secret a Gateway API listener refers to. As istiod, the
    // reference itself is the authorisation: a Gateway this proxy serves names it (a Secret of
    // the Gateway's namespace, or another a ReferenceGrant allows); nothing else, whatever the
    // proxy's own permissions. `kubernetes://` names need a verified proxy of the Secret's
    // namespace, and for a certificate and key its permission to read Secrets there.
    let (reference, gateway_reference) = match name.strip_prefix(KUBERNETES_PREFIX) {
        Some(r) => (r, false),
        None => {
            let r = name
                .strip_prefix(crate::model::gateway_api::KUBERNETES_GATEWAY_SECRET)
                .ok_or("unknown secret name (expected default, ROOTCA or kubernetes://...)")?;
            if !verified.contains(name) {
                return Err(format!(
                    "no Gateway served by {} references it (a Secret of another namespace needs a ReferenceGrant)",
                    identity.uri()
                ));
            }
            (r, true)
        }
    };
    let (namespace, secret_name) = reference
        .split_once('/')
        .unwrap_or((proxy.namespace.as_str(), reference));
    if identity.namespace != namespace && !gateway_reference {
        return Err(format!(
            "{} may not read secrets of namespace {namespace}",
            identity.uri()
        ));
    }
    let data = |secret: &str| -> Option<std::collections::BTreeMap<String, Vec<u8>>> {
        let entry = ctx.snapshot.get(&ConfigKey {
            kind: Kind::Secret,
            namespace: namespace.to_string(),
            name: secret.to_string(),
            cluster: String::new(),
        })?;
        match &entry.config.spec {
            Spec::Secret(s) => Some(
                s.data
                    .iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.0.clone()))
                    .collect(),
            ),
            _ => None,
        }
    };
    if let Some(base) = secret_name.strip_suffix(CACERT_SUFFIX) {
        // As istiod: the `<name>-cacert` Secret when there is one, else `<name>` itself; its
        // CA bundle and revocation list (`cacert`/`crl`, or `ca.crt`/`ca.crl`).
        let d = data(secret_name)
            .or_else(|| data(base))
            .ok_or_else(|| format!("no Secret {namespace}/{base}"))?;
        let (ca, crl) = [("cacert", "crl"), ("ca.crt", "ca.crl")]
            .into_iter()
            .find_map(|(ca, crl)| {
                d.get(ca)
                    .filter(|v| !v.is_empty())
                    .map(|ca| (ca, d.get(crl).filter(|v| !v.is_empty())))
            })
            .ok_or_else(|| {
                format!("no CA certificate (cacert or ca.crt) in Secret {namespace}/{base}")
            })?;
        return Ok(validation_with_crl(name, ca, crl.map(Vec::as_slice)));
    }
    // A certificate and its key: only for a service account that may list the namespace's
    // Secrets itself (istiod's check; CA certificates above are public), unless a Gateway the
    // proxy serves references it.
    if !gateway_reference && let Some(why) = &proxy.secrets_refused {
        return Err(why.clone());
    }
    let d = data(secret_name).ok_or_else(|| format!("no Secret {namespace}/{secret_name}"))?;
    // As istiod: `cert`/`key` first, then `tls.crt`/`tls.key` (with an OCSP staple).
    let (chain, key, staple) = [
        ("cert", "key", None),
        ("tls.crt", "tls.key", Some("tls.ocsp-staple")),
    ]
    .into_iter()
    .find_map(|(cert, key, staple)| {
        let cert = d.get(cert).filter(|v| !v.is_empty())?;
        let key = d.get(key).filter(|v| !v.is_empty())?;
        Some((
            cert,
            key,
            staple.and_then(|s| d.get(s)).filter(|v| !v.is_empty()),
        ))
    })
    .ok_or_else(|| {
        format!("Secret {namespace}/{secret_name} has no cert and key, nor tls.crt and tls.key")
    })?;
    Ok(certificate_with_staple(
        name,
        &String::from_utf8_lossy(chain),
        &String::from_utf8_lossy(key),
        staple.map(Vec::as_slice),
    ))
}
