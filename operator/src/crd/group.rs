//! `ConsumerGroup` (strom.dev/v1alpha1): a consumer group's state and lag in status, and
//! declarative offset resets (its controller comes with the GitOps issue; the type is here so
//! the CRD is installed now).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::topic::DeletionPolicy;
use super::ClusterRef;

/// A consumer group of a Strom cluster.
// Each printcolumn(...) repeats `name`, `type_`, `json_path`: not duplicates, whatever
// clippy's attribute lint reads into them.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "strom.dev",
    version = "v1alpha1",
    kind = "ConsumerGroup",
    namespaced,
    status = "ConsumerGroupStatus",
    derive = "PartialEq",
    category = "strom",
    doc = "A consumer group of a Strom cluster: its state and lag, and declarative offset resets.",
    printcolumn(name = "Cluster", type_ = "string", json_path = ".spec.clusterRef.name"),
    printcolumn(name = "State", type_ = "string", json_path = ".status.state"),
    printcolumn(name = "Members", type_ = "integer", json_path = ".status.members"),
    printcolumn(name = "Lag", type_ = "integer", json_path = ".status.totalLag"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[x_kube(validation = Rule::new("has(self.groupId) == has(oldSelf.groupId) && (!has(self.groupId) || self.groupId == oldSelf.groupId)").message("groupId cannot change"))]
#[serde(rename_all = "camelCase")]
pub struct ConsumerGroupSpec {
    /// The Cluster (in this namespace) the group lives in.
    #[x_kube(validation = Rule::new("self == oldSelf").message("clusterRef cannot change"))]
    pub cluster_ref: ClusterRef,
    /// The Kafka group id (default: this resource's name). Fixed at creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub group_id: Option<String>,
    /// An offset reset, applied once per `id` and only while the group has no members.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset: Option<OffsetReset>,
    /// What deleting this resource does to the group: `Delete` (default) deletes the group and
    /// its committed offsets, `Retain` leaves them.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

/// A declarative offset reset.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[x_kube(validation = Rule::new("self.to in ['Earliest', 'Latest'] || has(self.value)").message("reset.value is required for Timestamp, Offset and ShiftBy"))]
#[serde(rename_all = "camelCase")]
pub struct OffsetReset {
    /// Any string; a new one asks for the reset again.
    #[schemars(length(min = 1))]
    pub id: String,
    /// The topic whose offsets are reset.
    #[schemars(length(min = 1))]
    pub topic: String,
    /// Partitions to reset (default: all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partitions: Vec<i32>,
    /// Where to: `Earliest`, `Latest`, `Timestamp` (value: RFC 3339 or ms since the epoch),
    /// `Offset` (value: the offset), `ShiftBy` (value: added to the committed offset).
    pub to: ResetTo,
    /// The timestamp, offset or shift.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResetTo {
    Earliest,
    Latest,
    Timestamp,
    Offset,
    ShiftBy,
}

/// What the operator last saw of the group.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerGroupStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Reconciling`, `Stalled`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The group's state (Empty, Stable, PreparingRebalance, CompletingRebalance, Dead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Members in the group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<i32>,
    /// Sum of the lag of every partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_lag: Option<i64>,
    /// Committed offset, log end offset and lag per partition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offsets: Vec<PartitionLag>,
    /// The `id` of the last reset applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reset_id: Option<String>,
}

/// One partition's committed offset and lag.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PartitionLag {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The group's committed offset (the next record it will read).
    pub committed_offset: i64,
    /// The partition's log end offset (-1 when its leader did not answer).
    pub log_end_offset: i64,
    /// Records between the committed offset and the log end offset.
    pub lag: i64,
}
