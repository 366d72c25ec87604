//! Wires one broker together and runs it until shutdown:
//! identity and catalog → listeners bound → HTTP up (not ready) → partitions opened and
//! recovered → ready, Kafka clients accepted → retention task → on shutdown, stop accepting
//! and flush every partition so the next start skips recovery.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::config::{BrokerConfig, ConfigError};
use crate::group::GroupCoordinator;
use crate::http::{self, HttpState};
use crate::kafka::listener;
use crate::metadata::cluster::IdentityError;
use crate::metadata::producer_ids::ProducerIdError;
use crate::metadata::{Catalog, CatalogError, ClusterIdentity, ProducerIdAllocator};
use crate::metrics::Metrics;
use crate::node::{Node, TopicOpError};
use crate::partition::ReplicaManager;
use crate::shutdown::Shutdown;
use crate::time::now_ms;

/// Why the broker could not start.
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
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    ProducerIds(#[from] ProducerIdError),
    #[error("binding {what} listener on {addr}")]
    Bind {
        what: &'static str,
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid advertised Kafka address {0:?}: expected host:port")]
    Advertised(String),
    #[error("opening partitions")]
    OpenPartitions(#[source] TopicOpError),
}

/// Addresses a started broker listens on.
#[derive(Debug, Clone, Copy)]
pub struct BoundAddrs {
    pub kafka: SocketAddr,
    pub http: SocketAddr,
}

/// Runs a broker until `shutdown` fires. `on_bound` is told the listening addresses once both
/// listeners are bound (before recovery).
pub async fn run(
    config: BrokerConfig,
    shutdown: Shutdown,
    on_bound: impl FnOnce(BoundAddrs),
) -> Result<(), ServerError> {
    config.validate()?;
    let config = Arc::new(config);
    std::fs::create_dir_all(&config.data_dir)
        .map_err(|source| ServerError::DataDir { path: config.data_dir.clone(), source })?;
    let identity = ClusterIdentity::load_or_create(&config.data_dir, config.node_id)?;
    let metadata_dir = config.data_dir.join("metadata");
    let catalog = Catalog::open(&metadata_dir)?;
    let producer_ids = ProducerIdAllocator::open(&metadata_dir)?;

    let bind = |what, addr: String| async move {
        TcpListener::bind(&addr).await.map_err(|source| ServerError::Bind { what, addr, source })
    };
    let kafka_listener = bind("Kafka", config.kafka_listen.clone()).await?;
    let http_listener = bind("HTTP", config.http_listen.clone()).await?;
    let kafka_addr = kafka_listener.local_addr().map_err(|source| ServerError::Bind {
        what: "Kafka",
        addr: config.kafka_listen.clone(),
        source,
    })?;
    let http_addr = http_listener.local_addr().map_err(|source| ServerError::Bind {
        what: "HTTP",
        addr: config.http_listen.clone(),
        source,
    })?;
    let (advertised_host, advertised_port) = advertised(&config, kafka_addr)?;
    on_bound(BoundAddrs { kafka: kafka_addr, http: http_addr });

    let metrics = Arc::new(Metrics::new());
    let replicas = Arc::new(ReplicaManager::new(&config.data_dir, config.clone()));
    let ready = Arc::new(AtomicBool::new(false));
    let groups = Arc::new(GroupCoordinator::new(crate::node::group_config(&config), replicas.clone()));
    let http_state = HttpState {
        metrics: metrics.clone(),
        replicas: replicas.clone(),
        groups: groups.clone(),
        ready: ready.clone(),
    };
    let http_task = tokio::spawn(http::run(http_listener, http_state, shutdown.clone()));

    let node = Arc::new(Node {
        config: config.clone(),
        identity,
        advertised_host,
        advertised_port,
        catalog,
        replicas: replicas.clone(),
        producer_ids,
        metrics,
        groups,
    });
    let started = std::time::Instant::now();
    {
        let node = node.clone();
        tokio::task::spawn_blocking(move || node.open_all_topics())
            .await
            .map_err(|e| {
                ServerError::OpenPartitions(TopicOpError::Partition(crate::partition::PartitionError::Io {
                    topic: String::new(),
                    partition: -1,
                    op: "open partitions task",
                    path: config.data_dir.clone(),
                    source: std::io::Error::other(e),
                }))
            })?
            .map_err(ServerError::OpenPartitions)?;
    }
    let groups_loaded = node.groups.load();
    tracing::info!(
        node_id = config.node_id,
        groups = groups_loaded,
        cluster_id = %node.identity.cluster_id,
        kafka = %kafka_addr,
        advertised = %format!("{}:{}", node.advertised_host, node.advertised_port),
        http = %http_addr,
        data_dir = %config.data_dir.display(),
        partitions = replicas.all().len(),
        recovery_ms = started.elapsed().as_millis() as u64,
        "strom broker ready"
    );
    ready.store(true, Ordering::Release);

    let retention_task = tokio::spawn(every_blocking(
        "retention",
        config.log_retention_check_interval_ms,
        replicas.clone(),
        ReplicaManager::enforce_retention,
        shutdown.clone(),
    ));
    let group_task = tokio::spawn(group_tick_loop(node.clone(), shutdown.clone()));
    let cleaner_task = tokio::spawn(every_blocking(
        "log cleaner",
        config.log_cleaner_interval_ms,
        replicas.clone(),
        ReplicaManager::compact_all,
        shutdown.clone(),
    ));
    listener::run(kafka_listener, node.clone(), shutdown.clone()).await;

    tracing::info!("shutting down: flushing partitions");
    ready.store(false, Ordering::Release);
    retention_task.abort();
    group_task.abort();
    cleaner_task.abort();
    let flush = replicas.clone();
    if let Err(e) = tokio::task::spawn_blocking(move || flush.flush_all()).await {
        tracing::error!(error = %e, "flush task failed");
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), http_task).await;
    tracing::info!("strom broker stopped");
    Ok(())
}

fn advertised(config: &BrokerConfig, bound: SocketAddr) -> Result<(String, i32), ServerError> {
    match &config.advertised_kafka {
        Some(a) => {
            let (host, port) = a.rsplit_once(':').ok_or_else(|| ServerError::Advertised(a.clone()))?;
            let port: u16 = port.parse().map_err(|_| ServerError::Advertised(a.clone()))?;
            if host.is_empty() {
                return Err(ServerError::Advertised(a.clone()));
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
    what: &'static str,
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
        if let Err(e) = tokio::task::spawn_blocking(move || work(&r, now_ms())).await {
            tracing::error!(task = what, error = %e, "background task failed");
        }
    }
}

/// Drives the group coordinator's timers (session expiry, rebalance deadlines).
async fn group_tick_loop(node: Arc<Node>, mut shutdown: Shutdown) {
    let mut ticker = tokio::time::interval(Duration::from_millis(100));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.wait() => return,
            _ = ticker.tick() => node.groups.tick(),
        }
    }
}
