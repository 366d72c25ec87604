//! Topics of a Cluster that no `Topic` resource names: made with a Kafka client, the CLI or
//! an application's auto-creation while the operator runs. They are not in Git, so by
//! default the operator leaves them alone (`--unmanaged-topics ignore`): Git owns what it
//! names and nothing else, and a team that creates topics from code keeps doing so.
//! `report` announces them (a Normal Event on the Cluster each time the set changes, and the
//! `strom_operator_unmanaged_topics` gauge); `adopt` writes a `Topic` for each, as the topic
//! is, with `deletionPolicy: Retain` and the label `strom.dev/adopted=true`, for a team that
//! wants every topic in Git (export them with `kubectl get topics -l strom.dev/adopted=true
//! -o yaml`). Looked at on each resync of a Ready Cluster.

use std::collections::BTreeSet;

use kube::api::{Api, ListParams, PostParams};
use kube::runtime::events::EventType;
use kube::ResourceExt;
use sha2::{Digest, Sha256};

use crate::admin::{Admin, AdminError};
use crate::cluster::names::FIELD_MANAGER;
use crate::context::Context;
use crate::crd::cluster::Cluster;
use crate::crd::topic::{DeletionPolicy, Topic, TopicSpec};
use crate::crd::ClusterRef;

use super::plan::{kafka_name, TopicView};

/// What the operator does about topics no Topic resource names.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UnmanagedTopics {
    /// Leave them alone.
    #[default]
    Ignore,
    /// Announce them in Events on the Cluster and in a metric.
    Report,
    /// Write a Topic resource (deletionPolicy Retain) for each.
    Adopt,
}

/// Label on the Topics `adopt` writes.
pub const ADOPTED_LABEL: &str = "strom.dev/adopted";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("listing the Topics of namespace {namespace}")]
    List {
        namespace: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("listing the cluster's topics")]
    Admin(#[source] Box<AdminError>),
    #[error("creating Topic {name}")]
    Create {
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
}

/// Topics of the cluster that none of `resources` (Topics of the cluster's namespace) names
/// (pure). The brokers' own topics (`__consumer_offsets`) are not listed to begin with.
pub fn unmanaged(kafka_topics: &[String], resources: &[Topic], cluster: &str) -> Vec<String> {
    let named: BTreeSet<String> =
        resources.iter().filter(|t| t.spec.cluster_ref.name == cluster).map(kafka_name).collect();
    let mut out: Vec<String> = kafka_topics.iter().filter(|t| !named.contains(*t)).cloned().collect();
    out.sort();
    out
}

/// A Kubernetes name for the Topic resource of Kafka topic `topic` (pure): the topic's own
/// name when it is a valid one, else a cleaned-up name with a hash of the original (Kafka
/// allows `_` and capitals, Kubernetes names do not).
pub fn resource_name(topic: &str) -> String {
    let valid = topic.len() <= 253
        && topic.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && topic.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && topic.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric());
    if valid {
        return topic.to_string();
    }
    let cleaned: String = topic
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c.to_ascii_lowercase() } else { '-' })
        .collect();
    let cleaned: String = cleaned.trim_matches(|c| c == '-' || c == '.').chars().take(200).collect();
    let hash = Sha256::digest(topic.as_bytes());
    let suffix: String = hash.iter().take(4).map(|b| format!("{b:02x}")).collect();
    if cleaned.is_empty() {
        format!("topic-{suffix}")
    } else {
        format!("{cleaned}-{suffix}")
    }
}

/// The Topic resource that adopts `topic` as it is (pure).
pub fn adoption(topic: &str, view: &TopicView, cluster: &str, namespace: &str) -> Topic {
    let mut t = Topic::new(
        &resource_name(topic),
        TopicSpec {
            cluster_ref: ClusterRef { name: cluster.to_string() },
            topic_name: Some(topic.to_string()),
            partitions: view.partitions,
            replication_factor: view.replication_factor,
            config: view.configs.clone(),
            deletion_policy: DeletionPolicy::Retain,
        },
    );
    t.metadata.namespace = Some(namespace.to_string());
    t.metadata.labels = Some([(ADOPTED_LABEL.to_string(), "true".to_string())].into());
    t
}

/// Reports or adopts the unmanaged topics of a Ready `cluster`, as the operator is set to.
pub async fn reconcile(ctx: &Context, cluster: &Cluster, admin: &Admin) -> Result<(), Error> {
    let mode = ctx.settings.unmanaged_topics;
    if mode == UnmanagedTopics::Ignore {
        return Ok(());
    }
    let namespace = cluster.namespace().unwrap_or_default();
    let name = cluster.name_any();
    let api: Api<Topic> = Api::namespaced(ctx.client.clone(), &namespace);
    let resources = api
        .list(&ListParams::default())
        .await
        .map_err(|source| Error::List { namespace: namespace.clone(), source: Box::new(source) })?
        .items;
    let kafka = admin.topic_names().await.map_err(|e| Error::Admin(Box::new(e)))?;
    let found = unmanaged(&kafka, &resources, &name);
    ctx.metrics.unmanaged_topics(&namespace, &name, found.len());
    match mode {
        UnmanagedTopics::Ignore => {}
        UnmanagedTopics::Report => {
            if !found.is_empty() && ctx.first_warning(&format!("unmanaged/{namespace}/{name}/{}", found.join(","))) {
                let shown: Vec<&str> = found.iter().take(20).map(String::as_str).collect();
                let more = if found.len() > 20 { format!(" and {} more", found.len() - 20) } else { String::new() };
                let note =
                    format!("{} topic(s) not managed by a Topic resource: {}{more}", found.len(), shown.join(", "));
                crate::publish::event(ctx, cluster, EventType::Normal, "UnmanagedTopics", "Reconcile", note).await;
            }
        }
        UnmanagedTopics::Adopt => {
            for topic in &found {
                let Ok(Some(view)) = admin.topic(topic).await else { continue };
                let resource = adoption(topic, &view, &name, &namespace);
                let resource_name = resource.name_any();
                let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() };
                match api.create(&params, &resource).await {
                    Ok(_) => {
                        let note = format!(
                            "topic {topic} was not in Git: wrote Topic {resource_name} (deletionPolicy Retain)"
                        );
                        crate::publish::event(ctx, cluster, EventType::Normal, "TopicAdopted", "Reconcile", note).await;
                    }
                    // A Topic of that name names another Kafka topic: leave both as they are.
                    Err(kube::Error::Api(e)) if e.code == 409 => {
                        tracing::warn!(topic, resource = %resource_name, "not adopted: a Topic of that name exists");
                    }
                    Err(source) => return Err(Error::Create { name: resource_name, source: Box::new(source) }),
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_no_resource_names_are_unmanaged() {
        let orders = Topic::new(
            "orders",
            TopicSpec {
                cluster_ref: ClusterRef { name: "events".into() },
                topic_name: None,
                partitions: 1,
                replication_factor: 1,
                config: Default::default(),
                deletion_policy: DeletionPolicy::Delete,
            },
        );
        let mut elsewhere = orders.clone();
        elsewhere.spec.cluster_ref.name = "other".into();
        elsewhere.spec.topic_name = Some("clicks".into());
        let kafka = ["orders".to_string(), "clicks".to_string(), "audit".to_string()];
        assert_eq!(unmanaged(&kafka, &[orders, elsewhere], "events"), ["audit", "clicks"]);
    }

    #[test]
    fn a_kafka_name_kubernetes_refuses_gets_a_clean_name_with_a_hash() {
        assert_eq!(resource_name("orders.v2"), "orders.v2");
        let a = resource_name("Orders_V2");
        assert!(a.starts_with("orders-v2-") && a.len() == "orders-v2-".len() + 8, "{a}");
        assert_ne!(a, resource_name("orders_v2"), "the hash keeps names that clean up alike apart");
        assert!(resource_name("__").starts_with("topic-"));
        let view = TopicView {
            id: "x".into(),
            partitions: 3,
            replication_factor: 2,
            configs: [("retention.ms".to_string(), "1".to_string())].into(),
            reassigning: 0,
        };
        let t = adoption("Orders_V2", &view, "events", "ns");
        assert_eq!(t.spec.topic_name.as_deref(), Some("Orders_V2"));
        assert_eq!(
            (t.spec.partitions, t.spec.replication_factor, t.spec.deletion_policy),
            (3, 2, DeletionPolicy::Retain)
        );
        assert_eq!(t.labels().get(ADOPTED_LABEL).map(String::as_str), Some("true"));
    }
}
