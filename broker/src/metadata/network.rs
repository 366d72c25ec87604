//! The client side of the raft RPCs: openraft's [`RaftNetworkFactory`] over tonic.
//!
//! One lazily connected `Channel` per peer address, shared by every RPC to it (a channel per
//! RPC would mean a TCP and HTTP/2 handshake each time). Errors map to what openraft expects:
//! a peer that cannot be reached is `Unreachable` (openraft backs off), other transport
//! errors are `Network`, and the peer's own raft error comes back as `RemoteError`. Every
//! AppendEntries a peer answers is noted in [`Contacts`] (DescribeQuorum's last fetch).

// openraft's RPC error types are large, and the trait methods this file implements return them.
#![allow(clippy::result_large_err)]

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{InstallSnapshotError, NetworkError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::BasicNode;
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde::Serialize;
use strom_proto::raft::raft_client::RaftClient;
use strom_proto::raft::{RaftReply, RaftRequest, SnapshotChunk};
use tonic::transport::{Channel, Endpoint};

use super::contacts::Contacts;
use super::types::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, RPCError, RaftError,
    TypeConfig, VoteRequest, VoteResponse,
};
use super::ClusterIdSource;

/// How long a connection attempt to a peer may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// HTTP/2 flow-control windows of the internal port (both directions).
pub const HTTP2_STREAM_WINDOW: u32 = 16 * 1024 * 1024;
pub const HTTP2_CONNECTION_WINDOW: u32 = 64 * 1024 * 1024;
/// The largest HTTP/2 frame a peer may send (16 KiB by default: 640 frames per 10 MB fetch).
pub const HTTP2_MAX_FRAME: u32 = 1024 * 1024;

/// Channels to peers by address, shared by the raft network and the controller client.
#[derive(Debug, Clone, Default)]
pub struct Channels {
    by_addr: Arc<Mutex<HashMap<String, Channel>>>,
}

impl Channels {
    /// The channel to `addr` (`host:port`), created on first use; it connects lazily.
    pub fn get(&self, addr: &str) -> Result<Channel, tonic::transport::Error> {
        let mut map = self.by_addr.lock();
        if let Some(c) = map.get(addr) {
            return Ok(c.clone());
        }
        let channel = Endpoint::from_shared(format!("http://{addr}"))?
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            // Replica fetches carry megabytes: HTTP/2's default 64 KiB windows would make
            // every response wait for many window updates.
            .initial_stream_window_size(HTTP2_STREAM_WINDOW)
            .initial_connection_window_size(HTTP2_CONNECTION_WINDOW)
            .max_frame_size(HTTP2_MAX_FRAME)
            .http2_keep_alive_interval(Duration::from_secs(10))
            .keep_alive_timeout(Duration::from_secs(5))
            .connect_lazy();
        map.insert(addr.to_string(), channel.clone());
        Ok(channel)
    }
}

/// Makes a [`Peer`] for each target openraft replicates to or asks for votes.
#[derive(Debug, Clone)]
pub struct Network {
    pub me: u64,
    pub channels: Channels,
    pub cluster_id: ClusterIdSource,
    pub contacts: Contacts,
    /// The voters' addresses as configured (`--voters`): they win over the addresses the
    /// membership remembers, so a cluster started again with new ports or addresses (`strom
    /// dev` on an existing data directory) reaches its voters and forms its quorum again.
    pub configured: Arc<BTreeMap<u64, String>>,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> Peer {
        let addr = self.configured.get(&target).cloned().unwrap_or_else(|| node.addr.clone());
        Peer {
            me: self.me,
            target,
            channel: self.channels.get(&addr).map_err(|e| e.to_string()),
            addr,
            cluster_id: self.cluster_id.clone(),
            contacts: self.contacts.clone(),
        }
    }
}

/// The connection to one peer.
#[derive(Debug)]
pub struct Peer {
    me: u64,
    target: u64,
    addr: String,
    channel: Result<Channel, String>,
    cluster_id: ClusterIdSource,
    contacts: Contacts,
}

/// A transport failure as openraft's error.
fn transport<E: std::error::Error>(addr: &str, status: tonic::Status) -> RPCError<E> {
    let e = std::io::Error::other(format!("{addr}: {status}"));
    match status.code() {
        tonic::Code::Unavailable | tonic::Code::DeadlineExceeded | tonic::Code::Cancelled => {
            RPCError::Unreachable(Unreachable::new(&e))
        }
        _ => RPCError::Network(NetworkError::new(&e)),
    }
}

fn encode<T: Serialize, E: std::error::Error>(value: &T) -> Result<Vec<u8>, RPCError<E>> {
    serde_json::to_vec(value).map_err(|e| RPCError::Network(NetworkError::new(&e)))
}

impl Peer {
    fn client<E: std::error::Error>(&self) -> Result<RaftClient<Channel>, RPCError<E>> {
        match &self.channel {
            Ok(c) => {
                Ok(RaftClient::new(c.clone()).max_decoding_message_size(64 << 20).max_encoding_message_size(64 << 20))
            }
            Err(e) => Err(RPCError::Unreachable(Unreachable::new(&std::io::Error::other(format!(
                "invalid address {:?} of node {}: {e}",
                self.addr, self.target
            ))))),
        }
    }

    fn request<T>(&self, message: T, option: &RPCOption) -> tonic::Request<T> {
        let mut req = tonic::Request::new(message);
        req.set_timeout(option.hard_ttl());
        req
    }

    /// Decodes a reply body: the peer's `Result<Resp, RaftError<E>>`.
    fn decode<R: DeserializeOwned, E>(&self, reply: RaftReply) -> Result<R, RPCError<E>>
    where
        E: std::error::Error + DeserializeOwned,
    {
        let result: Result<R, RaftError<E>> =
            serde_json::from_slice(&reply.body).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse, RPCError> {
        let term = rpc.vote.leader_id.term;
        let body = encode(&rpc)?;
        let message = RaftRequest { cluster_id: self.cluster_id.get(), from_node: self.me, body: body.into() };
        let req = self.request(message, &option);
        let reply = self.client()?.append_entries(req).await.map_err(|s| transport(&self.addr, s))?;
        let response = self.decode(reply.into_inner());
        // A peer that knows a newer leader does not follow this one.
        if matches!(&response, Ok(r) if !matches!(r, AppendEntriesResponse::HigherVote(_))) {
            self.contacts.replied(self.target, term, crate::time::now_ms());
        }
        response
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse, RPCError<InstallSnapshotError>> {
        let header = SnapshotHeader { vote: rpc.vote, meta: rpc.meta, offset: rpc.offset, done: rpc.done };
        let message = SnapshotChunk {
            cluster_id: self.cluster_id.get(),
            from_node: self.me,
            header: encode(&header)?.into(),
            data: rpc.data.into(),
        };
        let req = self.request(message, &option);
        let reply = self.client()?.install_snapshot(req).await.map_err(|s| transport(&self.addr, s))?;
        self.decode(reply.into_inner())
    }

    async fn vote(&mut self, rpc: VoteRequest, option: RPCOption) -> Result<VoteResponse, RPCError> {
        let body = encode(&rpc)?;
        let message = RaftRequest { cluster_id: self.cluster_id.get(), from_node: self.me, body: body.into() };
        let req = self.request(message, &option);
        let reply = self.client()?.vote(req).await.map_err(|s| transport(&self.addr, s))?;
        self.decode(reply.into_inner())
    }
}

/// An InstallSnapshot request without its data, which travels as raw bytes beside it.
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct SnapshotHeader {
    pub vote: super::types::Vote,
    pub meta: super::types::SnapshotMeta,
    pub offset: u64,
    pub done: bool,
}
