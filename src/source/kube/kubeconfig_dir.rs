//! Remote clusters from a directory of kubeconfig files (istiod's
//! `PILOT_MULTICLUSTER_KUBECONFIG_PATH`), instead of remote secrets: every `.yaml`/`.yml` file
//! under it, subdirectories included (a mounted Secret's files live in its timestamped
//! directory), is one cluster's kubeconfig, the cluster's ID taken from the kubeconfig itself.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What the directory holds now.
#[derive(Debug, Default, PartialEq)]
pub struct KubeconfigDir {
    /// Kubeconfigs by the cluster ID they name, each with the file it came from; more than one
    /// for an ID is a conflict the caller refuses.
    pub by_cluster: BTreeMap<String, Vec<(PathBuf, Vec<u8>)>>,
    /// Files that are not usable kubeconfigs, with why. The others are read all the same
    /// (istiod drops the whole directory's update for one bad file).
    pub errors: Vec<(PathBuf, String)>,
}

/// Reads every kubeconfig under `root`. A directory that cannot be read is one error.
pub fn read(root: &Path) -> KubeconfigDir {
    let mut out = KubeconfigDir::default();
    let mut files = Vec::new();
    if let Err(e) = walk(root, &mut files) {
        out.errors.push((root.to_path_buf(), e.to_string()));
        return out;
    }
    files.sort();
    for path in files {
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                out.errors.push((path, e.to_string()));
                continue;
            }
        };
        match cluster_id(&bytes) {
            Ok(id) => out.by_cluster.entry(id).or_default().push((path, bytes)),
            Err(e) => out.errors.push((path, e)),
        }
    }
    out
}

/// The regular `.yaml`/`.yml` files under `dir`; symbolic links are not followed, as istiod's
/// walk does not (a mounted Secret's links point into the directory walked anyway).
fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let path = entry.path();
        if kind.is_dir() {
            walk(&path, files)?;
        } else if kind.is_file()
            && matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml")
            )
        {
            files.push(path);
        }
    }
    Ok(())
}

/// The cluster a kubeconfig is for, as istiod picks it: the cluster of the current context,
/// else of the first context (by name) that names one, else the first cluster by name.
pub fn cluster_id(bytes: &[u8]) -> Result<String, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not a kubeconfig: {e}"))?;
    let kubeconfig =
        kube::config::Kubeconfig::from_yaml(text).map_err(|e| format!("not a kubeconfig: {e}"))?;
    let cluster_of = |name: &str| {
        kubeconfig
            .contexts
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.context.as_ref())
            .map(|c| c.cluster.clone())
            .filter(|c| !c.is_empty())
    };
    if let Some(id) = kubeconfig.current_context.as_deref().and_then(cluster_of) {
        return Ok(id);
    }
    let mut contexts: Vec<&str> = kubeconfig
        .contexts
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    contexts.sort_unstable();
    if let Some(id) = contexts.into_iter().find_map(cluster_of) {
        return Ok(id);
    }
    kubeconfig
        .clusters
        .iter()
        .map(|c| c.name.as_str())
        .filter(|n| !n.is_empty())
        .min()
        .map(str::to_string)
        .ok_or_else(|| "the kubeconfig names no cluster".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig(current: &str, contexts: &[(&str, &str)], clusters: &[&str]) -> String {
        let mut text = format!("apiVersion: v1\nkind: Config\ncurrent-context: \"{current}\"\n");
        text.push_str("clusters:\n");
        for c in clusters {
            text.push_str(&format!(
                "- name: {c}\n  cluster: {{server: https://{c}.example:6443}}\n"
            ));
        }
        text.push_str("contexts:\n");
        for (name, cluster) in contexts {
            text.push_str(&format!(
                "- name: {name}\n  context: {{cluster: {cluster}, user: u}}\n"
            ));
        }
        text.push_str("users:\n- name: u\n  user: {token: t}\n");
        text
    }

    /// istiod's order: the current context's cluster, the first context's by name, the first
    /// cluster's by name.
    #[test]
    fn the_cluster_id_comes_from_the_kubeconfig() {
        let id = |text: String| cluster_id(text.as_bytes());
        assert_eq!(
            id(kubeconfig(
                "b",
                &[("a", "west"), ("b", "east")],
                &["east", "west"]
            )),
            Ok("east".into())
        );
        assert_eq!(
            id(kubeconfig(
                "gone",
                &[("z", "north"), ("m", "south")],
                &["north", "south"]
            )),
            Ok("south".into())
        );
        assert_eq!(
            id(kubeconfig("", &[], &["zeta", "alpha"])),
            Ok("alpha".into())
        );
        assert!(id(kubeconfig("", &[], &[])).is_err());
        assert!(cluster_id(b"{not: [a kubeconfig").is_err());
    }

    /// Only `.yaml`/`.yml` files, subdirectories walked; a bad file is an error of its own and
    /// the others are still read; two files for one cluster are both kept (a conflict).
    #[test]
    fn a_directory_is_read_file_by_file() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write("west.yaml", &kubeconfig("w", &[("w", "west")], &["west"]));
        write(
            "..2026_12_05/east.yml",
            &kubeconfig("e", &[("e", "east")], &["east"]),
        );
        write(
            "east-copy.yaml",
            &kubeconfig("e", &[("e", "east")], &["east"]),
        );
        write("notes.txt", "not read");
        write("broken.yaml", "{{{");
        let read = read(dir.path());
        assert_eq!(
            read.by_cluster.keys().collect::<Vec<_>>(),
            ["east", "west"],
            "{read:?}"
        );
        assert_eq!(read.by_cluster["east"].len(), 2);
        assert_eq!(read.errors.len(), 1);
        assert!(read.errors[0].0.ends_with("broken.yaml"));
        let missing = super::read(&dir.path().join("nowhere"));
        assert_eq!(missing.errors.len(), 1);
        assert!(missing.by_cluster.is_empty());
    }
}
