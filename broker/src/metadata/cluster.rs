//! The cluster id and this node's id, kept in `<data>/meta.properties` as Kafka does, so a
//! data directory is never opened by a different node by mistake.

use std::path::{Path, PathBuf};

use super::atomic_file;

/// Who this node is and which cluster its data belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterIdentity {
    pub cluster_id: String,
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
    #[error("{path} is malformed: {reason}")]
    Malformed { path: PathBuf, reason: String },
    #[error("{path} belongs to node {found}, but this broker is node {expected}")]
    NodeMismatch { path: PathBuf, found: i32, expected: i32 },
}

impl ClusterIdentity {
    /// Loads the identity from `data_dir`, or creates one with a new cluster id on first start.
    pub fn load_or_create(data_dir: &Path, node_id: i32) -> Result<ClusterIdentity, IdentityError> {
        let path = data_dir.join("meta.properties");
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let identity =
                    parse(&text).map_err(|reason| IdentityError::Malformed { path: path.clone(), reason })?;
                if identity.node_id != node_id {
                    return Err(IdentityError::NodeMismatch { path, found: identity.node_id, expected: node_id });
                }
                Ok(identity)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let identity = ClusterIdentity { cluster_id: new_cluster_id(), node_id };
                let text = format!(
                    "# written by strom; do not edit\nversion=1\ncluster.id={}\nnode.id={}\n",
                    identity.cluster_id, identity.node_id
                );
                atomic_file::write(&path, text.as_bytes()).map_err(|source| IdentityError::Io { path, source })?;
                Ok(identity)
            }
            Err(source) => Err(IdentityError::Io { path, source }),
        }
    }
}

fn parse(text: &str) -> Result<ClusterIdentity, String> {
    let mut cluster_id = None;
    let mut node_id = None;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        match line.split_once('=') {
            Some(("cluster.id", v)) => cluster_id = Some(v.to_string()),
            Some(("node.id", v)) => {
                node_id = Some(v.parse::<i32>().map_err(|_| format!("node.id {v:?} is not a number"))?)
            }
            _ => {}
        }
    }
    Ok(ClusterIdentity {
        cluster_id: cluster_id.ok_or("missing cluster.id")?,
        node_id: node_id.ok_or("missing node.id")?,
    })
}

/// Kafka's cluster ids are 22-character URL-safe base64 of a UUID.
fn new_cluster_id() -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bits = uuid::Uuid::new_v4().as_u128();
    (0..22).map(|i| ALPHABET[((bits >> (i * 6)) & 63) as usize] as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_is_created_once_and_then_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = ClusterIdentity::load_or_create(dir.path(), 3).expect("create");
        let again = ClusterIdentity::load_or_create(dir.path(), 3).expect("load");
        assert_eq!(first, again);
        assert_eq!(first.cluster_id.len(), 22);
    }

    #[test]
    fn a_data_dir_of_another_node_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        ClusterIdentity::load_or_create(dir.path(), 1).expect("create");
        let err = ClusterIdentity::load_or_create(dir.path(), 2).expect_err("mismatch");
        assert!(matches!(err, IdentityError::NodeMismatch { found: 1, expected: 2, .. }));
    }
}
