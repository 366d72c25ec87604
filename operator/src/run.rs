//! `strom-operator run`: install the CRDs, serve metrics and health, take the leader Lease,
//! and run the controllers until SIGTERM or Ctrl-C (reconciles in flight finish first, then
//! the Lease is released so a standby replica takes over at once).

use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::Client;
use tokio::sync::watch;

use crate::context::{Context, Settings};
use crate::leader::{self, LeaseSettings};
use crate::metrics::Metrics;
use crate::topic::unmanaged::UnmanagedTopics;
use crate::{cluster, group, topic};

/// Flags of `strom-operator run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Watch only this namespace (default: all namespaces).
    #[arg(long, env = "STROM_OPERATOR_WATCH_NAMESPACE")]
    pub namespace: Option<String>,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, env = "STROM_OPERATOR_HTTP_LISTEN", default_value = "0.0.0.0:8080")]
    pub http_listen: String,
    /// Apply the CRDs at start (server-side apply), so an upgrade of the operator upgrades them.
    #[arg(long, env = "STROM_OPERATOR_INSTALL_CRDS", default_value_t = true, action = clap::ArgAction::Set)]
    pub install_crds: bool,
    /// Hold a Lease while reconciling, so that only one of several replicas acts.
    #[arg(long, env = "STROM_OPERATOR_LEADER_ELECT", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// Namespace of the Lease (default: the operator's own, from POD_NAMESPACE, else `default`).
    #[arg(long, env = "STROM_OPERATOR_LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// Name of the Lease.
    #[arg(long, env = "STROM_OPERATOR_LEASE_NAME", default_value = "strom-operator")]
    pub lease_name: String,
    /// Seconds a Lease that is not renewed stays held (a standby takes over after that long).
    #[arg(long, env = "STROM_OPERATOR_LEASE_DURATION_SECONDS", default_value_t = 15)]
    pub lease_duration_seconds: u64,
    /// This replica's name in the Lease (default: POD_NAME, else host name and pid).
    #[arg(long, env = "STROM_OPERATOR_IDENTITY")]
    pub identity: Option<String>,
    /// Seconds between reconciles of an idle resource.
    #[arg(long, env = "STROM_OPERATOR_RESYNC_SECONDS", default_value_t = 60)]
    pub resync_seconds: u64,
    /// Topics no Topic resource names (made with a Kafka client): `ignore` them, `report`
    /// them (Events on the Cluster, a metric), or `adopt` them (write a Topic for each,
    /// deletionPolicy Retain).
    #[arg(long, env = "STROM_OPERATOR_UNMANAGED_TOPICS", value_enum, default_value_t = UnmanagedTopics::Ignore)]
    pub unmanaged_topics: UnmanagedTopics,
    /// DNS domain of the Kubernetes cluster.
    #[arg(long, env = "STROM_OPERATOR_CLUSTER_DOMAIN", default_value = "cluster.local")]
    pub cluster_domain: String,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("no Kubernetes client configuration (in-cluster or kubeconfig)")]
    Client(#[source] kube::Error),
    #[error("applying CRD {name} (the operator's service account needs patch on customresourcedefinitions)")]
    Crd {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("binding the HTTP listener {addr}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("leader election")]
    Lease(#[source] leader::LeaseError),
    #[error("lost the leader Lease; stopping so that the other replica alone reconciles")]
    LeaseLost,
}

/// Runs until a signal (Ok) or until the Lease is lost (Err: the process exits non-zero and
/// Kubernetes restarts it as a standby).
pub async fn run(args: RunArgs) -> Result<(), RunError> {
    let client = Client::try_default().await.map_err(RunError::Client)?;
    if args.install_crds {
        install_crds(&client).await?;
    }
    let metrics = Arc::new(Metrics::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(signals(stop_tx));
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };

    let listener = tokio::net::TcpListener::bind(&args.http_listen)
        .await
        .map_err(|source| RunError::Bind { addr: args.http_listen.clone(), source })?;
    tracing::info!(addr = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(), "serving /metrics, /healthz, /readyz");
    let http = tokio::spawn(crate::http::serve(listener, metrics.clone(), stopped(stop_rx.clone())));

    let leadership = if args.leader_elect {
        let settings = LeaseSettings {
            namespace: args
                .lease_namespace
                .clone()
                .or_else(|| std::env::var("POD_NAMESPACE").ok())
                .unwrap_or_else(|| "default".into()),
            name: args.lease_name.clone(),
            identity: args.identity.clone().or_else(|| std::env::var("POD_NAME").ok()).unwrap_or_else(default_identity),
            duration: Duration::from_secs(args.lease_duration_seconds.max(1)),
        };
        tracing::info!(lease = %settings.name, namespace = %settings.namespace, identity = %settings.identity, "waiting for the leader Lease");
        tokio::select! {
            held = leader::acquire(&client, settings) => Some(held.map_err(RunError::Lease)?),
            () = stopped(stop_rx.clone()) => {
                let _ = http.await;
                return Ok(());
            }
        }
    } else {
        None
    };
    metrics.leader.set(1);

    let settings = Settings {
        cluster_domain: args.cluster_domain.clone(),
        resync: Duration::from_secs(args.resync_seconds.max(1)),
        unmanaged_topics: args.unmanaged_topics,
        ..Settings::default()
    };
    let ctx = Arc::new(Context::new(client.clone(), metrics.clone(), settings));
    let (lost_tx, lost_rx) = watch::channel(false);
    let shutdown = {
        let stop = stopped(stop_rx.clone());
        let lost = stopped(lost_rx.clone());
        async move {
            tokio::select! {
                () = stop => {}
                () = lost => {}
            }
        }
    };
    let watch_lease = async {
        match &leadership {
            Some(l) => {
                l.lost().await;
                let _ = lost_tx.send(true);
            }
            None => std::future::pending::<()>().await,
        }
    };
    tracing::info!(
        namespace = args.namespace.as_deref().unwrap_or("(all)"),
        "starting the Cluster, Topic and ConsumerGroup controllers"
    );
    let shutdown = futures::future::FutureExt::shared(Box::pin(shutdown));
    let controllers = async {
        tokio::join!(
            cluster::run(ctx.clone(), args.namespace.clone(), shutdown.clone()),
            topic::run(ctx.clone(), args.namespace.clone(), shutdown.clone()),
            group::run(ctx, args.namespace.clone(), shutdown),
        )
    };
    tokio::select! {
        _ = controllers => {}
        () = watch_lease => {}
    }
    metrics.leader.set(0);
    let lost = *lost_rx.borrow();
    if let Some(l) = leadership {
        if !lost {
            l.release().await;
        }
    }
    if lost {
        return Err(RunError::LeaseLost);
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), http).await;
    tracing::info!("strom-operator stopped");
    Ok(())
}

fn default_identity() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "strom-operator".into());
    format!("{host}-{}", std::process::id())
}

/// Applies every CRD with server-side apply.
pub async fn install_crds(client: &Client) -> Result<(), RunError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crate::crd::all() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let mut value = serde_json::to_value(&crd)
            .map_err(|e| RunError::Crd { name: name.clone(), source: kube::Error::SerdeError(e) })?;
        value["apiVersion"] = serde_json::json!("apiextensions.k8s.io/v1");
        value["kind"] = serde_json::json!("CustomResourceDefinition");
        api.patch(&name, &PatchParams::apply(crate::cluster::names::FIELD_MANAGER).force(), &Patch::Apply(&value))
            .await
            .map_err(|source| RunError::Crd { name: name.clone(), source })?;
        tracing::info!(crd = %name, "CRD applied");
    }
    Ok(())
}

/// Sets `stop` on SIGTERM or Ctrl-C.
async fn signals(stop: watch::Sender<bool>) {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
    tracing::info!("signal received: finishing the reconciles in flight");
    let _ = stop.send(true);
}
