//! Leader election's metric, registered by `cmd`.

use crate::metrics::Registry;
use prometheus_client::metrics::gauge::Gauge;

/// Leader election.
pub struct LeaderMetrics {
    /// 1 while this replica holds the leader lease.
    pub leader: Gauge,
}

impl LeaderMetrics {
    pub fn register(registry: &mut Registry) -> LeaderMetrics {
        LeaderMetrics {
            leader: registry.register(
                "rudder_leader",
                "Whether this replica holds the leader lease (1) or not (0)",
                Gauge::default(),
            ),
        }
    }
}
