//! Why a group operation was refused; mapped to Kafka error codes at the protocol edge.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    #[error("invalid group id")]
    InvalidGroupId,
    #[error("the coordinator is not available yet")]
    CoordinatorNotAvailable,
    #[error("this broker is not the group's coordinator")]
    NotCoordinator,
    #[error("unknown member id")]
    UnknownMemberId,
    #[error("illegal generation")]
    IllegalGeneration,
    #[error("a rebalance is in progress")]
    RebalanceInProgress,
    #[error("the group's protocol type or protocols do not match")]
    InconsistentGroupProtocol,
    #[error("session timeout outside group.min.session.timeout.ms..group.max.session.timeout.ms")]
    InvalidSessionTimeout,
    #[error("a member id is required: rejoin with the one given")]
    MemberIdRequired,
    #[error("another member with the same group.instance.id replaced this one")]
    FencedInstanceId,
    #[error("group does not exist")]
    GroupIdNotFound,
    #[error("the group still has members")]
    NonEmptyGroup,
    #[error("the group is subscribed to the topic")]
    GroupSubscribedToTopic,
    #[error("offset metadata too large")]
    OffsetMetadataTooLarge,
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    #[error("writing to __consumer_offsets failed: {0}")]
    Storage(String),
    #[error("the offsets partition's in-sync replicas did not confirm the write in time")]
    ReplicationTimeout,
}
