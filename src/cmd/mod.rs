//! Subcommands of the `rudder` binary.

pub mod config_source;
mod http;
pub mod istiod_flags;
pub mod log;
pub mod precheck;
pub mod serve;
pub mod shadow;
pub mod validate;
pub mod what_if;

/// Turns transparent huge pages off for this process, unless `MIMALLOC_ALLOW_THP` is set (then
/// mimalloc decides, as it would by default). mimalloc asks for huge pages for its arenas, so each
/// page it gives back and takes again came back as a whole 2 MiB page, zeroed. In the Kubernetes
/// churn bench that was an eighth of the load generator's CPU; with it off in both, 10,000 proxies
/// sync in 3 s instead of 8–10, and the daemon holds ~610 MiB instead of ~745 (docs/performance.md).
pub fn without_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        // SAFETY: PR_SET_THP_DISABLE only sets a flag of this process; it takes no pointers.
        unsafe {
            libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
        }
    }
}

/// Raises the open-files soft limit to the hard limit: every xDS stream is a socket, and 10,000
/// proxies need more than the usual 1,024.
pub fn raise_fd_limit() {
    #[cfg(unix)]
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}
