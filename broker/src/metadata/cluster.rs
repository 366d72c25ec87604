//! The cluster id and this node's id, kept in `<data>/meta.properties` as Kafka does, so a
//! data directory is never opened by a different node, or joined to another cluster, by
//! mistake. The node id is written at the first start; the cluster id once the metadata log
//! names it (the first controller of a new cluster does).

use std::path::{Path, PathBuf};

use super::atomic_file;

/// Who this node is and which cluster its data belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterIdentity {
    pub cluster_id: Option<String>,
    pub node_id: i32,
}

/// The data directory belongs to someone else, or its identity file is unreadable.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("accessing {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} belongs to node {found}, but this broker is node {expected}")]
    NodeMismatch { path: PathBuf, found: i32, expected: i32 },
    #[error("{path} belongs to cluster {found}, but the metadata quorum is cluster {expected}")]
    ClusterMismatch { path: PathBuf, found: String, expected: String },
}

impl ClusterIdentity {
    /// Loads the identity from `data_dir`, or records this node id there on first start.
    ///
    /// An empty, torn or unparsable file (a damaged disk: it is replaced atomically, so a crash
    /// cannot tear it) is treated as missing, with a warning: the node id is written again
    /// and the cluster id recorded again once the metadata log names it. Only complete lines
    /// count, so a cut cluster id is never taken for another cluster's. A well-formed file of
    /// another node is refused: that is a configuration mistake, not damage.
    pub fn load_or_create(data_dir: &Path, node_id: i32) -> Result<ClusterIdentity, IdentityError> {
        let path = data_dir.join("meta.properties");
        let found = match std::fs::read(&path) {
            Ok(bytes) => match parse(&String::from_utf8_lossy(&bytes)) {
                Ok(identity) => Some(identity),
                Err(reason) => {
                    tracing::warn!(path = %path.display(), %reason, "unreadable meta.properties; writing it again");
                    None
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => return Err(IdentityError::Io { path, source }),
        };
        match found {
            Some(identity) if identity.node_id != node_id => {
                Err(IdentityError::NodeMismatch { path, found: identity.node_id, expected: node_id })
            }
            Some(identity) => Ok(identity),
            None => {
                let identity = ClusterIdentity { cluster_id: None, node_id };
                identity.write(&path)?;
                Ok(identity)
            }
        }
    }

    /// Records the cluster id the metadata log names; refuses another cluster's.
    pub fn record_cluster_id(&mut self, data_dir: &Path, cluster_id: &str) -> Result<(), IdentityError> {
        let path = data_dir.join("meta.properties");
        match &self.cluster_id {
            Some(known) if known == cluster_id => Ok(()),
            Some(known) => {
                Err(IdentityError::ClusterMismatch { path, found: known.clone(), expected: cluster_id.to_string() })
            }
            None => {
                let updated = ClusterIdentity { cluster_id: Some(cluster_id.to_string()), node_id: self.node_id };
                updated.write(&path)?;
                *self = updated;
                Ok(())
            }
        }
    }

    fn write(&self, path: &Path) -> Result<(), IdentityError> {
        let mut text = format!("# written by strom; do not edit\nversion=1\nnode.id={}\n", self.node_id);
        if let Some(c) = &self.cluster_id {
            text.push_str(&format!("cluster.id={c}\n"));
        }
        atomic_file::write(path, text.as_bytes())
            .map_err(|source| IdentityError::Io { path: path.to_path_buf(), source })
    }
}

fn parse(text: &str) -> Result<ClusterIdentity, String> {
    let mut cluster_id = None;
    let mut node_id = None;
    // Only whole lines: the last one without its newline is a torn write.
    let whole = text.rfind('\n').map_or("", |end| &text[..end]);
    for line in whole.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        match line.split_once('=') {
            Some(("cluster.id", v)) => cluster_id = Some(v.to_string()),
            Some(("node.id", v)) => {
                node_id = Some(v.parse::<i32>().map_err(|_| format!("node.id {v:?} is not a number"))?)
            }
            _ => {}
        }
    }
    Ok(ClusterIdentity { cluster_id, node_id: node_id.ok_or("missing node.id")? })
}

/// A new cluster id: like Kafka's, 22 characters of URL-safe base64 of a random UUID.
pub fn new_cluster_id() -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bits = uuid::Uuid::new_v4().as_u128();
    (0..22).map(|i| ALPHABET[((bits >> (i * 6)) & 63) as usize] as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_id_is_recorded_at_first_start_and_the_cluster_id_once_known() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut first = ClusterIdentity::load_or_create(dir.path(), 3).expect("create");
        assert_eq!(first.cluster_id, None);
        let id = new_cluster_id();
        assert_eq!(id.len(), 22);
        first.record_cluster_id(dir.path(), &id).expect("record");
        let again = ClusterIdentity::load_or_create(dir.path(), 3).expect("load");
        assert_eq!(again, first);
        let mut again = again;
        let err = again.record_cluster_id(dir.path(), "another").expect_err("mismatch");
        assert!(matches!(err, IdentityError::ClusterMismatch { .. }));
    }

    #[test]
    fn an_empty_torn_or_missing_file_is_written_again_and_a_cut_cluster_id_is_not_believed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("meta.properties");
        let mut first = ClusterIdentity::load_or_create(dir.path(), 3).expect("create");
        first.record_cluster_id(dir.path(), "AAAAAAAAAAAAAAAAAAAAAA").expect("record");
        let whole = std::fs::read(&path).expect("read");
        for cut in [0, whole.len() / 2, whole.len() - 5, whole.len() - 1] {
            std::fs::write(&path, &whole[..cut]).expect("cut");
            let mut again = ClusterIdentity::load_or_create(dir.path(), 3).expect("load a cut file");
            assert_eq!(again.node_id, 3);
            assert_eq!(again.cluster_id, None, "cut at {cut}: the cluster id line is incomplete");
            again.record_cluster_id(dir.path(), "AAAAAAAAAAAAAAAAAAAAAA").expect("the real cluster id is accepted");
        }
        std::fs::remove_file(&path).expect("remove");
        assert_eq!(ClusterIdentity::load_or_create(dir.path(), 3).expect("recreate").node_id, 3);
    }

    #[test]
    fn a_data_dir_of_another_node_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        ClusterIdentity::load_or_create(dir.path(), 1).expect("create");
        let err = ClusterIdentity::load_or_create(dir.path(), 2).expect_err("mismatch");
        assert!(matches!(err, IdentityError::NodeMismatch { found: 1, expected: 2, .. }));
    }
}
