//! Workload certificates for proxies that ask for them over SDS (`default`, `ROOTCA`) instead of
//! running an agent that sends CSRs. One key and chain per identity, reused until half its life is
//! gone, so every push does not mint a new key.

use super::shared::SharedAuthority;
use super::{CaError, Identity};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Issued {
    chain: Arc<String>,
    key: Arc<String>,
    renew_at: Instant,
    /// The trust bundle when issued: after a root rotation the chain is issued again, so it ends
    /// at the root proxies now trust.
    roots: Arc<str>,
}

pub struct WorkloadIssuer {
    authority: Arc<SharedAuthority>,
    issued: Mutex<HashMap<Identity, Issued>>,
}

impl WorkloadIssuer {
    pub fn new(authority: Arc<SharedAuthority>) -> WorkloadIssuer {
        WorkloadIssuer {
            authority,
            issued: Mutex::default(),
        }
    }

    /// The chain (leaf first) and private key for `id`, PEM.
    pub fn certificate(&self, id: &Identity) -> Result<(Arc<String>, Arc<String>), CaError> {
        let now = Instant::now();
        let roots = self.authority.root_pem();
        if let Some(i) = self
            .issued
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .filter(|i| i.renew_at > now && i.roots == roots)
        {
            return Ok((i.chain.clone(), i.key.clone()));
        }
        let authority = self.authority.load();
        let (chain, key) = authority.issue_workload(id)?;
        let issued = Issued {
            chain: Arc::new(chain.concat()),
            key: Arc::new(key),
            renew_at: now + authority.default_ttl / 2,
            roots,
        };
        let out = (issued.chain.clone(), issued.key.clone());
        self.issued
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), issued);
        Ok(out)
    }

    pub fn root_pem(&self) -> Arc<str> {
        self.authority.root_pem()
    }

    /// How long an issued certificate is reused.
    pub fn reuse_for(&self) -> Duration {
        self.authority.load().default_ttl / 2
    }
}

impl crate::model::identity::WorkloadCertificates for WorkloadIssuer {
    fn certificate(&self, id: &Identity) -> Result<(Arc<String>, Arc<String>), String> {
        WorkloadIssuer::certificate(self, id).map_err(|e| e.to_string())
    }

    fn root_pem(&self) -> Arc<str> {
        WorkloadIssuer::root_pem(self)
    }
}

/// With an external CA Rudder has no key to issue certificates over SDS: proxies send CSRs (the
/// Istio agent does). The root is still served (`ROOTCA`).
pub struct ExternalRoots {
    pub root_pem: Arc<str>,
}

impl crate::model::identity::WorkloadCertificates for ExternalRoots {
    fn certificate(&self, _id: &Identity) -> Result<(Arc<String>, Arc<String>), String> {
        Err(
            "with an external CA (EXTERNAL_CA) workload certificates come from CSRs, not over SDS"
                .into(),
        )
    }

    fn root_pem(&self) -> Arc<str> {
        self.root_pem.clone()
    }
}
