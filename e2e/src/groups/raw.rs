//! A hand-driven group member over raw frames ([`crate::wire`] + kafka-protocol), for the
//! requests no well-behaved client sends: a JoinGroup with another protocol type or a session
//! timeout out of bounds, a SyncGroup or Heartbeat of a stale generation, an OffsetCommit from
//! outside the generation, an OffsetDelete while the group is subscribed.
//!
//! [`RawClient`] answers with the response (or its error code) rather than a `Result`, and
//! panics when the connection or the framing fails: it is a test fixture, and a test wants
//! the error code the broker chose, not a transport error to thread through.

use std::collections::HashMap;
use std::io::Write;
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedPartitions;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, ConsumerProtocolAssignment, ConsumerProtocolSubscription, FindCoordinatorRequest,
    FindCoordinatorResponse, GroupId, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, LeaveGroupResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest,
    OffsetDeleteResponse, SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::broker::BrokerProcess;
use crate::wire;

// Kafka error codes the group APIs answer with.
pub const NONE: i16 = 0;
pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = ResponseError::CoordinatorLoadInProgress.code();
pub const COORDINATOR_NOT_AVAILABLE: i16 = ResponseError::CoordinatorNotAvailable.code();
pub const NOT_COORDINATOR: i16 = ResponseError::NotCoordinator.code();
pub const ILLEGAL_GENERATION: i16 = ResponseError::IllegalGeneration.code();
pub const INCONSISTENT_GROUP_PROTOCOL: i16 = ResponseError::InconsistentGroupProtocol.code();
pub const UNKNOWN_MEMBER_ID: i16 = ResponseError::UnknownMemberId.code();
pub const INVALID_SESSION_TIMEOUT: i16 = ResponseError::InvalidSessionTimeout.code();
pub const MEMBER_ID_REQUIRED: i16 = ResponseError::MemberIdRequired.code();
pub const GROUP_SUBSCRIBED_TO_TOPIC: i16 = ResponseError::GroupSubscribedToTopic.code();
/// Retriable while `__consumer_offsets` is created or its partition loaded.
pub const COORDINATOR_WAIT: [i16; 3] = [COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR];

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn group_id(group: &str) -> GroupId {
    GroupId(str_bytes(group))
}

/// i16 version, then the body: how the consumer protocol embeds its messages.
fn embedded<M: Encodable>(message: &M, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    message.encode(&mut buf, version).expect("encode consumer protocol message");
    buf.freeze()
}

/// A consumer-protocol subscription (v0) to `topic`: the metadata of a JoinGroup protocol.
pub fn subscription(topic: &str) -> Bytes {
    embedded(&ConsumerProtocolSubscription::default().with_topics(vec![str_bytes(topic)]), 0)
}

/// A consumer-protocol assignment (v0) of `topic`'s `partitions`: one entry of a SyncGroup plan.
pub fn assignment_bytes(topic: &str, partitions: &[i32]) -> Bytes {
    let tp = AssignedPartitions::default().with_topic(TopicName(str_bytes(topic))).with_partitions(partitions.to_vec());
    embedded(&ConsumerProtocolAssignment::default().with_assigned_partitions(vec![tp]), 0)
}

/// One raw connection to the coordinator (the only broker), using for each API the highest
/// version both the broker and this client know how to fill.
pub struct RawClient {
    stream: TcpStream,
    correlation_id: i32,
    versions: HashMap<i16, (i16, i16)>,
}

/// What a JoinGroup asks for.
#[derive(Debug, Clone)]
pub struct Join {
    pub group: String,
    /// Empty for a new member.
    pub member_id: String,
    pub session_timeout_ms: i32,
    /// "consumer" for Kafka consumers.
    pub protocol_type: String,
    /// (assignor name, subscription metadata), in order of preference.
    pub protocols: Vec<(String, Bytes)>,
}

impl RawClient {
    /// Connects to `broker` and learns the versions it offers (ApiVersions).
    pub fn connect(broker: &BrokerProcess) -> Self {
        // JoinGroup answers only when the rebalance completes.
        let stream = wire::connect(broker.kafka_addr(), Duration::from_secs(30)).expect("connect");
        let mut raw = Self { stream, correlation_id: 0, versions: HashMap::new() };
        let api: ApiVersionsResponse =
            raw.call(ApiKey::ApiVersions, 3, &wire::api_versions_request()).expect("ApiVersions");
        assert_eq!(api.error_code, NONE, "ApiVersions");
        raw.versions = api.api_keys.iter().map(|k| (k.api_key, (k.min_version, k.max_version))).collect();
        raw
    }

    /// The highest version in `lo..=hi` that the broker advertises for `key`.
    fn version(&self, key: ApiKey, lo: i16, hi: i16) -> i16 {
        let (min, max) =
            *self.versions.get(&(key as i16)).unwrap_or_else(|| panic!("the broker does not advertise {key:?}"));
        let v = max.min(hi);
        assert!(v >= lo.max(min), "{key:?}: the broker offers v{min}..=v{max}, this test fills v{lo}..=v{hi}");
        v
    }

    fn call<Req: Encodable, Resp: Decodable>(&mut self, key: ApiKey, version: i16, request: &Req) -> Result<Resp> {
        self.correlation_id += 1;
        let frame = wire::encode_request(key, version, self.correlation_id, request).context("encode (a test bug)")?;
        self.stream.write_all(&frame).context("send")?;
        let answer =
            wire::read_frame(&mut self.stream)?.ok_or_else(|| anyhow!("connection closed instead of {key:?}"))?;
        let (correlation_id, response) = wire::decode_response::<Resp>(key, version, answer)?;
        if correlation_id != self.correlation_id {
            bail!("{key:?}: correlation id {correlation_id}, sent {}", self.correlation_id);
        }
        Ok(response)
    }

    /// FindCoordinator until it names this broker (it may first answer COORDINATOR_NOT_AVAILABLE
    /// while `__consumer_offsets` is being created).
    pub fn find_coordinator(&mut self, group: &str) {
        let v = self.version(ApiKey::FindCoordinator, 1, 4);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let request = if v >= 4 {
                FindCoordinatorRequest::default().with_coordinator_keys(vec![str_bytes(group)])
            } else {
                FindCoordinatorRequest::default().with_key(str_bytes(group))
            };
            let r: FindCoordinatorResponse = self.call(ApiKey::FindCoordinator, v, &request).expect("FindCoordinator");
            let (error, port) = match r.coordinators.first() {
                Some(c) if v >= 4 => (c.error_code, c.port),
                _ => (r.error_code, r.port),
            };
            if error == NONE {
                let local = self.stream.peer_addr().expect("peer address").port();
                assert_eq!(port, i32::from(local), "FindCoordinator {group}: the only broker is the coordinator");
                return;
            }
            assert!(COORDINATOR_WAIT.contains(&error), "FindCoordinator {group}: error {error}");
            assert!(Instant::now() < deadline, "FindCoordinator {group}: still {error} after 30 s");
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// One JoinGroup, repeated while the coordinator is still loading; returns the answer.
    pub fn join(&mut self, join: &Join) -> JoinGroupResponse {
        let v = self.version(ApiKey::JoinGroup, 1, 9);
        let protocols = join
            .protocols
            .iter()
            .map(|(name, metadata)| {
                JoinGroupRequestProtocol::default().with_name(str_bytes(name)).with_metadata(metadata.clone())
            })
            .collect();
        let request = JoinGroupRequest::default()
            .with_group_id(group_id(&join.group))
            .with_session_timeout_ms(join.session_timeout_ms)
            .with_rebalance_timeout_ms(10_000)
            .with_member_id(str_bytes(&join.member_id))
            .with_protocol_type(str_bytes(&join.protocol_type))
            .with_protocols(protocols);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r: JoinGroupResponse = self.call(ApiKey::JoinGroup, v, &request).expect("JoinGroup");
            if !COORDINATOR_WAIT.contains(&r.error_code) || Instant::now() > deadline {
                return r;
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// A join as a new member: with an empty member id, then (JoinGroup v4+ answers
    /// MEMBER_ID_REQUIRED with the id to use) again with the id the coordinator chose.
    pub fn join_new(&mut self, join: Join) -> JoinGroupResponse {
        let first = self.join(&join);
        if first.error_code != MEMBER_ID_REQUIRED {
            return first;
        }
        let member_id = first.member_id.to_string();
        assert!(!member_id.is_empty(), "MEMBER_ID_REQUIRED without a member id");
        self.join(&Join { member_id, ..join })
    }

    /// SyncGroup; the leader passes `plan` (member id, assignment), the others an empty one.
    pub fn sync(&mut self, group: &str, generation: i32, member_id: &str, plan: &[(&str, Bytes)]) -> SyncGroupResponse {
        let v = self.version(ApiKey::SyncGroup, 0, 5);
        let assignments = plan
            .iter()
            .map(|(member, bytes)| {
                SyncGroupRequestAssignment::default().with_member_id(str_bytes(member)).with_assignment(bytes.clone())
            })
            .collect();
        let mut request = SyncGroupRequest::default()
            .with_group_id(group_id(group))
            .with_generation_id(generation)
            .with_member_id(str_bytes(member_id))
            .with_assignments(assignments);
        if v >= 5 {
            request =
                request.with_protocol_type(Some(str_bytes("consumer"))).with_protocol_name(Some(str_bytes("range")));
        }
        self.call(ApiKey::SyncGroup, v, &request).expect("SyncGroup")
    }

    /// Heartbeat; returns the error code.
    pub fn heartbeat(&mut self, group: &str, generation: i32, member_id: &str) -> i16 {
        let v = self.version(ApiKey::Heartbeat, 0, 4);
        let request = HeartbeatRequest::default()
            .with_group_id(group_id(group))
            .with_generation_id(generation)
            .with_member_id(str_bytes(member_id));
        let r: HeartbeatResponse = self.call(ApiKey::Heartbeat, v, &request).expect("Heartbeat");
        r.error_code
    }

    /// LeaveGroup; returns the top-level error and, from v3, the member's own.
    pub fn leave(&mut self, group: &str, member_id: &str) -> (i16, Option<i16>) {
        let v = self.version(ApiKey::LeaveGroup, 0, 5);
        let request = if v >= 3 {
            LeaveGroupRequest::default()
                .with_group_id(group_id(group))
                .with_members(vec![MemberIdentity::default().with_member_id(str_bytes(member_id))])
        } else {
            LeaveGroupRequest::default().with_group_id(group_id(group)).with_member_id(str_bytes(member_id))
        };
        let r: LeaveGroupResponse = self.call(ApiKey::LeaveGroup, v, &request).expect("LeaveGroup");
        (r.error_code, r.members.first().map(|m| m.error_code))
    }

    /// OffsetCommit of one offset; returns the partition's error code.
    pub fn commit(
        &mut self,
        group: &str,
        generation: i32,
        member_id: &str,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> i16 {
        let v = self.version(ApiKey::OffsetCommit, 2, 8);
        let request = OffsetCommitRequest::default()
            .with_group_id(group_id(group))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(str_bytes(member_id))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(str_bytes(topic)))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(partition)
                    .with_committed_offset(offset)])]);
        let r: OffsetCommitResponse = self.call(ApiKey::OffsetCommit, v, &request).expect("OffsetCommit");
        let codes: Vec<i16> = r.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect();
        assert_eq!(codes.len(), 1, "OffsetCommit of one partition answered {r:?}");
        codes[0]
    }

    /// OffsetDelete; returns the top-level error and (partition, error) for each partition.
    pub fn offset_delete(&mut self, group: &str, topic: &str, partitions: &[i32]) -> (i16, Vec<(i32, i16)>) {
        let v = self.version(ApiKey::OffsetDelete, 0, 0);
        let request = OffsetDeleteRequest::default().with_group_id(group_id(group)).with_topics(vec![
            OffsetDeleteRequestTopic::default().with_name(TopicName(str_bytes(topic))).with_partitions(
                partitions.iter().map(|&p| OffsetDeleteRequestPartition::default().with_partition_index(p)).collect(),
            ),
        ]);
        let r: OffsetDeleteResponse = self.call(ApiKey::OffsetDelete, v, &request).expect("OffsetDelete");
        let parts =
            r.topics.iter().flat_map(|t| t.partitions.iter().map(|p| (p.partition_index, p.error_code))).collect();
        (r.error_code, parts)
    }
}
