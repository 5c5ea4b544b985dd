//! Rudder's own authority: a root (or intermediate) and its key, which signs workload CSRs with
//! the caller's identity and issues serving certificates; and the CSR and chain checks an external
//! CA's answers are held to as well.

use super::keys;
use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DistinguishedName,
    DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};
use std::time::Duration;
use x509_parser::prelude::*;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CaError {
    #[error("invalid CSR: {0}")]
    BadCsr(String),
    #[error("CSR identity {requested} does not match the caller's identity {caller}")]
    IdentityMismatch { requested: String, caller: String },
    #[error("invalid CA material: {0}")]
    Material(String),
    #[error("signing failed: {0}")]
    Sign(String),
}

use crate::model::identity::Identity;

/// The signing CA: its key and certificate, the chain up to the root, and the root.
pub struct Authority {
    signing_key: KeyPair,
    signing_cert_pem: String,
    /// Certificates between the signing cert and the root (exclusive), leaf-most first.
    intermediates: Vec<String>,
    /// The root this CA's chain ends at.
    chain_root: String,
    /// Every root workloads are to trust: this CA's root, then the other roots of `root-cert.pem`
    /// (during a root rotation it holds the old root and the new, so workloads with certificates
    /// from either keep talking).
    trust_bundle: String,
    pub default_ttl: Duration,
    pub max_ttl: Duration,
}

/// A random, positive 128-bit serial (RFC 5280 §4.1.2.2: unique per issuer, at most 20 octets).
/// rcgen would otherwise derive it from the public key, so two certificates for one CSR would share it.
fn random_serial() -> Result<SerialNumber, CaError> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| CaError::Sign("no randomness for a serial number".into()))?;
    bytes[0] = (bytes[0] & 0x7f) | 0x40;
    Ok(SerialNumber::from_slice(&bytes))
}

/// Settings every certificate issued to a workload or to the control plane shares: not a CA
/// (basicConstraints CA:FALSE, as istiod writes), a random serial, the authority key identifier.
fn leaf_params(params: &mut CertificateParams) -> Result<(), CaError> {
    params.is_ca = IsCa::ExplicitNoCa;
    params.serial_number = Some(random_serial()?);
    params.use_authority_key_identifier_extension = true;
    Ok(())
}

/// A workload certificate's lifetime: the default when none is asked for, else what is asked, at
/// most `max`.
pub fn workload_ttl(requested_secs: i64, default: Duration, max: Duration) -> Duration {
    if requested_secs <= 0 {
        default
    } else {
        Duration::from_secs(requested_secs as u64).min(max)
    }
}

/// When the first certificate of `pem` expires (Unix seconds; 0 when unreadable).
pub fn not_after(pem: &str) -> i64 {
    ::pem::parse(pem)
        .ok()
        .and_then(|p| {
            X509Certificate::from_der(p.contents())
                .ok()
                .map(|(_, c)| c.validity().not_after.timestamp())
        })
        .unwrap_or(0)
}

/// A self-signed root certificate (PEM) named `dn`, of `key`, valid from five minutes ago for `ttl`.
fn self_signed_root(
    dn: DistinguishedName,
    key: &KeyPair,
    ttl: Duration,
) -> Result<String, CaError> {
    let mut params =
        CertificateParams::new(Vec::<String>::new()).map_err(|e| CaError::Sign(e.to_string()))?;
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.serial_number = Some(random_serial()?);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let now = ::time::OffsetDateTime::now_utc();
    params.not_before = now - ::time::Duration::minutes(5);
    params.not_after =
        now + ::time::Duration::try_from(ttl).map_err(|e| CaError::Sign(e.to_string()))?;
    let cert = params
        .self_signed(key)
        .map_err(|e| CaError::Sign(e.to_string()))?;
    Ok(cert.pem())
}

/// A fresh key and the parameters of a serving certificate for `dns_names` and `ips` (the first
/// name as common name): what Rudder's CA signs itself or asks an external CA to sign.
pub fn serving_request(
    dns_names: &[String],
    ips: &[std::net::IpAddr],
) -> Result<(KeyPair, CertificateParams), CaError> {
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .map_err(|e| CaError::Sign(e.to_string()))?;
    let mut params =
        CertificateParams::new(dns_names.to_vec()).map_err(|e| CaError::Sign(e.to_string()))?;
    params
        .subject_alt_names
        .extend(ips.iter().map(|ip| SanType::IpAddress(*ip)));
    let mut dn = DistinguishedName::new();
    dn.push(
        DnType::CommonName,
        dns_names
            .first()
            .cloned()
            .unwrap_or_else(|| "rudder".into()),
    );
    params.distinguished_name = dn;
    Ok((key, params))
}

/// True when `issuer_pem`'s subject is `cert_pem`'s issuer (and the key verifies its signature).
pub(super) fn issued(issuer_pem: &str, cert_pem: &str) -> bool {
    let parse = |text: &str| ::pem::parse(text).ok().map(|p| p.into_contents());
    let (Some(issuer_der), Some(cert_der)) = (parse(issuer_pem), parse(cert_pem)) else {
        return false;
    };
    let (Ok((_, issuer)), Ok((_, cert))) = (
        X509Certificate::from_der(&issuer_der),
        X509Certificate::from_der(&cert_der),
    ) else {
        return false;
    };
    issuer.subject() == cert.issuer() && cert.verify_signature(Some(issuer.public_key())).is_ok()
}

/// PEM blocks re-encoded with LF line endings, so the same certificate is the same text everywhere
/// (chains, files, ConfigMaps).
pub(super) fn pem_blocks(text: &str) -> Vec<String> {
    let lf = ::pem::EncodeConfig::new().set_line_ending(::pem::LineEnding::LF);
    ::pem::parse_many(text)
        .unwrap_or_default()
        .into_iter()
        .map(|p| ::pem::encode_config(&p, lf))
        .collect()
}

impl Authority {
    /// A new self-signed root, as istiod creates on first start (10 years).
    pub fn generate_root(trust_domain: &str) -> Result<(String, String), CaError> {
        Authority::generate_root_for(trust_domain, Duration::from_secs(3650 * 86400))
    }

    /// A new self-signed root valid for `ttl` (istiod's `CITADEL_SELF_SIGNED_CA_CERT_TTL`).
    pub fn generate_root_for(
        trust_domain: &str,
        ttl: Duration,
    ) -> Result<(String, String), CaError> {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
            .map_err(|e| CaError::Sign(e.to_string()))?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, trust_domain);
        Ok((self_signed_root(dn, &key, ttl)?, key.serialize_pem()))
    }

    /// A self-signed root of the same key and subject as `cert_pem`, valid from now for `ttl`: what
    /// istiod's root rotator makes before the old one expires. Every certificate the old root
    /// signed verifies under the new one (same issuer name, same key), so proxies can switch
    /// trust at any time without a window where either side fails.
    pub fn renew_root(cert_pem: &str, key_pem: &str, ttl: Duration) -> Result<String, CaError> {
        let key = keys::key_pair(key_pem).map_err(|e| CaError::Material(format!("CA key: {e}")))?;
        let der =
            ::pem::parse(cert_pem).map_err(|e| CaError::Material(format!("ca-cert.pem: {e}")))?;
        let (_, old) = X509Certificate::from_der(der.contents())
            .map_err(|e| CaError::Material(format!("ca-cert.pem: {e}")))?;
        if old.subject() != old.issuer() {
            return Err(CaError::Material(
                "ca-cert.pem is not self-signed; only a self-signed root is renewed".into(),
            ));
        }
        let mut dn = DistinguishedName::new();
        for attr in old.subject().iter_attributes() {
            let oid: Vec<u64> = attr
                .attr_type()
                .iter()
                .map(|arcs| arcs.collect())
                .unwrap_or_default();
            let value = attr
                .as_str()
                .map_err(|e| CaError::Material(format!("ca-cert.pem subject: {e}")))?;
            dn.push(DnType::from_oid(&oid), value);
        }
        self_signed_root(dn, &key, ttl)
    }

    /// Builds the authority from PEM material. `chain_pem` is `cert-chain.pem` (signing cert and
    /// intermediates); `root_pem` may be empty for a self-signed signing cert.
    pub fn from_pem(
        cert_pem: &str,
        key_pem: &str,
        chain_pem: &str,
        root_pem: &str,
        default_ttl: Duration,
        max_ttl: Duration,
    ) -> Result<Authority, CaError> {
        let signing_key =
            keys::key_pair(key_pem).map_err(|e| CaError::Material(format!("CA key: {e}")))?;
        let signing_cert_pem = pem_blocks(cert_pem)
            .into_iter()
            .next()
            .ok_or_else(|| CaError::Material("ca-cert.pem has no certificate".into()))?;
        Issuer::from_ca_cert_pem(&signing_cert_pem, &signing_key)
            .map_err(|e| CaError::Material(format!("ca-cert.pem: {e}")))?;
        let roots = pem_blocks(root_pem);
        let intermediates: Vec<String> = pem_blocks(chain_pem)
            .into_iter()
            .filter(|c| *c != signing_cert_pem && !roots.contains(c))
            .collect();
        // The root the chain ends at: the one that issued its top certificate.
        let top = intermediates.last().unwrap_or(&signing_cert_pem);
        let root_pem = roots
            .iter()
            .find(|r| issued(r, top))
            .or(roots.first())
            .cloned()
            .unwrap_or_else(|| signing_cert_pem.clone());
        let mut trust: Vec<&String> = vec![&root_pem];
        trust.extend(roots.iter().filter(|r| **r != root_pem));
        let trust_bundle = trust.into_iter().map(String::as_str).collect();
        Ok(Authority {
            signing_key,
            signing_cert_pem,
            intermediates,
            chain_root: root_pem,
            trust_bundle,
            default_ttl,
            max_ttl,
        })
    }

    /// The signing certificate (PEM), which is the root for a self-signed CA.
    pub fn signing_cert_pem(&self) -> &str {
        &self.signing_cert_pem
    }

    /// When the root and the signing certificate expire (Unix seconds; 0 when unreadable).
    pub fn expiry_timestamps(&self) -> (i64, i64) {
        (
            not_after(&self.chain_root),
            not_after(&self.signing_cert_pem),
        )
    }

    /// Every root workloads are to trust (PEM, this CA's root first): what ROOTCA, the
    /// `istio-ca-root-cert` ConfigMaps and the CA port's client verification use.
    pub fn root_pem(&self) -> &str {
        &self.trust_bundle
    }

    /// Leaf, then the signing cert (unless it is the root), intermediates, and the root last.
    fn chain_for(&self, leaf_pem: String) -> Vec<String> {
        let mut chain = vec![leaf_pem];
        if self.signing_cert_pem != self.chain_root {
            chain.push(self.signing_cert_pem.clone());
        }
        chain.extend(self.intermediates.iter().cloned());
        chain.push(self.chain_root.clone());
        chain
    }

    fn issuer(&self) -> Result<Issuer<'static, &KeyPair>, CaError> {
        Issuer::from_ca_cert_pem(&self.signing_cert_pem, &self.signing_key)
            .map_err(|e| CaError::Sign(e.to_string()))
    }

    fn ttl(&self, requested_secs: i64) -> Duration {
        workload_ttl(requested_secs, self.default_ttl, self.max_ttl)
    }

    /// Signs `csr_pem` for `caller`. The CSR must be well-formed, correctly self-signed, carry an RSA
    /// (2048+ bits) or ECDSA P-256/P-384 key, and ask for no identity other than the caller's.
    pub fn sign_workload(
        &self,
        csr_pem: &str,
        caller: &Identity,
        requested_ttl_secs: i64,
    ) -> Result<Vec<String>, CaError> {
        let csr = check_csr(csr_pem, caller)?;
        let caller_uri = caller.uri();
        let mut params = CertificateParams::new(Vec::<String>::new())
            .map_err(|e| CaError::Sign(e.to_string()))?;
        params.subject_alt_names = vec![SanType::URI(
            caller_uri
                .clone()
                .try_into()
                .map_err(|e: rcgen::Error| CaError::Sign(e.to_string()))?,
        )];
        params.distinguished_name = DistinguishedName::new();
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        leaf_params(&mut params)?;
        let now = ::time::OffsetDateTime::now_utc();
        params.not_before = now - ::time::Duration::minutes(1);
        params.not_after = now
            + ::time::Duration::try_from(self.ttl(requested_ttl_secs))
                .map_err(|e| CaError::Sign(e.to_string()))?;
        let issuer = self.issuer()?;
        let cert = params
            .signed_by(&csr.public_key, &issuer)
            .map_err(|e| CaError::Sign(e.to_string()))?;
        Ok(self.chain_for(cert.pem()))
    }

    /// A fresh key and a certificate chain for `id`, for workloads that get their certificate over
    /// SDS instead of sending a CSR. Signed by the same path as CSRs, so the same checks apply.
    pub fn issue_workload(&self, id: &Identity) -> Result<(Vec<String>, String), CaError> {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
            .map_err(|e| CaError::Sign(e.to_string()))?;
        let mut params = CertificateParams::new(Vec::<String>::new())
            .map_err(|e| CaError::Sign(e.to_string()))?;
        params.subject_alt_names = vec![SanType::URI(
            id.uri()
                .try_into()
                .map_err(|e: rcgen::Error| CaError::Sign(e.to_string()))?,
        )];
        let csr = params
            .serialize_request(&key)
            .and_then(|r| r.pem())
            .map_err(|e| CaError::Sign(e.to_string()))?;
        let chain = self.sign_workload(&csr, id, 0)?;
        Ok((chain, key.serialize_pem()))
    }

    /// A serving certificate for the control plane itself (xDS over TLS, webhooks).
    pub fn serving_cert(
        &self,
        dns_names: &[String],
        ips: &[std::net::IpAddr],
        ttl: Duration,
    ) -> Result<(Vec<String>, String), CaError> {
        let (key, mut params) = serving_request(dns_names, ips)?;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        leaf_params(&mut params)?;
        let now = ::time::OffsetDateTime::now_utc();
        params.not_before = now - ::time::Duration::minutes(1);
        params.not_after =
            now + ::time::Duration::try_from(ttl).map_err(|e| CaError::Sign(e.to_string()))?;
        let cert = params
            .signed_by(&key, &self.issuer()?)
            .map_err(|e| CaError::Sign(e.to_string()))?;
        Ok((self.chain_for(cert.pem()), key.serialize_pem()))
    }
}

/// RSA of at least 2048 bits, or ECDSA on P-256/P-384: what Envoy and istio-agent use.
/// The CSR checks every signer makes, local or external: well-formed, correctly self-signed, an
/// RSA (2048+ bits) or ECDSA P-256/P-384 key, and no identity other than the caller's.
pub fn check_csr(
    csr_pem: &str,
    caller: &Identity,
) -> Result<CertificateSigningRequestParams, CaError> {
    let csr = CertificateSigningRequestParams::from_pem(csr_pem)
        .map_err(|e| CaError::BadCsr(e.to_string()))?;
    check_key(csr_pem)?;
    let caller_uri = caller.uri();
    for san in &csr.params.subject_alt_names {
        let requested = match san {
            SanType::URI(u) => u.as_str().to_string(),
            SanType::DnsName(d) => d.as_str().to_string(),
            SanType::IpAddress(ip) => ip.to_string(),
            other => format!("{other:?}"),
        };
        if requested != caller_uri {
            return Err(CaError::IdentityMismatch {
                requested,
                caller: caller_uri,
            });
        }
    }
    Ok(csr)
}

fn check_key(csr_pem: &str) -> Result<(), CaError> {
    let block = ::pem::parse(csr_pem).map_err(|e| CaError::BadCsr(e.to_string()))?;
    let (_, req) = X509CertificationRequest::from_der(block.contents())
        .map_err(|e| CaError::BadCsr(e.to_string()))?;
    let spki = &req.certification_request_info.subject_pki;
    match spki.parsed().map_err(|e| CaError::BadCsr(e.to_string()))? {
        x509_parser::public_key::PublicKey::RSA(rsa) => {
            let bits = rsa.key_size();
            if bits < 2048 {
                return Err(CaError::BadCsr(format!(
                    "RSA key of {bits} bits is too small (minimum 2048)"
                )));
            }
        }
        x509_parser::public_key::PublicKey::EC(_) => {
            let curve = spki
                .algorithm
                .parameters
                .as_ref()
                .and_then(|p| p.as_oid().ok())
                .map(|o| o.to_id_string())
                .unwrap_or_default();
            // prime256v1, secp384r1
            if curve != "1.2.840.10045.3.1.7" && curve != "1.3.132.0.34" {
                return Err(CaError::BadCsr(format!(
                    "EC curve {curve} is not supported (P-256 or P-384)"
                )));
            }
        }
        _ => {
            return Err(CaError::BadCsr(
                "unsupported key type (RSA or ECDSA required)".into(),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn authority() -> Authority {
        let (cert, key) = Authority::generate_root("cluster.local").unwrap();
        Authority::from_pem(
            &cert,
            &key,
            "",
            "",
            Duration::from_secs(86400),
            Duration::from_secs(7 * 86400),
        )
        .unwrap()
    }

    fn csr(sans: &[&str], alg: &'static rcgen::SignatureAlgorithm) -> String {
        let key = KeyPair::generate_for(alg).unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.subject_alt_names = sans
            .iter()
            .map(|s| SanType::URI((*s).try_into().unwrap()))
            .collect();
        p.serialize_request(&key).unwrap().pem().unwrap()
    }

    fn id() -> Identity {
        Identity {
            trust_domain: "cluster.local".into(),
            namespace: "foo".into(),
            service_account: "bar".into(),
        }
    }

    #[test]
    fn every_root_of_root_cert_pem_is_trusted_and_chains_end_at_our_own() {
        // A root rotation in progress: root-cert.pem lists the old root first, then the new one,
        // which is this CA's (self-signed here; both have the same subject, as istiod's do).
        let (old_root, _) = Authority::generate_root("cluster.local").unwrap();
        let (new_root, new_key) = Authority::generate_root("cluster.local").unwrap();
        let ca = Authority::from_pem(
            &new_root,
            &new_key,
            "",
            &format!("{old_root}{new_root}"),
            Duration::from_secs(86400),
            Duration::from_secs(86400),
        )
        .unwrap();
        let bundle = pem_blocks(ca.root_pem());
        assert_eq!(bundle, pem_blocks(&format!("{new_root}{old_root}")));
        let (chain, _) = ca.issue_workload(&id()).unwrap();
        assert_eq!(chain.last(), pem_blocks(&new_root).first());
        assert_eq!(chain.len(), 2, "leaf and our root, not the old one");
    }

    #[test]
    fn signs_with_the_callers_identity_and_caps_ttl() {
        let ca = authority();
        let chain = ca
            .sign_workload(
                &csr(
                    &["spiffe://cluster.local/ns/foo/sa/bar"],
                    &rcgen::PKCS_ECDSA_P256_SHA256,
                ),
                &id(),
                365 * 86400,
            )
            .unwrap();
        assert_eq!(chain.len(), 2, "leaf then root");
        assert_eq!(chain[1], ca.root_pem());
        let der = ::pem::parse(&chain[0]).unwrap();
        let (_, cert) = X509Certificate::from_der(der.contents()).unwrap();
        let sans: Vec<String> = cert
            .subject_alternative_name()
            .unwrap()
            .unwrap()
            .value
            .general_names
            .iter()
            .map(|g| g.to_string())
            .collect();
        assert_eq!(sans, ["URI(spiffe://cluster.local/ns/foo/sa/bar)"]);
        let lifetime =
            cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp();
        assert!(
            lifetime <= 7 * 86400 + 120,
            "capped at the maximum TTL: {lifetime}"
        );
        let empty = ca
            .sign_workload(&csr(&[], &rcgen::PKCS_ECDSA_P256_SHA256), &id(), 0)
            .unwrap();
        assert_eq!(
            empty.len(),
            2,
            "a CSR without SANs gets the caller's identity"
        );
    }

    /// RFC 5280: a leaf says it is not a CA, and serials are unique even for the same CSR.
    #[test]
    fn leaves_are_not_cas_and_serials_are_unique() {
        let ca = authority();
        let request = csr(
            &["spiffe://cluster.local/ns/foo/sa/bar"],
            &rcgen::PKCS_ECDSA_P256_SHA256,
        );
        let leaf = |pem: &str| {
            let der = ::pem::parse(pem).unwrap();
            let (_, cert) = X509Certificate::from_der(der.contents()).unwrap();
            let ca = cert.basic_constraints().unwrap().map(|b| b.value.ca);
            (cert.raw_serial().to_vec(), ca)
        };
        let (first, first_ca) = leaf(&ca.sign_workload(&request, &id(), 0).unwrap()[0]);
        let (second, _) = leaf(&ca.sign_workload(&request, &id(), 0).unwrap()[0]);
        assert_eq!(first_ca, Some(false), "basicConstraints CA:FALSE present");
        assert_ne!(first, second, "same CSR, different serials");
        let serving = ca
            .serving_cert(
                &["rudder.istio-system.svc".into()],
                &[],
                Duration::from_secs(3600),
            )
            .unwrap();
        assert_eq!(leaf(&serving.0[0]).1, Some(false));
    }

    #[test]
    fn refuses_other_identities_and_bad_csrs() {
        let ca = authority();
        let err = ca
            .sign_workload(
                &csr(
                    &["spiffe://cluster.local/ns/foo/sa/admin"],
                    &rcgen::PKCS_ECDSA_P256_SHA256,
                ),
                &id(),
                0,
            )
            .unwrap_err();
        assert!(matches!(err, CaError::IdentityMismatch { .. }), "{err}");
        assert!(matches!(
            ca.sign_workload("not a csr", &id(), 0),
            Err(CaError::BadCsr(_))
        ));
        let ed = csr(&[], &rcgen::PKCS_ED25519);
        assert!(
            matches!(ca.sign_workload(&ed, &id(), 0), Err(CaError::BadCsr(m)) if m.contains("unsupported key type"))
        );
        // A CSR whose signature does not match its contents.
        let good = csr(&[], &rcgen::PKCS_ECDSA_P256_SHA256);
        let mut der = ::pem::parse(&good).unwrap().contents().to_vec();
        let n = der.len();
        der[n - 5] ^= 0xff;
        let tampered = ::pem::encode(&::pem::Pem::new("CERTIFICATE REQUEST", der));
        assert!(matches!(
            ca.sign_workload(&tampered, &id(), 0),
            Err(CaError::BadCsr(_))
        ));
    }

    #[test]
    fn pem_output_uses_lf_everywhere() {
        let ca = authority();
        assert!(!ca.root_pem().contains('\r'));
        let chain = ca
            .sign_workload(&csr(&[], &rcgen::PKCS_ECDSA_P256_SHA256), &id(), 0)
            .unwrap();
        assert!(
            chain.iter().all(|c| !c.contains('\r')),
            "identical text in chains, files and ConfigMaps"
        );
    }

    #[test]
    fn spiffe_identities_parse() {
        assert_eq!(
            Identity::parse("spiffe://cluster.local/ns/foo/sa/bar"),
            Some(id())
        );
        assert_eq!(Identity::parse("spiffe://cluster.local/ns/foo"), None);
        assert_eq!(Identity::parse("https://x/ns/a/sa/b"), None);
    }
}
