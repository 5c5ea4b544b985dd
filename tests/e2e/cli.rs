//! The `rudder` binary as a user runs it.

use crate::common;
use crate::common::{Daemon, eventually, http_get, rudder};
use std::io::Write;
use std::process::Stdio;

const GOOD: &str = "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: reviews}\nspec:\n  host: reviews\n  subsets: [{name: v1, labels: {version: v1}}]\n";
/// All-zero weights: istiod denies them (weights that merely do not sum to 100 it normalises).
const BAD_WEIGHTS: &str = "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: reviews, namespace: shop}\nspec:\n  hosts: [reviews]\n  http:\n  - route:\n    - destination: {host: reviews, subset: v1}\n      weight: 0\n    - destination: {host: reviews, subset: v2}\n      weight: 0\n";

fn run(args: &[&str]) -> (i32, String, String) {
    let out = rudder().args(args).output().expect("run rudder");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn validate_accepts_the_examples() {
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
    let (code, out, err) = run(&["validate", "-f", examples]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("valid"), "{out}");
}

#[test]
fn validate_reports_object_field_and_reason_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, BAD_WEIGHTS).unwrap();
    let good = dir.path().join("good.yaml");
    std::fs::write(&good, GOOD).unwrap();
    let (code, out, err) = run(&[
        "validate",
        "-f",
        bad.to_str().unwrap(),
        "-f",
        good.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("bad.yaml: VirtualService shop/reviews: spec.http[0].route: total destination weight = 0"),
        "{err}"
    );
    assert!(
        out.contains("ok: ") && out.contains("good.yaml"),
        "valid files are still reported: {out}"
    );
    assert!(err.contains("1 of 2 file(s) invalid"), "{err}");
}

#[test]
fn validate_unknown_fields_and_bad_yaml() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.yaml"),
        GOOD.replace("host: reviews", "host: reviews\n  hots: [x]"),
    )
    .unwrap();
    std::fs::write(dir.path().join("b.yaml"), "kind: [unclosed").unwrap();
    let (code, _, err) = run(&["validate", "-f", dir.path().to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("spec.hots: unknown field `hots`"), "{err}");
    assert!(err.contains("b.yaml: invalid YAML"), "{err}");
}

/// Kubernetes Gateway API objects are not served yet: named in a warning, not skipped in silence
/// as a Kubernetes Service is.
#[test]
fn validate_checks_gateway_api_objects_and_names_those_it_does_not_serve() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("route.yaml"),
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: reviews, namespace: shop}\nspec: {parentRefs: [{name: gw}], rules: [{matches: [{path: {type: PathPrefix, value: /v1}}], backendRefs: [{name: reviews, port: 9080}]}]}\n---\napiVersion: gateway.networking.x-k8s.io/v1alpha1\nkind: XListenerSet\nmetadata: {name: extra, namespace: shop}\nspec: {}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: reviews, namespace: shop}\n",
    )
    .unwrap();
    let (code, out, err) = run(&["validate", "-f", dir.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains(
            "XListenerSet shop/extra: gateway.networking.x-k8s.io/v1alpha1 XListenerSet is not served"
        ),
        "{err}"
    );
    assert!(!err.contains("HTTPRoute shop/reviews"), "{err}");
    assert!(!err.contains("Service shop/reviews"), "{err}");
    // The CRDs' own rules: a path match must be absolute, a Service backend needs a port.
    std::fs::write(
        dir.path().join("route.yaml"),
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: reviews, namespace: shop}\nspec: {parentRefs: [{name: gw}], rules: [{matches: [{path: {type: PathPrefix, value: v1}}], backendRefs: [{name: reviews}]}]}\n",
    )
    .unwrap();
    let (code, out, err) = run(&["validate", "-f", dir.path().to_str().unwrap()]);
    assert_ne!(code, 0, "{out}{err}");
    assert!(err.contains("spec.rules[0].matches[0].path.value"), "{err}");
    assert!(
        err.contains("Must have port for Service reference"),
        "{err}"
    );
}

/// Files mode has no object status: `validate` says what a route's status would, across files —
/// a mesh route whose ServiceEntry parent is in another file is accepted, one whose parent does
/// not exist (or is a Service, which files mode has none of) is named with istiod's reason.
#[test]
fn validate_names_route_parents_status_would_refuse() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("entry.yaml"),
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: payments, namespace: shop}\nspec: {hosts: [pay.example.com], ports: [{number: 80, name: http, protocol: HTTP}], resolution: DNS}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("routes.yaml"),
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: pay, namespace: shop}\nspec: {parentRefs: [{group: networking.istio.io, kind: ServiceEntry, name: payments}, {group: networking.istio.io, kind: ServiceEntry, name: refunds, port: 80}, {group: '', kind: Service, name: reviews}], rules: [{backendRefs: [{group: networking.istio.io, kind: Hostname, name: pay.example.com, port: 80}]}]}\n",
    )
    .unwrap();
    let (code, out, err) = run(&["validate", "-f", dir.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("HTTPRoute")).collect();
    assert_eq!(warnings.len(), 2, "{err}");
    assert!(
        warnings[0].ends_with("routes.yaml: HTTPRoute shop/pay: parent ServiceEntry shop/refunds port 80 not accepted (NoMatchingParent): parent service entry: \"refunds\" not found"),
        "{err}"
    );
    assert!(
        warnings[1].ends_with("HTTPRoute shop/pay: parent Service shop/reviews not accepted (NoMatchingParent): parent service: \"reviews\" not found"),
        "{err}"
    );
}

#[test]
fn validate_unreadable_inputs_exit_2() {
    let (code, _, err) = run(&["validate", "-f", "/definitely/not/here.yaml"]);
    assert_eq!(code, 2);
    assert!(err.contains("/definitely/not/here.yaml"), "{err}");
    let empty = tempfile::tempdir().unwrap();
    let (code, _, err) = run(&["validate", "-f", empty.path().to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("no .yaml, .yml or .json files found"), "{err}");
    let (code, _, _) = run(&["validate"]);
    assert_eq!(code, 2, "usage error");
    // A config file that leads nowhere is named, not skipped as if it held nothing.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("good.yaml"), GOOD).unwrap();
    std::os::unix::fs::symlink(
        dir.path().join("missing.yaml"),
        dir.path().join("gone.yaml"),
    )
    .unwrap();
    let (code, _, err) = run(&["validate", "-f", dir.path().to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("gone.yaml: cannot be read"), "{err}");
}

#[test]
fn validate_reads_stdin_and_finds_cross_file_duplicates() {
    let mut child = rudder()
        .args(["validate", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(GOOD.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.yaml"), GOOD).unwrap();
    std::fs::write(dir.path().join("b.yaml"), GOOD).unwrap();
    let (code, _, err) = run(&["validate", "-f", dir.path().to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.contains("DestinationRule default/reviews: metadata.name: already defined in"),
        "{err}"
    );
}

#[test]
fn serve_loads_watches_and_shuts_down_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("dr.yaml"), GOOD).unwrap();
    let daemon = Daemon::start(dir.path(), &["--file-debounce", "20ms"]);
    let mon = daemon.addr("monitoring");
    let http = daemon.addr("http");

    eventually(20, "ready after the initial sync", || {
        http_get(http, "/ready").0 == 200
    });
    let (status, body) = http_get(mon, "/debug/configz");
    assert_eq!(status, 200);
    let configz: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(configz["items"][0]["kind"], "DestinationRule");
    assert_eq!(configz["items"][0]["spec"]["subsets"][0]["name"], "v1");
    let (_, version) = http_get(mon, "/version");
    assert!(version.contains(env!("CARGO_PKG_VERSION")));

    // A live edit arrives without a restart; a broken edit is reported and changes nothing.
    std::fs::write(dir.path().join("vs.yaml"), BAD_WEIGHTS).unwrap();
    eventually(20, "bad file reported", || {
        http_get(mon, "/debug/sources")
            .1
            .contains("total destination weight = 0")
    });
    let (_, metrics) = http_get(mon, "/metrics");
    assert!(
        metrics.contains("rudder_config_file_errors_total{reason=\"invalid\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("rudder_config_objects{kind=\"DestinationRule\"} 1"),
        "{metrics}"
    );
    std::fs::write(
        dir.path().join("vs.yaml"),
        BAD_WEIGHTS.replace("weight: 0", "weight: 50"),
    )
    .unwrap();
    eventually(20, "fixed file loaded", || {
        http_get(mon, "/debug/configz").1.contains("VirtualService")
    });

    let status = daemon.terminate();
    assert!(status.success(), "SIGTERM is a clean shutdown: {status:?}");
}

/// The THP flag of a process, from `/proc/PID/status` (None on kernels that do not show it).
fn thp_enabled(pid: u32) -> Option<bool> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("THP_enabled:"))?;
    Some(line.trim() == "1")
}

/// The daemon turns transparent huge pages off for itself (docs/performance.md: with them on,
/// memory mimalloc gave back came back as zeroed 2 MiB pages); `MIMALLOC_ALLOW_THP` leaves them
/// as the system has them.
#[test]
fn serve_runs_without_transparent_huge_pages_unless_told() {
    if thp_enabled(std::process::id()).is_none() {
        eprintln!("skipped: this kernel does not show THP_enabled in /proc/PID/status");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().to_string_lossy().to_string();
    let files = ["--config-source", "files", "--config-dir", cfg.as_str()];
    let daemon = Daemon::spawn_env("127.0.0.1:0", &files, &[("MIMALLOC_ALLOW_THP", None)]);
    assert_eq!(thp_enabled(daemon.child.id()), Some(false));
    let told = Daemon::spawn_env("127.0.0.1:0", &files, &[("MIMALLOC_ALLOW_THP", Some("1"))]);
    assert_eq!(
        thp_enabled(told.child.id()),
        thp_enabled(std::process::id())
    );
}

#[test]
fn serve_fails_clearly_when_the_port_is_taken() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (code, _, err) = run(&[
        "serve",
        "--monitoring-addr",
        &addr,
        "--http-addr",
        "127.0.0.1:0",
        "--grpc-addr",
        "127.0.0.1:0",
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!("cannot listen on {addr} for monitoring")),
        "{err}"
    );
}

/// `rudder-loadgen` on a small mesh (60 services, 40 proxies, one change of each kind) against
/// `d`, writing into `config_dir`: its exit code, standard output and standard error.
fn run_loadgen(d: &Daemon, config_dir: &std::path::Path, extra: &[&str]) -> (i32, String, String) {
    let (grpc, monitoring) = (
        d.addr("grpc-xds").to_string(),
        d.addr("monitoring").to_string(),
    );
    let config_dir = config_dir.to_string_lossy().to_string();
    let mut args = vec![
        "--xds-addr",
        &grpc,
        "--monitoring-addr",
        &monitoring,
        "--config-dir",
        &config_dir,
        "--services",
        "60",
        "--namespaces",
        "3",
        "--proxies",
        "40",
        "--changes",
        "1",
        "--settle-ms",
        "300",
    ];
    args.extend_from_slice(extra);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rudder-loadgen"))
        .args(&args)
        .output()
        .expect("run rudder-loadgen");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// A run in a directory an earlier run wrote starts from its own mesh, however slowly the daemon
/// loads it. Here the daemon's file debounce (3 s) is longer than the run takes to sync its
/// proxies and write its first change, so the daemon loads the run's mesh and that change as one:
/// a generator that took the earlier run's mesh (same service count) for its own synced the
/// proxies with it, and its first full push never came, since the earlier run's churn service
/// was already there (issue #51, which a slow machine hit by chance).
#[test]
fn loadgen_measures_the_mesh_it_wrote_not_an_earlier_runs() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        dir.path(),
        &["--file-debounce", "3s", "--file-debounce-max", "6s"],
    );
    for extra in [&[][..], &["--realistic"], &["--sidecar-scope"]] {
        let (code, out, err) = run_loadgen(&d, dir.path(), extra);
        assert_eq!(code, 0, "{extra:?}: {out}{err}");
        assert!(
            out.contains("full push convergence, from push start"),
            "{extra:?}: {out}"
        );
    }
}

/// `rudder-loadgen` as docs/performance.md runs it, scaled down: every proxy kind syncs (wildcard
/// CDS/LDS followed by EDS/RDS, Delta and proxyless gRPC), full and endpoint pushes converge, and the
/// replay baseline replays what the daemon sent (a full push, or one endpoint push) to SotW and
/// Delta streams.
#[test]
fn loadgen_drives_the_daemon_and_the_replay_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let loadgen = |extra: &[&str]| run_loadgen(&d, dir.path(), extra);

    let (code, out, err) = loadgen(&["--sidecar-scope"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("connected and synced 40/40"), "{out}");
    for line in [
        "full push convergence, from push start",
        "endpoint push convergence, from push start",
    ] {
        assert!(out.contains(line), "{line}: {out}");
    }
    assert!(out.contains("daemon: 40 xDS streams"), "{out}");

    // Unscoped, with proxyless gRPC clients: each watches only the service it calls, so only the
    // clients of service 0 are waited for when its endpoints move.
    let (code, out, err) = loadgen(&[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("endpoint push convergence, from push start"),
        "{out}"
    );

    // The realistic mesh (VirtualServices, DestinationRules with subsets, AuthorizationPolicies,
    // Gateways) is valid config, and the results come out as JSON too.
    let json = dir.path().join("results.json");
    let (code, out, err) = loadgen(&["--realistic", "--json", &json.to_string_lossy()]);
    assert_eq!(code, 0, "{out}{err}");
    for counted in [
        "rudder_config_files_invalid",
        "rudder_config_file_errors",
        "rudder_config_unhonoured_fields",
    ] {
        assert_eq!(common::metric(&d, counted), 0.0, "{counted}");
    }
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("the JSON results")).unwrap();
    assert_eq!(results["proxies"], 40);
    assert_eq!(results["realistic"], true);
    assert!(results["endpoint_push_from_push_start"]["samples"].as_u64() > Some(0));
    assert!(results["daemon_rss_mib"].as_f64() > Some(0.0));
    // Who limited the sync: both sides' CPU while the proxies connected.
    assert!(results["loadgen_cpu_while_syncing_s"].as_f64() > Some(0.0));
    assert!(results["server_cpu_while_syncing_s"].as_f64().is_some());
    // ... which the plot script draws.
    let svg = dir.path().join("plot.svg");
    let plotted = std::process::Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/plot.py"))
        .args([&svg, &json])
        .output()
        .expect("run scripts/plot.py");
    assert!(plotted.status.success(), "{plotted:?}");
    let svg = std::fs::read_to_string(&svg).expect("the SVG");
    assert!(
        svg.starts_with("<svg") && svg.matches("<polyline").count() == 3,
        "{svg}"
    );

    // The replay serves SotW and Delta streams alike.
    let (code, out, err) = loadgen(&["--replay", "--delta-percent", "25", "--grpc-percent", "0"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("mode: replay baseline"), "{out}");
    assert!(
        out.contains("(40 Envoy-like, 25 of them Delta, 0 gRPC), connected and synced 40/40"),
        "{out}"
    );
    assert!(
        out.contains("full push convergence, from the trigger"),
        "{out}"
    );
    // The replay server is a process of its own, as the daemon is; its CPU is reported apart.
    assert!(out.contains("replay server: CPU "), "{out}");
    // What the proxies received is counted by the generator, so a replay run reports it too.
    assert!(out.contains("responses received during churn: "), "{out}");
    assert!(
        !out.contains("responses received during churn: 0 "),
        "{out}"
    );

    // The endpoint-push floor: the one changed ClusterLoadAssignment replayed to every stream.
    let (code, out, err) = loadgen(&[
        "--replay",
        "--endpoint-only",
        "--delta-percent",
        "25",
        "--grpc-percent",
        "0",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("25 of them Delta"), "{out}");
    assert!(
        out.contains("replay baseline (service 0's captured ClusterLoadAssignment"),
        "{out}"
    );
    assert!(
        out.contains("endpoint push convergence, from the trigger"),
        "{out}"
    );
}

/// Global flags may come before the subcommand (as `--help` lists them), and a `--config-dir`
/// that does not exist stops `serve` at start with a clear error instead of serving an empty mesh.
#[test]
fn serve_takes_global_flags_first_and_refuses_a_missing_config_dir() {
    let mut args = vec![
        "--log-format",
        "json",
        "--log-level=debug",
        "serve",
        "--config-source",
        "files",
        "--config-dir",
        "/nonexistent/istio-config",
    ];
    args.extend(common::LOOPBACK_PORTS);
    let (code, _, err) = run(&args);
    assert_ne!(code, 0);
    assert!(
        err.contains("--config-dir /nonexistent/istio-config: not a directory"),
        "{err}"
    );
    assert!(!err.contains("cannot be used with"), "{err}");
    let (code, out, _) = run(&["--log-format", "json", "validate", "-f", "examples"]);
    assert_eq!(code, 0, "{out}");
}

/// The README's first command as a newcomer runs it (the example mesh on istiod's default ports),
/// then exactly what its start-up log says to do next: `scripts/try-envoy.sh` connects a real
/// Envoy as a sidecar of the mesh, a request through it meets the example's fault injection, and
/// the debug URL printed shows that proxy's config. In a network namespace of its own, so the
/// default ports are free whatever else runs.
#[test]
fn first_run_next_steps_work_as_printed() {
    use std::os::unix::process::CommandExt;
    if !common::netns::available() {
        return;
    }
    let Some(envoy) = common::peers::peer("venv/bin/envoy") else {
        return;
    };
    let root = env!("CARGO_MANIFEST_DIR");
    let pod = common::netns::Pod::new("10.66.0.2");
    let cwd = tempfile::tempdir().unwrap();
    pod.run(|| {
        let mut daemon = rudder()
            .args(["serve", "--config-source", "files", "--config-dir"])
            .arg(format!("{root}/examples"))
            .current_dir(cwd.path())
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start rudder");
        let lines = std::io::BufRead::lines(std::io::BufReader::new(daemon.stderr.take().unwrap()));
        let mut next = Vec::new();
        for line in lines.map_while(Result::ok) {
            eprintln!("[rudder] {line}");
            if let Some((_, step)) = line.split_once("next: ") {
                next.push(step.to_string());
                if next.len() == 3 {
                    break;
                }
            }
        }
        let ui = next[0].rsplit(' ').next().unwrap().to_string();
        let connect = next[1].split(": ").nth(1).unwrap();
        let connect = connect.split(" (").next().unwrap();
        let (assignment, script) = connect.split_once(' ').unwrap();
        let (var, value) = assignment.split_once('=').unwrap();
        assert_eq!(script, "scripts/try-envoy.sh", "{connect}");
        let path = format!(
            "{}:{}",
            envoy.parent().unwrap().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut sidecar = std::process::Command::new(format!("{root}/{script}"))
            .env(var, value)
            .env("PATH", path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("run scripts/try-envoy.sh");
        let port_9080: std::net::SocketAddr = "127.0.0.1:9080".parse().unwrap();
        let mut answer = (0, String::new());
        eventually(60, "the fault injected for end-user: tester", || {
            let request = common::http::Request {
                host: "ratings.bookinfo.svc.cluster.local",
                headers: &[("end-user", "tester")],
                ..common::http::Request::get("/")
            };
            answer = common::http::send(port_9080, &request).unwrap_or_default();
            answer.0 == 503
        });
        assert!(answer.1.contains("fault filter abort"), "{answer:?}");
        let dump = next[2].split('\'').nth(1).unwrap();
        let (host, path) = dump
            .strip_prefix("http://")
            .unwrap()
            .split_once('/')
            .unwrap();
        let (status, body) = http_get(host.parse().unwrap(), &format!("/{path}"));
        assert_eq!(status, 200, "{body}");
        assert!(
            body.contains("ratings.bookinfo.svc.cluster.local"),
            "{body}"
        );
        let (host, path) = ui.strip_prefix("http://").unwrap().split_once('/').unwrap();
        assert_eq!(http_get(host.parse().unwrap(), &format!("/{path}")).0, 200);
        // SAFETY: signalling the script's own process group (Envoy included).
        unsafe { libc::kill(-(sidecar.id() as i32), libc::SIGTERM) };
        let _ = sidecar.wait();
        let _ = daemon.kill();
        let _ = daemon.wait();
    });
}
