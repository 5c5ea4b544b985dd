//! SDS: the secrets a proxy names in its TLS contexts. `default` (its workload certificate, for the
//! identity its stream proved), `ROOTCA` (the mesh root), and `kubernetes://[<namespace>/]<name>`
//! (`credentialName`: a Kubernetes Secret, `-cacert` for its CA bundle). As in istiod, a Kubernetes
//! Secret goes only to a verified proxy of the Secret's own namespace.

use super::util::any;
use crate::config::{ConfigKey, Kind, Spec};
use crate::xds::context::PushContext;
use crate::xds::proxy::Proxy;
use crate::xds::resource::Resource;
use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, Secret, TlsCertificate, secret,
};
use std::collections::BTreeSet;
use std::sync::Arc;
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

fn certificate(name: &str, chain: &str, key: &str) -> Arc<Resource> {
    Resource::new(
        name,
        any(&Secret {
            name: name.into(),
            r#type: Some(secret::Type::TlsCertificate(TlsCertificate {
                certificate_chain: inline(chain),
                private_key: inline(key),
                ..Default::default()
            })),
        }),
    )
}

fn validation(name: &str, ca: &str) -> Arc<Resource> {
    Resource::new(
        name,
        any(&Secret {
            name: name.into(),
            r#type: Some(secret::Type::ValidationContext(
                CertificateValidationContext {
                    trusted_ca: inline(ca),
                    ..Default::default()
                },
            )),
        }),
    )
}

/// The secrets among `names` this proxy may have. Secrets it may not have, or that do not exist,
/// are left out (logged): the proxy keeps waiting for them, as with istiod.
pub fn secrets(
    ctx: &PushContext,
    proxy: &Proxy,
    names: Option<&BTreeSet<String>>,
) -> Vec<Arc<Resource>> {
    names
        .into_iter()
        .flatten()
        .filter_map(|name| match secret_for(ctx, proxy, name) {
            Ok(r) => Some(r),
            Err(why) => {
                warn!(proxy = %proxy.id, secret = %name, "not sending secret: {why}");
                None
            }
        })
        .collect()
}

fn secret_for(ctx: &PushContext, proxy: &Proxy, name: &str) -> Result<Arc<Resource>, String> {
    let issuer = ctx.certificates.as_ref();
    if name == ROOT_CA {
        let issuer = issuer.ok_or("the CA is not running")?;
        return Ok(validation(name, &issuer.root_pem()));
    }
    let identity = proxy.identity.as_ref().ok_or(
        "the stream is not authenticated (connect to the TLS port with a token or certificate)",
    )?;
    if name == WORKLOAD_CERT {
        let issuer = issuer.ok_or("the CA is not running")?;
        let (chain, key) = issuer.certificate(identity).map_err(|e| e.to_string())?;
        return Ok(certificate(name, &chain, &key));
    }
    let reference = name
        .strip_prefix(KUBERNETES_PREFIX)
        .ok_or("unknown secret name (expected default, ROOTCA or kubernetes://...)")?;
    let (namespace, secret_name) = reference
        .split_once('/')
        .unwrap_or((proxy.namespace.as_str(), reference));
    if identity.namespace != namespace {
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
    let text = |d: &std::collections::BTreeMap<String, Vec<u8>>, keys: &[&str]| {
        keys.iter()
            .find_map(|k| d.get(*k))
            .map(|v| String::from_utf8_lossy(v).into_owned())
    };
    if let Some(base) = secret_name.strip_suffix(CACERT_SUFFIX) {
        // A separate `<name>-cacert` Secret, else the `ca.crt` of `<name>` itself.
        let ca = data(secret_name)
            .and_then(|d| text(&d, &["ca.crt", "cacert"]))
            .or_else(|| data(base).and_then(|d| text(&d, &["ca.crt", "cacert"])))
            .ok_or_else(|| format!("no CA certificate in Secret {namespace}/{base}"))?;
        return Ok(validation(name, &ca));
    }
    // A certificate and its key: only for a service account that may list the namespace's
    // Secrets itself (istiod's check; CA certificates above are public).
    if let Some(why) = &proxy.secrets_refused {
        return Err(why.clone());
    }
    let d = data(secret_name).ok_or_else(|| format!("no Secret {namespace}/{secret_name}"))?;
    let chain = text(&d, &["tls.crt", "cert"])
        .ok_or_else(|| format!("Secret {namespace}/{secret_name} has no tls.crt or cert"))?;
    let key = text(&d, &["tls.key", "key"])
        .ok_or_else(|| format!("Secret {namespace}/{secret_name} has no tls.key or key"))?;
    Ok(certificate(name, &chain, &key))
}
