//! What the internal port decodes from a peer: the gRPC messages of the raft, controller and
//! replication services (prost), and the raft RPCs' JSON bodies (openraft's types). The first
//! byte picks the message.
#![no_main]

use broker::metadata::network::SnapshotHeader;
use broker::metadata::types::{AppendEntriesRequest, VoteRequest};
use libfuzzer_sys::fuzz_target;
use prost::Message;
use strom_proto::{controller, raft, replication};

fuzz_target!(|data: &[u8]| {
    let Some((&which, body)) = data.split_first() else { return };
    match which % 12 {
        0 => drop(raft::RaftRequest::decode(body)),
        1 => drop(raft::SnapshotChunk::decode(body)),
        2 => drop(serde_json::from_slice::<AppendEntriesRequest>(body)),
        3 => drop(serde_json::from_slice::<VoteRequest>(body)),
        4 => drop(serde_json::from_slice::<SnapshotHeader>(body)),
        5 => drop(replication::FetchRequest::decode(body)),
        6 => drop(replication::WriteMarkersRequest::decode(body)),
        7 => drop(controller::RegisterBrokerRequest::decode(body)),
        8 => drop(controller::BrokerHeartbeatRequest::decode(body)),
        9 => drop(controller::AlterPartitionRequest::decode(body)),
        10 => drop(controller::CreateTopicRequest::decode(body)),
        _ => drop(controller::ReassignRequest::decode(body)),
    }
});
