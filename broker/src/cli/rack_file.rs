//! `--rack-from-file`: how a broker run by strom-operator learns its rack. Kubernetes tells a
//! pod nothing about its node's labels, so the operator copies the node's topology label onto
//! the pod as the annotation `strom.dev/rack` once the pod is scheduled, and the kubelet
//! writes the pod's annotations into a downward-API file (and rewrites it when they change).
//! The broker waits at start until the key is in that file: a broker must register with its
//! rack, since the controller places replicas by it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The rack never appeared.
#[derive(Debug, thiserror::Error)]
#[error("no {key} in {path} after {waited:?} (is the operator running, and the pod on a node?)")]
pub struct RackFileError {
    pub path: PathBuf,
    pub key: String,
    pub waited: Duration,
}

/// The `key="value"` lines of a downward-API file, values unquoted as Go's `%q` quotes them.
/// A line that does not parse is skipped (the kubelet writes the file atomically, so a torn
/// file is not expected; an unreadable line is not a rack).
pub fn parse(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| {
            let (key, quoted) = line.split_once('=')?;
            Some((key.trim().to_string(), unquote(quoted.trim())?))
        })
        .collect()
}

fn unquote(quoted: &str) -> Option<String> {
    let inner = quoted.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            other => out.push(other),
        }
    }
    Some(out)
}

/// Waits until `key` is in the file at `path`; its value (None when empty: no rack).
pub async fn wait_for_rack(path: &Path, key: &str, timeout: Duration) -> Result<Option<String>, RackFileError> {
    let start = Instant::now();
    let mut told = false;
    loop {
        // A file that is missing or unreadable is one the kubelet has not written yet.
        if let Ok(text) = tokio::fs::read_to_string(path).await {
            if let Some(value) = parse(&text).remove(key) {
                return Ok(Some(value).filter(|v| !v.is_empty()));
            }
        }
        if start.elapsed() >= timeout {
            return Err(RackFileError { path: path.to_path_buf(), key: key.to_string(), waited: timeout });
        }
        if !told {
            tracing::info!(file = %path.display(), key, "waiting for this broker's rack");
            told = true;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downward_api_lines_are_read_with_gos_quoting() {
        let text = "kubernetes.io/config.seen=\"2026-12-07T00:00:00Z\"\nstrom.dev/rack=\"zone-a\"\nodd=\"a \\\"b\\\"\\nc\"\nbroken\n";
        let m = parse(text);
        assert_eq!(m["strom.dev/rack"], "zone-a");
        assert_eq!(m["odd"], "a \"b\"\nc");
        assert!(!m.contains_key("broken"));
    }

    #[tokio::test]
    async fn the_rack_is_waited_for_and_an_empty_one_is_none() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("annotations");
        let writer = {
            let path = path.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                tokio::fs::write(&path, "other=\"x\"\n").await.expect("write");
                tokio::time::sleep(Duration::from_millis(300)).await;
                tokio::fs::write(&path, "other=\"x\"\nstrom.dev/rack=\"rack-2\"\n").await.expect("write");
            })
        };
        let rack = wait_for_rack(&path, "strom.dev/rack", Duration::from_secs(10)).await.expect("rack");
        assert_eq!(rack.as_deref(), Some("rack-2"));
        writer.await.expect("writer");
        tokio::fs::write(&path, "strom.dev/rack=\"\"\n").await.expect("write");
        assert_eq!(wait_for_rack(&path, "strom.dev/rack", Duration::from_secs(1)).await.expect("rack"), None);
        let missing = wait_for_rack(&dir.path().join("none"), "strom.dev/rack", Duration::from_millis(300)).await;
        assert!(missing.is_err());
    }
}
