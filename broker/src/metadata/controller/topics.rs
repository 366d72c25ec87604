//! The controller's topic writes: CreateTopic (validated, placed), DeleteTopic,
//! CreatePartitions, AlterTopicConfigs.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::placement::{self, BrokerLoad, Candidate};
use super::{fail, Controller, ControllerError, CreatedTopic, ErrorKind, TopicSpec};
use crate::metadata::catalog::{validate_topic_name, MAX_PARTITIONS};
use crate::metadata::command::{CommandResult, MetadataCommand};
use crate::metadata::image::MetadataImage;
use crate::metadata::topic_config;

impl Controller {
    pub(super) fn live_candidates(image: &MetadataImage) -> Vec<Candidate> {
        image.live_brokers().map(|b| Candidate { id: b.id, rack: b.rack.clone() }).collect()
    }

    /// Checks a manual assignment: every partition the same number of distinct, registered brokers.
    pub(super) fn check_assignment(image: &MetadataImage, assignment: &[Vec<i32>]) -> Result<usize, ControllerError> {
        let rf = assignment.first().map_or(0, Vec::len);
        for (i, replicas) in assignment.iter().enumerate() {
            if replicas.is_empty() {
                return fail(ErrorKind::InvalidReplicaAssignment, format!("partition {i} has no replicas"));
            }
            if replicas.len() != rf {
                return fail(
                    ErrorKind::InvalidReplicaAssignment,
                    format!("partition {i} has {} replicas, partition 0 has {rf}", replicas.len()),
                );
            }
            let mut seen = std::collections::BTreeSet::new();
            for b in replicas {
                if !seen.insert(*b) {
                    return fail(ErrorKind::InvalidReplicaAssignment, format!("partition {i} names broker {b} twice"));
                }
                if image.broker(*b).is_none() {
                    let known: Vec<String> = image.brokers.keys().map(i32::to_string).collect();
                    return fail(
                        ErrorKind::InvalidReplicaAssignment,
                        format!(
                            "partition {i} is assigned to broker {b}, which is not registered (brokers: {})",
                            known.join(",")
                        ),
                    );
                }
            }
        }
        Ok(rf)
    }

    /// CreateTopic: validates, places and commits a new topic.
    pub async fn create_topic(&self, spec: TopicSpec) -> Result<CreatedTopic, ControllerError> {
        let _guard = self.write_lock.lock().await;
        self.ensure_active().await?;
        let image = self.image();
        if let Err(e) = validate_topic_name(&spec.name) {
            return fail(ErrorKind::InvalidTopicName, e.to_string());
        }
        if image.topic(&spec.name).is_some() {
            return fail(ErrorKind::TopicAlreadyExists, format!("Topic '{}' already exists.", spec.name));
        }
        if let Err(e) = topic_config::validate(&spec.configs) {
            return fail(ErrorKind::InvalidConfig, e.to_string());
        }
        let assignment = if spec.assignment.is_empty() {
            if !(1..=MAX_PARTITIONS).contains(&spec.partitions) {
                return fail(
                    ErrorKind::InvalidPartitions,
                    format!("number of partitions must be between 1 and {MAX_PARTITIONS}, got {}", spec.partitions),
                );
            }
            if spec.replication_factor < 1 {
                return fail(
                    ErrorKind::InvalidReplicationFactor,
                    format!("replication factor {} must be at least 1", spec.replication_factor),
                );
            }
            let rf = usize::try_from(spec.replication_factor).unwrap_or(0);
            let mut load = BrokerLoad::of(&image);
            let count = usize::try_from(spec.partitions).unwrap_or(0);
            placement::place(&Self::live_candidates(&image), &mut load, count, rf)
                .map_err(|e| ControllerError { code: ErrorKind::InvalidReplicationFactor, message: e.to_string() })?
        } else {
            if spec.assignment.len() > MAX_PARTITIONS as usize {
                return fail(ErrorKind::InvalidPartitions, format!("at most {MAX_PARTITIONS} partitions"));
            }
            Self::check_assignment(&image, &spec.assignment)?;
            spec.assignment.clone()
        };
        let partitions = i32::try_from(assignment.len()).unwrap_or(i32::MAX);
        let replication_factor = i16::try_from(assignment.first().map_or(0, Vec::len)).unwrap_or(i16::MAX);
        if spec.validate_only {
            return Ok(CreatedTopic { id: None, partitions, replication_factor, index: image.applied_index });
        }
        let id = Uuid::new_v4();
        let command = MetadataCommand::CreateTopic { name: spec.name.clone(), id, configs: spec.configs, assignment };
        match self.write(command).await? {
            (CommandResult::Done, index) => {
                tracing::info!(topic = %spec.name, %id, partitions, "created topic");
                Ok(CreatedTopic { id: Some(id), partitions, replication_factor, index })
            }
            (other, _) => fail(ErrorKind::InvalidRequest, format!("topic {} not created: {other:?}", spec.name)),
        }
    }

    pub(super) fn topic_id(image: &MetadataImage, name: &str) -> Result<Uuid, ControllerError> {
        image.topic(name).map(|t| t.id).ok_or_else(|| ControllerError {
            code: ErrorKind::UnknownTopic,
            message: format!("topic {name} does not exist"),
        })
    }

    /// DeleteTopic.
    pub async fn delete_topic(&self, name: &str) -> Result<u64, ControllerError> {
        let _guard = self.write_lock.lock().await;
        self.ensure_active().await?;
        let id = Self::topic_id(&self.image(), name)?;
        let (_, index) = self.write(MetadataCommand::DeleteTopic { id }).await?;
        tracing::info!(topic = %name, %id, "deleted topic");
        Ok(index)
    }

    /// CreatePartitions: grows a topic to `count` partitions.
    pub async fn create_partitions(
        &self,
        name: &str,
        count: i32,
        assignment: Vec<Vec<i32>>,
        validate_only: bool,
    ) -> Result<u64, ControllerError> {
        let _guard = self.write_lock.lock().await;
        self.ensure_active().await?;
        let image = self.image();
        let topic = image.topic(name).cloned().ok_or_else(|| ControllerError {
            code: ErrorKind::UnknownTopic,
            message: format!("topic {name} does not exist"),
        })?;
        let current = topic.partition_count();
        if count > MAX_PARTITIONS {
            return fail(ErrorKind::InvalidPartitions, format!("topic {name}: at most {MAX_PARTITIONS} partitions"));
        }
        if count < current {
            return fail(
                ErrorKind::InvalidPartitions,
                format!("topic {name} has {current} partitions; it cannot decrease to {count}"),
            );
        }
        if count == current {
            return fail(ErrorKind::InvalidPartitions, format!("topic {name} already has {count} partitions"));
        }
        let added = usize::try_from(count - current).unwrap_or(0);
        let rf = usize::try_from(topic.replication_factor()).unwrap_or(1).max(1);
        let new = if assignment.is_empty() {
            let mut load = BrokerLoad::of(&image);
            placement::place(&Self::live_candidates(&image), &mut load, added, rf)
                .map_err(|e| ControllerError { code: ErrorKind::InvalidReplicationFactor, message: e.to_string() })?
        } else {
            if assignment.len() != added {
                return fail(
                    ErrorKind::InvalidReplicaAssignment,
                    format!("{} assignments given for {added} new partitions", assignment.len()),
                );
            }
            let given = Self::check_assignment(&image, &assignment)?;
            if given != rf {
                return fail(
                    ErrorKind::InvalidReplicaAssignment,
                    format!("new partitions have {given} replicas; topic {name} has {rf}"),
                );
            }
            assignment
        };
        if validate_only {
            return Ok(image.applied_index);
        }
        let (_, index) = self.write(MetadataCommand::CreatePartitions { id: topic.id, assignment: new }).await?;
        tracing::info!(topic = %name, partitions = count, "increased partitions");
        Ok(index)
    }

    /// AlterTopicConfigs: replaces a topic's overrides.
    pub async fn alter_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<u64, ControllerError> {
        let _guard = self.write_lock.lock().await;
        self.ensure_active().await?;
        let image = self.image();
        let id = Self::topic_id(&image, name)?;
        if let Err(e) = topic_config::validate(&configs) {
            return fail(ErrorKind::InvalidConfig, e.to_string());
        }
        if validate_only {
            return Ok(image.applied_index);
        }
        let (_, index) = self.write(MetadataCommand::AlterTopicConfigs { id, configs: configs.clone() }).await?;
        tracing::info!(topic = %name, configs = ?configs, "altered topic configs");
        Ok(index)
    }
}
