//! Topic configurations by Kafka's names: which keys exist, their defaults (taken from the
//! broker's `log.*` settings, as in Kafka), how values are validated, and the typed effective
//! configuration that the partition and its log run with.
//!
//! Only keys that Strom honours are accepted; anything else is refused with a clear reason
//! rather than stored and silently ignored.

use std::collections::BTreeMap;

use crate::config::BrokerConfig;
use crate::log::{CompactionConfig, LogConfig};

/// Why a topic config value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid value {value:?} for configuration {key}: {reason}")]
pub struct TopicConfigError {
    pub key: String,
    pub value: String,
    pub reason: String,
}

/// How a value is typed, for validation and for DescribeConfigs' `config_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean,
    String,
    Int,
    Long,
    Double,
}

impl ConfigType {
    /// Kafka's DescribeConfigs type code.
    pub fn code(self) -> i8 {
        match self {
            ConfigType::Boolean => 1,
            ConfigType::String => 2,
            ConfigType::Int => 3,
            ConfigType::Long => 5,
            ConfigType::Double => 6,
        }
    }
}

/// One supported topic config key.
#[derive(Debug)]
pub struct ConfigDef {
    pub name: &'static str,
    pub kind: ConfigType,
    /// The value when the topic does not override it, from the broker's configuration.
    pub default: fn(&BrokerConfig) -> String,
    /// Checks a value beyond its type (ranges, allowed words).
    pub check: fn(&str) -> Result<(), String>,
    pub doc: &'static str,
}

fn any(_: &str) -> Result<(), String> {
    Ok(())
}

fn long_at_least(v: &str, min: i64) -> Result<(), String> {
    let n: i64 = v.parse().map_err(|_| "not a 64-bit integer".to_string())?;
    if n < min {
        return Err(format!("must be at least {min}"));
    }
    Ok(())
}

fn int_at_least(v: &str, min: i32) -> Result<(), String> {
    let n: i32 = v.parse().map_err(|_| "not a 32-bit integer".to_string())?;
    if n < min {
        return Err(format!("must be at least {min}"));
    }
    Ok(())
}

/// Kafka's `*.replication.throttled.replicas` syntax: empty, `*`, or `partition:broker,...`.
fn throttled_replicas(v: &str) -> Result<(), String> {
    if v.is_empty() || v.trim() == "*" {
        return Ok(());
    }
    for item in v.split(',') {
        let ok = item
            .trim()
            .split_once(':')
            .is_some_and(|(p, b)| p.trim().parse::<u32>().is_ok() && b.trim().parse::<u32>().is_ok());
        if !ok {
            return Err(format!("{item:?} is not partition:broker (the list is \"*\" or partition:broker,...)"));
        }
    }
    Ok(())
}

/// Every topic config key Strom accepts.
pub const TOPIC_CONFIGS: &[ConfigDef] = &[
    ConfigDef {
        name: "cleanup.policy",
        kind: ConfigType::String,
        default: |_| "delete".into(),
        check: |v| match cleanup_policy(v) {
            Some(_) => Ok(()),
            None => Err("must be \"delete\", \"compact\" or both (comma-separated)".into()),
        },
        doc: "What happens to old segments: \"delete\" removes them by retention.ms/retention.bytes; \"compact\" keeps the last record of each key.",
    },
    ConfigDef {
        name: "compression.type",
        kind: ConfigType::String,
        default: |_| "producer".into(),
        check: |v| match v {
            "producer" => Ok(()),
            _ => Err("the broker keeps batches as the producer compressed them; only \"producer\" is supported".into()),
        },
        doc: "Compression of stored batches: \"producer\" keeps the producer's codec.",
    },
    ConfigDef {
        name: "delete.retention.ms",
        kind: ConfigType::Long,
        default: |_| "86400000".into(),
        check: |v| long_at_least(v, 0),
        doc: "How long tombstones stay readable in a compacted topic.",
    },
    ConfigDef {
        name: "flush.messages",
        kind: ConfigType::Long,
        default: |b| b.log_flush_interval_messages.to_string(),
        check: |v| long_at_least(v, 1),
        doc: "fsync the log after this many messages.",
    },
    ConfigDef {
        name: "flush.ms",
        kind: ConfigType::Long,
        default: |b| b.log_flush_interval_ms.to_string(),
        check: |v| long_at_least(v, 0),
        doc: "fsync the log when this many milliseconds passed since the last fsync.",
    },
    ConfigDef {
        name: "follower.replication.throttled.replicas",
        kind: ConfigType::String,
        default: |_| String::new(),
        check: throttled_replicas,
        doc: "Kafka's list of throttled follower replicas (\"*\" or partition:broker,...). Accepted for Kafka's tools; Strom throttles every added replica that is not yet in sync, listed or not.",
    },
    ConfigDef {
        name: "index.interval.bytes",
        kind: ConfigType::Int,
        default: |b| b.log_index_interval_bytes.to_string(),
        check: |v| int_at_least(v, 0),
        doc: "Bytes of log between two offset-index entries.",
    },
    ConfigDef {
        name: "leader.replication.throttled.replicas",
        kind: ConfigType::String,
        default: |_| String::new(),
        check: throttled_replicas,
        doc: "Kafka's list of throttled leader replicas (\"*\" or partition:broker,...). Accepted for Kafka's tools; Strom throttles every added replica that is not yet in sync, listed or not.",
    },
    ConfigDef {
        name: "max.message.bytes",
        kind: ConfigType::Int,
        default: |b| b.message_max_bytes.to_string(),
        check: |v| int_at_least(v, 0),
        doc: "Largest record batch the topic accepts.",
    },
    ConfigDef {
        name: "message.timestamp.type",
        kind: ConfigType::String,
        default: |b| b.log_message_timestamp_type.clone(),
        check: |v| match v {
            "CreateTime" | "LogAppendTime" => Ok(()),
            _ => Err("must be CreateTime or LogAppendTime".into()),
        },
        doc: "CreateTime keeps the producer's timestamps; LogAppendTime stamps the broker's clock.",
    },
    ConfigDef {
        name: "message.timestamp.after.max.ms",
        kind: ConfigType::Long,
        default: |_| i64::MAX.to_string(),
        check: |v| long_at_least(v, 0),
        doc: "With CreateTime, a batch whose timestamp is further than this in the future is refused.",
    },
    ConfigDef {
        name: "min.cleanable.dirty.ratio",
        kind: ConfigType::Double,
        default: |_| "0.5".into(),
        check: |v| match v.parse::<f64>() {
            Ok(r) if (0.0..=1.0).contains(&r) => Ok(()),
            _ => Err("must be a number between 0 and 1".into()),
        },
        doc: "Compaction runs when at least this share of the log has not been compacted yet.",
    },
    ConfigDef {
        name: "min.compaction.lag.ms",
        kind: ConfigType::Long,
        default: |_| "0".into(),
        check: |v| long_at_least(v, 0),
        doc: "Records younger than this are never compacted away.",
    },
    ConfigDef {
        name: "min.insync.replicas",
        kind: ConfigType::Int,
        default: |b| b.min_insync_replicas.to_string(),
        check: |v| int_at_least(v, 1),
        doc: "acks=all produces fail with NOT_ENOUGH_REPLICAS when fewer replicas are in sync.",
    },
    ConfigDef {
        name: "retention.bytes",
        kind: ConfigType::Long,
        default: |b| b.log_retention_bytes.to_string(),
        check: |v| long_at_least(v, -1),
        doc: "Largest size of a partition before its oldest segments are deleted; -1 for no limit.",
    },
    ConfigDef {
        name: "retention.ms",
        kind: ConfigType::Long,
        default: |b| b.log_retention_ms.to_string(),
        check: |v| long_at_least(v, -1),
        doc: "Age after which a segment is deleted; -1 keeps forever.",
    },
    ConfigDef {
        name: "segment.bytes",
        kind: ConfigType::Int,
        default: |b| b.log_segment_bytes.to_string(),
        check: |v| int_at_least(v, 14),
        doc: "Size at which a segment rolls.",
    },
    ConfigDef {
        name: "segment.index.bytes",
        kind: ConfigType::Int,
        default: |b| b.log_index_size_max_bytes.to_string(),
        check: |v| int_at_least(v, 4096),
        doc: "Preallocated size of a segment's offset and time indexes.",
    },
    ConfigDef {
        name: "segment.ms",
        kind: ConfigType::Long,
        default: |b| b.log_roll_ms.to_string(),
        check: |v| long_at_least(v, 1),
        doc: "Age at which a segment rolls even if not full.",
    },
    ConfigDef {
        name: "unclean.leader.election.enable",
        kind: ConfigType::Boolean,
        default: |_| "false".into(),
        check: any,
        doc: "Whether an out-of-sync replica may become leader (replicated clusters).",
    },
];

/// The definition of `name`, if Strom supports it.
pub fn definition(name: &str) -> Option<&'static ConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.name == name)
}

/// Validates one key and value.
pub fn validate_entry(key: &str, value: &str) -> Result<(), TopicConfigError> {
    let err = |reason: String| TopicConfigError { key: key.into(), value: value.into(), reason };
    let def = definition(key).ok_or_else(|| err("unknown or unsupported topic configuration".into()))?;
    match def.kind {
        ConfigType::Boolean => {
            if value != "true" && value != "false" {
                return Err(err("must be true or false".into()));
            }
        }
        ConfigType::Int => {
            value.parse::<i32>().map_err(|_| err("not a 32-bit integer".into()))?;
        }
        ConfigType::Long => {
            value.parse::<i64>().map_err(|_| err("not a 64-bit integer".into()))?;
        }
        ConfigType::Double => {
            value.parse::<f64>().map_err(|_| err("not a number".into()))?;
        }
        ConfigType::String => {}
    }
    (def.check)(value).map_err(err)
}

/// (delete, compact) for a cleanup.policy value; None if it is not one.
pub fn cleanup_policy(v: &str) -> Option<(bool, bool)> {
    let (mut delete, mut compact) = (false, false);
    for part in v.split(',').map(str::trim) {
        match part {
            "delete" => delete = true,
            "compact" => compact = true,
            _ => return None,
        }
    }
    (delete || compact).then_some((delete, compact))
}

/// Validates every override of a topic.
pub fn validate(overrides: &BTreeMap<String, String>) -> Result<(), TopicConfigError> {
    overrides.iter().try_for_each(|(k, v)| validate_entry(k, v))
}

/// The configuration a partition runs with: defaults merged with the topic's overrides.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicConfig {
    pub log: LogConfig,
    pub max_message_bytes: i32,
    pub log_append_time: bool,
    pub timestamp_after_max_ms: i64,
    pub min_insync_replicas: i32,
    /// cleanup.policy includes compact: the log cleaner compacts this topic.
    pub compact: bool,
    pub compaction: CompactionConfig,
}

impl TopicConfig {
    /// Resolves the effective values; `overrides` must already be valid.
    pub fn resolve(
        broker: &BrokerConfig,
        overrides: &BTreeMap<String, String>,
    ) -> Result<TopicConfig, TopicConfigError> {
        let value = |name: &str| -> String {
            overrides
                .get(name)
                .cloned()
                .unwrap_or_else(|| definition(name).map(|d| (d.default)(broker)).unwrap_or_default())
        };
        fn num<T: std::str::FromStr>(name: &str, v: String) -> Result<T, TopicConfigError> {
            v.parse().map_err(|_| TopicConfigError {
                key: name.into(),
                value: v.clone(),
                reason: "not a number".into(),
            })
        }
        let (delete, compact) = cleanup_policy(&value("cleanup.policy")).unwrap_or((true, false));
        let mut log = LogConfig {
            segment_bytes: num("segment.bytes", value("segment.bytes"))?,
            segment_ms: num("segment.ms", value("segment.ms"))?,
            segment_index_bytes: num("segment.index.bytes", value("segment.index.bytes"))?,
            index_interval_bytes: num("index.interval.bytes", value("index.interval.bytes"))?,
            retention_ms: num("retention.ms", value("retention.ms"))?,
            retention_bytes: num("retention.bytes", value("retention.bytes"))?,
            flush_messages: num("flush.messages", value("flush.messages"))?,
            flush_ms: num("flush.ms", value("flush.ms"))?,
        };
        if !delete {
            // A compact-only topic keeps every key's latest record however old or large.
            log.retention_ms = -1;
            log.retention_bytes = -1;
        }
        let ratio = value("min.cleanable.dirty.ratio");
        let compaction = CompactionConfig {
            delete_retention_ms: num("delete.retention.ms", value("delete.retention.ms"))?,
            min_compaction_lag_ms: num("min.compaction.lag.ms", value("min.compaction.lag.ms"))?,
            min_cleanable_dirty_ratio: num("min.cleanable.dirty.ratio", ratio)?,
        };
        Ok(TopicConfig {
            log,
            compact,
            compaction,
            max_message_bytes: num("max.message.bytes", value("max.message.bytes"))?,
            log_append_time: value("message.timestamp.type") == "LogAppendTime",
            timestamp_after_max_ms: num("message.timestamp.after.max.ms", value("message.timestamp.after.max.ms"))?,
            min_insync_replicas: num("min.insync.replicas", value("min.insync.replicas"))?,
        })
    }
}

/// One entry of DescribeConfigs for a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedConfig {
    pub name: &'static str,
    pub value: String,
    pub is_default: bool,
    pub kind: ConfigType,
    pub doc: &'static str,
}

/// Every supported key with its effective value and whether the topic overrides it.
pub fn describe(broker: &BrokerConfig, overrides: &BTreeMap<String, String>) -> Vec<DescribedConfig> {
    TOPIC_CONFIGS
        .iter()
        .map(|d| match overrides.get(d.name) {
            Some(v) => DescribedConfig { name: d.name, value: v.clone(), is_default: false, kind: d.kind, doc: d.doc },
            None => {
                DescribedConfig { name: d.name, value: (d.default)(broker), is_default: true, kind: d.kind, doc: d.doc }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_come_from_the_broker_config() {
        let broker = BrokerConfig { log_segment_bytes: 4096, ..BrokerConfig::default() };
        let cfg = TopicConfig::resolve(&broker, &BTreeMap::new()).expect("resolves");
        assert_eq!(cfg.log.segment_bytes, 4096);
        assert!(!cfg.log_append_time);
    }

    #[test]
    fn overrides_win_over_defaults() {
        let overrides = BTreeMap::from([("retention.bytes".to_string(), "65536".to_string())]);
        let cfg = TopicConfig::resolve(&BrokerConfig::default(), &overrides).expect("resolves");
        assert_eq!(cfg.log.retention_bytes, 65536);
    }

    #[test]
    fn compact_only_topics_have_no_time_or_size_retention() {
        let overrides = BTreeMap::from([
            ("cleanup.policy".to_string(), "compact".to_string()),
            ("retention.ms".to_string(), "1000".to_string()),
        ]);
        let cfg = TopicConfig::resolve(&BrokerConfig::default(), &overrides).expect("resolves");
        assert!(cfg.compact);
        assert_eq!((cfg.log.retention_ms, cfg.log.retention_bytes), (-1, -1));
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused_with_the_key_named() {
        let err = validate_entry("retention.msx", "1").expect_err("unknown key");
        assert_eq!(err.key, "retention.msx");
        assert!(validate_entry("segment.bytes", "10").is_err());
        assert!(validate_entry("segment.bytes", "abc").is_err());
        assert!(validate_entry("message.timestamp.type", "Whenever").is_err());
        assert!(validate_entry("cleanup.policy", "compact").is_ok());
        assert!(validate_entry("cleanup.policy", "compact,delete").is_ok());
        assert!(validate_entry("cleanup.policy", "shred").is_err());
        assert!(validate_entry("min.cleanable.dirty.ratio", "1.5").is_err());
        assert!(validate_entry("retention.ms", "-1").is_ok());
        assert!(validate_entry("leader.replication.throttled.replicas", "*").is_ok());
        assert!(validate_entry("leader.replication.throttled.replicas", "0:1, 1:2").is_ok());
        assert!(validate_entry("follower.replication.throttled.replicas", "").is_ok());
        assert!(validate_entry("follower.replication.throttled.replicas", "0-1").is_err());
    }
}
