//! istiod's own flags (`pilot-discovery discovery`), read as Rudder's: an istiod values file's
//! `extraContainerArgs`, or a command line written for istiod, starts the daemon instead of
//! stopping it at the first unknown flag. A flag with a Rudder equivalent becomes it; one Rudder
//! does not act on is accepted and named in a start-up warning (never silently dropped).

use std::ffi::OsString;

/// istiod flag → Rudder flag taking the same value.
const RENAMED: &[(&str, &str)] = &[
    ("log_output_level", "--log-level"),
    ("monitoringAddr", "--monitoring-addr"),
    ("httpAddr", "--http-addr"),
    ("httpsAddr", "--https-addr"),
    ("grpcAddr", "--grpc-addr"),
    ("secureGRPCAddr", "--secure-grpc-addr"),
    ("domain", "--domain-suffix"),
    ("clusterID", "--cluster-id"),
    ("clusterAliases", "--cluster-aliases"),
    ("meshConfig", "--mesh-config"),
    ("kubeconfig", "--kubeconfig"),
    ("namespace", "--system-namespace"),
    ("configDir", "--config-dir"),
    ("shutdownDuration", "--drain-duration"),
    ("keepaliveInterval", "--keepalive-interval"),
    ("keepaliveTimeout", "--keepalive-timeout"),
    (
        "keepaliveMaxServerConnectionAge",
        "--keepalive-max-server-connection-age",
    ),
    (
        "keepaliveMaxServerConnectionAgeGrace",
        "--keepalive-max-server-connection-age-grace",
    ),
];

/// istiod flags that take a value and that Rudder accepts without acting on them, with why.
const NOT_READ: &[(&str, &str)] = &[
    ("log_target", "logs go to standard error"),
    ("log_caller", "log lines do not name their caller"),
    ("log_stacktrace_level", "no stack traces in log lines"),
    (
        "log_rotate",
        "logs go to standard error, not to a rotated file",
    ),
    (
        "log_rotate_max_age",
        "logs go to standard error, not to a rotated file",
    ),
    (
        "log_rotate_max_backups",
        "logs go to standard error, not to a rotated file",
    ),
    (
        "log_rotate_max_size",
        "logs go to standard error, not to a rotated file",
    ),
    (
        "registries",
        "the registries are Kubernetes, or the config directory",
    ),
    (
        "clusterRegistriesNamespace",
        "remote secrets are read from the system namespace (istiod sets this flag from it too)",
    ),
    (
        "networksConfig",
        "the networks file is not read (meshNetworks is read from the mesh ConfigMap)",
    ),
    ("cniNamespace", "the CNI node agent is not watched"),
    (
        "caCertFile",
        "the serving certificate comes from Rudder's CA",
    ),
    (
        "tlsCertFile",
        "the serving certificate comes from Rudder's CA",
    ),
    (
        "tlsKeyFile",
        "the serving certificate comes from Rudder's CA",
    ),
    (
        "kubernetesApiQPS",
        "Kubernetes API calls are not rate-limited here",
    ),
    (
        "kubernetesApiBurst",
        "Kubernetes API calls are not rate-limited here",
    ),
    ("vklog", "kube client logging follows the log level"),
];

/// istiod boolean flags Rudder accepts without acting on them.
const NOT_READ_SWITCHES: &[(&str, &str)] = &[
    ("profile", "profiling endpoints are not served"),
    (
        "log_rotate_compress",
        "logs go to standard error, not to a rotated file",
    ),
];

/// `args` with istiod's flags replaced by Rudder's, and the istiod flags accepted but not acted
/// on, each with why. Only `--name value` and `--name=value` forms are read (Go's flag forms);
/// anything else passes through for clap to judge.
pub fn translate(args: Vec<OsString>) -> (Vec<OsString>, Vec<(String, &'static str)>) {
    let mut out = Vec::with_capacity(args.len());
    let mut ignored = Vec::new();
    let mut iter = args.into_iter().peekable();
    while let Some(arg) = iter.next() {
        let Some(text) = arg.to_str().map(str::to_string) else {
            out.push(arg);
            continue;
        };
        let Some(flag) = text.strip_prefix("--") else {
            out.push(arg);
            continue;
        };
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (flag, None),
        };
        let value = |iter: &mut std::iter::Peekable<std::vec::IntoIter<OsString>>| {
            inline.clone().or_else(|| {
                iter.next_if(|v| !v.to_string_lossy().starts_with("--"))
                    .map(|v| v.to_string_lossy().into_owned())
            })
        };
        if let Some((_, rudder)) = RENAMED.iter().find(|(istiod, _)| *istiod == name) {
            match value(&mut iter) {
                // istiod's `:15014` is every address; Rudder's addresses name the host.
                Some(v) if name.ends_with("Addr") && v.starts_with(':') => {
                    out.push(format!("{rudder}=0.0.0.0{v}").into())
                }
                Some(v) => out.push(format!("{rudder}={v}").into()),
                None => out.push((*rudder).into()),
            }
        } else if name == "ctrlz_port" || name == "ctrlz_address" {
            // Rudder takes ControlZ's address whole: the port with loopback, or the host on 9876.
            if let Some(v) = value(&mut iter) {
                let addr = if name == "ctrlz_port" {
                    format!("127.0.0.1:{v}")
                } else if v == "localhost" {
                    "127.0.0.1:9876".to_string()
                } else {
                    format!("{v}:9876")
                };
                out.push(format!("--ctrlz-addr={addr}").into());
            }
        } else if name == "log_as_json" {
            let on = inline.as_deref().is_none_or(|v| v != "false");
            out.push(format!("--log-format={}", if on { "json" } else { "text" }).into());
        } else if let Some((_, why)) = NOT_READ.iter().find(|(istiod, _)| *istiod == name) {
            value(&mut iter);
            ignored.push((format!("--{name}"), *why));
        } else if let Some((_, why)) = NOT_READ_SWITCHES.iter().find(|(istiod, _)| *istiod == name)
        {
            ignored.push((format!("--{name}"), *why));
        } else {
            out.push(arg);
        }
    }
    (out, ignored)
}

#[cfg(test)]
mod tests {
    use super::translate;
    use std::ffi::OsString;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn istiod_flags_become_rudders_and_the_rest_are_named() {
        let (out, ignored) = translate(args(&[
            "rudder",
            "serve",
            "--log_output_level=default:debug",
            "--log_as_json",
            "--monitoringAddr",
            ":15014",
            "--domain=cluster.example",
            "--keepaliveMaxServerConnectionAge",
            "30m",
            "--profile",
            "--caCertFile",
            "/etc/ca.pem",
            "--trust-domain=td",
        ]));
        assert_eq!(
            out,
            args(&[
                "rudder",
                "serve",
                "--log-level=default:debug",
                "--log-format=json",
                "--monitoring-addr=0.0.0.0:15014",
                "--domain-suffix=cluster.example",
                "--keepalive-max-server-connection-age=30m",
                "--trust-domain=td",
            ])
        );
        let names: Vec<&str> = ignored.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["--profile", "--caCertFile"]);
        let (out, _) = translate(args(&["rudder", "--log_as_json=false"]));
        assert_eq!(out, args(&["rudder", "--log-format=text"]));
    }
}
