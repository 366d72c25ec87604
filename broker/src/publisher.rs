//! The metadata publisher: makes this broker what each new metadata image says it is.
//!
//! For every image it opens the replicas assigned here (recovering their logs), gives each
//! its leadership, leader epoch and ISR, points the fetch loops at the leaders of the
//! partitions it follows, applies changed topic configs, removes replicas of
//! deleted topics, loads the consumer groups of `__consumer_offsets` partitions it has come
//! to lead (and drops those it no longer leads), records the cluster id in
//! `meta.properties`, and decides `/readyz`: registered with the current epoch, unfenced, and
//! this image applied. File work runs on a blocking thread; raft's state machine only ever
//! publishes (it must not block).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::watch;

use crate::group::OFFSETS_TOPIC;
use crate::metadata::{ClusterIdentity, MetadataImage};
use crate::node::Node;
use crate::partition::Leadership;
use crate::replication::FollowTarget;
use crate::shutdown::Shutdown;
use crate::txn::TRANSACTION_STATE_TOPIC;

/// Applies `image` to this broker (after `previous`, if any). `epoch` is this broker's
/// registration: a replica leads only while the image shows this very registration unfenced,
/// so a restarted broker never serves as leader from its stale local image.
pub fn apply(node: &Node, previous: Option<&MetadataImage>, image: &MetadataImage, epoch: Option<u64>) {
    let me = node.id();
    let registered = is_ready(me, image, epoch);
    // Removals first, so a topic deleted and created again under the same name gets a fresh
    // replica instead of the old one's data.
    for (name, index, id) in node.replicas.hosted() {
        let keep = image
            .topic(&name)
            .is_some_and(|t| t.id == id && t.partition(index).is_some_and(|p| p.replicas.contains(&me)));
        if !keep {
            tracing::info!(topic = %name, partition = index, "removing replica: its topic was deleted or it moved away");
            node.replicas.remove_partition(&name, index);
        }
    }
    for (topic, index, reg) in image.partitions() {
        if !reg.replicas.contains(&me) {
            continue;
        }
        match node.replicas.ensure_partition(topic, index) {
            Ok(replica) => {
                let leadership = Leadership {
                    is_leader: registered && reg.leader == me,
                    leader_epoch: reg.leader_epoch,
                    leader: reg.leader,
                    replicas: reg.replicas.clone(),
                    isr: reg.isr.clone(),
                    partition_epoch: reg.partition_epoch,
                    adding: reg.adding.clone(),
                    fenced: reg.replicas.iter().copied().filter(|r| !image.is_live(*r)).collect(),
                };
                if replica.is_leader() != leadership.is_leader {
                    tracing::info!(topic = %topic.name, partition = index, leader = leadership.is_leader, leader_epoch = leadership.leader_epoch, "leadership changed");
                }
                replica.set_leadership(leadership);
            }
            Err(e) => {
                tracing::error!(topic = %topic.name, partition = index, error = %crate::error_chain::display(&e), "opening replica failed")
            }
        }
    }
    // Follow the leader of every partition replicated here that another broker leads.
    let mut follow = std::collections::BTreeMap::new();
    for (topic, index, reg) in image.partitions() {
        if reg.replicas.contains(&me) && reg.leader >= 0 && reg.leader != me {
            let target = FollowTarget { leader: reg.leader, topic_id: topic.id, leader_epoch: reg.leader_epoch };
            follow.insert((topic.name.clone(), index), target);
        }
    }
    node.fetchers.set(follow);
    if let Some(previous) = previous {
        for topic in image.topics.values() {
            let changed =
                previous.topic(&topic.name).is_some_and(|old| old.id == topic.id && old.configs != topic.configs);
            if changed {
                node.replicas.update_topic_config(topic);
            }
        }
    }
    let loaded = node.txn.loaded_partitions();
    for p in 0..node.txn.config().state_partitions {
        let leader_epoch = node.replicas.leader(TRANSACTION_STATE_TOPIC, p).map(|r| r.leadership().leader_epoch);
        let was = loaded.contains(&p);
        match leader_epoch {
            Some(epoch) if !was => {
                let ids = node.txn.load_partition(p, epoch);
                tracing::info!(
                    partition = p,
                    ids,
                    "coordinating the transactional ids of __transaction_state partition"
                );
            }
            None if was => {
                node.txn.unload_partition(p);
                tracing::info!(
                    partition = p,
                    "no longer coordinating the transactional ids of __transaction_state partition"
                );
            }
            _ => {}
        }
    }
    let loaded = node.groups.loaded_partitions();
    for p in 0..node.groups.config().offsets_topic_partitions {
        let leading = node.replicas.leader(OFFSETS_TOPIC, p).is_some();
        let was = loaded.contains(&p);
        if leading && !was {
            let groups = node.groups.load_partition(p);
            tracing::info!(partition = p, groups, "coordinating the groups of __consumer_offsets partition");
        } else if !leading && was {
            node.groups.unload_partition(p);
            tracing::info!(partition = p, "no longer coordinating the groups of __consumer_offsets partition");
        }
    }
}

/// Whether this broker may serve: registered with `epoch`, unfenced in `image`.
fn is_ready(me: i32, image: &MetadataImage, epoch: Option<u64>) -> bool {
    let Some(epoch) = epoch else { return false };
    image.broker(me).is_some_and(|b| b.epoch == epoch && !b.fenced)
}

/// Applies each new image until `stopped` (after the controlled shutdown, so the image that
/// moves this broker's leaderships away is still applied); not ready from `stopping` on.
/// `epoch` is this broker's registration.
pub async fn run(
    node: Arc<Node>,
    mut images: watch::Receiver<Arc<MetadataImage>>,
    mut epoch: watch::Receiver<Option<u64>>,
    mut identity: ClusterIdentity,
    mut applied: Arc<MetadataImage>,
    stopping: Shutdown,
    mut stopped: Shutdown,
) {
    let mut identity_ok = true;
    let mut applied_epoch = None;
    loop {
        let image = images.borrow_and_update().clone();
        let current_epoch = *epoch.borrow_and_update();
        if !Arc::ptr_eq(&image, &applied) || current_epoch != applied_epoch {
            let (n, previous, next) = (node.clone(), applied.clone(), image.clone());
            if let Err(e) = tokio::task::spawn_blocking(move || apply(&n, Some(&previous), &next, current_epoch)).await
            {
                tracing::error!(error = %e, "applying the metadata image failed");
            }
            applied = image.clone();
            applied_epoch = current_epoch;
        }
        if let Some(cluster_id) = &image.cluster_id {
            if identity.cluster_id.as_deref() != Some(cluster_id.as_str()) && identity_ok {
                if let Err(e) = identity.record_cluster_id(&node.config.data_dir, cluster_id) {
                    tracing::error!(error = %crate::error_chain::display(&e), "this data directory belongs to another cluster; not serving");
                    identity_ok = false;
                }
            }
        }
        let ready = identity_ok && !stopping.is_triggered() && is_ready(node.id(), &image, current_epoch);
        if node.ready.swap(ready, Ordering::AcqRel) != ready {
            tracing::info!(ready, applied_index = image.applied_index, "readiness changed");
        }
        let mut stopping_now = stopping.clone();
        tokio::select! {
            _ = stopped.wait() => {
                node.ready.store(false, Ordering::Release);
                return;
            }
            _ = stopping_now.wait(), if !stopping.is_triggered() => {}
            changed = images.changed() => if changed.is_err() { return },
            changed = epoch.changed() => if changed.is_err() { return },
        }
    }
}
