//! The registry of connected streams and the push fan-out. Each stream has a one-slot mailbox (a
//! new push merges into a pending one, so a proxy never has more than one push queued) and routing
//! state derived from its subscriptions, which the fan-out reads to wake only the streams a partial
//! push concerns. A partial push finds its streams through an index (the streams watching each
//! type, and each service's endpoints), so its cost follows the streams it reaches, not the
//! streams connected. The debug status is published beside it and never read by the fan-out.

use super::lock::lock;
use super::watches::{ConnectionStatus, WatchMap, Watches};
use crate::xds::generate::shared::util::parse_service_cluster;
use crate::xds::proxy::Proxy;
use crate::xds::push::request::PushRequest;
use crate::xds::types::TypeUrl;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::Notify;

/// How many streams hold a push they have not finished sending. New streams wait for it to reach
/// zero (for a bounded time) before their first response: pushes to connected proxies go first,
/// and clients that connect in a loop cannot slow them down.
#[derive(Default)]
pub(super) struct PushesInFlight {
    count: AtomicUsize,
    settled: Notify,
}

impl PushesInFlight {
    /// Returns once no stream holds an unsent push, or after `max`, whichever comes first; true
    /// when it had to wait.
    pub(super) async fn settled(&self, max: Duration) -> bool {
        if self.count.load(Ordering::Acquire) == 0 {
            return false;
        }
        let _ = tokio::time::timeout(max, async {
            loop {
                let notified = self.settled.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if self.count.load(Ordering::Acquire) == 0 {
                    return;
                }
                notified.await;
            }
        })
        .await;
        true
    }

    fn ticket(self: &Arc<Self>) -> PushTicket {
        self.count.fetch_add(1, Ordering::AcqRel);
        PushTicket(self.clone())
    }
}

/// One stream's unsent push, counted in `PushesInFlight` until it is dropped: when the stream has
/// sent it, or when the stream ends.
pub(super) struct PushTicket(Arc<PushesInFlight>);

impl Drop for PushTicket {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.settled.notify_waiters();
        }
    }
}

pub(super) struct Mailbox {
    pending: Mutex<Option<(PushRequest, Option<PushTicket>)>>,
    pub(super) notify: Notify,
    in_flight: Arc<PushesInFlight>,
    /// Set while the stream waits for its client to read: its pushes are not counted in flight,
    /// or one client that does not read would hold every new stream back.
    waiting_on_client: AtomicBool,
}

impl Mailbox {
    /// The pending push, if any, leaving the slot empty; its ticket (none while the stream waits
    /// on its client) counts it as in flight until the caller drops it.
    pub(super) fn take(&self) -> Option<(PushRequest, Option<PushTicket>)> {
        lock(&self.pending).take()
    }

    /// Whether the stream is waiting for its client to read (see `waiting_on_client`).
    pub(super) fn set_waiting_on_client(&self, waiting: bool) {
        self.waiting_on_client.store(waiting, Ordering::Release);
    }

    fn put(&self, request: &PushRequest) {
        let mut pending = lock(&self.pending);
        match pending.as_mut() {
            Some((p, _)) => p.merge(request.clone()),
            None => {
                let ticket = (!self.waiting_on_client.load(Ordering::Acquire))
                    .then(|| self.in_flight.ticket());
                *pending = Some((request.clone(), ticket));
            }
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
    /// do not). The fan-out's index answers the same (`FanOutIndex::streams`); this is its
    /// specification, which the tests hold it to.
    #[cfg(test)]
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

    /// Follows `watches`; `derive` gives the services of a set of EDS names. Returns the types
    /// watched before, when they changed (most updates record a response or an ACK, and change
    /// neither types nor names).
    fn update(
        &mut self,
        watches: &WatchMap,
        derive: impl FnOnce(&Arc<BTreeSet<String>>) -> Arc<HashSet<String>>,
    ) -> Option<BTreeSet<TypeUrl>> {
        let old_types = (!self.types.iter().eq(watches.keys()))
            .then(|| std::mem::replace(&mut self.types, watches.keys().copied().collect()));
        let eds = watches.get(&TypeUrl::Endpoint);
        self.eds_wildcard = eds.is_some_and(|w| w.wildcard);
        // Compared by address before anything is cloned: the names are shared by every stream
        // with the same subscription, and this runs after every response and every ACK.
        let names = eds.map(|w| &w.names);
        let unchanged = match (names, &self.eds_names) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if !unchanged {
            let names = names.cloned();
            self.eds_hosts = names.as_ref().map(derive).unwrap_or_default();
            self.eds_names = names;
        }
        old_types
    }
}

/// The services of a set of EDS names.
fn services_of(names: &BTreeSet<String>) -> HashSet<String> {
    names
        .iter()
        .filter_map(|name| parse_service_cluster(name))
        .map(|(_, _, host)| host.to_string())
        .collect()
}

/// A set of EDS names and the services derived from it, both held weakly.
type DerivedServices = (Weak<BTreeSet<String>>, Weak<HashSet<String>>);

/// Streams whose EDS subscriptions name the same services: equal subscriptions share one set of
/// names (`SharedNames`), so they share one set of services and one group.
struct HostGroup {
    hosts: Arc<HashSet<String>>,
    streams: HashSet<u64>,
}

/// Which streams watch which types, and which services' endpoints: the streams a partial push
/// concerns, found without visiting the others.
#[derive(Default)]
struct FanOutIndex {
    /// Streams by watched type, EDS aside.
    by_type: HashMap<TypeUrl, HashSet<u64>>,
    /// Groups by the address of their set of services (which the group holds, so the address is
    /// not reused while it lives).
    groups: HashMap<usize, HostGroup>,
    /// Service → the groups watching its endpoints. In a mesh where every proxy watches every
    /// service, each service is here once, not once per stream.
    by_host: HashMap<String, HashSet<usize>>,
    /// Streams watching every endpoint (a wildcard EDS subscription).
    wildcard: HashSet<u64>,
    /// Sets of EDS names (by address; the weak reference keeps the address from being reused)
    /// → the services derived from them, shared by the streams subscribed to the same names.
    derived: HashMap<usize, DerivedServices>,
}

impl FanOutIndex {
    /// Moves stream `id` from the types of `old` to those of `new`.
    fn retype(&mut self, id: u64, old: &BTreeSet<TypeUrl>, new: &BTreeSet<TypeUrl>) {
        for t in old.difference(new) {
            if let Some(ids) = self.by_type.get_mut(t) {
                ids.remove(&id);
            }
        }
        for t in new.difference(old) {
            self.by_type.entry(*t).or_default().insert(id);
        }
    }

    /// The services of `names`, shared with the streams subscribed to the same set.
    fn services_of(&mut self, names: &Arc<BTreeSet<String>>) -> Arc<HashSet<String>> {
        let key = Arc::as_ptr(names) as usize;
        if let Some((n, h)) = self.derived.get(&key)
            && let (Some(n), Some(h)) = (n.upgrade(), h.upgrade())
            && Arc::ptr_eq(&n, names)
        {
            return h;
        }
        let hosts = Arc::new(services_of(names));
        self.derived
            .insert(key, (Arc::downgrade(names), Arc::downgrade(&hosts)));
        if self.derived.len() > 2 * self.groups.len() + 64 {
            self.derived
                .retain(|_, (n, h)| n.strong_count() > 0 && h.strong_count() > 0);
        }
        hosts
    }

    /// Moves stream `id` from the group of `old` to the group of `new`.
    fn reindex(
        &mut self,
        id: u64,
        old: &Arc<HashSet<String>>,
        new: &Arc<HashSet<String>>,
        wildcard: bool,
    ) {
        let old_key = Arc::as_ptr(old) as usize;
        if let Some(group) = self.groups.get_mut(&old_key) {
            group.streams.remove(&id);
            if group.streams.is_empty()
                && let Some(group) = self.groups.remove(&old_key)
            {
                for host in group.hosts.iter() {
                    if let Some(keys) = self.by_host.get_mut(host) {
                        keys.remove(&old_key);
                        if keys.is_empty() {
                            self.by_host.remove(host);
                        }
                    }
                }
            }
        }
        if !new.is_empty() {
            let new_key = Arc::as_ptr(new) as usize;
            if !self.groups.contains_key(&new_key) {
                for host in new.iter() {
                    self.by_host
                        .entry(host.clone())
                        .or_default()
                        .insert(new_key);
                }
            }
            self.groups
                .entry(new_key)
                .or_insert_with(|| HostGroup {
                    hosts: new.clone(),
                    streams: HashSet::new(),
                })
                .streams
                .insert(id);
        }
        if wildcard {
            self.wildcard.insert(id);
        } else {
            self.wildcard.remove(&id);
        }
    }

    /// The streams a partial push concerns: those watching one of its types other than EDS, and
    /// for EDS those watching an endpoint of a changed service (`Routing::wants`).
    fn streams(&self, push: &PushRequest) -> HashSet<u64> {
        let mut out = HashSet::new();
        for t in &push.types {
            if *t == TypeUrl::Endpoint {
                out.extend(&self.wildcard);
                let groups: HashSet<usize> = push
                    .eds_hosts
                    .iter()
                    .filter_map(|host| self.by_host.get(host))
                    .flatten()
                    .copied()
                    .collect();
                for key in groups {
                    if let Some(group) = self.groups.get(&key) {
                        out.extend(&group.streams);
                    }
                }
            } else if let Some(ids) = self.by_type.get(t) {
                out.extend(ids);
            }
        }
        out
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
    fan_out_index: Arc<Mutex<FanOutIndex>>,
    next_id: AtomicU64,
    pub(super) in_flight: Arc<PushesInFlight>,
}

/// A stream's side of its registry entry.
pub(super) struct Registration {
    pub(super) id: u64,
    pub(super) mailbox: Arc<Mailbox>,
    routing: Arc<Mutex<Routing>>,
    status: Arc<Mutex<ConnectionStatus>>,
    fan_out_index: Arc<Mutex<FanOutIndex>>,
}

impl Registration {
    /// Publishes the stream's subscriptions to the fan-out and to `/debug`.
    pub(super) fn publish(&self, watches: &WatchMap) {
        let mut routing = lock(&self.routing);
        let (old, old_wildcard) = (routing.eds_hosts.clone(), routing.eds_wildcard);
        let old_types = routing.update(watches, |names| {
            lock(&self.fan_out_index).services_of(names)
        });
        let hosts_changed =
            !Arc::ptr_eq(&old, &routing.eds_hosts) || old_wildcard != routing.eds_wildcard;
        if hosts_changed || old_types.is_some() {
            let mut index = lock(&self.fan_out_index);
            if let Some(old_types) = &old_types {
                index.retype(self.id, old_types, &routing.types);
            }
            if hosts_changed {
                index.reindex(self.id, &old, &routing.eds_hosts, routing.eds_wildcard);
            }
        }
        drop(routing);
        mirror(&mut lock(&self.status).types, watches);
    }
}

/// Copies a stream's watches into its published status, in place. The stream used to publish a
/// map it shared, so its next change (one per response and one per ACK) copied the whole map: 8%
/// of the daemon's CPU in an endpoint push. Now only `/debug`, while it reads, holds the status
/// map.
fn mirror(status: &mut Watches, watches: &WatchMap) {
    let status = Arc::make_mut(status);
    status.retain(|t, _| watches.contains_key(t));
    for (t, w) in watches.iter() {
        match status.get_mut(t) {
            Some(s) => s.copy_from(w),
            None => {
                status.insert(*t, w.clone());
            }
        }
    }
}

impl Connections {
    pub(super) fn register(&self, proxy: Arc<Proxy>, delta: bool) -> Registration {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let mailbox = Arc::new(Mailbox {
            pending: Mutex::new(None),
            notify: Notify::new(),
            in_flight: self.in_flight.clone(),
            waiting_on_client: AtomicBool::new(false),
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
            fan_out_index: self.fan_out_index.clone(),
        }
    }

    /// False when the stream was not registered.
    pub(super) fn unregister(&self, id: u64) -> bool {
        let Some(entry) = lock(&self.entries).remove(&id) else {
            return false;
        };
        let routing = lock(&entry.routing);
        let mut index = lock(&self.fan_out_index);
        index.retype(id, &routing.types, &BTreeSet::new());
        index.reindex(id, &routing.eds_hosts, &Arc::default(), false);
        true
    }

    /// Queues `request` in the mailbox of every stream it concerns; returns how many streams
    /// are connected.
    pub(super) fn fan_out(&self, request: &PushRequest) -> usize {
        if !request.full {
            let streams = lock(&self.fan_out_index).streams(request);
            let entries = lock(&self.entries);
            for id in streams {
                if let Some(entry) = entries.get(&id) {
                    entry.mailbox.put(request);
                }
            }
            return entries.len();
        }
        let entries = lock(&self.entries);
        for entry in entries.values() {
            entry.mailbox.put(request);
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
            eds_hosts: Arc::new(hosts.iter().map(|h| h.to_string()).collect()),
            started: Instant::now(),
            reason: "test".into(),
            queued: Instant::now(),
        }
    }

    fn follow(routing: &mut Routing, watches: WatchMap) {
        let _ = routing.update(&watches, |names| Arc::new(services_of(names)));
    }

    fn watching(eds: TypeStatus) -> WatchMap {
        BTreeMap::from([(TypeUrl::Endpoint, eds)])
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
        follow(
            &mut routing,
            watching(TypeStatus {
                names: names.clone(),
                ..Default::default()
            }),
        );
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
        follow(
            &mut routing,
            watching(TypeStatus {
                names: names.clone(),
                nonce_sent: "2".into(),
                ..Default::default()
            }),
        );
        assert!(Arc::ptr_eq(&kept, &routing.eds_hosts));
        follow(
            &mut routing,
            watching(TypeStatus {
                names: Arc::new(["outbound|80||b.ns.svc.cluster.local".to_string()].into()),
                ..Default::default()
            }),
        );
        assert!(routing.wants(&push(false, &["b.ns.svc.cluster.local"])));
        assert!(!routing.wants(&push(false, &["a.ns.svc.cluster.local"])));

        follow(
            &mut routing,
            watching(TypeStatus {
                wildcard: true,
                ..Default::default()
            }),
        );
        assert!(routing.wants(&push(false, &["z.ns.svc.cluster.local"])));
    }

    fn sidecar() -> Arc<Proxy> {
        let node = envoy_types::pb::envoy::config::core::v3::Node {
            id: "sidecar~10.0.0.1~p.ns~ns.svc.cluster.local".into(),
            ..Default::default()
        };
        Arc::new(Proxy::from_node(Some(&node)).unwrap())
    }

    fn eds_watch(hosts: &[&str]) -> WatchMap {
        watching(TypeStatus {
            names: Arc::new(
                hosts
                    .iter()
                    .map(|h| format!("outbound|80||{h}.ns.svc.cluster.local"))
                    .collect(),
            ),
            ..Default::default()
        })
    }

    /// The streams an endpoint push for `host` left mail for (taking it), checked against what
    /// each stream's `Routing::wants`, for that push and for pushes of other types.
    fn reached(streams: &[&Registration], host: &str, connections: &Connections) -> Vec<usize> {
        let eds = push(false, &[&format!("{host}.ns.svc.cluster.local")]);
        let mut address_and_eds = eds.clone();
        address_and_eds.types.insert(TypeUrl::Address);
        let mut secret = push(false, &[]);
        secret.types.insert(TypeUrl::Secret);
        let mut result = Vec::new();
        for p in [secret, address_and_eds, eds] {
            connections.fan_out(&p);
            result = (0..streams.len())
                .filter(|&i| streams[i].mailbox.take().is_some())
                .collect();
            let wanted: Vec<usize> = (0..streams.len())
                .filter(|&i| {
                    lock(&connections.entries).contains_key(&streams[i].id)
                        && lock(&streams[i].routing).wants(&p)
                })
                .collect();
            assert_eq!(result, wanted, "{p:?}");
        }
        result
    }

    #[test]
    fn endpoint_pushes_follow_the_index_as_subscriptions_change() {
        let connections = Connections::default();
        let proxy = sidecar();
        let [a, b, c] = [0; 3].map(|_| connections.register(proxy.clone(), false));
        a.publish(&eds_watch(&["x", "y"]));
        b.publish(&eds_watch(&["y"]));
        let streams = [&a, &b, &c];
        assert_eq!(reached(&streams, "x", &connections), [0]);
        assert_eq!(reached(&streams, "y", &connections), [0, 1]);
        assert_eq!(reached(&streams, "z", &connections), Vec::<usize>::new());

        // A new subscription moves the stream; a wildcard one reaches it for every service; other
        // types are found by type.
        a.publish(&eds_watch(&["z"]));
        b.publish(&Arc::new(BTreeMap::from([
            (
                TypeUrl::Endpoint,
                TypeStatus {
                    names: eds_watch(&["y"])[&TypeUrl::Endpoint].names.clone(),
                    ..Default::default()
                },
            ),
            (TypeUrl::Address, TypeStatus::default()),
            (TypeUrl::Secret, TypeStatus::default()),
        ])));
        c.publish(&watching(TypeStatus {
            wildcard: true,
            ..Default::default()
        }));
        assert_eq!(reached(&streams, "x", &connections), [2]);
        assert_eq!(reached(&streams, "z", &connections), [0, 2]);

        // A stream that leaves is no longer reached; a full push still reaches every stream.
        assert!(connections.unregister(a.id));
        assert_eq!(reached(&streams, "z", &connections), [2]);
        assert!(
            !lock(&connections.fan_out_index)
                .by_host
                .contains_key("z.ns.svc.cluster.local")
        );
        connections.fan_out(&push(true, &[]));
        assert!(b.mailbox.take().is_some() && c.mailbox.take().is_some());

        // Streams subscribed to one shared set of names share one set of services and one group:
        // each service is indexed once, however many streams watch it.
        let shared = eds_watch(&["w1", "w2"]);
        let [d, e] = [0; 2].map(|_| connections.register(proxy.clone(), false));
        d.publish(&shared);
        e.publish(&shared);
        assert!(Arc::ptr_eq(
            &lock(&d.routing).eds_hosts,
            &lock(&e.routing).eds_hosts
        ));
        let groups_of_w1 = |c: &Connections| {
            lock(&c.fan_out_index)
                .by_host
                .get("w1.ns.svc.cluster.local")
                .map_or(0, HashSet::len)
        };
        assert_eq!(groups_of_w1(&connections), 1);
        assert_eq!(reached(&[&d, &e], "w1", &connections), [0, 1]);
        assert!(connections.unregister(d.id) && connections.unregister(e.id));
        assert_eq!(groups_of_w1(&connections), 0);
    }

    #[tokio::test]
    async fn new_streams_wait_for_unsent_pushes_within_a_bound() {
        let connections = Connections::default();
        let proxy = sidecar();
        let in_flight = connections.in_flight.clone();
        assert!(
            !in_flight.settled(Duration::from_secs(60)).await,
            "nothing to wait for"
        );

        let [a, b] = [0; 2].map(|_| connections.register(proxy.clone(), false));
        connections.fan_out(&push(true, &[]));
        connections.fan_out(&push(true, &[]));
        let waiter = tokio::spawn({
            let in_flight = in_flight.clone();
            async move { in_flight.settled(Duration::from_secs(60)).await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            !waiter.is_finished(),
            "two unsent pushes (merged ones count once)"
        );
        let (_, sent) = a.mailbox.take().unwrap();
        assert!(sent.is_some());
        drop(sent);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!waiter.is_finished(), "one unsent push left");
        // A stream that ends takes its unsent push with it, and the waiter goes on at once (its
        // own bound is a minute away).
        assert!(connections.unregister(b.id));
        drop(b);
        let woke = tokio::time::timeout(Duration::from_secs(30), waiter).await;
        assert!(matches!(woke, Ok(Ok(true))), "{woke:?}");

        // A stream waiting for its client to read holds nobody back.
        assert!(connections.unregister(a.id));
        let c = connections.register(proxy.clone(), false);
        c.mailbox.set_waiting_on_client(true);
        connections.fan_out(&push(true, &[]));
        assert!(!in_flight.settled(Duration::from_secs(60)).await);
        c.mailbox.set_waiting_on_client(false);
        assert!(c.mailbox.take().is_some_and(|(_, ticket)| ticket.is_none()));

        // Bounded: a push that is never sent holds a new stream back only for the limit.
        connections.fan_out(&push(true, &[]));
        let started = std::time::Instant::now();
        assert!(in_flight.settled(Duration::from_millis(200)).await);
        assert!(started.elapsed() >= Duration::from_millis(200));
    }

    /// Publishing copies the watches into the status `/debug` reads (the stream's map is its own,
    /// so recording a response copies nothing); a snapshot a reader holds stays as it was read.
    #[test]
    fn published_status_follows_the_stream_without_sharing_its_map() {
        let connections = Connections::default();
        let stream = connections.register(sidecar(), false);
        let mut watches = eds_watch(&["x"]);
        stream.publish(&watches);
        let read_before = connections.statuses().pop().unwrap();
        let eds = watches.get_mut(&TypeUrl::Endpoint).unwrap();
        eds.nonce_sent = "7".into();
        eds.version_sent = "v7".into();
        watches.insert(TypeUrl::Cluster, TypeStatus::default());
        stream.publish(&watches);
        let status = connections.statuses().pop().unwrap();
        assert_eq!(&*status.types[&TypeUrl::Endpoint].version_sent, "v7");
        assert_eq!(
            status.types.keys().copied().collect::<Vec<_>>(),
            [TypeUrl::Cluster, TypeUrl::Endpoint]
        );
        assert_eq!(&*read_before.types[&TypeUrl::Endpoint].version_sent, "");
        assert_eq!(read_before.types.len(), 1);
        // A type the stream stopped watching leaves the status too.
        watches.remove(&TypeUrl::Cluster);
        stream.publish(&watches);
        let status = connections.statuses().pop().unwrap();
        assert_eq!(status.types.len(), 1);
    }
}
