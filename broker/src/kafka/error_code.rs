//! The one place where Strom's errors become Kafka error codes (and messages for the
//! responses that carry one).

use kafka_protocol::error::ResponseError;

use crate::group::GroupError;
use crate::log::LogError;
use crate::metadata::client::ClientError;
use crate::metadata::controller::ErrorKind;
use crate::metadata::CatalogError;
use crate::node::{ReplicaLookup, TopicOpError};
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
        PartitionError::MarkerFenced { .. } => ResponseError::TransactionCoordinatorFenced,
        PartitionError::NotEnoughReplicas { .. } => ResponseError::NotEnoughReplicas,
        PartitionError::NotEnoughReplicasAfterAppend { .. } => ResponseError::NotEnoughReplicasAfterAppend,
        PartitionError::ReplicationTimeout { .. } => ResponseError::RequestTimedOut,
        PartitionError::NotLeader { .. } | PartitionError::NotFollowing { .. } => ResponseError::NotLeaderOrFollower,
        PartitionError::Log { source: LogError::OffsetOutOfRange { .. }, .. } => ResponseError::OffsetOutOfRange,
        PartitionError::Log { .. } | PartitionError::Io { .. } => ResponseError::KafkaStorageError,
    };
    code.code()
}

pub fn catalog(e: &CatalogError) -> i16 {
    let code = match e {
        CatalogError::UnknownTopic(_) => ResponseError::UnknownTopicOrPartition,
        CatalogError::InvalidTopicName { .. } => ResponseError::InvalidTopicException,
    };
    code.code()
}

/// A refused or failed controller call (topic changes, producer ids).
pub fn controller(e: &ClientError) -> i16 {
    match e {
        ClientError::Timeout { .. } => ResponseError::RequestTimedOut.code(),
        ClientError::Refused { code, .. } => controller_code(*code),
    }
}

/// The Kafka code of a controller error code.
pub fn controller_code(code: ErrorKind) -> i16 {
    let code = match code {
        ErrorKind::TopicAlreadyExists => ResponseError::TopicAlreadyExists,
        ErrorKind::UnknownTopic => ResponseError::UnknownTopicOrPartition,
        ErrorKind::InvalidTopicName => ResponseError::InvalidTopicException,
        ErrorKind::InvalidPartitions => ResponseError::InvalidPartitions,
        ErrorKind::InvalidReplicationFactor => ResponseError::InvalidReplicationFactor,
        ErrorKind::InvalidReplicaAssignment => ResponseError::InvalidReplicaAssignment,
        ErrorKind::InvalidConfig => ResponseError::InvalidConfig,
        ErrorKind::NotController => ResponseError::NotController,
        ErrorKind::NotCommitted => ResponseError::RequestTimedOut,
        ErrorKind::FencedLeaderEpoch => ResponseError::FencedLeaderEpoch,
        ErrorKind::NoReassignmentInProgress => ResponseError::NoReassignmentInProgress,
        ErrorKind::ElectionNotNeeded => ResponseError::ElectionNotNeeded,
        ErrorKind::IneligibleReplica => ResponseError::EligibleLeadersNotAvailable,
        ErrorKind::InvalidUpdateVersion
        | ErrorKind::None
        | ErrorKind::DuplicateBrokerRegistration
        | ErrorKind::StaleBrokerEpoch
        | ErrorKind::BrokerNotRegistered
        | ErrorKind::InvalidRequest => ResponseError::InvalidRequest,
    };
    code.code()
}

/// A partition's ElectLeaders outcome: a preferred election that found its preferred replica
/// ineligible is PREFERRED_LEADER_NOT_AVAILABLE, as Kafka answers.
pub fn election(code: ErrorKind, unclean: bool) -> i16 {
    match (code, unclean) {
        (ErrorKind::IneligibleReplica, false) => ResponseError::PreferredLeaderNotAvailable.code(),
        (other, _) => controller_code(other),
    }
}

pub fn topic_op(e: &TopicOpError) -> i16 {
    match e {
        TopicOpError::Controller(c) => controller(c),
    }
}

/// A partition this broker cannot serve.
pub fn lookup(e: ReplicaLookup) -> i16 {
    match e {
        ReplicaLookup::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition.code(),
        ReplicaLookup::NotLeader => ResponseError::NotLeaderOrFollower.code(),
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
        GroupError::NotCoordinator => ResponseError::NotCoordinator,
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
        GroupError::ReplicationTimeout => ResponseError::RequestTimedOut,
    };
    code.code()
}

/// The code of an optional group error (None is success).
pub fn group_opt(e: &Option<GroupError>) -> i16 {
    e.as_ref().map_or(NONE, group)
}

/// A transaction coordinator's refusal. `fenced_code` says whether the request's version
/// knows PRODUCER_FENCED (KIP-588); older clients get INVALID_PRODUCER_EPOCH instead.
pub fn txn(e: &crate::txn::coordinator::CoordinatorError, fenced_code: bool) -> i16 {
    use crate::txn::coordinator::CoordinatorError;
    use crate::txn::state::TxnError;
    let code = match e {
        CoordinatorError::Txn(TxnError::InvalidProducerIdMapping) => ResponseError::InvalidProducerIdMapping,
        CoordinatorError::Txn(TxnError::ProducerFenced) if fenced_code => ResponseError::ProducerFenced,
        CoordinatorError::Txn(TxnError::ProducerFenced) => ResponseError::InvalidProducerEpoch,
        CoordinatorError::Txn(TxnError::ConcurrentTransactions) => ResponseError::ConcurrentTransactions,
        CoordinatorError::Txn(TxnError::InvalidTxnState) => ResponseError::InvalidTxnState,
        CoordinatorError::Txn(TxnError::InvalidTransactionTimeout { .. }) => ResponseError::InvalidTransactionTimeout,
        CoordinatorError::NotCoordinator(_) => ResponseError::NotCoordinator,
        CoordinatorError::NotAvailable(_) | CoordinatorError::NeedsProducerId => ResponseError::CoordinatorNotAvailable,
        CoordinatorError::UnknownTransactionalId(_) => ResponseError::TransactionalIdNotFound,
    };
    code.code()
}
