//! `Cluster` (strom.dev/v1alpha1): a Strom cluster — brokers on persistent volumes, the first
//! `controllers` of them voting in the metadata quorum. The operator turns one into a
//! ConfigMap, two Services, a StatefulSet and a PodDisruptionBudget, and carries out scale-ups,
//! scale-downs, rolling restarts and broker replacement step by step (`crate::cluster`).
//!
//! Rules the API server enforces (CEL, so `kubectl` prints the message and nothing changes):
//! `replicas >= controllers`, `controllers` is 1, 3 or 5 and never changes, `storage.size` is a
//! quantity that never shrinks, `storage.storageClassName` never changes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ResourceRequirements, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The desired state of a Strom cluster.
// Each printcolumn(...) repeats `name`, `type_`, `json_path`: not duplicates, whatever
// clippy's attribute lint reads into them.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "strom.dev",
    version = "v1alpha1",
    kind = "Cluster",
    namespaced,
    status = "ClusterStatus",
    derive = "PartialEq",
    category = "strom",
    shortname = "strom",
    doc = "A Strom cluster: Kafka-compatible brokers on persistent volumes, run and kept healthy by strom-operator.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(
        name = "Brokers",
        type_ = "string",
        json_path = ".status.brokersReady",
        description = "Ready brokers / desired brokers"
    ),
    printcolumn(
        name = "Controller",
        type_ = "integer",
        json_path = ".status.activeController",
        description = "Id of the active controller"
    ),
    printcolumn(
        name = "URP",
        type_ = "integer",
        json_path = ".status.underReplicatedPartitions",
        description = "Under-replicated partitions"
    ),
    printcolumn(
        name = "Operation",
        type_ = "string",
        json_path = ".status.operation.type",
        description = "The operation in progress"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[x_kube(validation = Rule::new("self.replicas >= self.controllers").message("replicas must be at least controllers: brokers 0 to controllers-1 are the metadata quorum's voters"))]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    /// Number of brokers. Broker ids are the pod ordinals 0..replicas-1. Scaling down drains
    /// the highest ids first and is refused while the remaining brokers could not hold every
    /// replica (fewer brokers than the largest replication factor in use).
    #[schemars(range(min = 1, max = 1000))]
    pub replicas: i32,

    /// Brokers 0..controllers-1 vote in the metadata quorum (Kafka's
    /// controller.quorum.voters); the others follow it as learners. 1, 3 or 5; fixed at creation.
    #[serde(default = "default_controllers")]
    #[x_kube(validation = Rule::new("self == 1 || self == 3 || self == 5").message("controllers must be 1, 3 or 5"))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("controllers cannot change after creation"))]
    pub controllers: i32,

    /// Container image with the `strom` binary.
    #[schemars(length(min = 1))]
    pub image: String,

    /// Image pull policy of the broker container (Always, IfNotPresent, Never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,

    /// Each broker's persistent volume.
    pub storage: Storage,

    /// CPU and memory of the broker container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,

    /// Broker configuration with Kafka's key names (e.g. `log.retention.ms`,
    /// `min.insync.replicas`, `default.replication.factor`); values as strings. A change rolls
    /// the brokers one at a time. Keys the operator sets itself (node id, listeners, voters,
    /// data directory, rack) are refused.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub config: BTreeMap<String, String>,

    /// Ports the brokers listen on.
    #[serde(default)]
    pub listeners: Listeners,

    /// Rack awareness: spread brokers over the values of a node label and tell each broker
    /// its rack, so replicas of a partition land in different racks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rack: Option<Rack>,

    /// How replicas move when the cluster grows or shrinks.
    #[serde(default)]
    pub rebalance: Rebalance,

    /// What the operator does about a broker that stays down.
    #[serde(default)]
    pub failover: Failover,

    /// Settings of the broker pods.
    #[serde(default)]
    pub pod: PodSettings,
}

fn default_controllers() -> i32 {
    3
}

/// A broker's persistent volume (one PersistentVolumeClaim per broker).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[x_kube(validation = Rule::new("has(self.storageClassName) == has(oldSelf.storageClassName) && (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)").message("storage.storageClassName cannot change"))]
#[x_kube(validation = Rule::new("!isQuantity(self.size) || !isQuantity(oldSelf.size) || quantity(self.size).compareTo(quantity(oldSelf.size)) >= 0").message("storage.size cannot shrink"))]
#[serde(rename_all = "camelCase")]
pub struct Storage {
    /// Size of each broker's volume, a Kubernetes quantity such as `10Gi`. It may grow (the
    /// claims are expanded where the storage class allows it), never shrink.
    #[x_kube(validation = Rule::new("isQuantity(self)").message("storage.size must be a quantity such as 10Gi"))]
    pub size: String,

    /// Storage class of the claims (the cluster's default when unset). Fixed at creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,

    /// What happens to a broker's claim when its broker is removed by a scale-down or the
    /// Cluster is deleted: `Retain` (default) keeps it and its data, `Delete` deletes it.
    #[serde(default)]
    pub claim_deletion_policy: ClaimDeletionPolicy,
}

/// What happens to claims whose broker is gone.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClaimDeletionPolicy {
    #[default]
    Retain,
    Delete,
}

/// The brokers' ports.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Listeners {
    /// Kafka clients' port (default 9092).
    #[serde(default = "default_kafka_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub kafka: i32,
    /// Port between brokers and for the admin API: raft, replication, admin gRPC (default 9093).
    #[serde(default = "default_internal_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub internal: i32,
    /// Port of /metrics, /healthz and /readyz (default 9094).
    #[serde(default = "default_http_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub http: i32,
    /// Clients outside Kubernetes: the address each broker advertises to Kafka clients
    /// instead of its pod DNS name. All clients then use these addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<ExternalListener>,
}

impl Default for Listeners {
    fn default() -> Listeners {
        Listeners {
            kafka: default_kafka_port(),
            internal: default_internal_port(),
            http: default_http_port(),
            external: None,
        }
    }
}

fn default_kafka_port() -> i32 {
    9092
}
fn default_internal_port() -> i32 {
    9093
}
fn default_http_port() -> i32 {
    9094
}

/// Addresses outside the cluster at which clients reach each broker.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ExternalListener {
    /// host:port a broker advertises, with `{id}` standing for its broker id, e.g.
    /// `broker-{id}.kafka.example.com:9092`.
    #[schemars(length(min = 1))]
    pub advertised_address_template: String,
}

/// Rack awareness.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Rack {
    /// Node label whose value is a broker's rack, e.g. `topology.kubernetes.io/zone`. Brokers
    /// are spread over its values; the operator copies each broker's node label onto its pod
    /// (annotation `strom.dev/rack`), and the broker registers with it.
    #[schemars(length(min = 1))]
    pub topology_key: String,
}

/// How replicas move when the cluster changes size.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Rebalance {
    /// Move replicas onto new brokers after a scale-up (default true).
    #[serde(default = "default_true")]
    pub on_scale: bool,
    /// At most this many partitions move at once (default 0: no limit).
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub max_concurrent_moves: i32,
    /// Bytes per second a leader may send to replicas being added, a quantity such as `50Mi`
    /// (default: unthrottled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("isQuantity(self)").message("rebalance.throttle must be a quantity such as 50Mi"))]
    pub throttle: Option<String>,
}

impl Default for Rebalance {
    fn default() -> Rebalance {
        Rebalance { on_scale: true, max_concurrent_moves: 0, throttle: None }
    }
}

fn default_true() -> bool {
    true
}

/// What the operator does about a broker that stays down.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Failover {
    /// A broker down this long (a duration such as `10m` or `90s`) has its replicas moved to
    /// the other brokers; when it comes back it is filled again. Unset: wait for it forever
    /// (its partitions stay under-replicated), as Kafka does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace_after: Option<String>,
}

/// Settings of the broker pods.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodSettings {
    /// Labels added to the broker pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations added to the broker pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Node selector of the broker pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations of the broker pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Service account of the broker pods (they need no API access; default: none mounted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// Seconds a broker gets to hand over its leaderships and stop (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub termination_grace_period_seconds: Option<i64>,
    /// A partial pod template merged over the one the operator builds, for anything this spec
    /// has no field for: maps merge key by key, containers, volumes and env merge by name,
    /// other lists are replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::free_form_object")]
    pub template: Option<serde_json::Value>,
}

/// What the operator last saw and did (kstatus: `Ready`, `Reconciling`, `Stalled`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Reconciling` and `Stalled`, as kstatus reads them (Argo CD, Flux).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Brokers the StatefulSet runs now (for the scale subresource).
    #[serde(default)]
    pub replicas: i32,
    /// Brokers that are Ready.
    #[serde(default)]
    pub ready_replicas: i32,
    /// Ready brokers / desired brokers, e.g. `3/3`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brokers_ready: Option<String>,
    /// Label selector of the broker pods (for the scale subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// Id of the active controller (the metadata quorum's leader).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_controller: Option<i32>,
    /// Partitions with fewer in-sync replicas than replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub under_replicated_partitions: Option<i32>,
    /// Partitions without a live leader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offline_partitions: Option<i32>,
    /// Kafka bootstrap servers for clients inside Kubernetes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_servers: Option<String>,
    /// The brokers as the cluster sees them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub brokers: Vec<BrokerStatus>,
    /// The multi-step operation in progress, if any; everything needed to resume it after an
    /// operator restart is here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<Operation>,
    /// The pod template revision every broker runs once the last rolling restart finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_revision: Option<String>,
}

/// One broker, as the operator last saw it.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BrokerStatus {
    /// Broker id (= pod ordinal).
    pub id: i32,
    /// The rack it registered with (`spec.rack`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rack: Option<String>,
    /// Its pod is Ready (serving, caught up with the metadata).
    pub ready: bool,
    /// Registered with the controller and not fenced.
    pub live: bool,
    /// Votes in the metadata quorum.
    #[serde(default)]
    pub voter: bool,
    /// Partition replicas it holds.
    #[serde(default)]
    pub replicas: i32,
    /// Partitions it leads.
    #[serde(default)]
    pub leaders: i32,
    /// Since when it has been down (RFC 3339), if it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down_since: Option<String>,
    /// Its replicas were moved away while it was down; it is filled again when it returns.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replaced: bool,
}

/// A multi-step operation, one at a time.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Operation {
    /// What is being done.
    #[serde(rename = "type")]
    pub kind: OperationKind,
    /// Brokers before the operation.
    pub from_replicas: i32,
    /// Brokers after it.
    pub to_replicas: i32,
    /// The step it is at.
    pub phase: Phase,
    /// The brokers it concerns (added, drained, replaced or still to restart).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub brokers: Vec<i32>,
    /// When it started (RFC 3339).
    pub started_at: String,
    /// Progress for people, e.g. `12 partitions still moving` or `2/3 brokers restarted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperationKind {
    ScaleUp,
    ScaleDown,
    RollingRestart,
    ReplaceBroker,
    RefillBroker,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// New brokers are starting and registering.
    WaitingForBrokers,
    /// Replicas are moving (onto new brokers, or off drained or lost ones).
    MovingReplicas,
    /// The StatefulSet is shrinking.
    Shrinking,
    /// Removed brokers are being unregistered from the metadata.
    Unregistering,
    /// Pods are restarted one at a time.
    Restarting,
}
