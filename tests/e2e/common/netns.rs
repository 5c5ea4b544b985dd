//! Pods for sidecar tests: network namespaces joined by a veth pair, with the NAT rules
//! `istio-iptables` installs (outbound TCP redirected to 15001, inbound to 15006, the proxy's own
//! traffic, uid 1337, left alone), so traffic is captured exactly as in a Kubernetes pod.
//! Needs root, `ip` and `iptables`; tests skip cleanly without them unless
//! `RUDDER_REQUIRE_PEERS=1` and root (then a missing tool is a failure).
#![allow(dead_code)]

use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// The user istio-iptables exempts from capture: the sidecar runs as it.
pub const PROXY_UID: u32 = 1337;

fn run(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args[0]))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Whether pods can be made here; prints why not (or fails, see the module doc).
pub fn available() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let tools = [("ip", "-V"), ("iptables-restore", "--version")]
        .iter()
        .all(|(t, v)| {
            Command::new(t)
                .arg(v)
                .output()
                .is_ok_and(|o| o.status.success())
        });
    if root && tools {
        // Root without the capability to make namespaces (an unprivileged container) cannot run
        // these tests at all: say so and skip, as nothing can be installed to fix it.
        static PROBES: AtomicU32 = AtomicU32::new(0);
        let probe = format!(
            "rudder-probe-{}-{}",
            std::process::id(),
            PROBES.fetch_add(1, Ordering::Relaxed)
        );
        if run(&["ip", "netns", "add", &probe]).is_ok() {
            let _ = run(&["ip", "netns", "del", &probe]);
            return true;
        }
        eprintln!("skipping: this machine does not allow network namespaces");
        return false;
    }
    if root && std::env::var("RUDDER_REQUIRE_PEERS").is_ok_and(|v| v == "1") {
        panic!("`ip` or `iptables` is missing: run scripts/setup-peers.sh");
    }
    eprintln!("skipping: sidecar capture needs root, `ip` and `iptables`");
    false
}

/// A network namespace, deleted on drop.
pub struct Pod {
    pub name: String,
    pub ip: String,
}

impl Pod {
    pub fn new(ip: &str) -> Pod {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "rudder-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        run(&["ip", "netns", "add", &name]).unwrap();
        let pod = Pod {
            name,
            ip: ip.to_string(),
        };
        pod.ip_cmd(&["link", "set", "lo", "up"]);
        pod
    }

    fn ip_cmd(&self, args: &[&str]) {
        let mut all = vec!["ip", "-n", &self.name];
        all.extend_from_slice(args);
        run(&all).unwrap();
    }

    /// Runs `f` on a thread inside this namespace: sockets it opens, threads and processes it
    /// starts live there.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        std::thread::scope(|s| {
            s.spawn(move || {
                self.enter();
                f()
            })
            .join()
            .unwrap()
        })
    }

    /// Moves the calling thread into this namespace (use on a thread of its own).
    pub fn enter(&self) {
        let ns = std::fs::File::open(format!("/var/run/netns/{}", self.name)).unwrap();
        // SAFETY: a valid namespace file descriptor; only the calling thread changes namespace.
        let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
    }

    /// Installs istio-iptables' capture rules; `exclude_inbound` ports are not redirected (as
    /// `--exclude-inbound-ports`).
    pub fn capture(&self, exclude_inbound: &[u16]) {
        let mut rules = String::from(
            "*nat\n:ISTIO_INBOUND - [0:0]\n:ISTIO_IN_REDIRECT - [0:0]\n:ISTIO_OUTPUT - [0:0]\n:ISTIO_REDIRECT - [0:0]\n",
        );
        for port in [15008, 15090, 15021, 15020].iter().chain(exclude_inbound) {
            rules.push_str(&format!(
                "-A ISTIO_INBOUND -p tcp --dport {port} -j RETURN\n"
            ));
        }
        rules.push_str(&format!(
            "-A ISTIO_INBOUND -p tcp -j ISTIO_IN_REDIRECT\n\
-A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports 15006\n\
-A ISTIO_OUTPUT -s 127.0.0.6/32 -o lo -j RETURN\n\
-A ISTIO_OUTPUT ! -d 127.0.0.1/32 -o lo -p tcp -m owner --uid-owner {uid} -j ISTIO_IN_REDIRECT\n\
-A ISTIO_OUTPUT -o lo -m owner ! --uid-owner {uid} -j RETURN\n\
-A ISTIO_OUTPUT -m owner --uid-owner {uid} -j RETURN\n\
-A ISTIO_OUTPUT -d 127.0.0.1/32 -j RETURN\n\
-A ISTIO_OUTPUT -j ISTIO_REDIRECT\n\
-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001\n\
-A PREROUTING -p tcp -j ISTIO_INBOUND\n\
-A OUTPUT -p tcp -j ISTIO_OUTPUT\n\
COMMIT\n",
            uid = PROXY_UID
        ));
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.name, "iptables-restore"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(rules.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success(), "iptables-restore failed");
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        let _ = run(&["ip", "netns", "del", &self.name]);
    }
}

/// Joins two pods with a veth pair on one /24; each routes everything (service VIPs included)
/// through it, as a pod's default route does.
pub fn link(a: &Pod, b: &Pod) {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let (va, vb) = (
        format!("rv{}a{n}", std::process::id() % 100_000),
        format!("rv{}b{n}", std::process::id() % 100_000),
    );
    run(&[
        "ip", "link", "add", &va, "type", "veth", "peer", "name", &vb,
    ])
    .unwrap();
    run(&["ip", "link", "set", &va, "netns", &a.name]).unwrap();
    run(&["ip", "link", "set", &vb, "netns", &b.name]).unwrap();
    for (pod, dev) in [(a, &va), (b, &vb)] {
        pod.ip_cmd(&["addr", "add", &format!("{}/24", pod.ip), "dev", dev]);
        pod.ip_cmd(&["link", "set", dev, "up"]);
        pod.ip_cmd(&["route", "add", "default", "dev", dev]);
    }
}
