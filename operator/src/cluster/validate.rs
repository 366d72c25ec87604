//! The validate phase (pure): what a `Cluster` spec means, or why it cannot be carried out.
//! The API server already refuses most bad input (schema and CEL rules); this catches what
//! those cannot express (broker config keys and types, durations) and objects stored before a
//! rule existed. An invalid spec leaves the running cluster alone until the spec changes.

use std::time::Duration;

use crate::crd::cluster::ClusterSpec;
use crate::quantity;

use super::broker_config::{self, ConfigError};
use super::names::Names;

/// A spec the operator can carry out, with its values read.
#[derive(Debug, Clone, PartialEq)]
pub struct Valid {
    /// `broker.toml` for the ConfigMap.
    pub broker_config: String,
    pub storage_bytes: u64,
    /// Replication throttle for moves, bytes/s (0: none).
    pub throttle_bytes_per_sec: u64,
    pub replace_after: Option<Duration>,
}

/// Why a spec cannot be carried out (shown in the `Ready` condition and an Event).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InvalidSpec {
    #[error("replicas must be at least 1, not {0}")]
    Replicas(i32),
    #[error("controllers must be 1, 3 or 5, not {0}")]
    Controllers(i32),
    #[error("replicas ({replicas}) must be at least controllers ({controllers})")]
    FewerBrokersThanControllers { replicas: i32, controllers: i32 },
    #[error("image must not be empty")]
    Image,
    #[error("storage.size: {0}")]
    StorageSize(#[source] quantity::QuantityError),
    #[error("rebalance.throttle: {0}")]
    Throttle(#[source] quantity::QuantityError),
    #[error("failover.replaceAfter: {0:?} is not a duration such as 90s or 10m")]
    ReplaceAfter(String),
    #[error("spec.config: {0}")]
    Config(#[source] ConfigError),
    #[error("listeners: the kafka, internal and http ports must differ")]
    Ports,
    #[error("listeners.external.advertisedAddressTemplate must contain {{id}} and a port, e.g. broker-{{id}}.example.com:9092")]
    ExternalTemplate,
}

/// Reads `spec`; the first problem found refuses it.
pub fn validate(spec: &ClusterSpec, names: &Names) -> Result<Valid, InvalidSpec> {
    if spec.replicas < 1 {
        return Err(InvalidSpec::Replicas(spec.replicas));
    }
    if ![1, 3, 5].contains(&spec.controllers) {
        return Err(InvalidSpec::Controllers(spec.controllers));
    }
    if spec.replicas < spec.controllers {
        return Err(InvalidSpec::FewerBrokersThanControllers {
            replicas: spec.replicas,
            controllers: spec.controllers,
        });
    }
    if spec.image.trim().is_empty() {
        return Err(InvalidSpec::Image);
    }
    let l = &spec.listeners;
    if l.kafka == l.internal || l.kafka == l.http || l.internal == l.http {
        return Err(InvalidSpec::Ports);
    }
    if let Some(external) = &l.external {
        let t = &external.advertised_address_template;
        if !t.contains("{id}") || t.rsplit_once(':').is_none_or(|(_, port)| port.parse::<u16>().is_err()) {
            return Err(InvalidSpec::ExternalTemplate);
        }
    }
    let storage_bytes = quantity::bytes(&spec.storage.size).map_err(InvalidSpec::StorageSize)?;
    let throttle_bytes_per_sec = spec
        .rebalance
        .throttle
        .as_deref()
        .map(quantity::bytes)
        .transpose()
        .map_err(InvalidSpec::Throttle)?
        .unwrap_or(0);
    let replace_after = spec
        .failover
        .replace_after
        .as_deref()
        .map(|text| humantime::parse_duration(text.trim()).map_err(|_| InvalidSpec::ReplaceAfter(text.to_string())))
        .transpose()?;
    let broker_config =
        broker_config::render(names, spec.controllers, l.internal, &spec.config).map_err(InvalidSpec::Config)?;
    Ok(Valid { broker_config, storage_bytes, throttle_bytes_per_sec, replace_after })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::crd::cluster::{ClusterSpec, Storage};

    pub fn spec(replicas: i32) -> ClusterSpec {
        serde_json::from_value(serde_json::json!({
            "replicas": replicas,
            "controllers": if replicas >= 3 { 3 } else { 1 },
            "image": "strom:dev",
            "storage": {"size": "1Gi"},
        }))
        .expect("a spec")
    }

    fn names() -> Names {
        Names::new("c", "ns", "cluster.local")
    }

    #[test]
    fn a_minimal_spec_is_valid_with_defaults() {
        let s = spec(3);
        assert_eq!(s.listeners.kafka, 9092);
        assert!(s.rebalance.on_scale);
        let v = validate(&s, &names()).expect("valid");
        assert_eq!(v.storage_bytes, 1 << 30);
        assert_eq!(v.throttle_bytes_per_sec, 0);
        assert_eq!(v.replace_after, None);
        assert!(v.broker_config.contains("voters = "), "{}", v.broker_config);
    }

    #[test]
    fn bad_specs_are_refused_with_a_reason_a_person_can_act_on() {
        let with = |f: &dyn Fn(&mut ClusterSpec)| {
            let mut s = spec(3);
            f(&mut s);
            validate(&s, &names()).map(|_| ()).map_err(|e| e.to_string())
        };
        assert_eq!(with(&|s| s.replicas = 0), Err("replicas must be at least 1, not 0".into()));
        assert_eq!(with(&|s| s.controllers = 2), Err("controllers must be 1, 3 or 5, not 2".into()));
        assert_eq!(with(&|s| s.replicas = 2), Err("replicas (2) must be at least controllers (3)".into()));
        let size = with(&|s| s.storage = Storage { size: "lots".into(), ..s.storage.clone() });
        assert!(size.as_ref().is_err_and(|e| e.starts_with("storage.size: ")), "{size:?}");
        let after = with(&|s| s.failover.replace_after = Some("soon".into()));
        assert_eq!(after, Err("failover.replaceAfter: \"soon\" is not a duration such as 90s or 10m".into()));
        let config = with(&|s| {
            s.config.insert("node.id".into(), "7".into());
        });
        assert_eq!(config, Err("spec.config: config node.id: set by the operator, not by spec.config".into()));
        assert_eq!(
            with(&|s| s.listeners.http = 9092),
            Err("listeners: the kafka, internal and http ports must differ".into())
        );
    }

    #[test]
    fn durations_and_throttles_are_read() {
        let mut s = spec(3);
        s.failover.replace_after = Some("90s".into());
        s.rebalance.throttle = Some("50Mi".into());
        let v = validate(&s, &names()).expect("valid");
        assert_eq!(v.replace_after, Some(Duration::from_secs(90)));
        assert_eq!(v.throttle_bytes_per_sec, 50 << 20);
    }
}
