//! Topics known to the cluster, read from this broker's metadata image, and the checks of
//! names and partition counts that Kafka makes. Changes go through the controller
//! ([`super::controller`]); this is the read side.

use std::sync::Arc;

use tokio::sync::watch;
use uuid::Uuid;

use super::image::MetadataImage;
pub use super::image::TopicMetadata;

/// Kafka's limit on topic name length.
const MAX_TOPIC_NAME_LEN: usize = 249;
/// A generous bound on partitions per topic, so one request cannot make the broker create
/// millions of directories.
pub const MAX_PARTITIONS: i32 = 10_000;

/// Why a topic name or partition count is not acceptable.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("topic {0} does not exist")]
    UnknownTopic(String),
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidTopicName { name: String, reason: &'static str },
}

/// The topics of the cluster as this broker's metadata image has them.
#[derive(Debug, Clone)]
pub struct Catalog {
    image: watch::Receiver<Arc<MetadataImage>>,
}

/// Checks a topic name as Kafka does: 1..=249 characters of `[a-zA-Z0-9._-]`, not `.`/`..`.
pub fn validate_topic_name(name: &str) -> Result<(), CatalogError> {
    let fail = |reason| Err(CatalogError::InvalidTopicName { name: name.to_string(), reason });
    if name.is_empty() {
        return fail("the name is empty");
    }
    if name == "." || name == ".." {
        return fail("\".\" and \"..\" are not allowed");
    }
    if name.len() > MAX_TOPIC_NAME_LEN {
        return fail("longer than 249 characters");
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-') {
        return fail("only ASCII letters, digits, '.', '_' and '-' are allowed");
    }
    Ok(())
}

impl Catalog {
    pub fn new(image: watch::Receiver<Arc<MetadataImage>>) -> Catalog {
        Catalog { image }
    }

    /// The current image.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.borrow().clone()
    }

    pub fn get(&self, name: &str) -> Option<Arc<TopicMetadata>> {
        self.image.borrow().topic(name).cloned()
    }

    pub fn get_by_id(&self, id: Uuid) -> Option<Arc<TopicMetadata>> {
        self.image.borrow().topic_by_id(id).cloned()
    }

    /// All topics, ordered by name.
    pub fn list(&self) -> Vec<Arc<TopicMetadata>> {
        self.image.borrow().topics.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_are_checked_as_kafka_does() {
        assert!(validate_topic_name("orders.v1_x-y").is_ok());
        for bad in ["", ".", "..", "a/b", "spaced name"] {
            assert!(matches!(validate_topic_name(bad), Err(CatalogError::InvalidTopicName { .. })), "{bad:?}");
        }
        assert!(validate_topic_name(&"x".repeat(250)).is_err());
    }
}
