//! The registry of connected streams and the push fan-out. Each stream has a one-slot mailbox (a
//! new push merges into a pending one, so a proxy never has more than one push queued) and routing
//! state derived from its subscriptions, which the fan-out reads to wake only the streams a partial
//! push concerns. The debug status is published beside it and never read by the fan-out.

use super::status::{ConnectionStatus, Watches};
use crate::xds::generate::util::parse_outbound_cluster;
use crate::xds::proxy::Proxy;
use crate::xds::push::request::PushRequest;
use crate::xds::types::TypeUrl;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// Locks a mutex whose holder may have panicked: the data is still the last value written.
pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub(super) struct Mailbox {
    pending: Mutex<Option<PushRequest>>,
    pub(super) notify: Notify,
}

impl Mailbox {
    /// The pending push, if any, leaving the slot empty.
    pub(super) fn take(&self) -> Option<PushRequest> {
        lock(&self.pending).take()
    }

    fn put(&self, request: &PushRequest) {
        let mut pending = lock(&self.pending);
        match pending.as_mut() {
            Some(p) => p.merge(request.clone()),
            None => *pending = Some(request.clone()),
        }
        drop(pending);
        self.notify.notify_one();
    }
}

/// What the fan-out needs to know of a stream.
#[derive(Default)]
struct Routing {
    types: BTreeSet<TypeUrl>,
    eds_wildcard: bool,
    /// The services of the EDS names the stream watches, derived when those names change.
    eds_hosts: Arc<HashSet<String>>,
    /// The EDS names `eds_hosts` was derived from.
    eds_names: Option<Arc<BTreeSet<String>>>,
}

impl Routing {
    /// A partial push matters only to streams watching one of its types, and for EDS an endpoint of
    /// a changed service; the fan-out does not even wake the others (a change to one service would
    /// otherwise wake every proxy of the mesh and queue the ones that need it behind the ones that
    /// do not).
    fn wants(&self, push: &PushRequest) -> bool {
        if push.full
            || push
                .types
                .iter()
                .any(|t| *t != TypeUrl::Endpoint && self.types.contains(t))
        {
            return true;
        }
        if !(self.types.contains(&TypeUrl::Endpoint) && push.types.contains(&TypeUrl::Endpoint)) {
            return false;
        }
        // Look the smaller set up in the larger.
        self.eds_wildcard
            || if push.eds_hosts.len() <= self.eds_hosts.len() {
                push.eds_hosts.iter().any(|h| self.eds_hosts.contains(h))
            } else {
                self.eds_hosts.iter().any(|h| push.eds_hosts.contains(h))
            }
    }

    fn update(&mut self, watches: &Watches) {
        self.types = watches.keys().copied().collect();
        let eds = watches.get(&TypeUrl::Endpoint);
        self.eds_wildcard = eds.is_some_and(|w| w.wildcard);
        let names = eds.map(|w| w.names.clone());
        let unchanged = match (&names, &self.eds_names) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if !unchanged {
            self.eds_hosts = Arc::new(
                names
                    .iter()
                    .flat_map(|n| n.iter())
                    .filter_map(|name| parse_outbound_cluster(name))
                    .map(|(_, _, host)| host.to_string())
                    .collect(),
            );
            self.eds_names = names;
        }
    }
}

struct Entry {
    mailbox: Arc<Mailbox>,
    routing: Arc<Mutex<Routing>>,
    status: Arc<Mutex<ConnectionStatus>>,
}

/// Every connected stream.
#[derive(Default)]
pub(super) struct Connections {
    entries: Mutex<HashMap<u64, Entry>>,
    next_id: AtomicU64,
}

/// A stream's side of its registry entry.
pub(super) struct Registration {
    pub(super) id: u64,
    pub(super) mailbox: Arc<Mailbox>,
    routing: Arc<Mutex<Routing>>,
    status: Arc<Mutex<ConnectionStatus>>,
}

impl Registration {
    /// Publishes the stream's subscriptions to the fan-out and to `/debug`.
    pub(super) fn publish(&self, watches: &Watches) {
        lock(&self.routing).update(watches);
        lock(&self.status).types = watches.clone();
    }
}

impl Connections {
    pub(super) fn register(&self, proxy: Arc<Proxy>, delta: bool) -> Registration {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let mailbox = Arc::new(Mailbox {
            pending: Mutex::new(None),
            notify: Notify::new(),
        });
        let routing = Arc::new(Mutex::new(Routing::default()));
        let status = Arc::new(Mutex::new(ConnectionStatus {
            id: format!("{}-{id}", proxy.id),
            proxy,
            delta,
            connected_at_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            types: Arc::default(),
        }));
        lock(&self.entries).insert(
            id,
            Entry {
                mailbox: mailbox.clone(),
                routing: routing.clone(),
                status: status.clone(),
            },
        );
        Registration {
            id,
            mailbox,
            routing,
            status,
        }
    }

    /// False when the stream was not registered.
    pub(super) fn unregister(&self, id: u64) -> bool {
        lock(&self.entries).remove(&id).is_some()
    }

    /// Queues `request` in the mailbox of every stream it concerns; returns how many streams
    /// are connected.
    pub(super) fn fan_out(&self, request: &PushRequest) -> usize {
        let entries = lock(&self.entries);
        for entry in entries.values() {
            if request.full || lock(&entry.routing).wants(request) {
                entry.mailbox.put(request);
            }
        }
        entries.len()
    }

    pub(super) fn statuses(&self) -> Vec<ConnectionStatus> {
        let mut out: Vec<_> = lock(&self.entries)
            .values()
            .map(|e| lock(&e.status).clone())
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xds::server::status::TypeStatus;
    use std::collections::BTreeMap;
    use std::time::Instant;

    fn push(full: bool, hosts: &[&str]) -> PushRequest {
        PushRequest {
            full,
            types: if hosts.is_empty() {
                BTreeSet::new()
            } else {
                [TypeUrl::Endpoint].into()
            },
            eds_hosts: hosts.iter().map(|h| h.to_string()).collect(),
            started: Instant::now(),
            reason: "test".into(),
            queued: Instant::now(),
        }
    }

    fn watching(eds: TypeStatus) -> Watches {
        Arc::new(BTreeMap::from([(TypeUrl::Endpoint, eds)]))
    }

    #[test]
    fn endpoint_pushes_reach_only_streams_watching_a_changed_service() {
        let mut routing = Routing::default();
        assert!(
            routing.wants(&push(true, &[])),
            "a full push reaches everyone"
        );
        assert!(
            !routing.wants(&push(false, &["a.ns.svc.cluster.local"])),
            "no EDS watch"
        );
        let names = Arc::new(BTreeSet::from([
            "outbound|80||a.ns.svc.cluster.local".to_string(),
            "outbound|80|v1|c.ns.svc.cluster.local".to_string(),
        ]));
        routing.update(&watching(TypeStatus {
            names: names.clone(),
            ..Default::default()
        }));
        for changed in [&["a.ns.svc.cluster.local"][..], &["c.ns.svc.cluster.local"]] {
            assert!(routing.wants(&push(false, changed)), "{changed:?}");
        }
        assert!(!routing.wants(&push(false, &["b.ns.svc.cluster.local"])));
        // Many changed services, few watched: the lookup goes the other way, same answer.
        let many: Vec<String> = (0..10)
            .map(|i| format!("x{i}.ns.svc.cluster.local"))
            .collect();
        let mut many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(!routing.wants(&push(false, &many)));
        many.push("a.ns.svc.cluster.local");
        assert!(routing.wants(&push(false, &many)));

        // Recording a response (same names) keeps the derived hosts; a new subscription replaces them.
        let kept = routing.eds_hosts.clone();
        routing.update(&watching(TypeStatus {
            names: names.clone(),
            nonce_sent: "2".into(),
            ..Default::default()
        }));
        assert!(Arc::ptr_eq(&kept, &routing.eds_hosts));
        routing.update(&watching(TypeStatus {
            names: Arc::new(["outbound|80||b.ns.svc.cluster.local".to_string()].into()),
            ..Default::default()
        }));
        assert!(routing.wants(&push(false, &["b.ns.svc.cluster.local"])));
        assert!(!routing.wants(&push(false, &["a.ns.svc.cluster.local"])));

        routing.update(&watching(TypeStatus {
            wildcard: true,
            ..Default::default()
        }));
        assert!(routing.wants(&push(false, &["z.ns.svc.cluster.local"])));
    }
}
