//! The file source: loads, reloads, deletes, and survives bad files without losing good config.

use crate::common;
use rudder::config::{ConfigKey, Kind, Spec};
use rudder::metrics::{Metrics, Registry};
use rudder::source::file::{FileDebounce, FileSource};
use rudder::source::metrics::FileMetrics;
use rudder::store::{Store, StoreWriter};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn se(name: &str, host: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: mesh}}\n\
         spec: {{hosts: [{host}], ports: [{{number: 80, name: http, protocol: HTTP}}], resolution: DNS}}\n"
    )
}

fn key(name: &str) -> ConfigKey {
    ConfigKey {
        kind: Kind::ServiceEntry,
        namespace: "mesh".into(),
        name: name.into(),
        cluster: String::new(),
    }
}

fn host_of(store: &Store, name: &str) -> Option<String> {
    let snap = store.snapshot();
    let entry = snap.get(&key(name))?;
    match &entry.config.spec {
        Spec::ServiceEntry(s) => s.hosts.first().cloned(),
        _ => None,
    }
}

/// A plain (not atomic) write: the watcher must cope with editors that write in place too.
fn write_in_place(dir: &Path, file: &str, text: &str) {
    std::fs::write(dir.join(file), text).unwrap();
}

fn setup() -> (tempfile::TempDir, Arc<Store>, Arc<Metrics>, FileSource) {
    let dir = tempfile::tempdir().unwrap();
    let writer = StoreWriter::default();
    let mut registry = Registry::new();
    let file_metrics = Arc::new(FileMetrics::register(&mut registry));
    let source = FileSource::new(dir.path(), "default", writer.clone(), file_metrics);
    (dir, writer.reader(), Arc::new(registry.finish()), source)
}

/// Runs the watcher with this debounce and no periodic rescan within the test, so whatever is
/// applied was delivered by the watcher.
fn watch(
    source: FileSource,
    quiet_ms: u64,
    max_ms: u64,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let cancel = CancellationToken::new();
    let task = tokio::spawn(source.run(
        cancel.clone(),
        FileDebounce {
            quiet: Duration::from_millis(quiet_ms),
            max: Duration::from_millis(max_ms),
        },
        Duration::from_secs(3600),
    ));
    (cancel, task)
}

/// Waits up to 10 s for `cond`.
async fn eventually(what: &str, cond: impl FnMut() -> bool) {
    common::eventually_async(10, what, cond).await
}

#[test]
fn loads_directory_recursively_and_ignores_other_files() {
    let (dir, store, _, mut source) = setup();
    write_in_place(
        dir.path(),
        "a.yaml",
        &format!("{}---\n{}", se("a", "a.com"), se("b", "b.com")),
    );
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    write_in_place(&dir.path().join("sub"), "c.yml", &se("c", "c.com"));
    write_in_place(dir.path(), "notes.txt", "not: config");
    write_in_place(dir.path(), ".hidden.yaml", &se("hidden", "h.com"));
    assert_eq!(source.sync(), 3);
    assert_eq!(store.snapshot().len(), 3);
    assert!(host_of(&store, "hidden").is_none());
    assert_eq!(source.sync(), 0, "an unchanged directory causes no events");
}

#[test]
fn edits_adds_and_deletes_flow_into_the_store() {
    let (dir, store, _, mut source) = setup();
    write_in_place(
        dir.path(),
        "a.yaml",
        &format!("{}---\n{}", se("a", "a.com"), se("b", "b.com")),
    );
    source.sync();
    write_in_place(dir.path(), "a.yaml", &se("a", "a2.com"));
    assert_eq!(source.sync(), 2, "one update and one delete");
    assert_eq!(host_of(&store, "a").as_deref(), Some("a2.com"));
    assert!(
        host_of(&store, "b").is_none(),
        "object dropped from the file is deleted"
    );
    write_in_place(dir.path(), "c.yaml", &se("c", "c.com"));
    source.sync();
    assert_eq!(host_of(&store, "c").as_deref(), Some("c.com"));
    std::fs::remove_file(dir.path().join("a.yaml")).unwrap();
    source.sync();
    assert!(
        host_of(&store, "a").is_none(),
        "deleting the file deletes its objects"
    );
    assert_eq!(store.snapshot().len(), 1);
}

#[test]
fn malformed_yaml_keeps_last_good_objects_and_is_counted() {
    let (dir, store, metrics, mut source) = setup();
    write_in_place(dir.path(), "a.yaml", &se("a", "a.com"));
    write_in_place(dir.path(), "other.yaml", &se("o", "o.com"));
    source.sync();
    write_in_place(dir.path(), "a.yaml", "apiVersion: [this is: not yaml\n");
    assert_eq!(source.sync(), 0);
    assert_eq!(
        host_of(&store, "a").as_deref(),
        Some("a.com"),
        "last good object stays"
    );
    let status = source.status_handle().lock().unwrap().clone();
    let a = status.iter().find(|s| s.path.ends_with("a.yaml")).unwrap();
    assert!(
        a.error.as_deref().unwrap().contains("invalid YAML"),
        "{a:?}"
    );
    assert_eq!(a.objects, 1);
    let rendered = metrics.render();
    assert!(
        rendered.contains("rudder_config_file_errors_total{reason=\"syntax\"} 1"),
        "{rendered}"
    );
    assert!(
        rendered.contains("rudder_config_files_invalid 1"),
        "{rendered}"
    );
    // Nothing else is affected: other files still reload.
    write_in_place(dir.path(), "other.yaml", &se("o", "o2.com"));
    source.sync();
    assert_eq!(host_of(&store, "o").as_deref(), Some("o2.com"));
    // Fixing the file recovers it.
    write_in_place(dir.path(), "a.yaml", &se("a", "fixed.com"));
    source.sync();
    assert_eq!(host_of(&store, "a").as_deref(), Some("fixed.com"));
    assert!(metrics.render().contains("rudder_config_files_invalid 0"));
}

#[test]
fn an_invalid_object_rejects_its_whole_file() {
    let (dir, store, metrics, mut source) = setup();
    write_in_place(
        dir.path(),
        "a.yaml",
        &format!("{}---\n{}", se("a", "a.com"), se("b", "b.com")),
    );
    source.sync();
    let bad_vs = "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: v, namespace: mesh}\n\
                  spec: {hosts: [a.com], http: [{route: [{destination: {host: a.com}, weight: 0}, {destination: {host: b.com}, weight: 0}]}]}\n";
    write_in_place(
        dir.path(),
        "a.yaml",
        &format!("{}---\n{}", se("a", "changed.com"), bad_vs),
    );
    source.sync();
    assert_eq!(
        host_of(&store, "a").as_deref(),
        Some("a.com"),
        "no partial application"
    );
    assert_eq!(host_of(&store, "b").as_deref(), Some("b.com"));
    assert_eq!(store.snapshot().count(Kind::VirtualService), 0);
    let status = source.status_handle().lock().unwrap().clone();
    assert!(
        status[0]
            .error
            .as_deref()
            .unwrap()
            .contains("total destination weight = 0")
    );
    assert!(metrics.render().contains("reason=\"invalid\""));
}

#[test]
fn a_second_definition_of_an_object_is_a_conflict() {
    let (dir, store, metrics, mut source) = setup();
    write_in_place(dir.path(), "a.yaml", &se("a", "a.com"));
    source.sync();
    write_in_place(
        dir.path(),
        "b.yaml",
        &format!("{}---\n{}", se("a", "evil.com"), se("z", "z.com")),
    );
    source.sync();
    assert_eq!(
        host_of(&store, "a").as_deref(),
        Some("a.com"),
        "first owner wins"
    );
    assert!(
        host_of(&store, "z").is_none(),
        "conflicting file is rejected whole"
    );
    let status = source.status_handle().lock().unwrap().clone();
    let b = status.iter().find(|s| s.path.ends_with("b.yaml")).unwrap();
    assert!(
        b.error
            .as_deref()
            .unwrap()
            .contains("is already defined in"),
        "{b:?}"
    );
    assert!(metrics.render().contains("reason=\"conflict\""));
}

#[test]
fn moving_an_object_between_files_keeps_it() {
    let (dir, store, _, mut source) = setup();
    write_in_place(dir.path(), "z.yaml", &se("a", "a.com"));
    source.sync();
    // In one scan: removed from z.yaml, added to a.yaml (sorted before z.yaml).
    write_in_place(dir.path(), "z.yaml", &se("other", "o.com"));
    write_in_place(dir.path(), "a.yaml", &se("a", "a.com"));
    source.sync();
    assert_eq!(host_of(&store, "a").as_deref(), Some("a.com"));
    std::fs::remove_file(dir.path().join("z.yaml")).unwrap();
    source.sync();
    assert_eq!(host_of(&store, "a").as_deref(), Some("a.com"));
}

#[test]
fn unreadable_directory_keeps_config() {
    let (dir, store, _, mut source) = setup();
    write_in_place(dir.path(), "a.yaml", &se("a", "a.com"));
    source.sync();
    let moved = dir.path().with_extension("moved");
    std::fs::rename(dir.path(), &moved).unwrap();
    source.sync();
    assert_eq!(host_of(&store, "a").as_deref(), Some("a.com"));
    std::fs::rename(&moved, dir.path()).unwrap();
}

#[test]
fn non_utf8_and_duplicate_objects_are_rejected() {
    let (dir, store, _, mut source) = setup();
    std::fs::write(dir.path().join("bin.yaml"), [0xff, 0xfe, 0x00, 0x41]).unwrap();
    write_in_place(
        dir.path(),
        "dup.yaml",
        &format!("{}---\n{}", se("a", "a.com"), se("a", "b.com")),
    );
    source.sync();
    assert!(store.snapshot().is_empty());
    let status = source.status_handle().lock().unwrap().clone();
    assert!(status.iter().all(|s| s.error.is_some()), "{status:?}");
}

/// The running watcher picks up edits, additions and deletions without a restart.
#[tokio::test]
async fn watcher_applies_changes_without_restart() {
    let (dir, store, metrics, mut source) = setup();
    write_in_place(dir.path(), "a.yaml", &se("a", "a.com"));
    source.sync();
    let (cancel, task) = watch(source, 50, 1000);
    tokio::time::sleep(Duration::from_millis(200)).await;
    write_in_place(dir.path(), "a.yaml", &se("a", "edited.com"));
    eventually("edit applied", || {
        host_of(&store, "a").as_deref() == Some("edited.com")
    })
    .await;
    write_in_place(dir.path(), "b.yaml", &se("b", "b.com"));
    eventually("new file loaded", || host_of(&store, "b").is_some()).await;
    std::fs::remove_file(dir.path().join("a.yaml")).unwrap();
    eventually("deleted file unloaded", || host_of(&store, "a").is_none()).await;
    let errors = || {
        metrics
            .render()
            .lines()
            .filter(|l| l.starts_with("rudder_config_file_errors_total"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    let before = errors();
    write_in_place(dir.path(), "b.yaml", "{{{{ broken");
    // The watcher has read and refused the broken edit (counted), not merely not got to it.
    eventually("broken edit judged", || errors() > before).await;
    assert_eq!(
        host_of(&store, "b").as_deref(),
        Some("b.com"),
        "bad edit keeps last good"
    );
    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("source stops on cancel")
        .unwrap();
}

/// Editing one object of a large file parses and applies that object only (the others were
/// already loaded), with the same results as loading the file from scratch; a bad edit is rejected
/// and a later good one builds on the last good version.
#[test]
fn an_edit_to_a_large_file_touches_only_the_changed_documents() {
    let (dir, store, _, mut source) = setup();
    let text = |hosts: &[(&str, &str)]| {
        hosts
            .iter()
            .map(|(name, host)| se(name, host))
            .collect::<Vec<_>>()
            .join("---\n")
    };
    let mut objects: Vec<(String, String)> = (0..200)
        .map(|i| (format!("s{i}"), format!("s{i}.com")))
        .collect();
    let render = |o: &Vec<(String, String)>| {
        let pairs: Vec<(&str, &str)> = o.iter().map(|(n, h)| (n.as_str(), h.as_str())).collect();
        text(&pairs)
    };
    write_in_place(dir.path(), "big.yaml", &render(&objects));
    assert_eq!(source.sync(), 200);
    let version = |name: &str| store.snapshot().get(&key(name)).unwrap().version;
    let untouched = version("s7");

    // One edit, one addition, one removal: exactly three events.
    objects[3].1 = "edited.com".into();
    objects.push(("new".into(), "new.com".into()));
    objects.remove(10);
    write_in_place(dir.path(), "big.yaml", &render(&objects));
    assert_eq!(source.sync(), 3);
    assert_eq!(host_of(&store, "s3").as_deref(), Some("edited.com"));
    assert_eq!(host_of(&store, "new").as_deref(), Some("new.com"));
    assert!(host_of(&store, "s10").is_none());
    assert_eq!(
        version("s7"),
        untouched,
        "unchanged objects are not rewritten"
    );
    assert_eq!(store.snapshot().len(), 200);

    // A duplicate of a loaded object rejects the file; everything stays as it was.
    let mut dup = objects.clone();
    dup.push(("s5".into(), "other.com".into()));
    write_in_place(dir.path(), "big.yaml", &render(&dup));
    assert_eq!(source.sync(), 0);
    assert_eq!(host_of(&store, "s5").as_deref(), Some("s5.com"));
    let status = source.status_handle().lock().unwrap().clone();
    assert!(
        status[0]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("more than once")),
        "{status:?}"
    );

    // Fixed: the next edit builds on the last good version.
    objects[4].1 = "four.com".into();
    write_in_place(dir.path(), "big.yaml", &render(&objects));
    assert_eq!(source.sync(), 1);
    assert_eq!(host_of(&store, "s4").as_deref(), Some("four.com"));
    assert_eq!(store.snapshot().len(), 200);
    assert!(source.status_handle().lock().unwrap()[0].error.is_none());
}

/// The mesh ConfigMap (`istio` in the root namespace) is read from the config directory, as istiod
/// reads its mesh config file: mesh-wide settings apply and follow edits without a cluster.
#[test]
fn mesh_config_map_in_the_directory_applies_and_reloads() {
    let dir = tempfile::tempdir().unwrap();
    let mesh = |mode: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: istio, namespace: istio-system}}\n\
             data:\n  mesh: |\n    outboundTrafficPolicy: {{mode: {mode}}}\n"
        )
    };
    common::write_atomic(&dir.path().join("mesh.yaml"), &mesh("REGISTRY_ONLY"));
    let daemon = common::Daemon::start(
        dir.path(),
        &["--debounce-after", "20ms", "--file-debounce", "20ms"],
    );
    let allow_any = || {
        let (_, body) = common::http_get(daemon.addr("monitoring"), "/debug/mesh");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        v["outboundAllowAny"].as_bool()
    };
    common::eventually(30, "REGISTRY_ONLY from the file", || {
        allow_any() == Some(false)
    });
    common::write_atomic(&dir.path().join("mesh.yaml"), &mesh("ALLOW_ANY"));
    common::eventually(30, "edit applied", || allow_any() == Some(true));
}

/// `--mesh-config FILE` takes a MeshConfig as istiod's `--meshConfig` does: it applies, follows
/// edits, refuses to start when the file is missing or has a field istio.io's MeshConfig does not
/// know, and warns about fields Rudder does not act on.
#[test]
fn mesh_config_file_applies_reloads_and_fails_fast() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cfg");
    std::fs::create_dir(&cfg).unwrap();
    let mesh_dir = dir.path().join("mesh");
    std::fs::create_dir(&mesh_dir).unwrap();
    let mesh = mesh_dir.join("mesh");
    common::write_atomic(
        &mesh,
        "outboundTrafficPolicy: {mode: REGISTRY_ONLY}\ndnsRefreshRate: 10s\n",
    );
    let flag = mesh.to_str().unwrap().to_string();
    let daemon = common::Daemon::start(
        &cfg,
        &[
            "--mesh-config",
            &flag,
            "--debounce-after",
            "20ms",
            "--file-debounce",
            "20ms",
        ],
    );
    let allow_any = || {
        let (_, body) = common::http_get(daemon.addr("monitoring"), "/debug/mesh");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        v["outboundAllowAny"].as_bool()
    };
    common::eventually(30, "REGISTRY_ONLY from the mesh file", || {
        allow_any() == Some(false)
    });
    let (_, sources) = common::http_get(daemon.addr("monitoring"), "/debug/sources");
    assert!(
        sources.contains("data.mesh.dnsRefreshRate"),
        "the field Rudder does not apply is warned about: {sources}"
    );
    common::write_atomic(&mesh, "outboundTrafficPolicy: {mode: ALLOW_ANY}\n");
    common::eventually(30, "edit applied", || allow_any() == Some(true));
    drop(daemon);

    // A typo in a field name, or no file at all: the daemon refuses to start.
    common::write_atomic(&mesh, "outboundTrafficPolcy: {mode: ALLOW_ANY}\n");
    for path in [flag.clone(), format!("{flag}-missing")] {
        let out = common::rudder()
            .args(["serve", "--config-source", "files", "--config-dir"])
            .arg(&cfg)
            .args(["--mesh-config", &path])
            .args([
                "--monitoring-addr",
                "127.0.0.1:0",
                "--http-addr",
                "127.0.0.1:0",
            ])
            .args([
                "--grpc-addr",
                "127.0.0.1:0",
                "--secure-grpc-addr",
                "127.0.0.1:0",
            ])
            .args(["--https-addr", "127.0.0.1:0", "--ca-dir"])
            .arg(dir.path().join("ca"))
            .output()
            .unwrap();
        assert!(!out.status.success(), "{path}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--mesh-config"), "{err}");
    }
}

#[test]
fn symlink_loops_are_read_once_and_reported_once() {
    let (dir, store, metrics, mut source) = setup();
    write_in_place(dir.path(), "a.yaml", &se("a", "a.com"));
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    write_in_place(&dir.path().join("sub"), "b.yaml", &se("b", "b.com"));
    // Two loops back to the top (each way around them is a new path, 2^n of them) and a second
    // link to a file.
    std::os::unix::fs::symlink(dir.path(), dir.path().join("loop")).unwrap();
    std::os::unix::fs::symlink("..", dir.path().join("sub/up")).unwrap();
    std::os::unix::fs::symlink("a.yaml", dir.path().join("again.yaml")).unwrap();
    let scan = rudder::source::file::scan_dir(dir.path()).unwrap();
    assert_eq!(scan.files.len(), 2, "{scan:?}");
    assert_eq!(scan.repeated.len(), 3, "{scan:?}");
    source.sync();
    source.sync();
    assert!(host_of(&store, "a").is_some() && host_of(&store, "b").is_some());
    let status = source.status_handle().lock().unwrap().clone();
    let skipped: Vec<_> = status.iter().filter(|s| s.error.is_some()).collect();
    assert_eq!(skipped.len(), 3, "no 'defined twice' errors: {status:?}");
    assert!(
        metrics
            .render()
            .contains("rudder_config_file_errors_total{reason=\"repeated_path\"} 3"),
        "each counted once, not once per scan"
    );
}

/// A file rewritten without pause does not hold back another file's change past the maximum delay.
#[tokio::test]
async fn a_file_rewritten_without_pause_does_not_hold_back_other_changes() {
    let (dir, store, _, mut source) = setup();
    write_in_place(dir.path(), "noisy.yaml", &se("noisy", "n0.com"));
    source.sync();
    let (cancel, task) = watch(source, 200, 500);
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Rewritten every 50 ms (under the quiet period) for 20 s.
    let noisy_dir = dir.path().to_path_buf();
    let noisy = tokio::spawn(async move {
        for i in 0..400 {
            write_in_place(&noisy_dir, "noisy.yaml", &se("noisy", &format!("n{i}.com")));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    write_in_place(dir.path(), "b.yaml", &se("b", "b.com"));
    while host_of(&store, "b").is_none() {
        assert!(
            !noisy.is_finished(),
            "the change waited until the noisy writer stopped"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    noisy.abort();
    cancel.cancel();
    task.await.unwrap();
}

/// A rescan opens every file it reads; the watcher must not take those opens for changes. An idle
/// daemon kept rescanning its directory every debounce period (ten times a second by default).
#[tokio::test]
async fn an_idle_directory_is_not_rescanned() {
    let (dir, store, metrics, mut source) = setup();
    write_in_place(dir.path(), "a.yaml", &se("a", "a.com"));
    source.sync();
    let (cancel, task) = watch(source, 50, 1000);
    let watch_scans = || {
        let rendered = metrics.render();
        rendered
            .lines()
            .find_map(|l| l.strip_prefix("rudder_config_dir_scans_total{trigger=\"watch\"} "))
            .map_or(0, |n| n.trim().parse::<u64>().unwrap())
    };
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(watch_scans(), 0, "rescanned with nothing changed");

    write_in_place(dir.path(), "a.yaml", &se("a", "edited.com"));
    eventually("edit applied", || {
        host_of(&store, "a").as_deref() == Some("edited.com")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let after_edit = watch_scans();
    assert!(
        (1..=2).contains(&after_edit),
        "one edit, {after_edit} rescans"
    );
    cancel.cancel();
    task.await.unwrap();
}
