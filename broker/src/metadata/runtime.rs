//! [`Metadata`]: one broker's share of the metadata quorum — its raft log and state machine,
//! its raft, the controller role and the client that reaches the active controller — opened
//! and wired together, and the bootstrap of a new cluster.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use strom_proto::controller::controller_client::ControllerClient as QuorumClient;
use strom_proto::controller::controller_server::ControllerServer;
use strom_proto::controller::DescribeQuorumRequest;
use strom_proto::raft::raft_server::RaftServer;
use tokio::sync::watch;

use super::client::ControllerClient;
use super::contacts::Contacts;
use super::controller::service::ControllerService;
use super::controller::{Controller, ControllerConfig};
use super::image::MetadataImage;
use super::log_store::LogStore;
use super::network::{Channels, Network};
use super::quorum::{raft_config, QuorumTuning, VoterSet};
use super::raft_service::RaftService;
use super::state_machine::StateMachine;
use super::types::{node_id, Raft, RaftMetrics, StorageError};
use super::ClusterIdSource;

/// Largest raft or controller message accepted on the internal port.
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// What [`Metadata::open`] needs.
#[derive(Debug, Clone)]
pub struct MetadataSettings {
    pub node_id: i32,
    pub voters: VoterSet,
    pub tuning: QuorumTuning,
    /// `broker.session.timeout.ms`.
    pub session_timeout: Duration,
    /// How often the active controller moves leadership back to preferred replicas (None:
    /// never, `auto.leader.rebalance.enable=false`).
    pub preferred_leader_interval: Option<Duration>,
    /// The cluster's `min.insync.replicas` (topics without their own): decides which replicas
    /// leaving an ISR become eligible leaders.
    pub default_min_insync: i32,
    /// `<data>/metadata`.
    pub dir: PathBuf,
}

/// The metadata quorum could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    #[error("opening the metadata log in {path}")]
    OpenLog {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("opening the metadata state machine in {path}")]
    OpenStateMachine {
        path: PathBuf,
        #[source]
        source: Box<StorageError>,
    },
    #[error(
        "the metadata log in {path} starts at index {first_index}, after the newest readable snapshot \
         (which ends at {snapshot_end:?}): the metadata cannot be rebuilt here. A voter of a larger \
         quorum can be started on an empty metadata directory to take the leader's snapshot \
         (docs/durability.md)"
    )]
    PurgedPastSnapshot { path: PathBuf, first_index: u64, snapshot_end: Option<u64> },
    #[error("metadata quorum settings")]
    Config(#[source] Box<openraft::ConfigError>),
    #[error("starting raft")]
    Raft(#[source] Box<openraft::error::Fatal<u64>>),
}

/// One broker's share of the quorum.
#[derive(Clone)]
pub struct Metadata {
    pub node_id: i32,
    pub raft: Raft,
    pub state_machine: StateMachine,
    pub log_store: LogStore,
    pub controller: Arc<Controller>,
    pub client: ControllerClient,
    pub voters: VoterSet,
    pub channels: Channels,
}

impl std::fmt::Debug for Metadata {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metadata").field("node_id", &self.node_id).field("voters", &self.voters).finish_non_exhaustive()
    }
}

impl Metadata {
    /// Opens the log and the newest snapshot under `settings.dir` and starts raft (which
    /// replays the committed entries after the snapshot).
    pub async fn open(settings: MetadataSettings) -> Result<Metadata, MetadataError> {
        let snapshot_dir = settings.dir.join("snapshots");
        let state_machine = StateMachine::open(&snapshot_dir).map_err(|source| MetadataError::OpenStateMachine {
            path: snapshot_dir.clone(),
            source: Box::new(source),
        })?;
        let log_dir = settings.dir.join("raft");
        let log_store = LogStore::open_beside(&log_dir, state_machine.snapshot_last_log_id())
            .map_err(|source| MetadataError::OpenLog { path: log_dir.clone(), source })?;
        log_store.limit_purges(state_machine.purge_limit(), state_machine.persisted_snapshots());
        // Entries purged below the first one kept must be in the snapshot; if the snapshot
        // that held them is unreadable, raft would start from an image that misses them.
        let snapshot_end = state_machine.snapshot_last_log_id().map(|l| l.index);
        let first_index = log_store.first_index();
        if first_index > snapshot_end.map_or(0, |end| end + 1) {
            return Err(MetadataError::PurgedPastSnapshot { path: settings.dir.clone(), first_index, snapshot_end });
        }
        let image = state_machine.subscribe();
        let channels = Channels::default();
        let contacts = Contacts::default();
        let network = Network {
            me: node_id(settings.node_id),
            channels: channels.clone(),
            cluster_id: ClusterIdSource(image.clone()),
            contacts: contacts.clone(),
            configured: Arc::new(settings.voters.iter().map(|(id, addr)| (node_id(id), addr.to_string())).collect()),
        };
        let config = raft_config(settings.tuning).map_err(MetadataError::Config)?;
        let raft = Raft::new(node_id(settings.node_id), config, network, log_store.clone(), state_machine.clone())
            .await
            .map_err(|e| MetadataError::Raft(Box::new(e)))?;
        let controller = Arc::new(Controller::new(
            raft.clone(),
            image.clone(),
            ControllerConfig {
                me: settings.node_id,
                voters: settings.voters.clone(),
                session_timeout: settings.session_timeout,
                preferred_leader_interval: settings.preferred_leader_interval,
                default_min_insync: settings.default_min_insync,
            },
            contacts,
        ));
        let client = ControllerClient::new(settings.voters.clone(), channels.clone(), raft.metrics(), image);
        Ok(Metadata {
            node_id: settings.node_id,
            raft,
            state_machine,
            log_store,
            controller,
            client,
            voters: settings.voters,
            channels,
        })
    }

    /// Every image applied from now on.
    pub fn image(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.state_machine.subscribe()
    }

    pub fn metrics(&self) -> watch::Receiver<RaftMetrics> {
        self.raft.metrics()
    }

    /// The gRPC services of the internal port.
    pub fn services(&self) -> (RaftServer<RaftService>, ControllerServer<ControllerService>) {
        let raft = RaftServer::new(RaftService {
            raft: self.raft.clone(),
            voters: self.voters.clone(),
            cluster_id: ClusterIdSource(self.image()),
        })
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
        let controller = ControllerServer::new(ControllerService { controller: self.controller.clone() })
            .max_decoding_message_size(MAX_MESSAGE_BYTES);
        (raft, controller)
    }

    /// Initializes a new cluster: only the lowest voter, only on a pristine log, and only if
    /// no other voter already has a metadata log (a voter whose disk was wiped must be
    /// replicated to, not start a second cluster). Call once the internal port serves.
    pub async fn bootstrap(&self) {
        if self.voters.bootstrapper() != Some(self.node_id) || !self.log_store.is_pristine() {
            return;
        }
        match self.raft.is_initialized().await {
            Ok(false) => {}
            Ok(true) | Err(_) => return,
        }
        for (id, addr) in self.voters.iter().filter(|(id, _)| *id != self.node_id) {
            let Ok(channel) = self.channels.get(addr) else { continue };
            let mut client = QuorumClient::new(channel);
            let call = client.describe_quorum(DescribeQuorumRequest { from_leader: false });
            if let Ok(Ok(resp)) = tokio::time::timeout(Duration::from_secs(1), call).await {
                let q = resp.into_inner();
                if q.applied_index > 0 || !q.cluster_id.is_empty() {
                    tracing::warn!(
                        voter = id,
                        cluster_id = %q.cluster_id,
                        "this voter's metadata log is empty but voter {id} has one: not initializing a new cluster; waiting to be replicated to"
                    );
                    return;
                }
            }
        }
        match self.raft.initialize(self.voters.membership()).await {
            Ok(()) => tracing::info!(voters = %self.voters.describe(), "initialized a new metadata quorum"),
            Err(e) => tracing::info!(error = %e, "metadata quorum already initialized"),
        }
    }
}
