//! `ConsumerGroup` (strom.dev/v1alpha1): a consumer group's state and lag in status, and
//! declarative offset resets (the controller is [`crate::group`]).

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
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
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
    #[schemars(length(min = 1, max = 255))]
    pub group_id: Option<String>,
    /// Seconds between refreshes of the status (state, members, lag); default 30.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 5, max = 86400))]
    pub refresh_seconds: Option<i32>,
    /// An offset reset, applied once per `id` and only while the group has no members.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset: Option<OffsetReset>,
    /// What deleting this resource does to the group: `Retain` (default) leaves the group and
    /// its committed offsets to the application; `Delete` deletes them.
    #[serde(default = "retain")]
    pub deletion_policy: DeletionPolicy,
}

/// A group's offsets belong to its application: deleting the resource that watches it keeps
/// them unless asked otherwise.
fn retain() -> DeletionPolicy {
    DeletionPolicy::Retain
}

/// Status refresh period when the spec names none.
pub const DEFAULT_REFRESH_SECONDS: i32 = 30;

/// A declarative offset reset: where the group resumes, per topic.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OffsetReset {
    /// Any string; a new one asks for the reset again (a reset is applied once per id).
    #[schemars(length(min = 1, max = 253))]
    pub id: String,
    /// The topics to reset, each with its own target.
    #[schemars(length(min = 1))]
    pub topics: Vec<TopicReset>,
}

/// Where one topic's committed offsets go.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[x_kube(validation = Rule::new("self.to != 'Timestamp' || has(self.timestamp)").message("timestamp is required when `to` is Timestamp"))]
#[x_kube(validation = Rule::new("self.to != 'ShiftBy' || has(self.shiftBy)").message("shiftBy is required when `to` is ShiftBy"))]
#[x_kube(validation = Rule::new("self.to != 'Offset' || (has(self.offsets) && size(self.offsets) > 0)").message("offsets is required when `to` is Offset"))]
#[x_kube(validation = Rule::new("self.to == 'Offset' || !has(self.offsets)").message("offsets is only for `to: Offset`"))]
#[x_kube(validation = Rule::new("self.to != 'Offset' || !has(self.partitions)").message("partitions is not for `to: Offset`: offsets names them"))]
#[x_kube(validation = Rule::new("self.to == 'Timestamp' || !has(self.timestamp)").message("timestamp is only for `to: Timestamp`"))]
#[x_kube(validation = Rule::new("self.to == 'ShiftBy' || !has(self.shiftBy)").message("shiftBy is only for `to: ShiftBy`"))]
#[serde(rename_all = "camelCase")]
pub struct TopicReset {
    /// The topic whose offsets are reset.
    #[schemars(length(min = 1, max = 249))]
    pub topic: String,
    /// Where to: `Earliest`, `Latest`, `Timestamp` (the first record at or after
    /// `timestamp`), `Offset` (the offset of each partition in `offsets`), `ShiftBy` (the
    /// committed offset plus `shiftBy`). Targets are clamped to the partition's log.
    pub to: ResetTo,
    /// Partitions to reset (default: all); not with `Offset`, which names its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(range(min = 0)))]
    pub partitions: Vec<i32>,
    /// For `Timestamp`: RFC 3339 (`2026-12-01T00:00:00Z`) or milliseconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(r"^([0-9]{1,15}|[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?([Zz]|[+-][0-9]{2}:[0-9]{2}))$"))]
    pub timestamp: Option<String>,
    /// For `ShiftBy`: records to move (negative: back, re-reading them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shift_by: Option<i64>,
    /// For `Offset`: the offset of each partition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offsets: Vec<PartitionOffset>,
}

/// A partition and an offset in it.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PartitionOffset {
    /// The partition.
    #[schemars(range(min = 0))]
    pub partition: i32,
    /// The offset (the next record the group reads).
    #[schemars(range(min = 0))]
    pub offset: i64,
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
    /// The last reset: its id, when it was applied, and each partition's offset before and
    /// after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reset: Option<ResetResult>,
}

/// What a reset did. Its offsets are recorded before they are committed (`appliedAt` unset
/// until every one is), so an operator restarted halfway commits the same offsets again
/// rather than computing new ones.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResetResult {
    /// The reset's id.
    pub id: String,
    /// When every offset was committed (RFC 3339); unset while it is being applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_at: Option<String>,
    /// Each partition's committed offset before and after.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offsets: Vec<ResetOffset>,
}

/// One partition's committed offset before and after a reset.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ResetOffset {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The committed offset before the reset (unset: the group had none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<i64>,
    /// The committed offset after it.
    pub after: i64,
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
