//! Sidecar proxies: the virtual inbound and outbound listeners, inbound clusters and routes
//! (`listener`), the outbound listeners per service port (`outbound`), and the DNS name table
//! istio-agent answers from (`name_table`).

pub mod listener;
pub mod name_table;
pub mod outbound;
