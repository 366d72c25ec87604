//! The broker config file a Cluster's brokers share (`broker.toml` in the ConfigMap): the
//! quorum's voters, which the operator derives, and `spec.config` with Kafka's key names
//! translated to the keys of `strom serve --config` (dots become underscores). Per-broker
//! values (id, addresses, rack) are not here but on each pod's command line.
//!
//! The keys a user may set, with the type of each, are listed in [`SETTABLE`], mirroring
//! `BrokerConfig` in broker/src/config.rs (which refuses unknown keys at start). An unknown
//! key or a value of the wrong type is refused here, before any pod is touched; value ranges
//! are the broker's to check.

use std::collections::BTreeMap;

use super::names::Names;

/// What a config value must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Integer,
    Bool,
    Text,
}

/// Broker configs a Cluster may set, by Kafka's name (or Strom's, where Kafka has none).
pub const SETTABLE: &[(&str, Kind)] = &[
    ("auto.create.topics.enable", Kind::Bool),
    ("auto.leader.rebalance.enable", Kind::Bool),
    ("broker.heartbeat.interval.ms", Kind::Integer),
    ("broker.session.timeout.ms", Kind::Integer),
    ("controller.quorum.election.timeout.ms", Kind::Integer),
    ("controller.quorum.heartbeat.interval.ms", Kind::Integer),
    ("default.replication.factor", Kind::Integer),
    ("flush.on.acks.all", Kind::Bool),
    ("group.initial.rebalance.delay.ms", Kind::Integer),
    ("group.max.session.timeout.ms", Kind::Integer),
    ("group.min.session.timeout.ms", Kind::Integer),
    ("leader.imbalance.check.interval.ms", Kind::Integer),
    ("log.cleaner.interval.ms", Kind::Integer),
    ("log.flush.interval.messages", Kind::Integer),
    ("log.flush.interval.ms", Kind::Integer),
    ("log.format", Kind::Text),
    ("log.index.interval.bytes", Kind::Integer),
    ("log.index.size.max.bytes", Kind::Integer),
    ("log.message.timestamp.type", Kind::Text),
    ("log.retention.bytes", Kind::Integer),
    ("log.retention.check.interval.ms", Kind::Integer),
    ("log.retention.ms", Kind::Integer),
    ("log.roll.ms", Kind::Integer),
    ("log.segment.bytes", Kind::Integer),
    ("max.connections", Kind::Integer),
    ("message.max.bytes", Kind::Integer),
    ("metadata.max.retained.entries", Kind::Integer),
    ("metadata.snapshot.interval.entries", Kind::Integer),
    ("min.insync.replicas", Kind::Integer),
    ("num.partitions", Kind::Integer),
    ("offset.metadata.max.bytes", Kind::Integer),
    ("offsets.retention.minutes", Kind::Integer),
    ("offsets.topic.num.partitions", Kind::Integer),
    ("offsets.topic.replication.factor", Kind::Integer),
    ("offsets.topic.segment.bytes", Kind::Integer),
    ("queued.max.request.bytes", Kind::Integer),
    ("replica.fetch.response.max.bytes", Kind::Integer),
    ("replica.fetch.wait.max.ms", Kind::Integer),
    ("replica.lag.time.max.ms", Kind::Integer),
    ("socket.request.max.bytes", Kind::Integer),
    ("socket.send.buffer.bytes", Kind::Integer),
];

/// Keys the operator sets itself; a Cluster that names one is refused.
pub const MANAGED: &[&str] = &[
    "node.id",
    "data.dir",
    "log.dirs",
    "kafka.listen",
    "listeners",
    "advertised.kafka",
    "advertised.listeners",
    "http.listen",
    "internal.listen",
    "advertised.internal",
    "voters",
    "controller.quorum.voters",
    "rack",
    "broker.rack",
    "config",
];

/// Why `spec.config` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("config {0}: set by the operator, not by spec.config")]
    Managed(String),
    #[error("config {0}: not a broker config Strom knows")]
    Unknown(String),
    #[error("config {key}: {value:?} is not {expected}")]
    Type { key: String, value: String, expected: &'static str },
}

/// The broker config file for `config` (spec.config) in a cluster whose first `controllers`
/// brokers vote, reached on `internal_port`.
pub fn render(
    names: &Names,
    controllers: i32,
    internal_port: i32,
    config: &BTreeMap<String, String>,
) -> Result<String, ConfigError> {
    let mut table = toml::Table::new();
    let voters: Vec<String> =
        (0..controllers).map(|id| format!("{id}@{}:{internal_port}", names.pod_fqdn(id))).collect();
    table.insert("voters".into(), toml::Value::String(voters.join(",")));
    for (key, value) in config {
        let (k, v) = entry(key, value)?;
        table.insert(k, v);
    }
    let body = toml::to_string(&table).map_err(|e| ConfigError::Type {
        key: "(file)".into(),
        value: e.to_string(),
        expected: "representable as TOML",
    })?;
    Ok(format!("# strom-operator: broker config of Cluster {}/{}\n{body}", names.namespace, names.cluster))
}

fn entry(key: &str, value: &str) -> Result<(String, toml::Value), ConfigError> {
    let k = key.trim();
    if MANAGED.contains(&k) {
        return Err(ConfigError::Managed(k.to_string()));
    }
    let kind = SETTABLE
        .iter()
        .find(|(name, _)| *name == k || name.replace('.', "_") == k)
        .map(|(_, kind)| *kind)
        .ok_or_else(|| ConfigError::Unknown(k.to_string()))?;
    let v = value.trim();
    let wrong = |expected| ConfigError::Type { key: k.to_string(), value: value.to_string(), expected };
    let value = match kind {
        Kind::Integer => toml::Value::Integer(v.parse().map_err(|_| wrong("an integer"))?),
        Kind::Bool => toml::Value::Boolean(match v {
            "true" => true,
            "false" => false,
            _ => return Err(wrong("true or false")),
        }),
        Kind::Text => toml::Value::String(v.to_string()),
    };
    Ok((k.replace('.', "_"), value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Names {
        Names::new("c", "ns", "cluster.local")
    }

    #[test]
    fn kafka_names_become_the_brokers_config_keys_with_the_voters_first() {
        let config = BTreeMap::from([
            ("min.insync.replicas".to_string(), "2".to_string()),
            ("auto.create.topics.enable".to_string(), "false".to_string()),
            ("log.message.timestamp.type".to_string(), "LogAppendTime".to_string()),
        ]);
        let text = render(&names(), 3, 9093, &config).expect("valid");
        let parsed: toml::Table = toml::from_str(&text).expect("TOML");
        assert_eq!(
            parsed["voters"].as_str(),
            Some(
                "0@c-broker-0.c-brokers.ns.svc.cluster.local:9093,1@c-broker-1.c-brokers.ns.svc.cluster.local:9093,\
                 2@c-broker-2.c-brokers.ns.svc.cluster.local:9093"
            )
        );
        assert_eq!(parsed["min_insync_replicas"].as_integer(), Some(2));
        assert_eq!(parsed["auto_create_topics_enable"].as_bool(), Some(false));
        assert_eq!(parsed["log_message_timestamp_type"].as_str(), Some("LogAppendTime"));
    }

    #[test]
    fn unknown_managed_and_mistyped_keys_are_refused_by_name() {
        let one = |k: &str, v: &str| render(&names(), 1, 9093, &BTreeMap::from([(k.to_string(), v.to_string())]));
        assert_eq!(one("node.id", "3"), Err(ConfigError::Managed("node.id".into())));
        assert_eq!(one("log.retention.hours", "3"), Err(ConfigError::Unknown("log.retention.hours".into())));
        assert!(matches!(one("min.insync.replicas", "two"), Err(ConfigError::Type { .. })));
        assert!(matches!(one("auto.create.topics.enable", "yes"), Err(ConfigError::Type { .. })));
        assert!(one("min_insync_replicas", "2").is_ok(), "the file's own spelling is accepted too");
    }
}
