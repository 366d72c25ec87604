//! What a `Topic` asks of the brokers, decided from its spec and the topic as the brokers
//! have it (pure): create it, or one alteration (more partitions, config values, a new
//! replication factor), or nothing; and what its conditions say.
//!
//! Rules: partitions only grow (a topic with more partitions than the spec asks is reported,
//! never shrunk: Kafka cannot remove partitions); a config key in the spec is set to the
//! spec's value, a key left out is not managed; a replication factor that differs starts a
//! reassignment, and none is started while one is in progress.

use std::collections::BTreeMap;

use kube::ResourceExt;

use crate::conditions::Health;
use crate::crd::topic::{Topic, TopicSpec};

/// A topic as the brokers describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicView {
    pub id: String,
    pub partitions: i32,
    /// Replicas per partition once moves in progress finish; -1 when partitions differ.
    pub replication_factor: i32,
    /// The topic's config overrides (not the broker defaults).
    pub configs: BTreeMap<String, String>,
    /// Partitions with replicas being added or removed.
    pub reassigning: i32,
}

/// Changes to an existing topic, made in one AlterTopic.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Alter {
    /// The new partition count, when the spec asks for more.
    pub partitions: Option<i32>,
    /// Config values to set.
    pub set_configs: BTreeMap<String, String>,
    /// The replication factor to move to.
    pub replication_factor: Option<i32>,
}

impl Alter {
    pub fn is_empty(&self) -> bool {
        *self == Alter::default()
    }

    /// In words, for Events and conditions.
    pub fn describe(&self, have: &TopicView) -> String {
        let mut parts = Vec::new();
        if let Some(p) = self.partitions {
            parts.push(format!("partitions {} → {p}", have.partitions));
        }
        for (k, v) in &self.set_configs {
            match have.configs.get(k) {
                Some(old) => parts.push(format!("{k} {old} → {v}")),
                None => parts.push(format!("{k} (default) → {v}")),
            }
        }
        if let Some(rf) = self.replication_factor {
            parts.push(format!("replication factor {} → {rf}", have.replication_factor));
        }
        parts.join(", ")
    }
}

/// The next change the topic needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Create { partitions: i32, replication_factor: i32, configs: BTreeMap<String, String> },
    Alter(Alter),
    Nothing,
}

/// The topic compared with its spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diff {
    pub change: Change,
    /// (partitions the topic has, partitions the spec asks for) when the topic has more.
    pub more_partitions_than_spec: Option<(i32, i32)>,
    /// Partitions being reassigned now.
    pub reassigning: i32,
}

/// Compares the spec with the topic (None: it does not exist).
pub fn diff(spec: &TopicSpec, observed: Option<&TopicView>) -> Diff {
    let Some(have) = observed else {
        return Diff {
            change: Change::Create {
                partitions: spec.partitions,
                replication_factor: spec.replication_factor,
                configs: spec.config.clone(),
            },
            more_partitions_than_spec: None,
            reassigning: 0,
        };
    };
    let mut alter = Alter::default();
    if spec.partitions > have.partitions {
        alter.partitions = Some(spec.partitions);
    }
    for (k, v) in &spec.config {
        if have.configs.get(k) != Some(v) {
            alter.set_configs.insert(k.clone(), v.clone());
        }
    }
    if have.reassigning == 0 && spec.replication_factor != have.replication_factor {
        alter.replication_factor = Some(spec.replication_factor);
    }
    Diff {
        change: if alter.is_empty() { Change::Nothing } else { Change::Alter(alter) },
        more_partitions_than_spec: (have.partitions > spec.partitions).then_some((have.partitions, spec.partitions)),
        reassigning: have.reassigning,
    }
}

/// The topic's health once `diff` (computed after the last change) is what remains.
pub fn health(name: &str, spec: &TopicSpec, diff: &Diff) -> Health {
    if let Some((have, want)) = diff.more_partitions_than_spec {
        return Health::Stalled {
            reason: "PartitionsAboveSpec".into(),
            message: format!(
                "topic {name} has {have} partitions and the spec asks for {want}; Kafka cannot remove partitions: \
                 set spec.partitions to {have}"
            ),
        };
    }
    if diff.reassigning > 0 {
        return Health::Reconciling {
            reason: "Reassigning".into(),
            message: format!(
                "moving the replicas of {} partition(s) of {name} to replication factor {}",
                diff.reassigning, spec.replication_factor
            ),
        };
    }
    match &diff.change {
        Change::Nothing => Health::Ready {
            reason: "InSync".into(),
            message: format!(
                "topic {name} has {} partitions, replication factor {} and the {} config value(s) of the spec",
                spec.partitions,
                spec.replication_factor,
                spec.config.len()
            ),
        },
        Change::Create { .. } => {
            Health::Reconciling { reason: "Creating".into(), message: format!("creating topic {name}") }
        }
        Change::Alter(_) => {
            Health::Reconciling { reason: "Updating".into(), message: format!("updating topic {name}") }
        }
    }
}

/// The Kafka topic's name: `spec.topicName`, else the resource's name.
pub fn kafka_name(topic: &Topic) -> String {
    topic.spec.topic_name.clone().unwrap_or_else(|| topic.name_any())
}

/// Why the spec cannot be carried out, before anything reaches a broker (pure). What only
/// the brokers know (config keys and values, replicas against live brokers) they check.
pub fn validate(name: &str) -> Result<(), String> {
    if name == "." || name == ".." {
        return Err(format!("{name:?} is not a valid topic name"));
    }
    Ok(())
}

/// What a Topic names: (namespace, cluster, Kafka topic).
pub fn names(t: &Topic) -> (Option<String>, String, String) {
    (t.namespace(), t.spec.cluster_ref.name.clone(), kafka_name(t))
}

/// Of the Topic resources naming the same Kafka topic in the same Cluster, the one that
/// manages it: the oldest (then the first by name). None when `me` is that one; else its name.
pub fn claimed_by<'a>(me: &'a Topic, all: impl IntoIterator<Item = &'a Topic>) -> Option<String> {
    crate::claim::claimed_by(me, all, names)
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
