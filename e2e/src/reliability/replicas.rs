//! P9 and P10 after healing: every replica of a partition holds the same bytes (followers copy
//! the leader's batches verbatim, so their logs are byte-identical once caught up), and every
//! broker serves the same metadata.

use std::fs;
use std::time::Duration;

use anyhow::{bail, Result};

use crate::cluster::{wait_until, Cluster};
use crate::segment;

/// A partition's log as one byte string: its segments' `.log` files in offset order.
fn log_bytes(cluster: &Cluster, broker: usize, topic: &str, partition: i32) -> Result<Option<Vec<u8>>> {
    let dir = cluster.brokers[broker].partition_dir(topic, partition);
    if !dir.exists() {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    for file in segment::log_files(&dir)? {
        bytes.extend(fs::read(&file)?);
    }
    Ok(Some(bytes))
}

/// Waits until every replica of each of `partitions` partitions of `topic` holds the same
/// bytes and every broker serves the same metadata; returns each partition's size. Fails with
/// where the replicas differ.
pub fn wait_identical(cluster: &Cluster, topic: &str, partitions: i32, timeout: Duration) -> Result<Vec<usize>> {
    let ids: Vec<i32> = (0..cluster.brokers.len()).filter_map(|i| i32::try_from(i).ok()).collect();
    cluster.wait_same_metadata(&ids, timeout)?;
    wait_until(timeout, || {
        let mut sizes = Vec::new();
        for p in 0..partitions {
            let mut replicas = Vec::new();
            for b in 0..cluster.brokers.len() {
                if let Some(bytes) = log_bytes(cluster, b, topic, p)? {
                    replicas.push((b, bytes));
                }
            }
            let Some((first, reference)) = replicas.first() else { bail!("{topic}-{p} has no replica on disk") };
            for (b, bytes) in &replicas[1..] {
                if bytes != reference {
                    let at = bytes
                        .iter()
                        .zip(reference)
                        .position(|(x, y)| x != y)
                        .unwrap_or(bytes.len().min(reference.len()));
                    bail!(
                        "P9: {topic}-{p} differs between broker {first} ({} bytes) and broker {b} ({} bytes) from byte {at}",
                        reference.len(),
                        bytes.len()
                    );
                }
            }
            sizes.push(reference.len());
        }
        Ok(sizes)
    })
}
