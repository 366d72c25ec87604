//! Consumer groups as the tests drive and observe them.
//!
//! - `member` (re-exported here): [`GroupMember`], a librdkafka consumer that `subscribe`s and
//!   lets the group coordinator hand out partitions; it commits by hand, and only what it has
//!   processed, so a test knows which offsets the group committed and which records came after.
//!   [`GroupMemberOptions`] (assignor, session, commit policy) and [`MemberStatus`] (what it has
//!   seen and done; also the JSON line the `strom-group-member` binary prints).
//! - `observe` (re-exported here): a group from the outside — [`wait_for_assignment`] until a
//!   rebalance has settled, DescribeGroups ([`describe_group`]), ListGroups ([`list_groups`]),
//!   OffsetFetch ([`committed_offsets`]) and the consumer-protocol assignment decoder.
//! - [`raw`]: a hand-driven group member over raw frames (JoinGroup, SyncGroup, Heartbeat,
//!   LeaveGroup, OffsetCommit, OffsetDelete) for requests no well-behaved client sends.
//! - [`fixtures`]: what the consumer-group test files share — a broker with no initial
//!   rebalance delay, members with the tests' session settings, and polls that assert.

mod member;
mod observe;

pub mod fixtures;
pub mod raw;

pub use member::{group_consumer_config, Assignor, CommitPolicy, GroupMember, GroupMemberOptions, MemberStatus};
pub use observe::{
    committed_offsets, decode_consumer_assignment, describe_group, is_exclusive_cover, list_groups,
    wait_for_assignment, GroupDescription, GroupMemberDescription, ASSIGNMENT_SETTLE,
};
