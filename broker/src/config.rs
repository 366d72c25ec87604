//! The broker's configuration: one struct, Kafka's key names where Kafka has one, defaults
//! documented beside each field. Sources, lowest priority first: built-in defaults, a TOML file
//! (`--config`), `STROM_*` environment variables, command-line flags (see [`crate::cli::serve`]).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::log::LogConfig;

/// Everything one broker needs to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BrokerConfig {
    /// `node.id`: this broker's id, unique in the cluster. Default 0.
    pub node_id: i32,
    /// `log.dirs`: where partition logs and metadata live. Default `./strom-data`.
    pub data_dir: PathBuf,
    /// Address the Kafka listener binds. Default `0.0.0.0:9092`.
    pub kafka_listen: String,
    /// `advertised.listeners`: host:port clients are told to connect to. Default: the bound
    /// Kafka address, with an unspecified IP replaced by 127.0.0.1.
    pub advertised_kafka: Option<String>,
    /// Address of the HTTP endpoint (`/metrics`, `/healthz`, `/readyz`). Default `0.0.0.0:9094`.
    pub http_listen: String,
    /// Address of the internal gRPC listener (raft, controller calls). Default `0.0.0.0:9093`.
    pub internal_listen: String,
    /// host:port other brokers reach the internal listener at. Default: this broker's entry in
    /// `voters`, else the bound internal address with an unspecified IP replaced by 127.0.0.1.
    pub advertised_internal: Option<String>,
    /// `controller.quorum.voters`: `id@host:port,...` (internal addresses). Default: this broker
    /// alone, a one-voter quorum.
    pub voters: Option<String>,
    /// `controller.quorum.election.timeout.ms`: a voter that hears from no leader for this long
    /// (randomised up to twice it) starts an election. Default 1000.
    pub controller_quorum_election_timeout_ms: u64,
    /// How often the raft leader heartbeats its followers; also their RPC timeout. Default 250.
    pub controller_quorum_heartbeat_interval_ms: u64,
    /// `broker.heartbeat.interval.ms`: how often a broker heartbeats the controller. Default 2000.
    pub broker_heartbeat_interval_ms: u64,
    /// `broker.session.timeout.ms`: a broker silent for this long is fenced. Default 9000.
    pub broker_session_timeout_ms: u64,
    /// `replica.lag.time.max.ms`: an in-sync follower that has not caught up for this long
    /// leaves the ISR. Default 30000.
    pub replica_lag_time_max_ms: u64,
    /// `replica.fetch.wait.max.ms`: how long a leader holds a follower's fetch open waiting for
    /// records. Default 500.
    pub replica_fetch_wait_max_ms: u64,
    /// `replica.fetch.response.max.bytes`: record bytes per follower fetch. Default 10 MiB.
    pub replica_fetch_response_max_bytes: u64,
    /// `auto.leader.rebalance.enable`: move leadership back to preferred replicas. Default true.
    pub auto_leader_rebalance_enable: bool,
    /// `leader.imbalance.check.interval.seconds`, in ms. Default 300000.
    pub leader_imbalance_check_interval_ms: u64,
    /// `offsets.topic.replication.factor` (capped by the brokers registered when the topic is
    /// created). Default 3.
    pub offsets_topic_replication_factor: i16,
    /// Metadata log entries between snapshots. Default 5000.
    pub metadata_snapshot_interval_entries: u64,
    /// Metadata log entries kept below the last snapshot, for followers a little behind. Default 1000.
    pub metadata_max_retained_entries: u64,
    /// `broker.rack`. Default none.
    pub rack: Option<String>,
    /// A file of `key="value"` lines (a Kubernetes downward-API file of the pod's annotations)
    /// to read the rack from, under `rack_key`, when `rack` is not set: the broker waits at
    /// start, up to `rack_wait_ms`, until the key is there (the operator writes it once the
    /// pod is on a node). An empty value means no rack. Default none.
    pub rack_from_file: Option<PathBuf>,
    /// The key of the rack in `rack_from_file`. Default `strom.dev/rack`.
    pub rack_key: String,
    /// How long to wait for `rack_key` to appear in `rack_from_file`. Default 600000 (10 min).
    pub rack_wait_ms: u64,
    /// `num.partitions`: partitions of auto-created topics and of CreateTopics with -1. Default 1.
    pub num_partitions: i32,
    /// `default.replication.factor`. Default 1.
    pub default_replication_factor: i16,
    /// `auto.create.topics.enable`. Default true.
    pub auto_create_topics_enable: bool,
    /// `log.segment.bytes`: default `segment.bytes` of topics. Default 1 GiB.
    pub log_segment_bytes: u64,
    /// `log.roll.ms`: default `segment.ms`. Default 7 days.
    pub log_roll_ms: i64,
    /// `log.retention.ms`: default `retention.ms`; -1 keeps forever. Default 7 days.
    pub log_retention_ms: i64,
    /// `log.retention.bytes`: default `retention.bytes`; -1 means no size limit. Default -1.
    pub log_retention_bytes: i64,
    /// `log.retention.check.interval.ms`: how often retention runs. Default 5 minutes.
    pub log_retention_check_interval_ms: u64,
    /// `log.index.interval.bytes`: default `index.interval.bytes`. Default 4096.
    pub log_index_interval_bytes: u64,
    /// `log.index.size.max.bytes`: default `segment.index.bytes`. Default 10 MiB.
    pub log_index_size_max_bytes: u64,
    /// `log.flush.interval.messages`: default `flush.messages`. Default never (i64::MAX).
    pub log_flush_interval_messages: i64,
    /// `log.flush.interval.ms`: default `flush.ms`. Default never (i64::MAX).
    pub log_flush_interval_ms: i64,
    /// Strom's durability switch: fsync the partition before acknowledging an acks=all produce
    /// (docs/durability.md says what each mode survives). Default false, as Kafka.
    pub flush_on_acks_all: bool,
    /// `min.insync.replicas`: default of topics. Default 1.
    pub min_insync_replicas: i32,
    /// `message.max.bytes`: default `max.message.bytes` of topics. Default 1048588.
    pub message_max_bytes: i32,
    /// `log.message.timestamp.type`: CreateTime or LogAppendTime. Default CreateTime.
    pub log_message_timestamp_type: String,
    /// `socket.request.max.bytes`: a request frame larger than this is refused before it is
    /// read. Default 100 MiB.
    pub socket_request_max_bytes: u32,
    /// `queued.max.request.bytes`: budget of request bytes buffered at once across all
    /// connections; a connection waits for budget before reading a frame. Default 512 MiB.
    pub queued_max_request_bytes: u64,
    /// `max.connections`. Default 10000.
    pub max_connections: usize,
    /// Produce requests are refused with KAFKA_STORAGE_ERROR while the data directory's
    /// filesystem has fewer bytes free (0: no floor). Keeps room for the metadata log
    /// (src/disk_space.rs). Default 64 MiB.
    pub log_dir_min_free_bytes: u64,
    /// `socket.send.buffer.bytes`: SO_SNDBUF of client connections; -1 leaves the OS's
    /// autotuning. Default 102400, Kafka's: an autotuned buffer grows to 4 MiB and makes a
    /// fast consumer's fetch cycles uneven (docs/benchmarks.md, "Socket send buffer").
    pub socket_send_buffer_bytes: i32,
    /// Log output: `text` or `json`. Default text.
    pub log_format: String,
    /// `offsets.topic.num.partitions`: partitions of `__consumer_offsets`. Default 50.
    pub offsets_topic_num_partitions: i32,
    /// `offsets.topic.segment.bytes`. Default 100 MiB.
    pub offsets_topic_segment_bytes: u64,
    /// `offsets.retention.minutes`: offsets of a group without members expire after this. Default 7 days.
    pub offsets_retention_minutes: i64,
    /// `offset.metadata.max.bytes`. Default 4096.
    pub offset_metadata_max_bytes: usize,
    /// `group.initial.rebalance.delay.ms`: how long a new group waits for more members. Default 3000.
    pub group_initial_rebalance_delay_ms: u64,
    /// `group.min.session.timeout.ms`. Default 6000.
    pub group_min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`. Default 1800000.
    pub group_max_session_timeout_ms: i32,
    /// `log.cleaner.backoff.ms`: how often the log cleaner looks for compacted topics to clean. Default 15000.
    pub log_cleaner_interval_ms: u64,
    /// How often the consumer lag of the groups this broker coordinates is computed for
    /// `/metrics` (their committed offsets against the partitions' high watermarks). Default 15000.
    pub consumer_lag_interval_ms: u64,
    /// Also export per-partition series: each hosted partition's log start and end offsets
    /// and size (`strom_log_*`), and each coordinated group's lag per partition
    /// (`strom_consumer_group_partition_lag`). Default false: a broker's series count then does
    /// not grow with its partitions (docs/metrics.md).
    pub metrics_partition_series: bool,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        let log = LogConfig::default();
        BrokerConfig {
            node_id: 0,
            data_dir: PathBuf::from("./strom-data"),
            kafka_listen: "0.0.0.0:9092".to_string(),
            advertised_kafka: None,
            http_listen: "0.0.0.0:9094".to_string(),
            internal_listen: "0.0.0.0:9093".to_string(),
            advertised_internal: None,
            voters: None,
            controller_quorum_election_timeout_ms: 1000,
            controller_quorum_heartbeat_interval_ms: 250,
            broker_heartbeat_interval_ms: 2000,
            broker_session_timeout_ms: 9000,
            replica_lag_time_max_ms: 30_000,
            replica_fetch_wait_max_ms: 500,
            replica_fetch_response_max_bytes: 10 * 1024 * 1024,
            auto_leader_rebalance_enable: true,
            leader_imbalance_check_interval_ms: 300_000,
            offsets_topic_replication_factor: 3,
            metadata_snapshot_interval_entries: 5000,
            metadata_max_retained_entries: 1000,
            rack: None,
            rack_from_file: None,
            rack_key: "strom.dev/rack".to_string(),
            rack_wait_ms: 600_000,
            num_partitions: 1,
            default_replication_factor: 1,
            auto_create_topics_enable: true,
            log_segment_bytes: log.segment_bytes,
            log_roll_ms: log.segment_ms,
            log_retention_ms: log.retention_ms,
            log_retention_bytes: log.retention_bytes,
            log_retention_check_interval_ms: 300_000,
            log_index_interval_bytes: log.index_interval_bytes,
            log_index_size_max_bytes: log.segment_index_bytes,
            log_flush_interval_messages: log.flush_messages,
            log_flush_interval_ms: log.flush_ms,
            flush_on_acks_all: false,
            min_insync_replicas: 1,
            message_max_bytes: 1_048_588,
            log_message_timestamp_type: "CreateTime".to_string(),
            socket_request_max_bytes: 100 * 1024 * 1024,
            queued_max_request_bytes: 512 * 1024 * 1024,
            max_connections: 10_000,
            log_dir_min_free_bytes: 64 * 1024 * 1024,
            socket_send_buffer_bytes: 102_400,
            log_format: "text".to_string(),
            offsets_topic_num_partitions: 50,
            offsets_topic_segment_bytes: 100 * 1024 * 1024,
            offsets_retention_minutes: 7 * 24 * 60,
            offset_metadata_max_bytes: 4096,
            group_initial_rebalance_delay_ms: 3000,
            group_min_session_timeout_ms: 6000,
            group_max_session_timeout_ms: 1_800_000,
            log_cleaner_interval_ms: 15_000,
            consumer_lag_interval_ms: 15_000,
            metrics_partition_series: false,
        }
    }
}

/// A configuration value that cannot work, named by its key.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration {key}: {reason}")]
pub struct ConfigError {
    pub key: &'static str,
    pub reason: String,
}

impl BrokerConfig {
    /// Checks the values together; the server refuses to start on the first error.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let fail = |key, reason: &str| Err(ConfigError { key, reason: reason.to_string() });
        if self.node_id < 0 {
            return fail("node_id", "must be >= 0");
        }
        if self.num_partitions < 1 {
            return fail("num_partitions", "must be >= 1");
        }
        if self.default_replication_factor < 1 {
            return fail("default_replication_factor", "must be >= 1");
        }
        if self.log_segment_bytes < 14 || self.log_segment_bytes > i32::MAX as u64 {
            return fail("log_segment_bytes", "must be between 14 and 2147483647");
        }
        if self.log_retention_check_interval_ms == 0 {
            return fail("log_retention_check_interval_ms", "must be > 0");
        }
        if self.log_cleaner_interval_ms == 0 {
            return fail("log_cleaner_interval_ms", "must be > 0");
        }
        if self.min_insync_replicas < 1 {
            return fail("min_insync_replicas", "must be >= 1");
        }
        if self.message_max_bytes < 0 {
            return fail("message_max_bytes", "must be >= 0");
        }
        if !matches!(self.log_message_timestamp_type.as_str(), "CreateTime" | "LogAppendTime") {
            return fail("log_message_timestamp_type", "must be CreateTime or LogAppendTime");
        }
        if self.socket_request_max_bytes < 1024 {
            return fail("socket_request_max_bytes", "must be >= 1024");
        }
        if self.queued_max_request_bytes < u64::from(self.socket_request_max_bytes) {
            return fail("queued_max_request_bytes", "must be >= socket_request_max_bytes");
        }
        if self.socket_send_buffer_bytes == 0 || self.socket_send_buffer_bytes < -1 {
            return fail("socket_send_buffer_bytes", "must be -1 (the OS default) or > 0");
        }
        if !(1..=1000).contains(&self.offsets_topic_num_partitions) {
            return fail("offsets_topic_num_partitions", "must be between 1 and 1000");
        }
        if self.offsets_retention_minutes < 1 {
            return fail("offsets_retention_minutes", "must be >= 1");
        }
        if self.group_min_session_timeout_ms < 0
            || self.group_min_session_timeout_ms > self.group_max_session_timeout_ms
        {
            return fail("group_min_session_timeout_ms", "must be >= 0 and <= group_max_session_timeout_ms");
        }
        if self.controller_quorum_heartbeat_interval_ms == 0
            || self.controller_quorum_heartbeat_interval_ms >= self.controller_quorum_election_timeout_ms
        {
            return fail(
                "controller_quorum_heartbeat_interval_ms",
                "must be > 0 and below controller_quorum_election_timeout_ms",
            );
        }
        if self.broker_heartbeat_interval_ms == 0 || self.broker_heartbeat_interval_ms >= self.broker_session_timeout_ms
        {
            return fail("broker_heartbeat_interval_ms", "must be > 0 and below broker_session_timeout_ms");
        }
        if self.replica_lag_time_max_ms == 0 || self.replica_fetch_wait_max_ms >= self.replica_lag_time_max_ms {
            return fail("replica_fetch_wait_max_ms", "must be below replica_lag_time_max_ms, which must be > 0");
        }
        if self.replica_fetch_response_max_bytes < 1024 {
            return fail("replica_fetch_response_max_bytes", "must be >= 1024");
        }
        if self.leader_imbalance_check_interval_ms == 0 {
            return fail("leader_imbalance_check_interval_ms", "must be > 0");
        }
        if self.offsets_topic_replication_factor < 1 {
            return fail("offsets_topic_replication_factor", "must be >= 1");
        }
        if self.metadata_snapshot_interval_entries == 0 {
            return fail("metadata_snapshot_interval_entries", "must be > 0");
        }
        if let Some(v) = &self.voters {
            crate::metadata::quorum::VoterSet::parse(v)
                .map_err(|e| ConfigError { key: "voters", reason: e.to_string() })?;
        }
        if !matches!(self.log_format.as_str(), "text" | "json") {
            return fail("log_format", "must be text or json");
        }
        Ok(())
    }

    /// Reads a TOML file whose keys are this struct's fields.
    pub fn from_toml_file(path: &std::path::Path) -> Result<BrokerConfig, ConfigFileError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigFileError::Read { path: path.to_path_buf(), source })?;
        toml::from_str(&text).map_err(|source| ConfigFileError::Parse { path: path.to_path_buf(), source })
    }
}

/// The config file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    #[error("reading config file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("parsing config file {path}")]
    Parse {
        path: PathBuf,
        #[source]
        source: toml::de::Error,
    },
}
