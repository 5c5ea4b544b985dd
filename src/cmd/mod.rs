//! Subcommands of the `rudder` binary.

pub mod log;
pub mod serve;
pub mod validate;

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
