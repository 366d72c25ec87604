//! `strom serve`: one broker. Every flag also reads `STROM_<NAME>` from the environment;
//! `--config FILE` (TOML, keys as in `BrokerConfig`) gives the lowest-priority values.

use std::path::PathBuf;

use clap::Args;

use crate::config::{BrokerConfig, ConfigFileError};

/// Flags of `strom serve`; unset ones fall back to the config file, then to defaults.
#[derive(Debug, Args, Default)]
pub struct ServeArgs {
    /// TOML config file (keys as the flags, with underscores).
    #[arg(long, env = "STROM_CONFIG")]
    pub config: Option<PathBuf>,
    /// This broker's id (node.id).
    #[arg(long, env = "STROM_NODE_ID")]
    pub node_id: Option<i32>,
    /// Directory for partition logs and metadata (log.dirs).
    #[arg(long, env = "STROM_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Address of the Kafka listener, e.g. 0.0.0.0:9092.
    #[arg(long, env = "STROM_KAFKA_LISTEN")]
    pub kafka_listen: Option<String>,
    /// host:port clients are told to connect to (advertised.listeners).
    #[arg(long, env = "STROM_ADVERTISED_KAFKA")]
    pub advertised_kafka: Option<String>,
    /// Address of the HTTP endpoint (/metrics, /healthz, /readyz).
    #[arg(long, env = "STROM_HTTP_LISTEN")]
    pub http_listen: Option<String>,
    /// Address of the internal gRPC listener (raft and controller calls), e.g. 0.0.0.0:9093.
    #[arg(long, env = "STROM_INTERNAL_LISTEN")]
    pub internal_listen: Option<String>,
    /// host:port other brokers reach the internal listener at.
    #[arg(long, env = "STROM_ADVERTISED_INTERNAL")]
    pub advertised_internal: Option<String>,
    /// The metadata quorum's voters, id@host:port,... (controller.quorum.voters); default: this broker alone.
    #[arg(long, env = "STROM_VOTERS")]
    pub voters: Option<String>,
    /// controller.quorum.election.timeout.ms.
    #[arg(long, env = "STROM_CONTROLLER_QUORUM_ELECTION_TIMEOUT_MS")]
    pub controller_quorum_election_timeout_ms: Option<u64>,
    /// How often the raft leader heartbeats its followers (ms).
    #[arg(long, env = "STROM_CONTROLLER_QUORUM_HEARTBEAT_INTERVAL_MS")]
    pub controller_quorum_heartbeat_interval_ms: Option<u64>,
    /// broker.heartbeat.interval.ms.
    #[arg(long, env = "STROM_BROKER_HEARTBEAT_INTERVAL_MS")]
    pub broker_heartbeat_interval_ms: Option<u64>,
    /// broker.session.timeout.ms: a broker silent this long is fenced.
    #[arg(long, env = "STROM_BROKER_SESSION_TIMEOUT_MS")]
    pub broker_session_timeout_ms: Option<u64>,
    /// replica.lag.time.max.ms.
    #[arg(long, env = "STROM_REPLICA_LAG_TIME_MAX_MS")]
    pub replica_lag_time_max_ms: Option<u64>,
    /// replica.fetch.wait.max.ms.
    #[arg(long, env = "STROM_REPLICA_FETCH_WAIT_MAX_MS")]
    pub replica_fetch_wait_max_ms: Option<u64>,
    /// replica.fetch.response.max.bytes.
    #[arg(long, env = "STROM_REPLICA_FETCH_RESPONSE_MAX_BYTES")]
    pub replica_fetch_response_max_bytes: Option<u64>,
    /// auto.leader.rebalance.enable (true|false).
    #[arg(long, env = "STROM_AUTO_LEADER_REBALANCE_ENABLE")]
    pub auto_leader_rebalance_enable: Option<bool>,
    /// leader.imbalance.check.interval.seconds, in ms.
    #[arg(long, env = "STROM_LEADER_IMBALANCE_CHECK_INTERVAL_MS")]
    pub leader_imbalance_check_interval_ms: Option<u64>,
    /// offsets.topic.replication.factor.
    #[arg(long, env = "STROM_OFFSETS_TOPIC_REPLICATION_FACTOR")]
    pub offsets_topic_replication_factor: Option<i16>,
    /// Metadata log entries between snapshots.
    #[arg(long, env = "STROM_METADATA_SNAPSHOT_INTERVAL_ENTRIES")]
    pub metadata_snapshot_interval_entries: Option<u64>,
    /// Metadata log entries kept below the last snapshot.
    #[arg(long, env = "STROM_METADATA_MAX_RETAINED_ENTRIES")]
    pub metadata_max_retained_entries: Option<u64>,
    /// broker.rack.
    #[arg(long, env = "STROM_RACK")]
    pub rack: Option<String>,
    /// Read the rack from this file of key="value" lines (a downward-API annotations file),
    /// waiting at start until --rack-key is in it; for brokers run by strom-operator.
    #[arg(long, env = "STROM_RACK_FROM_FILE")]
    pub rack_from_file: Option<PathBuf>,
    /// The rack's key in --rack-from-file (default strom.dev/rack).
    #[arg(long, env = "STROM_RACK_KEY")]
    pub rack_key: Option<String>,
    /// How long to wait for the rack in --rack-from-file (ms, default 600000).
    #[arg(long, env = "STROM_RACK_WAIT_MS")]
    pub rack_wait_ms: Option<u64>,
    /// num.partitions for auto-created topics.
    #[arg(long, env = "STROM_NUM_PARTITIONS")]
    pub num_partitions: Option<i32>,
    /// default.replication.factor.
    #[arg(long, env = "STROM_DEFAULT_REPLICATION_FACTOR")]
    pub default_replication_factor: Option<i16>,
    /// auto.create.topics.enable (true|false).
    #[arg(long, env = "STROM_AUTO_CREATE_TOPICS_ENABLE")]
    pub auto_create_topics_enable: Option<bool>,
    /// log.segment.bytes.
    #[arg(long, env = "STROM_LOG_SEGMENT_BYTES")]
    pub log_segment_bytes: Option<u64>,
    /// log.roll.ms.
    #[arg(long, env = "STROM_LOG_ROLL_MS")]
    pub log_roll_ms: Option<i64>,
    /// log.retention.ms (-1 = forever).
    #[arg(long, env = "STROM_LOG_RETENTION_MS", allow_negative_numbers = true)]
    pub log_retention_ms: Option<i64>,
    /// log.retention.bytes (-1 = no limit).
    #[arg(long, env = "STROM_LOG_RETENTION_BYTES", allow_negative_numbers = true)]
    pub log_retention_bytes: Option<i64>,
    /// log.retention.check.interval.ms.
    #[arg(long, env = "STROM_LOG_RETENTION_CHECK_INTERVAL_MS")]
    pub log_retention_check_interval_ms: Option<u64>,
    /// log.flush.interval.messages.
    #[arg(long, env = "STROM_LOG_FLUSH_INTERVAL_MESSAGES")]
    pub log_flush_interval_messages: Option<i64>,
    /// log.flush.interval.ms.
    #[arg(long, env = "STROM_LOG_FLUSH_INTERVAL_MS")]
    pub log_flush_interval_ms: Option<i64>,
    /// fsync before acknowledging acks=all produces (true|false).
    #[arg(long, env = "STROM_FLUSH_ON_ACKS_ALL")]
    pub flush_on_acks_all: Option<bool>,
    /// min.insync.replicas default of topics.
    #[arg(long, env = "STROM_MIN_INSYNC_REPLICAS")]
    pub min_insync_replicas: Option<i32>,
    /// message.max.bytes default of topics.
    #[arg(long, env = "STROM_MESSAGE_MAX_BYTES")]
    pub message_max_bytes: Option<i32>,
    /// log.message.timestamp.type (CreateTime|LogAppendTime).
    #[arg(long, env = "STROM_LOG_MESSAGE_TIMESTAMP_TYPE")]
    pub log_message_timestamp_type: Option<String>,
    /// socket.request.max.bytes.
    #[arg(long, env = "STROM_SOCKET_REQUEST_MAX_BYTES")]
    pub socket_request_max_bytes: Option<u32>,
    /// queued.max.request.bytes.
    #[arg(long, env = "STROM_QUEUED_MAX_REQUEST_BYTES")]
    pub queued_max_request_bytes: Option<u64>,
    /// max.connections.
    #[arg(long, env = "STROM_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Refuse produce requests while the data directory has fewer bytes free (0: never).
    #[arg(long, env = "STROM_LOG_DIR_MIN_FREE_BYTES")]
    pub log_dir_min_free_bytes: Option<u64>,
    /// socket.send.buffer.bytes: SO_SNDBUF of client connections, -1 for the OS default.
    #[arg(long, env = "STROM_SOCKET_SEND_BUFFER_BYTES", allow_hyphen_values = true)]
    pub socket_send_buffer_bytes: Option<i32>,
    /// Log output: text or json.
    #[arg(long, env = "STROM_LOG_FORMAT")]
    pub log_format: Option<String>,
    /// offsets.topic.num.partitions (partitions of __consumer_offsets).
    #[arg(long, env = "STROM_OFFSETS_TOPIC_NUM_PARTITIONS")]
    pub offsets_topic_num_partitions: Option<i32>,
    /// offsets.topic.segment.bytes.
    #[arg(long, env = "STROM_OFFSETS_TOPIC_SEGMENT_BYTES")]
    pub offsets_topic_segment_bytes: Option<u64>,
    /// offsets.retention.minutes.
    #[arg(long, env = "STROM_OFFSETS_RETENTION_MINUTES")]
    pub offsets_retention_minutes: Option<i64>,
    /// offset.metadata.max.bytes.
    #[arg(long, env = "STROM_OFFSET_METADATA_MAX_BYTES")]
    pub offset_metadata_max_bytes: Option<usize>,
    /// group.initial.rebalance.delay.ms.
    #[arg(long, env = "STROM_GROUP_INITIAL_REBALANCE_DELAY_MS")]
    pub group_initial_rebalance_delay_ms: Option<u64>,
    /// group.min.session.timeout.ms.
    #[arg(long, env = "STROM_GROUP_MIN_SESSION_TIMEOUT_MS")]
    pub group_min_session_timeout_ms: Option<i32>,
    /// group.max.session.timeout.ms.
    #[arg(long, env = "STROM_GROUP_MAX_SESSION_TIMEOUT_MS")]
    pub group_max_session_timeout_ms: Option<i32>,
    /// How often the log cleaner compacts topics with cleanup.policy=compact (log.cleaner.backoff.ms).
    #[arg(long, env = "STROM_LOG_CLEANER_INTERVAL_MS")]
    pub log_cleaner_interval_ms: Option<u64>,
    /// How often the consumer lag of the groups this broker coordinates is computed for /metrics.
    #[arg(long, env = "STROM_CONSUMER_LAG_INTERVAL_MS")]
    pub consumer_lag_interval_ms: Option<u64>,
    /// Export per-partition series too (log offsets and size, consumer lag per partition).
    #[arg(long, env = "STROM_METRICS_PARTITION_SERIES")]
    pub metrics_partition_series: Option<bool>,
}

impl ServeArgs {
    /// The effective configuration: file (if any), then every flag or variable that is set.
    pub fn into_config(self) -> Result<BrokerConfig, ConfigFileError> {
        let mut c = match &self.config {
            Some(path) => BrokerConfig::from_toml_file(path)?,
            None => BrokerConfig::default(),
        };
        macro_rules! set {
            ($($field:ident),*) => { $( if let Some(v) = self.$field { c.$field = v; } )* };
        }
        set!(
            node_id,
            data_dir,
            kafka_listen,
            http_listen,
            internal_listen,
            controller_quorum_election_timeout_ms,
            controller_quorum_heartbeat_interval_ms,
            broker_heartbeat_interval_ms,
            broker_session_timeout_ms,
            metadata_snapshot_interval_entries,
            metadata_max_retained_entries,
            replica_lag_time_max_ms,
            replica_fetch_wait_max_ms,
            replica_fetch_response_max_bytes,
            auto_leader_rebalance_enable,
            leader_imbalance_check_interval_ms,
            offsets_topic_replication_factor,
            num_partitions,
            default_replication_factor,
            auto_create_topics_enable,
            log_segment_bytes,
            log_roll_ms,
            log_retention_ms,
            log_retention_bytes,
            log_retention_check_interval_ms,
            log_flush_interval_messages,
            log_flush_interval_ms,
            flush_on_acks_all,
            min_insync_replicas,
            message_max_bytes,
            log_message_timestamp_type,
            socket_request_max_bytes,
            queued_max_request_bytes,
            max_connections,
            log_dir_min_free_bytes,
            socket_send_buffer_bytes,
            log_format,
            offsets_topic_num_partitions,
            offsets_topic_segment_bytes,
            offsets_retention_minutes,
            offset_metadata_max_bytes,
            group_initial_rebalance_delay_ms,
            group_min_session_timeout_ms,
            group_max_session_timeout_ms,
            log_cleaner_interval_ms,
            consumer_lag_interval_ms,
            metrics_partition_series,
            rack_key,
            rack_wait_ms
        );
        if self.rack_from_file.is_some() {
            c.rack_from_file = self.rack_from_file;
        }
        if self.advertised_kafka.is_some() {
            c.advertised_kafka = self.advertised_kafka;
        }
        if self.rack.is_some() {
            c.rack = self.rack;
        }
        if self.voters.is_some() {
            c.voters = self.voters;
        }
        if self.advertised_internal.is_some() {
            c.advertised_internal = self.advertised_internal;
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: ServeArgs,
    }

    #[test]
    fn flags_win_over_the_config_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("strom.toml");
        std::fs::write(&file, "node_id = 4\nnum_partitions = 6\nlog_retention_ms = -1\n").expect("write");
        let w = Wrapper::try_parse_from(["x", "--config", file.to_str().expect("utf8"), "--num-partitions", "3"])
            .expect("parse");
        let c = w.args.into_config().expect("config");
        assert_eq!((c.node_id, c.num_partitions, c.log_retention_ms), (4, 3, -1));
    }

    #[test]
    fn group_flags_reach_the_config() {
        let w = Wrapper::try_parse_from([
            "x",
            "--group-initial-rebalance-delay-ms",
            "0",
            "--offsets-topic-num-partitions",
            "3",
            "--group-min-session-timeout-ms",
            "100",
        ])
        .expect("parse");
        let c = w.args.into_config().expect("config");
        assert_eq!(
            (c.group_initial_rebalance_delay_ms, c.offsets_topic_num_partitions, c.group_min_session_timeout_ms),
            (0, 3, 100)
        );
    }

    #[test]
    fn socket_send_buffer_bytes_takes_minus_one_and_refuses_zero() {
        let parse = |v: &str| {
            let w = Wrapper::try_parse_from(["x", "--socket-send-buffer-bytes", v]).expect("parse");
            w.args.into_config().expect("config")
        };
        assert_eq!(BrokerConfig::default().socket_send_buffer_bytes, 102_400);
        let os_default = parse("-1");
        assert_eq!(os_default.socket_send_buffer_bytes, -1);
        assert!(os_default.validate().is_ok());
        let err = parse("0").validate().expect_err("0 is refused");
        assert_eq!(err.key, "socket_send_buffer_bytes");
        assert!(parse("-2").validate().is_err());
    }

    #[test]
    fn an_unknown_key_in_the_config_file_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("strom.toml");
        std::fs::write(&file, "num_partitionz = 6\n").expect("write");
        let w = Wrapper::try_parse_from(["x", "--config", file.to_str().expect("utf8")]).expect("parse");
        assert!(w.args.into_config().is_err());
    }
}
