//! `Topic` (strom.dev/v1alpha1): a Kafka topic of a `Cluster`, kept as Git says (the
//! controller is [`crate::topic`]).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ClusterRef;

/// A Kafka topic of a Strom cluster.
// Each printcolumn(...) repeats `name`, `type_`, `json_path`: not duplicates, whatever
// clippy's attribute lint reads into them.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "strom.dev",
    version = "v1alpha1",
    kind = "Topic",
    namespaced,
    status = "TopicStatus",
    derive = "PartialEq",
    category = "strom",
    doc = "A Kafka topic of a Strom cluster, managed declaratively.",
    printcolumn(name = "Cluster", type_ = "string", json_path = ".spec.clusterRef.name"),
    printcolumn(name = "Partitions", type_ = "integer", json_path = ".spec.partitions"),
    printcolumn(
        name = "RF",
        type_ = "integer",
        json_path = ".spec.replicationFactor",
        description = "Replication factor"
    ),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[x_kube(validation = Rule::new("has(self.topicName) == has(oldSelf.topicName) && (!has(self.topicName) || self.topicName == oldSelf.topicName)").message("topicName cannot change"))]
#[serde(rename_all = "camelCase")]
pub struct TopicSpec {
    /// The Cluster (in this namespace) the topic lives in.
    #[x_kube(validation = Rule::new("self == oldSelf").message("clusterRef cannot change"))]
    pub cluster_ref: ClusterRef,
    /// The Kafka topic's name (default: this resource's name). Fixed at creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 249), pattern(r"^[a-zA-Z0-9._-]+$"))]
    pub topic_name: Option<String>,
    /// Number of partitions; it may grow, never shrink (Kafka cannot remove partitions).
    #[schemars(range(min = 1, max = 100000))]
    #[x_kube(validation = Rule::new("self >= oldSelf").message("partitions cannot decrease"))]
    pub partitions: i32,
    /// Replicas of each partition; a change moves replicas (a reassignment).
    #[schemars(range(min = 1, max = 32))]
    pub replication_factor: i32,
    /// Topic configs with Kafka's names (e.g. `retention.ms`, `cleanup.policy`); a key left
    /// out is not managed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub config: BTreeMap<String, String>,
    /// What deleting this resource does to the topic: `Delete` (default) deletes it,
    /// `Retain` leaves it in the cluster.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

/// What deleting the resource does to what it manages.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeletionPolicy {
    #[default]
    Delete,
    Retain,
}

/// What the operator last saw of the topic.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TopicStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Reconciling`, `Stalled`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The topic's id in the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_id: Option<String>,
    /// Partitions the topic has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<i32>,
    /// Its replication factor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_factor: Option<i32>,
    /// Partitions whose replicas are being moved (a replication-factor change in progress).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reassigning_partitions: Option<i32>,
}
