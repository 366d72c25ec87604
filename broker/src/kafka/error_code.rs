//! The one place where Strom's errors become Kafka error codes (and messages for the
//! responses that carry one).

use kafka_protocol::error::ResponseError;

use crate::group::GroupError;
use crate::log::LogError;
use crate::metadata::CatalogError;
use crate::node::TopicOpError;
use crate::partition::producer_state::SequenceError;
use crate::partition::PartitionError;

/// Kafka's "no error".
pub const NONE: i16 = 0;

pub fn partition(e: &PartitionError) -> i16 {
    let code = match e {
        PartitionError::CorruptMessage { .. } => ResponseError::CorruptMessage,
        PartitionError::InvalidRecord { .. } => ResponseError::InvalidRecord,
        PartitionError::MessageTooLarge { .. } => ResponseError::MessageTooLarge,
        PartitionError::UnsupportedMessageFormat { .. } => ResponseError::UnsupportedForMessageFormat,
        PartitionError::InvalidTimestamp { .. } => ResponseError::InvalidTimestamp,
        PartitionError::Sequence { source: SequenceError::InvalidProducerEpoch { .. }, .. } => {
            ResponseError::InvalidProducerEpoch
        }
        PartitionError::Sequence { source: SequenceError::OutOfOrderSequence { .. }, .. } => {
            ResponseError::OutOfOrderSequenceNumber
        }
        PartitionError::NotEnoughReplicas { .. } => ResponseError::NotEnoughReplicas,
        PartitionError::Log { source: LogError::OffsetOutOfRange { .. }, .. } => ResponseError::OffsetOutOfRange,
        PartitionError::Log { .. } | PartitionError::Io { .. } => ResponseError::KafkaStorageError,
    };
    code.code()
}

pub fn catalog(e: &CatalogError) -> i16 {
    let code = match e {
        CatalogError::TopicAlreadyExists(_) => ResponseError::TopicAlreadyExists,
        CatalogError::UnknownTopic(_) => ResponseError::UnknownTopicOrPartition,
        CatalogError::InvalidTopicName { .. } => ResponseError::InvalidTopicException,
        CatalogError::InvalidPartitions { .. } => ResponseError::InvalidPartitions,
        CatalogError::InvalidConfig(_) => ResponseError::InvalidConfig,
        CatalogError::Persist { .. } | CatalogError::Load { .. } => ResponseError::UnknownServerError,
    };
    code.code()
}

pub fn topic_op(e: &TopicOpError) -> i16 {
    match e {
        TopicOpError::Catalog(c) => catalog(c),
        TopicOpError::Partition(p) => partition(p),
    }
}

/// A human message for the responses that carry one: the error and its causes.
pub fn message(e: &(dyn std::error::Error + 'static)) -> String {
    crate::error_chain::display(e)
}

pub fn group(e: &GroupError) -> i16 {
    let code = match e {
        GroupError::InvalidGroupId => ResponseError::InvalidGroupId,
        GroupError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        GroupError::UnknownMemberId => ResponseError::UnknownMemberId,
        GroupError::IllegalGeneration => ResponseError::IllegalGeneration,
        GroupError::RebalanceInProgress => ResponseError::RebalanceInProgress,
        GroupError::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol,
        GroupError::InvalidSessionTimeout => ResponseError::InvalidSessionTimeout,
        GroupError::MemberIdRequired => ResponseError::MemberIdRequired,
        GroupError::FencedInstanceId => ResponseError::FencedInstanceId,
        GroupError::GroupIdNotFound => ResponseError::GroupIdNotFound,
        GroupError::NonEmptyGroup => ResponseError::NonEmptyGroup,
        GroupError::GroupSubscribedToTopic => ResponseError::GroupSubscribedToTopic,
        GroupError::OffsetMetadataTooLarge => ResponseError::OffsetMetadataTooLarge,
        GroupError::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition,
        GroupError::Storage(_) => ResponseError::UnknownServerError,
    };
    code.code()
}

/// The code of an optional group error (None is success).
pub fn group_opt(e: &Option<GroupError>) -> i16 {
    e.as_ref().map_or(NONE, group)
}
