//! Cluster-level admin operations: describe the cluster and its brokers, topics (list,
//! describe, create, alter — partitions, configs, replication factor — and delete),
//! rebalances (plan with the balancer, execute as reassignments, progress, cancel), broker
//! removal, leader elections, unhealthy partitions.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use strom_proto::admin::{
    AlterTopicRequest, Broker, CreateTopicRequest, DescribeClusterResponse, ElectLeadersRequest, ElectLeadersResponse,
    ElectionResult, PartitionInfo, PartitionMove, RebalanceMode, RebalancePlan, RebalanceProgress, RebalanceRequest,
    Topic, UnhealthyPartitionsResponse,
};
use tonic::Status;

use super::peers;
use super::{controller_status, topic_status};
use crate::metadata::controller::balancer::{self, BalanceError, BalanceRequest, BalancerBroker, PartitionLoad};
use crate::metadata::controller::placement::{self, BrokerLoad, Candidate};
use crate::metadata::controller::{ErrorKind, TopicSpec};
use crate::metadata::image::{MetadataImage, TopicMetadata};
use crate::node::{Node, CONTROLLER_TIMEOUT};

fn partition_info(index: usize, p: &crate::metadata::image::PartitionRegistration) -> PartitionInfo {
    PartitionInfo {
        partition: i32::try_from(index).unwrap_or(i32::MAX),
        leader: p.leader,
        leader_epoch: p.leader_epoch,
        replicas: p.replicas.clone(),
        isr: p.isr.clone(),
        adding: p.adding.clone(),
        removing: p.removing.clone(),
    }
}

pub fn topic(t: &TopicMetadata) -> Topic {
    Topic {
        name: t.name.clone(),
        id: t.id.to_string(),
        partitions: t.partition_count(),
        replication_factor: i32::from(t.replication_factor()),
        configs: t.configs.clone().into_iter().collect(),
        partition_info: t.partitions.iter().enumerate().map(|(i, p)| partition_info(i, p)).collect(),
        internal: Node::is_internal(&t.name),
    }
}

fn find_topic(node: &Node, name: &str) -> Result<Topic, Status> {
    node.catalog.get(name).map(|t| topic(&t)).ok_or_else(|| Status::not_found(format!("topic {name} does not exist")))
}

/// Bytes of each partition's leader replica, from every broker that answered.
async fn partition_sizes(node: &Node) -> HashMap<(String, i32), u64> {
    let mut sizes = HashMap::new();
    for broker in peers::all_replicas(node).await {
        for r in broker.replicas.into_iter().filter(|r| r.leader) {
            sizes.insert((r.topic, r.partition), r.size_bytes);
        }
    }
    sizes
}

pub async fn describe_cluster(node: &Node) -> DescribeClusterResponse {
    let image = node.catalog.image();
    let controller = node.controller_id();
    let mut bytes: HashMap<i32, u64> = HashMap::new();
    for broker in peers::all_replicas(node).await {
        bytes.insert(broker.broker_id, broker.replicas.iter().map(|r| r.size_bytes).sum());
    }
    let load = BrokerLoad::of(&image);
    let leaders = |id: i32| image.partitions().filter(|(_, _, p)| p.leader == id).count();
    let brokers = image
        .brokers
        .values()
        .map(|b| Broker {
            id: b.id,
            rack: b.rack.clone(),
            kafka_address: format!("{}:{}", b.kafka.host, b.kafka.port),
            internal_address: b.internal_addr.clone(),
            live: !b.fenced,
            voter: node.metadata.voters.contains(b.id),
            controller: b.id == controller,
            replicas: i32::try_from(load.replicas.get(&b.id).copied().unwrap_or(0)).unwrap_or(i32::MAX),
            leaders: i32::try_from(leaders(b.id)).unwrap_or(i32::MAX),
            bytes: bytes.get(&b.id).copied().unwrap_or(0),
        })
        .collect();
    let (under, offline) = unhealthy_counts(&image);
    DescribeClusterResponse {
        cluster_id: image.cluster_id.clone().unwrap_or_default(),
        controller_id: controller,
        brokers,
        topics: i32::try_from(image.topics.len()).unwrap_or(i32::MAX),
        partitions: i32::try_from(image.partitions().count()).unwrap_or(i32::MAX),
        under_replicated_partitions: under,
        offline_partitions: offline,
        reassigning_partitions: i32::try_from(image.partitions().filter(|(_, _, p)| p.is_reassigning()).count())
            .unwrap_or(i32::MAX),
        replication_throttle_bytes_per_sec: image.replication_throttle,
    }
}

fn unhealthy_counts(image: &MetadataImage) -> (i32, i32) {
    let under = image.partitions().filter(|(_, _, p)| p.isr.len() < p.target_replicas().len()).count();
    let offline = image.partitions().filter(|(_, _, p)| p.leader < 0 || !image.is_live(p.leader)).count();
    (i32::try_from(under).unwrap_or(i32::MAX), i32::try_from(offline).unwrap_or(i32::MAX))
}

pub fn list_topics(node: &Node, include_internal: bool) -> Vec<Topic> {
    node.catalog.list().iter().filter(|t| include_internal || !Node::is_internal(&t.name)).map(|t| topic(t)).collect()
}

pub fn describe_topic(node: &Node, name: &str) -> Result<Topic, Status> {
    find_topic(node, name)
}

pub async fn create_topic(node: &Node, r: CreateTopicRequest) -> Result<Topic, Status> {
    if Node::is_internal(&r.name) {
        return Err(Status::invalid_argument(format!("{} is an internal topic; the brokers create it", r.name)));
    }
    let partitions = if r.partitions == 0 { node.config.num_partitions } else { r.partitions };
    if partitions < 1 {
        return Err(Status::invalid_argument(format!("partitions must be at least 1, got {partitions}")));
    }
    let rf = if r.replication_factor == 0 {
        i32::from(node.config.default_replication_factor)
    } else {
        r.replication_factor
    };
    let replication_factor = i16::try_from(rf)
        .ok()
        .filter(|rf| *rf >= 1)
        .ok_or_else(|| Status::invalid_argument(format!("replication factor must be at least 1, got {rf}")))?;
    let spec = TopicSpec {
        name: r.name.clone(),
        partitions,
        replication_factor,
        configs: r.configs.into_iter().collect(),
        assignment: Vec::new(),
        validate_only: false,
    };
    node.create_topic(spec).await.map_err(|e| topic_status(&e))?;
    find_topic(node, &r.name)
}

pub async fn alter_topic(node: &Node, r: AlterTopicRequest) -> Result<Topic, Status> {
    let current =
        node.catalog.get(&r.name).ok_or_else(|| Status::not_found(format!("topic {} does not exist", r.name)))?;
    // Every check before any change, so a refused request changes nothing.
    if r.partitions < 0 || r.replication_factor < 0 {
        return Err(Status::invalid_argument(format!(
            "partitions and replication factor must be at least 1, got {} and {}",
            r.partitions, r.replication_factor
        )));
    }
    if r.partitions > 0 && r.partitions < current.partition_count() {
        return Err(Status::invalid_argument(format!(
            "topic {} has {} partitions; the count can only grow, not shrink to {}",
            r.name,
            current.partition_count(),
            r.partitions
        )));
    }
    let live = node.catalog.image().live_brokers().count();
    if usize::try_from(r.replication_factor).unwrap_or(0) > live {
        return Err(Status::invalid_argument(format!(
            "replication factor {} is larger than the {live} live broker(s)",
            r.replication_factor
        )));
    }
    let configs = (!r.set_configs.is_empty() || !r.delete_configs.is_empty()).then(|| {
        let mut configs = current.configs.clone();
        for k in &r.delete_configs {
            configs.remove(k);
        }
        configs.extend(r.set_configs.clone());
        configs
    });
    let grow = r.partitions > 0 && r.partitions != current.partition_count();
    // A partition left at another replica count (a reassignment refused halfway, a change
    // made to one partition) counts as a difference, not only partition 0's.
    let rf = usize::try_from(r.replication_factor).unwrap_or(0);
    let refit = rf > 0 && current.partitions.iter().any(|p| p.target_replicas().len() != rf);
    // The controller checks each part again when it is made; these validate-only passes let
    // a refusal of a later part come before an earlier part has changed anything.
    if let Some(configs) = &configs {
        node.set_topic_configs(&r.name, configs.clone(), true).await.map_err(|e| topic_status(&e))?;
    }
    if grow {
        node.increase_partitions(&r.name, r.partitions, &[], true).await.map_err(|e| topic_status(&e))?;
    }
    if let Some(configs) = configs {
        node.set_topic_configs(&r.name, configs, false).await.map_err(|e| topic_status(&e))?;
    }
    if grow {
        node.increase_partitions(&r.name, r.partitions, &[], false).await.map_err(|e| topic_status(&e))?;
    }
    if refit {
        change_replication_factor(node, &r.name, rf).await?;
    }
    find_topic(node, &r.name)
}

/// A new replication factor through reassignment: replicas are added on the least loaded live
/// brokers, or removed from the end of each list (never the leader).
async fn change_replication_factor(node: &Node, name: &str, rf: usize) -> Result<(), Status> {
    let image = node.catalog.image();
    let topic = image.topic(name).ok_or_else(|| Status::not_found(format!("topic {name} does not exist")))?;
    let live: Vec<Candidate> = image.live_brokers().map(|b| Candidate { id: b.id, rack: b.rack.clone() }).collect();
    if rf > live.len() {
        return Err(Status::invalid_argument(format!(
            "replication factor {rf} is larger than the {} live broker(s)",
            live.len()
        )));
    }
    let mut load = BrokerLoad::of(&image);
    let mut targets = Vec::new();
    for (i, p) in topic.partitions.iter().enumerate() {
        let mut replicas = p.target_replicas();
        while replicas.len() > rf {
            let at = replicas.iter().rposition(|r| *r != p.leader).unwrap_or(replicas.len() - 1);
            replicas.remove(at);
        }
        while replicas.len() < rf {
            let others: Vec<Candidate> = live.iter().filter(|c| !replicas.contains(&c.id)).cloned().collect();
            let pick =
                placement::place(&others, &mut load, 1, 1).map_err(|e| Status::invalid_argument(e.to_string()))?;
            replicas.push(pick[0][0]);
        }
        targets.push((name.to_string(), i32::try_from(i).unwrap_or(i32::MAX), Some(replicas)));
    }
    reassign(node, targets).await
}

async fn reassign(node: &Node, targets: Vec<(String, i32, Option<Vec<i32>>)>) -> Result<(), Status> {
    let results =
        node.metadata.client.reassign(&targets, CONTROLLER_TIMEOUT).await.map_err(|e| controller_status(&e))?;
    let failed: Vec<String> =
        results.iter().filter_map(|(t, p, e)| e.as_ref().map(|(_, m)| format!("{t}-{p}: {m}"))).take(5).collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Status::failed_precondition(format!("reassignment refused: {}", failed.join("; "))))
    }
}

pub async fn delete_topic(node: &Node, name: &str) -> Result<(), Status> {
    if Node::is_internal(name) {
        return Err(Status::invalid_argument(format!("{name} is an internal topic and cannot be deleted")));
    }
    node.delete_topic(name).await.map_err(|e| topic_status(&e))
}

/// The balancer's plan for `r` on the current cluster.
pub async fn plan_rebalance(
    node: &Node,
    r: &RebalanceRequest,
) -> Result<(RebalancePlan, Vec<(String, i32, Vec<i32>)>), Status> {
    let image = node.catalog.image();
    let mode =
        RebalanceMode::try_from(r.mode).map_err(|_| Status::invalid_argument(format!("unknown mode {}", r.mode)))?;
    for b in &r.brokers {
        if image.broker(*b).is_none() {
            return Err(Status::not_found(format!("broker {b} is not registered")));
        }
    }
    if mode != RebalanceMode::Full && r.brokers.is_empty() {
        return Err(Status::invalid_argument("name the brokers to add or to drain"));
    }
    let sizes = partition_sizes(node).await;
    let brokers: Vec<BalancerBroker> = image
        .brokers
        .values()
        .filter(|b| !b.fenced || r.brokers.contains(&b.id) && mode == RebalanceMode::DrainBrokers)
        .map(|b| BalancerBroker { id: b.id, rack: b.rack.clone() })
        .collect();
    let partitions: Vec<PartitionLoad> = image
        .partitions()
        .map(|(t, i, p)| PartitionLoad {
            topic: t.name.clone(),
            partition: i,
            replicas: p.target_replicas(),
            size_bytes: sizes.get(&(t.name.clone(), i)).copied().unwrap_or(0),
        })
        .collect();
    let drain: BTreeSet<i32> =
        if mode == RebalanceMode::DrainBrokers { r.brokers.iter().copied().collect() } else { BTreeSet::new() };
    let only_to: BTreeSet<i32> =
        if mode == RebalanceMode::AddBrokers { r.brokers.iter().copied().collect() } else { BTreeSet::new() };
    let request = BalanceRequest { brokers, partitions: partitions.clone(), drain, only_to };
    let moves = balancer::plan(&request).map_err(|e| match e {
        BalanceError::UnknownBroker(b) => Status::failed_precondition(format!("broker {b} is not live")),
        other if mode == RebalanceMode::DrainBrokers => {
            Status::failed_precondition(format!("cannot drain broker(s) {:?}: {other}", r.brokers))
        }
        other => Status::failed_precondition(other.to_string()),
    })?;
    let mut after: BTreeMap<(String, i32), Vec<i32>> =
        partitions.iter().map(|p| ((p.topic.clone(), p.partition), p.replicas.clone())).collect();
    let mut out = Vec::new();
    let mut plan = RebalancePlan::default();
    for m in &moves {
        let bytes = sizes.get(&(m.topic.clone(), m.partition)).copied().unwrap_or(0) * m.added().len() as u64;
        plan.replicas_to_move += i32::try_from(m.added().len()).unwrap_or(0);
        plan.bytes_to_move += bytes;
        plan.moves.push(PartitionMove {
            topic: m.topic.clone(),
            partition: m.partition,
            from: m.from.clone(),
            to: m.to.clone(),
            bytes,
        });
        after.insert((m.topic.clone(), m.partition), m.to.clone());
        out.push((m.topic.clone(), m.partition, m.to.clone()));
    }
    for replicas in after.values() {
        for r in replicas {
            *plan.replicas_after.entry(*r).or_default() += 1;
        }
        if let Some(l) = replicas.first() {
            *plan.leaders_after.entry(*l).or_default() += 1;
        }
    }
    Ok((plan, out))
}

pub async fn execute_rebalance(node: &Node, r: &RebalanceRequest) -> Result<RebalancePlan, Status> {
    let (mut plan, mut targets) = plan_rebalance(node, r).await?;
    if let Ok(max) = usize::try_from(r.max_moves) {
        if max > 0 && targets.len() > max {
            targets.truncate(max);
            plan.moves.truncate(max);
        }
    }
    let throttle = (r.throttle_bytes_per_sec > 0).then_some(r.throttle_bytes_per_sec);
    if throttle != node.catalog.image().replication_throttle {
        node.metadata
            .client
            .set_replication_throttle(throttle, CONTROLLER_TIMEOUT)
            .await
            .map_err(|e| controller_status(&e))?;
    }
    if !targets.is_empty() {
        reassign(node, targets.into_iter().map(|(t, p, r)| (t, p, Some(r))).collect()).await?;
    }
    Ok(plan)
}

pub async fn rebalance_status(node: &Node) -> RebalanceProgress {
    let image = node.catalog.image();
    let moving: Vec<_> = image.partitions().filter(|(_, _, p)| p.is_reassigning()).collect();
    if moving.is_empty() {
        return RebalanceProgress::default();
    }
    // Sizes of every replica, by (topic, partition, broker).
    let mut sizes: HashMap<(String, i32, i32), u64> = HashMap::new();
    for broker in peers::all_replicas(node).await {
        for r in broker.replicas {
            sizes.insert((r.topic, r.partition, broker.broker_id), r.size_bytes);
        }
    }
    let mut progress = RebalanceProgress::default();
    for (t, i, p) in moving {
        progress.partitions_remaining += 1;
        let leader_size = sizes.get(&(t.name.clone(), i, p.leader)).copied().unwrap_or(0);
        for r in p.adding.iter().filter(|r| !p.isr.contains(r)) {
            progress.replicas_remaining += 1;
            let have = sizes.get(&(t.name.clone(), i, *r)).copied().unwrap_or(0);
            progress.bytes_behind += leader_size.saturating_sub(have);
        }
        progress.in_progress.push(PartitionMove {
            topic: t.name.clone(),
            partition: i,
            from: p.original_replicas(),
            to: p.target_replicas(),
            bytes: leader_size,
        });
    }
    progress
}

pub async fn cancel_rebalance(node: &Node) -> Result<RebalanceProgress, Status> {
    node.metadata.client.cancel_all_reassignments(CONTROLLER_TIMEOUT).await.map_err(|e| controller_status(&e))?;
    Ok(rebalance_status(node).await)
}

pub async fn remove_broker(node: &Node, id: i32) -> Result<(), Status> {
    node.metadata.client.unregister_broker(id, CONTROLLER_TIMEOUT).await.map_err(|e| controller_status(&e))
}

pub async fn elect_leaders(node: &Node, r: ElectLeadersRequest) -> Result<ElectLeadersResponse, Status> {
    let partitions: Vec<(String, i32)> = r.partitions.into_iter().map(|p| (p.topic, p.partition)).collect();
    let results = node
        .metadata
        .client
        .elect_leaders(&partitions, r.unclean, CONTROLLER_TIMEOUT)
        .await
        .map_err(|e| controller_status(&e))?;
    Ok(ElectLeadersResponse {
        results: results
            .into_iter()
            .map(|(topic, partition, e)| ElectionResult {
                topic,
                partition,
                // A partition its preferred replica leads already is not a failure here.
                error: match e {
                    Some((ErrorKind::ElectionNotNeeded, _)) | None => String::new(),
                    Some((_, message)) => message,
                },
            })
            .collect(),
    })
}

pub fn unhealthy_partitions(node: &Node) -> UnhealthyPartitionsResponse {
    let image = node.catalog.image();
    let mut out = UnhealthyPartitionsResponse::default();
    for (t, i, p) in image.partitions() {
        let info = partition_info(usize::try_from(i).unwrap_or(0), p);
        if p.leader < 0 || !image.is_live(p.leader) {
            out.offline.push(info);
            out.offline_topics.push(t.name.clone());
        } else if p.isr.len() < p.target_replicas().len() {
            out.under_replicated.push(info);
            out.under_replicated_topics.push(t.name.clone());
        }
    }
    out
}
