//! The server side of `strom.raft.v1`: raft RPCs from other brokers, checked before openraft
//! sees them.
//!
//! Refused, with a warning naming the peer: a sender that is not in `--voters` (only voters
//! campaign, and only the leader — a voter — replicates), a body whose vote names another
//! node than the sender, a cluster id other than ours. An undecodable body is
//! `InvalidArgument`.

use std::net::SocketAddr;

use serde::de::DeserializeOwned;
use serde::Serialize;
use strom_proto::raft::raft_server::Raft as RaftRpc;
use strom_proto::raft::{RaftReply, RaftRequest, SnapshotChunk};
use tonic::{Request, Response, Status};

use super::network::SnapshotHeader;
use super::quorum::VoterSet;
use super::types::{AppendEntriesRequest, InstallSnapshotRequest, Raft, VoteRequest};
use super::ClusterIdSource;

/// Serves raft RPCs for this broker's raft.
pub struct RaftService {
    pub raft: Raft,
    pub voters: VoterSet,
    pub cluster_id: ClusterIdSource,
}

impl std::fmt::Debug for RaftService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftService").field("voters", &self.voters).finish_non_exhaustive()
    }
}

fn reply<T: Serialize>(value: &T) -> Result<Response<RaftReply>, Status> {
    let body = serde_json::to_vec(value).map_err(|e| Status::internal(format!("encoding the reply: {e}")))?;
    Ok(Response::new(RaftReply { body: body.into() }))
}

fn decode<T: DeserializeOwned>(what: &str, peer: Option<SocketAddr>, body: &[u8]) -> Result<T, Status> {
    serde_json::from_slice(body).map_err(|e| {
        tracing::warn!(peer = ?peer, rpc = what, error = %e, "undecodable raft request");
        Status::invalid_argument(format!("{what}: undecodable body: {e}"))
    })
}

impl RaftService {
    /// The checks every raft RPC passes: a known voter, our cluster.
    fn admit(&self, what: &str, peer: Option<SocketAddr>, from: u64, cluster_id: &str) -> Result<(), Status> {
        let sender = i32::try_from(from).ok().filter(|id| self.voters.contains(*id));
        if sender.is_none() {
            tracing::warn!(peer = ?peer, rpc = what, from_node = from, voters = %self.voters.describe(), "raft request from a node that is not a voter refused");
            return Err(Status::permission_denied(format!(
                "node {from} is not a voter (voters: {})",
                self.voters.describe()
            )));
        }
        let ours = self.cluster_id.get();
        if !ours.is_empty() && !cluster_id.is_empty() && ours != cluster_id {
            tracing::warn!(peer = ?peer, rpc = what, from_node = from, theirs = cluster_id, ours = %ours, "raft request from another cluster refused");
            return Err(Status::permission_denied(format!(
                "node {from} belongs to cluster {cluster_id}, this broker to cluster {ours}"
            )));
        }
        Ok(())
    }

    fn same_sender(what: &str, peer: Option<SocketAddr>, from: u64, claimed: u64) -> Result<(), Status> {
        if claimed != from {
            tracing::warn!(peer = ?peer, rpc = what, from_node = from, claimed, "raft request whose vote names another node refused");
            return Err(Status::permission_denied(format!(
                "{what} from node {from} carries the vote of node {claimed}"
            )));
        }
        Ok(())
    }
}

#[tonic::async_trait]
impl RaftRpc for RaftService {
    async fn append_entries(&self, request: Request<RaftRequest>) -> Result<Response<RaftReply>, Status> {
        let peer = request.remote_addr();
        let r = request.into_inner();
        self.admit("AppendEntries", peer, r.from_node, &r.cluster_id)?;
        let rpc: AppendEntriesRequest = decode("AppendEntries", peer, &r.body)?;
        Self::same_sender("AppendEntries", peer, r.from_node, rpc.vote.leader_id().voted_for().unwrap_or(u64::MAX))?;
        reply(&self.raft.append_entries(rpc).await)
    }

    async fn vote(&self, request: Request<RaftRequest>) -> Result<Response<RaftReply>, Status> {
        let peer = request.remote_addr();
        let r = request.into_inner();
        self.admit("Vote", peer, r.from_node, &r.cluster_id)?;
        let rpc: VoteRequest = decode("Vote", peer, &r.body)?;
        Self::same_sender("Vote", peer, r.from_node, rpc.vote.leader_id().voted_for().unwrap_or(u64::MAX))?;
        reply(&self.raft.vote(rpc).await)
    }

    async fn install_snapshot(&self, request: Request<SnapshotChunk>) -> Result<Response<RaftReply>, Status> {
        let peer = request.remote_addr();
        let r = request.into_inner();
        self.admit("InstallSnapshot", peer, r.from_node, &r.cluster_id)?;
        let header: SnapshotHeader = decode("InstallSnapshot", peer, &r.header)?;
        Self::same_sender(
            "InstallSnapshot",
            peer,
            r.from_node,
            header.vote.leader_id().voted_for().unwrap_or(u64::MAX),
        )?;
        let rpc = InstallSnapshotRequest {
            vote: header.vote,
            meta: header.meta,
            offset: header.offset,
            data: r.data.to_vec(),
            done: header.done,
        };
        reply(&self.raft.install_snapshot(rpc).await)
    }
}
