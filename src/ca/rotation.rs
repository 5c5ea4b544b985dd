//! Rotation of a self-signed root before it expires, as istiod's root rotator: every check
//! interval each replica reads Secret `istio-ca-secret`. When another replica has rotated, it
//! takes the new root; when the root is within its grace period (the last
//! `CITADEL_SELF_SIGNED_CA_CERT_GRACE_PERIOD_PERCENTILE` percent of its life), it writes a new root
//! of the same key and subject into the Secret, at the resourceVersion it read, so two replicas
//! never both rotate. The new root verifies everything the old one signed, so proxies switch
//! trust whenever their next ROOTCA push arrives. A plugged-in CA (`cacerts`) is never rotated.

use super::material::{self, CA_CERT, CA_KEY, Ttls};
use super::metrics::CaMetrics;
use super::shared::SharedAuthority;
use super::{Authority, CaError};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};
use x509_parser::prelude::*;

pub const SECRET: &str = "istio-ca-secret";

pub struct RootRotator {
    pub client: kube::Client,
    pub namespace: String,
    pub authority: Arc<SharedAuthority>,
    pub ttls: Ttls,
    /// istiod's `CITADEL_SELF_SIGNED_ROOT_CERT_CHECK_INTERVAL`.
    pub check_every: Duration,
    /// istiod's `CITADEL_SELF_SIGNED_CA_CERT_GRACE_PERIOD_PERCENTILE`.
    pub grace_percent: u32,
    pub metrics: Arc<CaMetrics>,
}

/// True when less than `grace_percent` of the certificate's life is left at `now` (Unix seconds).
pub fn rotation_due(cert_pem: &str, grace_percent: u32, now: i64) -> bool {
    let Some((not_before, not_after)) = ::pem::parse(cert_pem).ok().and_then(|p| {
        X509Certificate::from_der(p.contents()).ok().map(|(_, c)| {
            (
                c.validity().not_before.timestamp(),
                c.validity().not_after.timestamp(),
            )
        })
    }) else {
        return false;
    };
    let grace = (not_after - not_before).max(0) * i64::from(grace_percent.min(100)) / 100;
    now >= not_after - grace
}

impl RootRotator {
    pub async fn run(self, cancel: CancellationToken) {
        let mut tick = tokio::time::interval(self.check_every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tick.tick() => {}
            }
            if let Err(e) = self.check().await {
                warn!(error = %e, "root certificate check failed; will retry");
            }
        }
    }

    async fn check(&self) -> Result<(), CaError> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let secret = api
            .get_opt(SECRET)
            .await
            .map_err(|e| CaError::Material(format!("reading Secret {SECRET}: {e}")))?
            .ok_or_else(|| CaError::Material(format!("Secret {SECRET} is gone")))?;
        let files = material::secret_files(&secret);
        let current = self.authority.load();
        if files.cert.trim() != current.signing_cert_pem().trim() {
            // Another replica rotated (or an operator replaced the root): sign with theirs.
            let authority = files.authority(self.ttls)?;
            info!("CA: the root in Secret {SECRET} changed; using it");
            self.install(authority);
            return Ok(());
        }
        let now = ::time::OffsetDateTime::now_utc().unix_timestamp();
        let grace = self.grace_percent;
        if !rotation_due(&files.cert, grace, now) {
            return Ok(());
        }
        let renewed = Authority::renew_root(&files.cert, &files.key, self.ttls.root)?;
        let authority = Authority::from_pem(
            &renewed,
            &files.key,
            "",
            "",
            self.ttls.default,
            self.ttls.max,
        )?;
        let mut next = secret.clone();
        let data = next.data.get_or_insert_with(Default::default);
        data.insert(CA_CERT.into(), ByteString(renewed.clone().into_bytes()));
        data.insert(CA_KEY.into(), ByteString(files.key.clone().into_bytes()));
        match api.replace(SECRET, &PostParams::default(), &next).await {
            Ok(_) => {
                info!(
                    grace_percent = grace,
                    "CA: the self-signed root was near its end; renewed it (same key) in Secret {SECRET}"
                );
                self.metrics.root_rotations.inc();
                self.install(authority);
                Ok(())
            }
            // Another replica wrote first: the next check takes its root.
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => Err(CaError::Material(format!("writing Secret {SECRET}: {e}"))),
        }
    }

    fn install(&self, authority: Authority) {
        let (root_expiry, chain_expiry) = authority.expiry_timestamps();
        self.metrics.root_cert_expiry.set(root_expiry);
        self.metrics.cert_chain_expiry.set(chain_expiry);
        self.authority.replace(authority);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_only_in_the_last_part_of_the_life() {
        let (cert, _) =
            Authority::generate_root_for("cluster.local", Duration::from_secs(1000)).expect("root");
        let now = ::time::OffsetDateTime::now_utc().unix_timestamp();
        assert!(!rotation_due(&cert, 20, now));
        assert!(!rotation_due(&cert, 20, now + 500));
        assert!(rotation_due(&cert, 20, now + 900));
        assert!(rotation_due(&cert, 100, now));
        assert!(!rotation_due("not a certificate", 20, now));
    }

    #[test]
    fn a_renewed_root_verifies_what_the_old_one_signed() {
        let (old_root, key) = Authority::generate_root("cluster.local").expect("root");
        let ttl = Duration::from_secs(3600);
        let old = Authority::from_pem(&old_root, &key, "", "", ttl, ttl).expect("old");
        let id = crate::model::identity::Identity {
            trust_domain: "cluster.local".into(),
            namespace: "default".into(),
            service_account: "web".into(),
        };
        let (chain, _) = old.issue_workload(&id).expect("leaf");
        let new_root = Authority::renew_root(&old_root, &key, ttl).expect("renewed");
        assert_ne!(new_root, old_root);
        let parse = |text: &str| ::pem::parse(text).expect("pem").into_contents();
        let (leaf_der, new_der, old_der) = (parse(&chain[0]), parse(&new_root), parse(&old_root));
        let (_, leaf) = X509Certificate::from_der(&leaf_der).expect("leaf");
        let (_, renewed) = X509Certificate::from_der(&new_der).expect("new");
        let (_, previous) = X509Certificate::from_der(&old_der).expect("old");
        assert_eq!(renewed.subject(), previous.subject());
        assert_eq!(leaf.issuer(), renewed.subject());
        assert!(
            leaf.verify_signature(Some(renewed.public_key())).is_ok(),
            "the old leaf verifies under the new root"
        );
        assert!(
            Authority::renew_root(&chain[0], &key, ttl).is_err(),
            "only roots"
        );
    }
}
