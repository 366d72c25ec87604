//! Wires one broker together and runs it until shutdown:
//! identity → listeners bound → metadata quorum opened (raft log, snapshot) → internal gRPC
//! port served, a new cluster bootstrapped → HTTP up (not ready) → the replicas the local
//! metadata image assigns here opened and recovered → publisher, controller role, and
//! registration with the active controller → ready once registered and unfenced → Kafka
//! clients served. On shutdown: stop accepting, tell the controller (which moves leadership
//! away), flush every partition so the next start skips recovery, stop raft, close the
//! internal port.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use uuid::Uuid;

use crate::admin::AdminService;
use crate::config::{BrokerConfig, ConfigError};
use crate::group::GroupCoordinator;
use crate::http::{self, HttpState};
use crate::kafka::fetch_session::FetchSessionCache;
use crate::kafka::listener;
use crate::lifecycle::{self, LifecycleError, LifecycleTiming};
use crate::metadata::cluster::IdentityError;
use crate::metadata::command::Endpoint;
use crate::metadata::controller::Registration;
use crate::metadata::quorum::{QuorumTuning, VoterSet, VotersError};
use crate::metadata::runtime::{Metadata, MetadataError, MetadataSettings};
use crate::metadata::{Catalog, ClusterIdentity, ProducerIdAllocator};
use crate::metrics::Metrics;
use crate::node::{Node, FETCH_SESSIONS_MAX, FETCH_SESSION_PARTITIONS_MAX};
use crate::partition::ReplicaManager;
use crate::replication::service::Throttle;
use crate::replication::{FetcherConfig, IsrChanges, ReplicaFetchers, ReplicationService};
use crate::shutdown::{self, Shutdown};
use crate::time::now_ms;
use crate::{internal, publisher};

/// How often each replica's high watermark is checkpointed.
const HIGH_WATERMARK_CHECKPOINT_MS: u64 = 5_000;
/// How often segments closed by a roll are fsynced (off the append path; a roll itself does
/// not wait for the disk, as in Kafka).
const ROLLED_SEGMENT_FLUSH_MS: u64 = 500;

/// Why the broker could not start (or had to stop).
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("creating data directory {path}")]
    DataDir {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Identity(#[from] IdentityError),
    #[error(transparent)]
    Voters(#[from] VotersError),
    #[error(transparent)]
    Metadata(#[from] MetadataError),
    #[error("binding {what} listener on {addr}")]
    Bind {
        what: &'static str,
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid advertised {what} address {addr:?}: expected host:port")]
    Advertised { what: &'static str, addr: String },
    #[error("broker {id} is a voter at {voter}, but --advertised-internal says {advertised}")]
    VoterAddress { id: i32, voter: String, advertised: String },
    #[error("opening partitions")]
    OpenPartitions(#[source] tokio::task::JoinError),
    #[error(transparent)]
    Lifecycle(#[from] LifecycleError),
}

/// Addresses a started broker listens on.
#[derive(Debug, Clone, Copy)]
pub struct BoundAddrs {
    pub kafka: SocketAddr,
    pub http: SocketAddr,
    pub internal: SocketAddr,
}

/// Runs a broker until `shutdown` fires (or it cannot stay in the cluster). `on_bound` is
/// told the listening addresses once every listener is bound (before recovery).
pub async fn run(
    config: BrokerConfig,
    external_shutdown: Shutdown,
    on_bound: impl FnOnce(BoundAddrs),
) -> Result<(), ServerError> {
    config.validate()?;
    let config = Arc::new(config);
    let me = config.node_id;
    std::fs::create_dir_all(&config.data_dir)
        .map_err(|source| ServerError::DataDir { path: config.data_dir.clone(), source })?;
    let identity = ClusterIdentity::load_or_create(&config.data_dir, me)?;
    let metadata_dir = config.data_dir.join("metadata");
    for leftover in ["topics.json", "producer-ids"] {
        if metadata_dir.join(leftover).exists() {
            tracing::warn!(file = %metadata_dir.join(leftover).display(), "ignoring single-node metadata from an older Strom; topics now live in the metadata log");
        }
    }

    let bind = |what, addr: String| async move {
        let listener =
            TcpListener::bind(&addr).await.map_err(|source| ServerError::Bind { what, addr: addr.clone(), source })?;
        let local = listener.local_addr().map_err(|source| ServerError::Bind { what, addr, source })?;
        Ok::<_, ServerError>((listener, local))
    };
    let (internal_listener, internal_addr) = bind("internal", config.internal_listen.clone()).await?;
    let (kafka_listener, kafka_addr) = bind("Kafka", config.kafka_listen.clone()).await?;
    let (http_listener, http_addr) = bind("HTTP", config.http_listen.clone()).await?;
    let (advertised_host, advertised_port) = advertised("Kafka", config.advertised_kafka.as_deref(), kafka_addr)?;
    let (voters, advertised_internal) = quorum_addresses(&config, internal_addr)?;
    on_bound(BoundAddrs { kafka: kafka_addr, http: http_addr, internal: internal_addr });

    // Our own shutdown, fired by the caller's or by a fatal lifecycle error; the internal
    // port closes last, after the controller has been told.
    let (trigger, shutdown) = shutdown::channel();
    {
        let (trigger, mut external) = (trigger.clone(), external_shutdown);
        tokio::spawn(async move {
            external.wait().await;
            trigger.trigger();
        });
    }
    let (stop_internal, internal_shutdown) = shutdown::channel();

    let metadata = Metadata::open(MetadataSettings {
        node_id: me,
        voters: voters.clone(),
        tuning: QuorumTuning {
            election_timeout_ms: config.controller_quorum_election_timeout_ms,
            heartbeat_interval_ms: config.controller_quorum_heartbeat_interval_ms,
            snapshot_interval_entries: config.metadata_snapshot_interval_entries,
            max_retained_entries: config.metadata_max_retained_entries,
        },
        session_timeout: Duration::from_millis(config.broker_session_timeout_ms),
        preferred_leader_interval: config
            .auto_leader_rebalance_enable
            .then(|| Duration::from_millis(config.leader_imbalance_check_interval_ms)),
        default_min_insync: config.min_insync_replicas,
        dir: metadata_dir,
    })
    .await?;
    let replicas = Arc::new(ReplicaManager::new(&config.data_dir, config.clone()));
    let (epoch_tx, epoch_rx) = watch::channel(None);
    let throttle = Arc::new(Throttle::default());
    let groups = Arc::new(GroupCoordinator::new(crate::node::group_config(&config), replicas.clone()));
    let replication = ReplicationService {
        replicas: replicas.clone(),
        image: metadata.image(),
        throttle: throttle.clone(),
        groups: groups.clone(),
    };
    let admin = AdminService::new();
    let internal_task =
        tokio::spawn(internal::run(internal_listener, metadata.clone(), replication, admin.clone(), internal_shutdown));
    metadata.bootstrap().await;
    let controller_task = tokio::spawn(metadata.controller.clone().run(shutdown.clone()));

    let metrics = Arc::new(Metrics::new());
    metrics.partition_series.store(config.metrics_partition_series, std::sync::atomic::Ordering::Relaxed);
    let ready = Arc::new(AtomicBool::new(false));
    let fetchers = Arc::new(ReplicaFetchers::new(
        FetcherConfig {
            me,
            max_wait: Duration::from_millis(config.replica_fetch_wait_max_ms),
            max_bytes: i32::try_from(config.replica_fetch_response_max_bytes).unwrap_or(i32::MAX),
            fsync_before_next_fetch: config.flush_on_acks_all,
        },
        replicas.clone(),
        metadata.channels.clone(),
        metadata.image(),
        epoch_rx.clone(),
        shutdown.clone(),
    ));
    let isr_changes = Arc::new(IsrChanges::default());
    let markers = crate::txn::markers::ClusterMarkers {
        me,
        replicas: replicas.clone(),
        groups: groups.clone(),
        image: metadata.image(),
        channels: metadata.channels.clone(),
    };
    let txn_config = crate::txn::coordinator::TxnConfig {
        state_partitions: config.offsets_topic_num_partitions,
        ..Default::default()
    };
    let txn =
        Arc::new(crate::txn::coordinator::TransactionCoordinator::new(txn_config, replicas.clone(), Arc::new(markers)));
    let disk_space = Arc::new(crate::disk_space::DiskSpace::new(&config.data_dir, config.log_dir_min_free_bytes));
    disk_space.check();
    let node = Arc::new(Node {
        config: config.clone(),
        advertised_host,
        advertised_port,
        catalog: Catalog::new(metadata.image()),
        replicas: replicas.clone(),
        producer_ids: ProducerIdAllocator::new(me, epoch_rx.clone(), metadata.client.clone()),
        metrics: metrics.clone(),
        groups: groups.clone(),
        txn: txn.clone(),
        metadata: metadata.clone(),
        fetchers: fetchers.clone(),
        isr_changes: isr_changes.clone(),
        fetch_sessions: FetchSessionCache::new(FETCH_SESSIONS_MAX, FETCH_SESSION_PARTITIONS_MAX),
        ready: ready.clone(),
        disk_space: disk_space.clone(),
    });
    admin.attach(node.clone());
    let http_state = HttpState {
        metrics,
        replicas: replicas.clone(),
        groups,
        txn,
        metadata: metadata.clone(),
        fetchers,
        isr_changes: isr_changes.clone(),
        throttle,
        ready,
        data_dir: config.data_dir.clone(),
    };
    let http_task = tokio::spawn(http::run(http_listener, http_state, shutdown.clone()));

    // Recover what the local image assigns here before anything is served from it.
    let started = std::time::Instant::now();
    let image = metadata.state_machine.image();
    {
        let (node, image) = (node.clone(), image.clone());
        tokio::task::spawn_blocking(move || publisher::apply(&node, None, &image, None))
            .await
            .map_err(ServerError::OpenPartitions)?;
    }
    tracing::info!(
        node_id = me,
        voters = %voters.describe(),
        voter = voters.contains(me),
        kafka = %kafka_addr,
        advertised = %format!("{}:{}", node.advertised_host, node.advertised_port),
        internal = %internal_addr,
        advertised_internal = %advertised_internal,
        http = %http_addr,
        data_dir = %config.data_dir.display(),
        partitions = replicas.all().len(),
        metadata_applied_index = image.applied_index,
        recovery_ms = started.elapsed().as_millis() as u64,
        "strom broker started; registering with the controller"
    );
    // Serving stops only after the controlled shutdown: leadership moves first.
    let (stop_serving, serving) = shutdown::channel();
    let publisher_task = tokio::spawn(publisher::run(
        node.clone(),
        metadata.image(),
        epoch_rx.clone(),
        identity,
        image,
        shutdown.clone(),
        serving.clone(),
    ));
    let registration = Registration {
        id: me,
        incarnation: Uuid::new_v4(),
        kafka: Endpoint { host: node.advertised_host.clone(), port: node.advertised_port },
        internal_addr: advertised_internal,
        rack: config.rack.clone(),
    };
    let timing = LifecycleTiming {
        heartbeat_interval: Duration::from_millis(config.broker_heartbeat_interval_ms),
        session_timeout: Duration::from_millis(config.broker_session_timeout_ms),
    };
    let lifecycle_task = {
        let (client, sm, shutdown, trigger) =
            (metadata.client.clone(), metadata.state_machine.clone(), shutdown.clone(), trigger.clone());
        tokio::spawn(async move {
            let result = lifecycle::run(client, sm, registration, timing, epoch_tx, shutdown).await;
            if let Err(e) = &result {
                tracing::error!(error = %crate::error_chain::display(e), "leaving the cluster");
                trigger.trigger();
            }
            result
        })
    };

    let controlled_shutdown = {
        let (mut shutdown, node) = (shutdown.clone(), node.clone());
        tokio::spawn(async move {
            shutdown.wait().await;
            let result = match tokio::time::timeout(Duration::from_secs(15), lifecycle_task).await {
                Ok(Ok(result)) => result,
                Ok(Err(join)) => {
                    tracing::error!(error = %join, "lifecycle task failed");
                    Ok(())
                }
                Err(_) => {
                    tracing::warn!("the controller did not hear of the shutdown in time");
                    Ok(())
                }
            };
            // Wait (briefly) until this broker's image shows its leaderships gone.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            while node.replicas.all().iter().any(|p| p.is_leader()) && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            stop_serving.trigger();
            result
        })
    };
    let isr_task = tokio::spawn(crate::replication::isr::run(
        replicas.clone(),
        metadata.client.clone(),
        me,
        epoch_rx,
        Duration::from_millis(config.replica_lag_time_max_ms),
        isr_changes,
        shutdown.clone(),
    ));
    let checkpoint_task = tokio::spawn(every_blocking(
        ("high-watermark checkpoint", "hw_checkpoint"),
        node.metrics.clone(),
        HIGH_WATERMARK_CHECKPOINT_MS,
        replicas.clone(),
        |r: &ReplicaManager, _| r.checkpoint_high_watermarks(),
        shutdown.clone(),
    ));
    let roll_flush_task = tokio::spawn(every_blocking(
        ("flush of rolled segments", "rolled_segment_flush"),
        node.metrics.clone(),
        ROLLED_SEGMENT_FLUSH_MS,
        replicas.clone(),
        |r: &ReplicaManager, _| r.flush_rolled_segments(),
        shutdown.clone(),
    ));
    let retention_task = tokio::spawn(every_blocking(
        ("retention", "retention"),
        node.metrics.clone(),
        config.log_retention_check_interval_ms,
        replicas.clone(),
        ReplicaManager::enforce_retention,
        shutdown.clone(),
    ));
    let group_task = tokio::spawn(group_tick_loop(node.clone(), shutdown.clone()));
    let disk_space_task = tokio::spawn(crate::disk_space::run(disk_space, shutdown.clone()));
    let raft_watchdog = tokio::spawn(crate::metadata::watchdog::run(metadata.metrics()));
    let lag_task = tokio::spawn(crate::admin::lag::run(
        node.clone(),
        Duration::from_millis(config.consumer_lag_interval_ms),
        shutdown.clone(),
    ));
    let cleaner_task = tokio::spawn(every_blocking(
        ("log cleaner", "log_cleaner"),
        node.metrics.clone(),
        config.log_cleaner_interval_ms,
        replicas.clone(),
        ReplicaManager::compact_all,
        shutdown.clone(),
    ));
    listener::run(kafka_listener, node.clone(), serving).await;

    tracing::info!("shutting down");
    retention_task.abort();
    group_task.abort();
    disk_space_task.abort();
    raft_watchdog.abort();
    lag_task.abort();
    cleaner_task.abort();
    isr_task.abort();
    checkpoint_task.abort();
    roll_flush_task.abort();
    let lifecycle = controlled_shutdown.await.unwrap_or(Ok(()));
    let _ = publisher_task.await;
    let _ = controller_task.await;
    tracing::info!("flushing partitions");
    let flush = replicas.clone();
    if let Err(e) = tokio::task::spawn_blocking(move || flush.flush_all()).await {
        tracing::error!(error = %e, "flush task failed");
    }
    if let Err(e) = metadata.raft.shutdown().await {
        tracing::warn!(error = %e, "stopping raft");
    }
    stop_internal.trigger();
    let _ = tokio::time::timeout(Duration::from_secs(5), internal_task).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), http_task).await;
    tracing::info!("strom broker stopped");
    lifecycle.map_err(ServerError::from)
}

/// The voters, and the internal address this broker gives other brokers.
fn quorum_addresses(config: &BrokerConfig, bound: SocketAddr) -> Result<(VoterSet, String), ServerError> {
    let me = config.node_id;
    let own = match &config.advertised_internal {
        Some(a) => {
            let (host, port) = advertised("internal", Some(a), bound)?;
            format!("{host}:{port}")
        }
        None if bound.ip().is_unspecified() => {
            SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), bound.port()).to_string()
        }
        None => bound.to_string(),
    };
    let voters = match &config.voters {
        Some(v) => VoterSet::parse(v)?,
        None => VoterSet::single(me, own.clone()),
    };
    match voters.addr(me) {
        Some(voter) if config.advertised_internal.is_some() && voter != own => {
            Err(ServerError::VoterAddress { id: me, voter: voter.to_string(), advertised: own })
        }
        Some(voter) => Ok((voters.clone(), voter.to_string())),
        None => Ok((voters, own)),
    }
}

fn advertised(what: &'static str, given: Option<&str>, bound: SocketAddr) -> Result<(String, i32), ServerError> {
    let bad = |a: &str| ServerError::Advertised { what, addr: a.to_string() };
    match given {
        Some(a) => {
            let (host, port) = a.rsplit_once(':').ok_or_else(|| bad(a))?;
            let port: u16 = port.parse().map_err(|_| bad(a))?;
            if host.is_empty() {
                return Err(bad(a));
            }
            Ok((host.trim_start_matches('[').trim_end_matches(']').to_string(), i32::from(port)))
        }
        None => {
            let ip = if bound.ip().is_unspecified() { "127.0.0.1".to_string() } else { bound.ip().to_string() };
            Ok((ip, i32::from(bound.port())))
        }
    }
}

/// Runs `work` on a blocking thread every `interval_ms` until shutdown (retention, the log
/// cleaner): file work must not stall the async workers.
async fn every_blocking(
    (what, label): (&'static str, &'static str),
    metrics: Arc<Metrics>,
    interval_ms: u64,
    replicas: Arc<ReplicaManager>,
    work: fn(&ReplicaManager, i64),
    mut shutdown: Shutdown,
) {
    let mut ticker = tokio::time::interval(Duration::from_millis(interval_ms));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.wait() => return,
            _ = ticker.tick() => {}
        }
        let r = replicas.clone();
        let started = std::time::Instant::now();
        if let Err(e) = tokio::task::spawn_blocking(move || work(&r, now_ms())).await {
            tracing::error!(task = what, error = %e, "background task failed");
        }
        metrics.observe_background_task(label, started.elapsed());
    }
}

/// Drives the group coordinator's timers (session expiry, rebalance deadlines) and, every
/// second, the transaction coordinator's timeouts.
async fn group_tick_loop(node: Arc<Node>, mut shutdown: Shutdown) {
    let mut ticker = tokio::time::interval(Duration::from_millis(100));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut ticks = 0u64;
    loop {
        tokio::select! {
            _ = shutdown.wait() => return,
            _ = ticker.tick() => node.groups.tick(),
        }
        ticks += 1;
        if ticks.is_multiple_of(10) {
            node.txn.abort_timed_out().await;
        }
    }
}
