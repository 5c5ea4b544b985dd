//! The file source: every YAML/JSON file under a directory becomes store objects, kept in sync by a
//! file watcher (and a periodic rescan, in case a watch event is lost).
//!
//! Each file is all-or-nothing: a file that does not parse, holds an invalid object, or redefines an
//! object another file owns is rejected with a logged error and a metric, and the objects it last
//! loaded successfully stay in the store. Deleting a file deletes the objects it owned.

use crate::config::{Config, ConfigError, ConfigKey, Skipped, parse_yaml};
use crate::source::metrics::FileMetrics;
use crate::store::{Change, StoreWriter};
use crate::validation::{Warning, check};
use notify::{RecursiveMode, Watcher};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// What one file holds, after parsing and validation.
#[derive(Debug, Default)]
pub struct FileReport {
    pub path: PathBuf,
    pub configs: Vec<Config>,
    pub skipped: Vec<Skipped>,
    pub errors: Vec<ConfigError>,
    /// Admission warnings and fields Rudder does not honour yet, for every object of the text
    /// (kept ones included).
    pub warnings: Vec<Warning>,
    /// Objects of documents that did not change since the file was last loaded (already in the
    /// store): set by the file source's incremental check only.
    pub kept: Vec<ConfigKey>,
    /// The text's documents by the hash of their text, kept for the next change.
    documents: Documents,
}

impl FileReport {
    /// The metric label for why the file was rejected.
    pub fn error_reason(&self) -> &'static str {
        if self
            .errors
            .iter()
            .any(|e| matches!(e, ConfigError::Syntax(_)))
        {
            "syntax"
        } else {
            "invalid"
        }
    }
}

fn is_config_file(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml" | "json")
    )
}

fn is_hidden(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.'))
}

/// Config files under `path` (itself, if it is a file), sorted. Entries whose names start with a dot
/// are skipped: that also skips the `..data` indirection of Kubernetes ConfigMap volumes, whose visible
/// files are symlinks into it.
pub fn collect_files(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    scan_dir(path).map(|scan| scan.files)
}

/// What a scan of the config directory found.
#[derive(Debug, Default, PartialEq)]
pub struct Scan {
    /// Config files, sorted, each real file once.
    pub files: Vec<PathBuf>,
    /// Symlinks (and paths) leading to a directory or file already scanned: a loop, or a second way
    /// to the same place. Skipped, so a loop costs one entry, not a path per way around it.
    pub repeated: Vec<PathBuf>,
    /// Config-named entries that lead nowhere (a dangling symlink), with why: `rudder validate`
    /// reports them; the daemon skips them (a ConfigMap mount dangles for a moment while it swaps).
    pub dangling: Vec<(PathBuf, String)>,
}

/// As `collect_files`, and says which paths led back to something already scanned. Symlinks are
/// followed (a ConfigMap mount needs it); each directory and file is visited once, by its device
/// and inode.
pub fn scan_dir(path: &Path) -> std::io::Result<Scan> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)?;
    if meta.is_file() {
        return Ok(Scan {
            files: vec![path.to_path_buf()],
            ..Default::default()
        });
    }
    let mut scan = Scan::default();
    let mut seen: HashSet<(u64, u64)> = HashSet::from([(meta.dev(), meta.ino())]);
    let mut dirs = vec![path.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)?
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<_>>()?;
        // Sorted, so which of two ways to one file is kept does not depend on the file system.
        entries.sort();
        for p in entries {
            if is_hidden(&p) {
                continue;
            }
            let m = match std::fs::metadata(&p) {
                Ok(m) => m,
                Err(e) => {
                    if is_config_file(&p) {
                        scan.dangling.push((p, e.to_string()));
                    }
                    continue;
                }
            };
            let wanted = m.is_dir() || (m.is_file() && is_config_file(&p));
            if !wanted {
                continue;
            }
            if !seen.insert((m.dev(), m.ino())) {
                scan.repeated.push(p);
                continue;
            }
            if m.is_dir() {
                dirs.push(p);
            } else {
                scan.files.push(p);
            }
        }
    }
    scan.files.sort();
    scan.repeated.sort();
    scan.dangling.sort();
    Ok(scan)
}

/// One YAML document of a loaded file, parsed and validated; `skipped` is numbered from 1 within it.
#[derive(Debug)]
struct Document {
    configs: Vec<Config>,
    skipped: Vec<Skipped>,
    warnings: Vec<Warning>,
    /// YAML documents the text held (0 for a text of comments only).
    documents: usize,
}

type Documents = HashMap<u64, Arc<Document>>;

/// `text` cut at its `---` lines, when the cut is certainly where the YAML parser separates
/// documents: no directive (`%`) or document-end (`...`) lines and nothing after a `---`; a `---`
/// at the start of a line always ends a document. `None`: parse the text whole.
fn split_documents(text: &str) -> Option<Vec<&str>> {
    let mut chunks = Vec::new();
    let (mut start, mut at) = (0, 0);
    for line in text.split_inclusive('\n') {
        let bare = line.trim_end();
        if bare.starts_with('%') || bare.starts_with("...") {
            return None;
        }
        if bare.starts_with("---") {
            if bare != "---" {
                return None;
            }
            chunks.push(&text[start..at]);
            start = at + line.len();
        }
        at += line.len();
    }
    chunks.push(&text[start..]);
    Some(chunks)
}

fn defined_twice(config: &Config) -> ConfigError {
    ConfigError::Invalid {
        object: config.object_ref(),
        field: "metadata.name".into(),
        message: "defined more than once in this file".into(),
    }
}

/// What `check_text` finds, reusing the documents of the file's last loaded version (`previous`)
/// that did not change: only new documents are parsed and validated, and only their objects are
/// in `configs`; the others are listed in `kept`. A 5,000-object file with one edit costs one
/// document's parse, not the file's. Falls back to `check_text` when the text cannot be cut
/// safely or a new document has an error, so messages are those of the whole file.
fn check_changed(
    path: &Path,
    text: &str,
    default_namespace: &str,
    previous: &Documents,
) -> FileReport {
    let Some(chunks) = split_documents(text) else {
        return check_text(path, text, default_namespace);
    };
    let mut report = FileReport {
        path: path.to_path_buf(),
        ..Default::default()
    };
    let mut seen = BTreeSet::new();
    let mut numbered = 0;
    for chunk in chunks {
        let hash = hash_bytes(chunk.as_bytes());
        let loaded = previous.get(&hash);
        let document = match loaded.or_else(|| report.documents.get(&hash)) {
            Some(document) => document.clone(),
            None => {
                let parsed = parse_yaml(chunk, default_namespace);
                if !parsed.errors.is_empty() {
                    return check_text(path, text, default_namespace);
                }
                let mut warnings = Vec::new();
                for c in &parsed.configs {
                    let verdict = check(c);
                    if !verdict.errors.is_empty() {
                        return check_text(path, text, default_namespace);
                    }
                    warnings.extend(verdict.warnings);
                }
                Arc::new(Document {
                    configs: parsed.configs,
                    skipped: parsed.skipped,
                    warnings,
                    documents: parsed.documents,
                })
            }
        };
        report
            .skipped
            .extend(document.skipped.iter().map(|s| Skipped {
                document: s.document + numbered,
                ..s.clone()
            }));
        numbered += document.documents;
        report.warnings.extend(document.warnings.iter().cloned());
        for config in &document.configs {
            let key = config.key();
            if !seen.insert(key.clone()) {
                report.errors.push(defined_twice(config));
            }
            if loaded.is_some() {
                report.kept.push(key);
            } else {
                report.configs.push(config.clone());
            }
        }
        report.documents.insert(hash, document);
    }
    warn_unserved(&mut report);
    report
}

/// Parses and validates one text; objects are only returned when the whole text is valid.
pub fn check_text(path: &Path, text: &str, default_namespace: &str) -> FileReport {
    let parsed = parse_yaml(text, default_namespace);
    let mut report = FileReport {
        path: path.to_path_buf(),
        skipped: parsed.skipped,
        errors: parsed.errors,
        ..Default::default()
    };
    let mut seen = BTreeSet::new();
    for config in parsed.configs {
        let verdict = check(&config);
        report.errors.extend(verdict.errors);
        report.warnings.extend(verdict.warnings);
        if !seen.insert(config.key()) {
            report.errors.push(defined_twice(&config));
        }
        report.configs.push(config);
    }
    warn_unserved(&mut report);
    report
}

/// Gateway API kinds Rudder does not serve (UDPRoute, the
/// x-k8s.io kinds) are skipped; say so by name, so such an object is not silently dropped (other
/// kinds outside the config groups are not config).
fn warn_unserved(report: &mut FileReport) {
    for s in &report.skipped {
        let group = s.api_version.split_once('/').map_or("", |(g, _)| g);
        if matches!(
            group,
            "gateway.networking.k8s.io" | "gateway.networking.x-k8s.io"
        ) {
            report.warnings.push(Warning {
                object: crate::config::ObjectRef {
                    kind: s.kind.clone(),
                    namespace: s.namespace.clone(),
                    name: s.name.clone(),
                },
                field: String::new(),
                message: format!(
                    "{} {} is not served: Rudder does not implement this Gateway API kind yet, nothing is generated for it",
                    s.api_version, s.kind
                ),
            });
        }
    }
}

/// Per-file state the source remembers between scans.
#[derive(Debug, Default)]
struct FileState {
    content_hash: Option<u64>,
    /// Keys of the objects last loaded from this file successfully.
    keys: BTreeSet<ConfigKey>,
    error: Option<String>,
    /// The warnings of the version last loaded successfully.
    warnings: Vec<String>,
    /// The documents of the version last loaded successfully (their objects are in the store).
    documents: Documents,
}

/// What the source shows on its status page.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FileStatus {
    pub path: PathBuf,
    pub objects: usize,
    pub error: Option<String>,
    /// Warnings about the objects loaded from this file (istiod's admission warnings, and fields
    /// Rudder accepts but does not honour yet).
    pub warnings: Vec<String>,
}

/// How file events are batched before a rescan.
#[derive(Debug, Clone, Copy)]
pub struct FileDebounce {
    /// A rescan waits until no event came for this long...
    pub quiet: Duration,
    /// ...but never longer than this after the first event.
    pub max: Duration,
}

pub struct FileSource {
    dir: PathBuf,
    default_namespace: String,
    store: StoreWriter,
    metrics: Arc<FileMetrics>,
    files: BTreeMap<PathBuf, FileState>,
    status: Arc<Mutex<Vec<FileStatus>>>,
    /// `--mesh-config`: a MeshConfig file, loaded as ConfigMap `istio` of the root namespace.
    mesh_file: Option<(PathBuf, String)>,
    /// Paths the last scan skipped as leading somewhere already read (`Scan::repeated`).
    repeated: BTreeSet<PathBuf>,
}

/// A file's or a document's content digest, to skip what did not change. foldhash, not SipHash:
/// every scan digests every file, and at 5,000 services SipHash took a tenth of a scan.
fn hash_bytes(bytes: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    foldhash::quality::FixedState::with_seed(0).hash_one(bytes)
}

impl FileSource {
    pub fn new(
        dir: impl Into<PathBuf>,
        default_namespace: &str,
        store: StoreWriter,
        metrics: Arc<FileMetrics>,
    ) -> Self {
        FileSource {
            dir: dir.into(),
            default_namespace: default_namespace.to_string(),
            store,
            metrics,
            files: BTreeMap::new(),
            status: Arc::default(),
            mesh_file: None,
            repeated: BTreeSet::new(),
        }
    }

    /// Also loads `path`, a MeshConfig as istiod's `--meshConfig` takes it, as the mesh ConfigMap
    /// (`istio` in `root_namespace`); a mesh ConfigMap in the directory then conflicts with it.
    pub fn with_mesh_file(mut self, path: impl Into<PathBuf>, root_namespace: &str) -> Self {
        self.mesh_file = Some((path.into(), root_namespace.to_string()));
        self
    }

    /// A handle to the per-file status, updated after every scan.
    pub fn status_handle(&self) -> Arc<Mutex<Vec<FileStatus>>> {
        self.status.clone()
    }

    /// Rescans the directory and applies what changed to the store in one batch.
    /// Returns the number of store events the scan caused.
    pub fn sync(&mut self) -> usize {
        let paths = match scan_dir(&self.dir) {
            Ok(scan) => {
                self.note_repeated(scan.repeated);
                let mut p = scan.files;
                if let Some((mesh, _)) = &self.mesh_file
                    && !p.contains(mesh)
                {
                    p.push(mesh.clone());
                }
                p
            }
            Err(e) => {
                // An unreadable directory says nothing about the objects: keep serving them all.
                warn!(dir = %self.dir.display(), error = %e, "config directory unreadable; keeping current config");
                self.metrics.file_error("io");
                return 0;
            }
        };
        let present: BTreeSet<&PathBuf> = paths.iter().collect();
        let mut deletes: BTreeSet<ConfigKey> = BTreeSet::new();
        let mut upserts: Vec<Config> = Vec::new();

        // Files that are gone: their objects go with them.
        let removed: Vec<PathBuf> = self
            .files
            .keys()
            .filter(|p| !present.contains(p))
            .cloned()
            .collect();
        for path in removed {
            if let Some(state) = self.files.remove(&path) {
                info!(file = %path.display(), objects = state.keys.len(), "config file removed");
                deletes.extend(state.keys);
            }
        }

        // Read every file; only changed contents are parsed again.
        let changed = self.read_changed(&paths);

        // Who owns which key: unchanged files and rejected files keep their claims first.
        let changed_paths: BTreeSet<PathBuf> = changed
            .iter()
            .filter(|r| r.errors.is_empty())
            .map(|r| r.path.clone())
            .collect();
        let mut owners: HashMap<ConfigKey, PathBuf> = HashMap::new();
        for (path, state) in &self.files {
            if !changed_paths.contains(path) {
                for key in &state.keys {
                    owners.insert(key.clone(), path.clone());
                }
            }
        }

        for mut report in changed {
            let path = report.path.clone();
            let error = rejection(&report, &owners);
            let state = self.files.entry(path.clone()).or_default();
            match error {
                Some((reason, message)) => {
                    warn!(file = %path.display(), reason, error = %message, kept_objects = state.keys.len(),
                        "config file rejected; keeping its last good objects");
                    self.metrics.file_error(reason);
                    state.error = Some(message);
                    for key in &state.keys {
                        owners.entry(key.clone()).or_insert_with(|| path.clone());
                    }
                }
                None => {
                    let new_keys: BTreeSet<ConfigKey> = report
                        .configs
                        .iter()
                        .map(Config::key)
                        .chain(report.kept.iter().cloned())
                        .collect();
                    deletes.extend(state.keys.difference(&new_keys).cloned());
                    for key in &new_keys {
                        owners.insert(key.clone(), path.clone());
                    }
                    debug!(file = %path.display(), objects = new_keys.len(), skipped = report.skipped.len(), "config file loaded");
                    state.keys = new_keys;
                    state.error = None;
                    state.warnings = report.warnings.iter().map(ToString::to_string).collect();
                    for w in &state.warnings {
                        warn!(file = %path.display(), warning = %w, "config accepted with a warning");
                    }
                    state.documents = std::mem::take(&mut report.documents);
                    upserts.extend(report.configs);
                }
            }
        }

        // A key that moved to another file in this scan is claimed again: do not delete it.
        let changes = deletes
            .into_iter()
            .filter(|k| !owners.contains_key(k))
            .map(Change::Delete)
            .chain(upserts.into_iter().map(Change::Upsert))
            .collect();
        let events = self.store.apply(changes);
        for e in &events {
            self.metrics
                .config_events
                .get_or_create(&crate::metrics::EventLabels {
                    kind: e.key.kind.qualified_name(),
                    event: format!("{:?}", e.kind).to_lowercase(),
                })
                .inc();
        }
        self.publish_status();
        events.len()
    }

    /// The reports of the files whose contents changed since the last scan (an unreadable file
    /// keeps its last good objects).
    fn read_changed(&mut self, paths: &[PathBuf]) -> Vec<FileReport> {
        let mut changed: Vec<FileReport> = Vec::new();
        for path in paths {
            let bytes = match std::fs::read(path) {
                Ok(b) => match &self.mesh_file {
                    Some((mesh, root_namespace)) if mesh == path => {
                        mesh_config_map_text(&b, root_namespace)
                    }
                    _ => b,
                },
                Err(e) => {
                    warn!(file = %path.display(), error = %e, "config file unreadable; keeping its last good objects");
                    self.metrics.file_error("io");
                    continue;
                }
            };
            let hash = hash_bytes(&bytes);
            let state = self.files.entry(path.clone()).or_default();
            if state.content_hash == Some(hash) {
                continue;
            }
            state.content_hash = Some(hash);
            let report = match std::str::from_utf8(&bytes) {
                Ok(text) => check_changed(path, text, &self.default_namespace, &state.documents),
                Err(_) => FileReport {
                    path: path.clone(),
                    errors: vec![ConfigError::Syntax("file is not UTF-8 text".into())],
                    ..Default::default()
                },
            };
            changed.push(report);
        }
        changed
    }

    /// Warns about (and counts) each path newly found leading somewhere already read, once.
    fn note_repeated(&mut self, repeated: Vec<PathBuf>) {
        let repeated: BTreeSet<PathBuf> = repeated.into_iter().collect();
        for path in repeated.difference(&self.repeated) {
            warn!(path = %path.display(), "skipping a path to a directory or file already read (a symlink loop, or a second link to it)");
            self.metrics.file_error("repeated_path");
        }
        self.repeated = repeated;
    }

    fn publish_status(&self) {
        let status: Vec<FileStatus> = self
            .files
            .iter()
            .map(|(path, s)| FileStatus {
                path: path.clone(),
                objects: s.keys.len(),
                error: s.error.clone(),
                warnings: s.warnings.clone(),
            })
            .chain(self.repeated.iter().map(|path| FileStatus {
                path: path.clone(),
                objects: 0,
                error: Some(
                    "skipped: leads to a directory or file already read (a symlink loop, or a second link to it)"
                        .into(),
                ),
                warnings: Vec::new(),
            }))
            .collect();
        let invalid = status.iter().filter(|s| s.error.is_some()).count();
        self.metrics.config_files_invalid.set(invalid as i64);
        let snapshot = self.store.snapshot();
        for kind in crate::config::Kind::config_kinds() {
            self.metrics
                .config_objects
                .get_or_create(&crate::metrics::KindLabels {
                    kind: kind.qualified_name(),
                })
                .set(snapshot.count(kind) as i64);
        }
        *self.status.lock().unwrap_or_else(|p| p.into_inner()) = status;
    }

    /// `sync`, counted by what started it.
    fn rescan(&mut self, trigger: &str) {
        self.metrics
            .config_dir_scans
            .get_or_create(&crate::metrics::TriggerLabels {
                trigger: trigger.to_string(),
            })
            .inc();
        self.sync();
    }

    /// Watches the directory until `cancel` fires. Edits are applied after `debounce.quiet` of
    /// quiet, and at the latest `debounce.max` after the first (a file rewritten without pause must
    /// not hold back every other change); a full rescan also runs every `resync` in case the
    /// platform drops a watch event.
    pub async fn run(
        mut self,
        cancel: CancellationToken,
        debounce: FileDebounce,
        resync: Duration,
    ) {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            if res.as_ref().is_ok_and(|e| changes_nothing(&e.kind)) {
                return;
            }
            let _ = tx.send(res);
        })
        .and_then(|mut w| w.watch(&self.dir, RecursiveMode::Recursive).map(|_| w));
        // The mesh file's directory too (ConfigMap mounts swap a symlink there).
        let watcher = watcher.and_then(|mut w| {
            if let Some(parent) = self.mesh_file.as_ref().and_then(|(p, _)| p.parent()) {
                w.watch(parent, RecursiveMode::NonRecursive)?;
            }
            Ok(w)
        });
        let _watcher = match watcher {
            Ok(w) => Some(w),
            Err(e) => {
                warn!(dir = %self.dir.display(), error = %e, every = ?resync, "cannot watch config directory; polling instead");
                None
            }
        };
        // Changes made between the first scan and the watch starting would otherwise wait for the
        // next resync: scan once more now that the watch is in place (unchanged files are skipped
        // by their hash).
        self.rescan("start");
        let mut ticker = tokio::time::interval(resync);
        ticker.tick().await;
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                Some(event) = rx.recv() => {
                    if let Err(e) = event {
                        warn!(error = %e, "file watch error");
                    }
                    // Let a burst of writes (editors, ConfigMap symlink swaps) settle before rescanning.
                    let latest = tokio::time::Instant::now() + debounce.max;
                    loop {
                        let quiet_until = (tokio::time::Instant::now() + debounce.quiet).min(latest);
                        tokio::select! {
                            _ = cancel.cancelled() => return,
                            more = tokio::time::timeout_at(quiet_until, rx.recv()) => match more {
                                Ok(Some(_)) if tokio::time::Instant::now() < latest => continue,
                                _ => break,
                            },
                        }
                    }
                    self.rescan("watch");
                }
                _ = ticker.tick() => { self.rescan("resync"); }
            }
        }
        info!(dir = %self.dir.display(), "file source stopped");
    }
}

/// Why a changed file is refused: its own errors, or an object another file already defines.
fn rejection(
    report: &FileReport,
    owners: &HashMap<ConfigKey, PathBuf>,
) -> Option<(&'static str, String)> {
    let path = &report.path;
    let mut error = (!report.errors.is_empty()).then(|| {
        (
            report.error_reason(),
            report
                .errors
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("; "),
        )
    });
    if error.is_none() {
        let conflicts: Vec<String> = report
            .configs
            .iter()
            .map(Config::key)
            .chain(report.kept.iter().cloned())
            .filter_map(|key| {
                owners
                    .get(&key)
                    .filter(|owner| *owner != path)
                    .map(|owner| format!("{key} is already defined in {}", owner.display()))
            })
            .collect();
        if !conflicts.is_empty() {
            error = Some(("conflict", conflicts.join("; ")));
        }
    }
    error
}

/// Whether a watch event only says a file was opened or read. The scan opens every file it
/// reads, so waking on these would rescan the directory again and again while nothing changes.
/// A file closed after writing (`Close(Write)`) is a change.
fn changes_nothing(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode, EventKind};
    matches!(
        kind,
        EventKind::Access(
            AccessKind::Open(_)
                | AccessKind::Read
                | AccessKind::Close(AccessMode::Read | AccessMode::Execute)
        )
    )
}

/// A MeshConfig file's bytes as the mesh ConfigMap's YAML (text that is not UTF-8 is left as it
/// is, to be reported).
fn mesh_config_map_text(bytes: &[u8], root_namespace: &str) -> Vec<u8> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return bytes.to_vec();
    };
    let quoted = serde_json::Value::String(text.to_string()).to_string();
    let namespace = serde_json::Value::String(root_namespace.to_string()).to_string();
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {}, namespace: {namespace}}}\ndata:\n  {}: {quoted}\n",
        crate::config::mesh::MESH_CONFIGMAP,
        crate::config::mesh::MESH_KEY,
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_cut_only_where_the_parser_would_cut() {
        assert_eq!(
            split_documents("a: 1\n---\nb: 2\n--- \r\nc: 3"),
            Some(vec!["a: 1\n", "b: 2\n", "c: 3"])
        );
        assert_eq!(split_documents("---\na: 1\n"), Some(vec!["", "a: 1\n"]));
        // Nested text that merely contains dashes is not a marker.
        assert_eq!(
            split_documents("a: |\n  ---\n  x\n"),
            Some(vec!["a: |\n  ---\n  x\n"])
        );
        for whole in [
            "--- a: 1\n",
            "%YAML 1.2\n---\na: 1\n",
            "a: 1\n...\n",
            "--- # c\na: 1\n",
        ] {
            assert_eq!(split_documents(whole), None, "{whole:?}");
        }
    }

    /// Parsing in parts finds what parsing the whole text finds, for every example and fixture.
    #[test]
    fn documents_parsed_apart_give_the_whole_files_results() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = collect_files(&root.join("examples")).unwrap();
        files.extend(collect_files(&root.join("tests/fixtures/istio")).unwrap());
        assert!(files.len() >= 5);
        let extra = "---\n# only a comment\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n";
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap() + extra;
            let whole = check_text(&file, &text, "default");
            let parts = check_changed(&file, &text, "default", &Documents::new());
            assert!(whole.errors.is_empty(), "{file:?}: {:?}", whole.errors);
            assert_eq!(parts.configs, whole.configs, "{file:?}");
            assert!(parts.kept.is_empty());
            let skipped = |r: &FileReport| {
                r.skipped
                    .iter()
                    .map(|s| (s.document, s.kind.clone()))
                    .collect::<Vec<_>>()
            };
            assert_eq!(skipped(&parts), skipped(&whole), "{file:?}");
            assert!(!skipped(&whole).is_empty());

            // Loaded again unchanged: everything is kept, nothing is parsed anew.
            let again = check_changed(&file, &text, "default", &parts.documents);
            assert!(again.configs.is_empty());
            assert_eq!(again.kept.len(), whole.configs.len());
        }
    }

    #[test]
    fn a_new_document_with_an_error_reports_the_whole_files_errors() {
        let good = "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: a}\nspec: {host: a}\n";
        let loaded = check_changed(Path::new("f"), good, "default", &Documents::new());
        let bad = format!(
            "{good}---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: b}}\nspec: {{host: \"\"}}\n"
        );
        let parts = check_changed(Path::new("f"), &bad, "default", &loaded.documents);
        let whole = check_text(Path::new("f"), &bad, "default");
        assert!(!whole.errors.is_empty());
        assert_eq!(
            parts
                .errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            whole
                .errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        );
    }
}
