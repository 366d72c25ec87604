//! What the operator sees of a cluster when a reconcile starts: its StatefulSet and broker
//! pods (from the API server) and the brokers' own view (from the admin API). Plain data,
//! built from the API objects by pure functions, so plans can be tested without a cluster.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;

use super::names::{self, Names};

/// Everything the plan decides from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observed {
    pub statefulset: Option<StatefulSetView>,
    /// Broker pods by ordinal.
    pub pods: BTreeMap<i32, PodView>,
    /// The brokers' view; `None` when no broker answered the admin API.
    pub brokers: Option<BrokerView>,
    /// What the balancer would do now for the rebalance the current operation needs (asked
    /// of the brokers when an operation is moving replicas).
    pub planned_moves: Option<Planned>,
}

/// The brokers' answer to a dry run of a rebalance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Planned {
    /// This many partitions would move.
    Moves(i32),
    /// The balancer cannot do it (e.g. no broker left to drain onto), and says why.
    Impossible(String),
}

/// The StatefulSet as the StatefulSet controller last reported it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatefulSetView {
    pub replicas: i32,
    /// The revision pods created now get; meaningful only when `status_current`.
    pub update_revision: Option<String>,
    /// The StatefulSet controller has seen the latest spec (status.observedGeneration).
    pub status_current: bool,
    /// Size of the claim template (fixed at creation).
    pub claim_size: Option<String>,
    /// The pod template hash the operator annotated it with when it applied it last.
    pub template_hash: Option<String>,
}

/// One broker pod.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodView {
    pub name: String,
    pub uid: String,
    pub revision: Option<String>,
    pub ready: bool,
    pub terminating: bool,
    pub restarts: i32,
    /// The node it is scheduled on.
    pub node: Option<String>,
    /// Its `strom.dev/rack` annotation, once the operator set it.
    pub rack: Option<String>,
}

/// The cluster as its brokers see it (admin API: DescribeCluster, ListTopics).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BrokerView {
    pub controller: Option<i32>,
    /// Registered brokers by id.
    pub brokers: BTreeMap<i32, BrokerInfo>,
    pub partitions: i32,
    pub under_replicated: i32,
    pub offline: i32,
    pub reassigning: i32,
    /// The largest replication factor of any topic, internal ones included.
    pub max_replication_factor: i32,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct BrokerInfo {
    pub rack: Option<String>,
    pub live: bool,
    pub voter: bool,
    pub replicas: i32,
    pub leaders: i32,
}

impl StatefulSetView {
    pub fn of(sts: &StatefulSet) -> StatefulSetView {
        let spec = sts.spec.as_ref();
        let status = sts.status.as_ref();
        let generation = sts.metadata.generation;
        StatefulSetView {
            replicas: spec.and_then(|s| s.replicas).unwrap_or(1),
            update_revision: status.and_then(|s| s.update_revision.clone()),
            status_current: generation.is_some() && status.and_then(|s| s.observed_generation) == generation,
            claim_size: spec
                .and_then(|s| s.volume_claim_templates.as_ref())
                .and_then(|t| t.iter().find(|c| c.metadata.name.as_deref() == Some("data")))
                .and_then(|c| c.spec.as_ref()?.resources.as_ref()?.requests.as_ref()?.get("storage").cloned())
                .map(|q| q.0),
            template_hash: sts
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(names::TEMPLATE_HASH_ANNOTATION).cloned()),
        }
    }
}

impl PodView {
    pub fn of(pod: &Pod) -> PodView {
        let status = pod.status.as_ref();
        let ready = status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        PodView {
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            revision: pod.metadata.labels.as_ref().and_then(|l| l.get(names::REVISION_LABEL).cloned()),
            ready,
            terminating: pod.metadata.deletion_timestamp.is_some(),
            restarts: status
                .and_then(|s| s.container_statuses.as_ref())
                .map_or(0, |c| c.iter().map(|c| c.restart_count).sum()),
            node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            rack: pod.metadata.annotations.as_ref().and_then(|a| a.get(names::RACK_ANNOTATION).cloned()),
        }
    }
}

/// Scheduled pods whose rack annotation the operator has yet to set: (ordinal, pod, node).
pub fn pods_without_rack(pods: &BTreeMap<i32, PodView>) -> Vec<(i32, String, String)> {
    pods.iter()
        .filter(|(_, p)| p.rack.is_none() && !p.terminating)
        .filter_map(|(id, p)| Some((*id, p.name.clone(), p.node.clone()?)))
        .collect()
}

/// The cluster's broker pods by ordinal (pods of other StatefulSets are ignored).
pub fn pods_by_ordinal(names: &Names, pods: &[Pod]) -> BTreeMap<i32, PodView> {
    let sts = names.statefulset();
    pods.iter().filter_map(|p| Some((names::ordinal(&sts, p.metadata.name.as_deref()?)?, PodView::of(p)))).collect()
}

impl Observed {
    /// Broker `id` is up: its pod is Ready and, when the brokers answered, it is live.
    pub fn broker_up(&self, id: i32) -> bool {
        let pod_ready = self.pods.get(&id).is_some_and(|p| p.ready && !p.terminating);
        let live = self.brokers.as_ref().is_none_or(|b| b.brokers.get(&id).is_some_and(|i| i.live));
        pod_ready && live
    }

    /// Replicas broker `id` holds (0 when unknown or unregistered).
    pub fn replicas_on(&self, id: i32) -> i32 {
        self.brokers.as_ref().and_then(|b| b.brokers.get(&id)).map_or(0, |i| i.replicas)
    }
}
