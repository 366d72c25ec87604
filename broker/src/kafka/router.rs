//! From one request frame to one response frame: header, version check, body decode, the
//! API's handler, response encode. Anything the client got wrong at this level (unknown API,
//! unsupported version, a body that does not decode) closes the connection, as Kafka does —
//! except an unsupported ApiVersions version, which is answered so the client can retry
//! with one Strom supports (KIP-511).

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, AlterConfigsRequest, AlterPartitionReassignmentsRequest, ApiKey,
    ApiVersionsRequest, CreatePartitionsRequest, CreateTopicsRequest, DeleteGroupsRequest, DeleteRecordsRequest,
    DeleteTopicsRequest, DescribeClusterRequest, DescribeConfigsRequest, DescribeGroupsRequest,
    DescribeProducersRequest, DescribeQuorumRequest, DescribeTransactionsRequest, ElectLeadersRequest, EndTxnRequest,
    FetchRequest, FindCoordinatorRequest, HeartbeatRequest, IncrementalAlterConfigsRequest, InitProducerIdRequest,
    JoinGroupRequest, LeaveGroupRequest, ListGroupsRequest, ListOffsetsRequest, ListPartitionReassignmentsRequest,
    ListTransactionsRequest, MetadataRequest, OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest,
    ProduceRequest, RequestHeader, ResponseHeader, SyncGroupRequest, TxnOffsetCommitRequest, WriteTxnMarkersRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::metrics::Metrics;
use crate::node::Node;

use super::fetch_reply::{self, Part};
use super::handlers;
use super::response_errors::{self, ErrorCodes};
use super::versions::{self, SupportedApi};

/// What the connection does after a request.
pub enum Reply {
    /// Write this frame (size prefix included).
    Frame(BytesMut),
    /// Write these pieces in order (a Fetch response whose records come from segment files).
    Parts(Vec<Part>),
    /// Nothing to send (Produce with acks=0).
    Nothing,
    /// Close the connection; the reason is logged.
    Close(String),
    /// The request is handled (a produce appended); its reply comes when this resolves (the
    /// in-sync replicas have the records). Replies behind it wait their turn.
    Deferred(std::pin::Pin<Box<dyn std::future::Future<Output = Reply> + Send>>),
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reply::Frame(b) => write!(f, "Frame({} bytes)", b.len()),
            Reply::Parts(p) => write!(f, "Parts({} bytes)", p.iter().map(Part::len).sum::<usize>()),
            Reply::Nothing => write!(f, "Nothing"),
            Reply::Close(r) => write!(f, "Close({r})"),
            Reply::Deferred(_) => write!(f, "Deferred"),
        }
    }
}

/// Who sent a request: the header's client id and the connection's address (DescribeGroups
/// reports both for each member).
#[derive(Debug, Clone, Default)]
pub struct ClientInfo {
    pub client_id: String,
    pub host: String,
}

/// The API a frame names, for metrics, once its header is known.
pub fn api_of(frame: &[u8]) -> Option<&'static SupportedApi> {
    let key = i16::from_be_bytes([*frame.first()?, *frame.get(1)?]);
    ApiKey::try_from(key).ok().and_then(versions::lookup)
}

/// A request frame whose API, version and header are known and accepted; the body is not
/// decoded yet.
#[derive(Debug)]
pub struct RequestFrame {
    pub key: ApiKey,
    pub api: &'static SupportedApi,
    pub version: i16,
    pub header: RequestHeader,
    pub body: Bytes,
}

/// Why a frame was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameRefused {
    /// The connection is closed with this reason (Kafka's broker does the same).
    Close(String),
    /// An ApiVersions request of a version we do not know: answered with
    /// UNSUPPORTED_VERSION and our versions, at version 0 (KIP-511).
    ApiVersionsUnsupported { correlation_id: i32 },
}

/// Splits one request frame (without its size prefix) into its API, version, header and body,
/// refusing unknown APIs, unsupported versions and malformed headers. Pure: what the fuzz
/// target `kafka_request` drives with arbitrary bytes.
pub fn split_request(frame: Bytes) -> Result<RequestFrame, FrameRefused> {
    if frame.len() < 8 {
        return Err(FrameRefused::Close(format!("request of {} bytes is shorter than a request header", frame.len())));
    }
    let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let Ok(key) = ApiKey::try_from(raw_key) else {
        return Err(FrameRefused::Close(format!("unknown API key {raw_key}")));
    };
    let Some(api) = versions::lookup(key) else {
        return Err(FrameRefused::Close(format!("API {key:?} (key {raw_key}) is not supported")));
    };
    if version < api.min || version > api.max {
        if key == ApiKey::ApiVersions {
            return Err(FrameRefused::ApiVersionsUnsupported { correlation_id });
        }
        return Err(FrameRefused::Close(format!(
            "{} version {version} is not supported (supported {}..={})",
            api.name, api.min, api.max
        )));
    }
    let mut body = frame;
    let header = RequestHeader::decode(&mut body, key.request_header_version(version))
        .map_err(|e| FrameRefused::Close(format!("malformed {} request header: {e}", api.name)))?;
    Ok(RequestFrame { key, api, version, header, body })
}

/// Handles one request frame (without its size prefix).
pub async fn handle_frame(node: &Node, peer: &str, frame: Bytes) -> Reply {
    let RequestFrame { key, version, header, body, .. } = match split_request(frame) {
        Ok(request) => request,
        Err(FrameRefused::Close(reason)) => return Reply::Close(reason),
        Err(FrameRefused::ApiVersionsUnsupported { correlation_id }) => {
            return encode(ApiKey::ApiVersions, 0, correlation_id, &handlers::api_versions::unsupported_version())
        }
    };
    let client = ClientInfo {
        client_id: header.client_id.as_ref().map(|c| c.to_string()).unwrap_or_default(),
        host: format!("/{peer}"),
    };
    dispatch(node, &client, key, version, &header, body).await
}

fn decode<T: Decodable>(name: &str, body: &mut Bytes, version: i16) -> Result<T, Reply> {
    T::decode(body, version).map_err(|e| Reply::Close(format!("malformed {name} v{version} request: {e}")))
}

async fn dispatch(
    node: &Node,
    client: &ClientInfo,
    key: ApiKey,
    version: i16,
    header: &RequestHeader,
    mut body: Bytes,
) -> Reply {
    let c = header.correlation_id;
    macro_rules! req {
        ($ty:ty) => {
            match decode::<$ty>(stringify!($ty), &mut body, version) {
                Ok(r) => r,
                Err(reply) => return reply,
            }
        };
    }
    match key {
        ApiKey::ApiVersions => {
            let req = req!(ApiVersionsRequest);
            respond(&node.metrics, key, version, c, &handlers::api_versions::handle(&req, version))
        }
        ApiKey::Metadata => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::metadata::handle(node, req!(MetadataRequest), version).await,
        ),
        ApiKey::Produce => match handlers::produce::handle(node, req!(ProduceRequest), version) {
            handlers::produce::Outcome::Respond(resp) => respond(&node.metrics, key, version, c, &resp),
            handlers::produce::Outcome::Wait(later) => {
                let metrics = node.metrics.clone();
                Reply::Deferred(Box::pin(async move { respond(&metrics, key, version, c, &later.await) }))
            }
            handlers::produce::Outcome::NoResponse => Reply::Nothing,
            handlers::produce::Outcome::Close(reason) => Reply::Close(reason),
        },
        ApiKey::Fetch => {
            let reply = handlers::fetch::handle(node, req!(FetchRequest), version).await;
            count_errors(&node.metrics, key, &reply.response);
            fetch_reply::encode(version, c, reply)
        }
        ApiKey::ListOffsets => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::list_offsets::handle(node, req!(ListOffsetsRequest), version),
        ),
        ApiKey::CreateTopics => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::create_topics::handle(node, req!(CreateTopicsRequest), version).await,
        ),
        ApiKey::DeleteTopics => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::delete_topics::handle(node, req!(DeleteTopicsRequest), version).await,
        ),
        ApiKey::CreatePartitions => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::create_partitions::handle(node, req!(CreatePartitionsRequest)).await,
        ),
        ApiKey::DescribeConfigs => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::describe_configs::handle(node, req!(DescribeConfigsRequest), version),
        ),
        ApiKey::AlterConfigs => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::alter_configs::handle(node, req!(AlterConfigsRequest)).await,
        ),
        ApiKey::IncrementalAlterConfigs => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::incremental_alter_configs::handle(node, req!(IncrementalAlterConfigsRequest)).await,
        ),
        ApiKey::DescribeQuorum => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::describe_quorum::handle(node, req!(DescribeQuorumRequest), version).await,
        ),
        ApiKey::ElectLeaders => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::elect_leaders::handle(node, req!(ElectLeadersRequest), version).await,
        ),
        ApiKey::AlterPartitionReassignments => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::alter_partition_reassignments::handle(node, req!(AlterPartitionReassignmentsRequest)).await,
        ),
        ApiKey::ListPartitionReassignments => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::list_partition_reassignments::handle(node, req!(ListPartitionReassignmentsRequest)),
        ),
        ApiKey::DescribeCluster => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::describe_cluster::handle(node, req!(DescribeClusterRequest)),
        ),
        ApiKey::DeleteRecords => {
            respond(&node.metrics, key, version, c, &handlers::delete_records::handle(node, req!(DeleteRecordsRequest)))
        }
        ApiKey::InitProducerId => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::init_producer_id::handle(node, req!(InitProducerIdRequest), version).await,
        ),
        ApiKey::AddPartitionsToTxn => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::add_partitions_to_txn::handle(node, req!(AddPartitionsToTxnRequest), version).await,
        ),
        ApiKey::AddOffsetsToTxn => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::add_offsets_to_txn::handle(node, req!(AddOffsetsToTxnRequest), version).await,
        ),
        ApiKey::TxnOffsetCommit => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::txn_offset_commit::handle(node, req!(TxnOffsetCommitRequest), version).await,
        ),
        ApiKey::EndTxn => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::end_txn::handle(node, req!(EndTxnRequest), version).await,
        ),
        ApiKey::WriteTxnMarkers => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::write_txn_markers::handle(node, req!(WriteTxnMarkersRequest)).await,
        ),
        ApiKey::DescribeTransactions => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::describe_transactions::handle(node, req!(DescribeTransactionsRequest)),
        ),
        ApiKey::ListTransactions => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::list_transactions::handle(node, req!(ListTransactionsRequest), version),
        ),
        ApiKey::DescribeProducers => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::describe_producers::handle(node, req!(DescribeProducersRequest)),
        ),
        ApiKey::FindCoordinator => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::find_coordinator::handle(node, req!(FindCoordinatorRequest), version).await,
        ),
        ApiKey::JoinGroup => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::join_group::handle(node, client, req!(JoinGroupRequest), version).await,
        ),
        ApiKey::SyncGroup => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::sync_group::handle(node, req!(SyncGroupRequest), version).await,
        ),
        ApiKey::Heartbeat => {
            respond(&node.metrics, key, version, c, &handlers::heartbeat::handle(node, req!(HeartbeatRequest)))
        }
        ApiKey::LeaveGroup => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::leave_group::handle(node, req!(LeaveGroupRequest), version),
        ),
        ApiKey::OffsetCommit => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::offset_commit::handle(node, req!(OffsetCommitRequest), version).await,
        ),
        ApiKey::OffsetFetch => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::offset_fetch::handle(node, req!(OffsetFetchRequest), version).await,
        ),
        ApiKey::DescribeGroups => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::describe_groups::handle(node, req!(DescribeGroupsRequest), version),
        ),
        ApiKey::ListGroups => respond(
            &node.metrics,
            key,
            version,
            c,
            &handlers::list_groups::handle(node, req!(ListGroupsRequest), version),
        ),
        ApiKey::DeleteGroups => {
            respond(&node.metrics, key, version, c, &handlers::delete_groups::handle(node, req!(DeleteGroupsRequest)))
        }
        ApiKey::OffsetDelete => {
            respond(&node.metrics, key, version, c, &handlers::offset_delete::handle(node, req!(OffsetDeleteRequest)))
        }
        other => Reply::Close(format!("API {other:?} is listed as supported but has no route")),
    }
}

/// Counts the error codes in a response, then encodes it.
fn respond<R: Encodable + ErrorCodes>(metrics: &Metrics, key: ApiKey, version: i16, c: i32, body: &R) -> Reply {
    count_errors(metrics, key, body);
    encode(key, version, c, body)
}

fn count_errors(metrics: &Metrics, key: ApiKey, body: &dyn ErrorCodes) {
    let api = versions::lookup(key).map_or("unknown", |a| a.name);
    body.each_code(&mut |code| {
        if code != 0 {
            metrics.observe_response_error(api, response_errors::error_name(code));
        }
    });
}

/// Encodes a response frame: size prefix, response header (the version the API prescribes),
/// body.
pub fn encode<R: Encodable>(key: ApiKey, version: i16, correlation_id: i32, body: &R) -> Reply {
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let header_version = key.response_header_version(version);
    let result = (|| -> anyhow::Result<BytesMut> {
        let size = header.compute_size(header_version)? + body.compute_size(version)?;
        let mut buf = BytesMut::with_capacity(4 + size);
        buf.put_i32(i32::try_from(size)?);
        header.encode(&mut buf, header_version)?;
        body.encode(&mut buf, version)?;
        Ok(buf)
    })();
    match result {
        Ok(buf) => Reply::Frame(buf),
        Err(e) => Reply::Close(format!("encoding {key:?} v{version} response failed: {e}")),
    }
}
