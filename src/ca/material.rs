//! Where the CA's keys come from, in Istio's order: a plugged-in CA (`cacerts`), else the persisted
//! self-signed root (`istio-ca-secret`), else a new self-signed root that is persisted at once so
//! every replica and every restart signs with the same root.

use super::{Authority, CaError};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use tracing::info;

pub const CA_CERT: &str = "ca-cert.pem";
pub const CA_KEY: &str = "ca-key.pem";
pub const CERT_CHAIN: &str = "cert-chain.pem";
pub const ROOT_CERT: &str = "root-cert.pem";
/// The same CA in a `kubernetes.io/tls` Secret (cert-manager's layout), which istiod reads
/// whenever `tls.crt` is present: the signing certificate (and its intermediates), its key, and
/// the root.
pub const TLS_CERT: &str = "tls.crt";
pub const TLS_KEY: &str = "tls.key";
pub const TLS_ROOT: &str = "ca.crt";

#[derive(Debug, Clone, Copy)]
pub struct Ttls {
    pub default: Duration,
    pub max: Duration,
    /// A self-signed root's lifetime (istiod's `CITADEL_SELF_SIGNED_CA_CERT_TTL`).
    pub root: Duration,
}

/// Where the Kubernetes-mode CA came from: only a self-signed root is Rudder's to rotate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaSource {
    /// Secret `cacerts`: the operator's CA, rotated by the operator.
    PluggedIn,
    /// Secret `istio-ca-secret`: a root Rudder (or istiod) generated.
    SelfSigned,
}

/// The four files, as text; missing ones are empty.
#[derive(Debug, Default, Clone)]
pub struct Files {
    pub cert: String,
    pub key: String,
    pub chain: String,
    pub root: String,
}

impl Files {
    /// The CA files as `get` reads them (empty when missing), in whichever layout is there:
    /// cert-manager's when `tls.crt` is (as istiod decides), else Istio's four files.
    pub fn read(get: impl Fn(&str) -> String) -> Files {
        let tls_cert = get(TLS_CERT);
        if !tls_cert.trim().is_empty() {
            let root = get(TLS_ROOT);
            return Files {
                chain: format!("{tls_cert}\n{root}"),
                cert: tls_cert,
                key: get(TLS_KEY),
                root,
            };
        }
        Files {
            cert: get(CA_CERT),
            key: get(CA_KEY),
            chain: get(CERT_CHAIN),
            root: get(ROOT_CERT),
        }
    }

    pub fn usable(&self) -> bool {
        !self.cert.trim().is_empty() && !self.key.trim().is_empty()
    }

    pub fn authority(&self, ttls: Ttls) -> Result<Authority, CaError> {
        Authority::from_pem(
            &self.cert,
            &self.key,
            &self.chain,
            &self.root,
            ttls.default,
            ttls.max,
        )
    }
}

/// File mode: `dir` holds a plugged-in CA, or receives a new self-signed one. CA material that is
/// already there is never replaced: a directory with some CA files but not a usable certificate and
/// key is refused, since a new root would silently break mTLS with every workload that trusts the old.
pub fn from_dir(dir: &Path, trust_domain: &str, ttls: Ttls) -> Result<Authority, CaError> {
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
    let files = Files::read(read);
    if files.usable() {
        info!(dir = %dir.display(), "CA: using the certificates in the CA directory");
        warn_if_key_readable(&dir.join(CA_KEY));
        warn_if_key_readable(&dir.join(TLS_KEY));
        return files.authority(ttls);
    }
    let present: Vec<&str> = [
        (CA_CERT, &files.cert),
        (CA_KEY, &files.key),
        (CERT_CHAIN, &files.chain),
        (ROOT_CERT, &files.root),
    ]
    .into_iter()
    .filter(|(_, text)| !text.trim().is_empty())
    .map(|(name, _)| name)
    .collect();
    if !present.is_empty() {
        return Err(CaError::Material(format!(
            "{} holds {} but not both {CA_CERT} and {CA_KEY}; refusing to generate a new root over \
             existing CA material (restore the missing file, or empty the directory to start a new CA)",
            dir.display(),
            present.join(", ")
        )));
    }
    let (cert, key) = Authority::generate_root_for(trust_domain, ttls.root)?;
    std::fs::create_dir_all(dir)
        .map_err(|e| CaError::Material(format!("{}: {e}", dir.display())))?;
    for (name, text, mode) in [
        (CA_KEY, &key, 0o600),
        (CA_CERT, &cert, 0o644),
        (ROOT_CERT, &cert, 0o644),
    ] {
        write_new(&dir.join(name), text, mode)
            .map_err(|e| CaError::Material(format!("{name}: {e}")))?;
    }
    info!(dir = %dir.display(), "CA: generated a self-signed root (10 years)");
    Authority::from_pem(&cert, &key, "", "", ttls.default, ttls.max)
}

/// Writes `text` to `path` with `mode` from the first byte (a temporary file renamed into place),
/// so the file is never briefly readable by others nor seen half-written.
fn write_new(path: &Path, text: &str, mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)?;
    let written = file
        .write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

fn warn_if_key_readable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(
            path = %path.display(),
            mode = format!("{:o}", meta.permissions().mode() & 0o777),
            "CA: the signing key is readable by other users; anyone who can read it can mint any identity (chmod 600)"
        );
    }
}

pub fn secret_files(s: &Secret) -> Files {
    let get = |k: &str| {
        s.data
            .as_ref()
            .and_then(|d| d.get(k))
            .map(|b| String::from_utf8_lossy(&b.0).to_string())
            .unwrap_or_default()
    };
    Files::read(get)
}

/// Kubernetes mode: `cacerts`, else `istio-ca-secret`, else generate and create `istio-ca-secret`.
pub async fn from_kubernetes(
    client: kube::Client,
    namespace: &str,
    trust_domain: &str,
    ttls: Ttls,
) -> Result<(Authority, CaSource), CaError> {
    let api: Api<Secret> = Api::namespaced(client, namespace);
    let get = |name: &'static str| {
        let api = api.clone();
        async move {
            api.get_opt(name)
                .await
                .map_err(|e| CaError::Material(format!("reading Secret {name}: {e}")))
        }
    };
    if let Some(plugged) = get("cacerts").await?
        && secret_files(&plugged).usable()
    {
        info!(namespace, "CA: using the plugged-in CA from Secret cacerts");
        return Ok((secret_files(&plugged).authority(ttls)?, CaSource::PluggedIn));
    }
    for attempt in 0..3 {
        if let Some(existing) = get("istio-ca-secret").await?
            && secret_files(&existing).usable()
        {
            info!(
                namespace,
                "CA: using the self-signed root in Secret istio-ca-secret"
            );
            return Ok((
                secret_files(&existing).authority(ttls)?,
                CaSource::SelfSigned,
            ));
        }
        let (cert, key) = Authority::generate_root_for(trust_domain, ttls.root)?;
        let data: BTreeMap<String, ByteString> = [
            (CA_CERT, cert.clone()),
            (CA_KEY, key.clone()),
            (CERT_CHAIN, String::new()),
            (ROOT_CERT, String::new()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), ByteString(v.into_bytes())))
        .collect();
        let secret = Secret {
            metadata: kube::api::ObjectMeta {
                name: Some("istio-ca-secret".into()),
                namespace: Some(namespace.into()),
                ..Default::default()
            },
            data: Some(data),
            type_: Some("istio.io/ca-root".into()),
            ..Default::default()
        };
        match api.create(&PostParams::default(), &secret).await {
            Ok(_) => {
                info!(
                    namespace,
                    "CA: generated a self-signed root and stored it in Secret istio-ca-secret"
                );
                let authority = Authority::from_pem(&cert, &key, "", "", ttls.default, ttls.max)?;
                return Ok((authority, CaSource::SelfSigned));
            }
            // Another replica created it first: use theirs.
            Err(kube::Error::Api(e)) if e.code == 409 && attempt < 2 => continue,
            Err(e) => {
                return Err(CaError::Material(format!(
                    "creating Secret istio-ca-secret: {e}"
                )));
            }
        }
    }
    Err(CaError::Material(
        "could not settle on a root certificate".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const TTLS: Ttls = Ttls {
        default: Duration::from_secs(3600),
        max: Duration::from_secs(7200),
        root: Duration::from_secs(10 * 365 * 86400),
    };

    #[test]
    fn a_new_root_keeps_its_key_private_and_survives_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let first = from_dir(dir.path(), "cluster.local", TTLS).unwrap();
        let mode = std::fs::metadata(dir.path().join(CA_KEY))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "ca-key.pem is private");
        let again = from_dir(dir.path(), "cluster.local", TTLS).unwrap();
        assert_eq!(
            first.root_pem(),
            again.root_pem(),
            "a restart keeps the root"
        );
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn existing_ca_material_is_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        from_dir(dir.path(), "cluster.local", TTLS).unwrap();
        let root = std::fs::read_to_string(dir.path().join(ROOT_CERT)).unwrap();
        std::fs::remove_file(dir.path().join(CA_KEY)).unwrap();
        let err = from_dir(dir.path(), "cluster.local", TTLS).err().unwrap();
        assert!(err.to_string().contains("refusing"), "{err}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join(ROOT_CERT)).unwrap(),
            root,
            "the root others trust is untouched"
        );
        assert!(!dir.path().join(CA_KEY).exists(), "no new key written");
    }

    /// Runs openssl in `dir`; `false` when openssl is missing.
    fn openssl(dir: &Path, args: &[&str]) -> bool {
        match std::process::Command::new("openssl")
            .current_dir(dir)
            .args(args)
            .output()
        {
            Ok(out) => {
                assert!(
                    out.status.success(),
                    "openssl {args:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                true
            }
            Err(_) => false,
        }
    }

    /// A plugged-in CA as cert-manager writes it (`tls.crt` holding an intermediate CA, `tls.key`
    /// its PKCS#1 RSA key, `ca.crt` the root), which istiod reads whenever `tls.crt` exists:
    /// Rudder signs with the intermediate, and the chain it hands out verifies up to that root
    /// (before, the layout was ignored and a key in PKCS#1 form stopped the start).
    #[test]
    fn cert_managers_layout_with_a_pkcs1_key_signs_under_the_plugged_root() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let ext = "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n";
        std::fs::write(d.join("ca.ext"), ext).unwrap();
        if !openssl(d, &["genrsa", "-traditional", "-out", "root.key", "2048"]) {
            eprintln!("skipping: no openssl");
            return;
        }
        let steps: [&[&str]; 5] = [
            &[
                "req",
                "-x509",
                "-new",
                "-key",
                "root.key",
                "-subj",
                "/O=corp/CN=Root CA",
                "-days",
                "3650",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
                "-out",
                "ca.crt",
            ],
            &["genrsa", "-traditional", "-out", "tls.key", "2048"],
            &[
                "req",
                "-new",
                "-key",
                "tls.key",
                "-subj",
                "/O=corp/CN=cluster-a intermediate",
                "-out",
                "int.csr",
            ],
            &[
                "x509",
                "-req",
                "-in",
                "int.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "root.key",
                "-CAcreateserial",
                "-days",
                "365",
                "-extfile",
                "ca.ext",
                "-out",
                "tls.crt",
            ],
            &["version"],
        ];
        for step in steps {
            openssl(d, step);
        }
        assert!(
            std::fs::read_to_string(d.join("tls.key"))
                .unwrap()
                .contains("BEGIN RSA PRIVATE KEY")
        );
        let ca = from_dir(d, "cluster.local", TTLS).unwrap();
        assert_eq!(
            ca.root_pem().trim(),
            std::fs::read_to_string(d.join("ca.crt")).unwrap().trim(),
            "the plugged-in root is the trust anchor"
        );
        let id = crate::model::identity::Identity {
            trust_domain: "cluster.local".into(),
            namespace: "shop".into(),
            service_account: "web".into(),
        };
        let (chain, _) = ca.issue_workload(&id).unwrap();
        std::fs::write(d.join("leaf.pem"), &chain[0]).unwrap();
        std::fs::write(d.join("chain.pem"), chain[1..].join("\n")).unwrap();
        let verify = std::process::Command::new("openssl")
            .current_dir(d)
            .args([
                "verify",
                "-CAfile",
                "ca.crt",
                "-untrusted",
                "chain.pem",
                "leaf.pem",
            ])
            .output()
            .unwrap();
        assert!(
            verify.status.success(),
            "{}{}",
            String::from_utf8_lossy(&verify.stdout),
            String::from_utf8_lossy(&verify.stderr)
        );
        // No ca-*.pem was written beside them: the directory held a CA, nothing was generated.
        assert!(!d.join(CA_KEY).exists());
    }
}
