//! Leader election on a `coordination.k8s.io/v1` Lease, so that two operator replicas never
//! reconcile at once: one holds the Lease and renews it; the other waits until the Lease has
//! not been renewed for its duration (measured on its own clock from when it last saw the
//! Lease change, as client-go does, so clock skew between nodes does not matter), then takes
//! it with an optimistic-concurrency update. A holder gives up when no renewal has succeeded
//! within two thirds of the duration, counted from when the last successful one was sent (and
//! each attempt is cut off at that deadline), so it stops acting before a standby may take the
//! Lease; one that shuts down releases the Lease so the other takes over at once.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::Client;
use tokio::sync::watch;

/// Where the Lease is and who this process is.
#[derive(Debug, Clone)]
pub struct LeaseSettings {
    pub namespace: String,
    pub name: String,
    pub identity: String,
    /// How long a Lease that is not renewed stays held.
    pub duration: Duration,
}

impl LeaseSettings {
    fn renew_every(&self) -> Duration {
        self.duration / 3
    }

    /// A renewal must succeed within this long of the last one that did (client-go: 10 s of 15).
    fn renew_deadline(&self) -> Duration {
        self.duration * 2 / 3
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("reading or writing Lease {namespace}/{name}")]
    Api {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// A held Lease. `lost()` resolves when it could not be renewed in time.
#[derive(Debug)]
pub struct Leadership {
    lost: watch::Receiver<bool>,
    task: tokio::task::JoinHandle<()>,
    api: Api<Lease>,
    settings: LeaseSettings,
}

fn lease_api(client: &Client, s: &LeaseSettings) -> Api<Lease> {
    Api::namespaced(client.clone(), &s.namespace)
}

/// Waits until this process holds the Lease.
pub async fn acquire(client: &Client, settings: LeaseSettings) -> Result<Leadership, LeaseError> {
    let api = lease_api(client, &settings);
    let fail = |source| LeaseError::Api { namespace: settings.namespace.clone(), name: settings.name.clone(), source };
    // The Lease's resourceVersion as last seen, and when it was first seen (our clock).
    let mut seen: Option<(String, Instant)> = None;
    let acquired_at = loop {
        let sent = Instant::now();
        match api.get_opt(&settings.name).await.map_err(fail)? {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta { name: Some(settings.name.clone()), ..ObjectMeta::default() },
                    spec: Some(held(&settings, None)),
                };
                match api.create(&PostParams::default(), &lease).await {
                    Ok(_) => break sent,
                    Err(kube::Error::Api(e)) if e.code == 409 => {}
                    Err(e) => return Err(fail(e)),
                }
            }
            Some(lease) => {
                let version = lease.metadata.resource_version.clone().unwrap_or_default();
                let spec = lease.spec.clone().unwrap_or_default();
                let holder = spec.holder_identity.clone().unwrap_or_default();
                let duration =
                    Duration::from_secs(u64::try_from(spec.lease_duration_seconds.unwrap_or(15).max(1)).unwrap_or(15));
                let since = match &seen {
                    Some((v, at)) if *v == version => *at,
                    _ => {
                        let now = Instant::now();
                        seen = Some((version.clone(), now));
                        now
                    }
                };
                let free = holder.is_empty() || holder == settings.identity || since.elapsed() >= duration;
                if free {
                    let mut next = lease.clone();
                    next.spec = Some(held(&settings, Some(&spec)));
                    match api.replace(&settings.name, &PostParams::default(), &next).await {
                        Ok(_) => break sent,
                        // Someone else wrote it first: look again.
                        Err(kube::Error::Api(e)) if e.code == 409 => {}
                        Err(e) => return Err(fail(e)),
                    }
                }
            }
        }
        tokio::time::sleep(settings.renew_every().min(Duration::from_secs(2))).await;
    };
    tracing::info!(lease = %settings.name, identity = %settings.identity, "acquired the leader Lease");
    let (tx, lost) = watch::channel(false);
    let task = tokio::spawn(renew(api.clone(), settings.clone(), acquired_at, tx));
    Ok(Leadership { lost, task, api, settings })
}

/// The spec of a Lease held by this process (a new holder counts a transition).
fn held(s: &LeaseSettings, before: Option<&LeaseSpec>) -> LeaseSpec {
    let now = MicroTime(Timestamp::now());
    let ours = before.is_some_and(|b| b.holder_identity.as_deref() == Some(s.identity.as_str()));
    LeaseSpec {
        holder_identity: Some(s.identity.clone()),
        lease_duration_seconds: Some(i32::try_from(s.duration.as_secs().max(1)).unwrap_or(15)),
        acquire_time: if ours { before.and_then(|b| b.acquire_time.clone()) } else { Some(now.clone()) },
        renew_time: Some(now),
        lease_transitions: Some(before.and_then(|b| b.lease_transitions).unwrap_or(0) + i32::from(!ours)),
        ..LeaseSpec::default()
    }
}

/// Renews the Lease every third of its duration. Gives up (and says the Lease is lost) when
/// another holder appears, or when no renewal succeeded within the renew deadline of the last
/// one that did, counted from when that one was sent; each attempt is cut off at the deadline,
/// so a hung call cannot keep a holder acting past it.
async fn renew(api: Api<Lease>, s: LeaseSettings, acquired_at: Instant, lost: watch::Sender<bool>) {
    let mut last_ok = acquired_at;
    loop {
        tokio::time::sleep(s.renew_every()).await;
        let sent = Instant::now();
        let left = s.renew_deadline().saturating_sub(sent.duration_since(last_ok));
        let attempt = async {
            let mut lease = api.get(&s.name).await?;
            let spec = lease.spec.clone().unwrap_or_default();
            if spec.holder_identity.as_deref() != Some(s.identity.as_str()) {
                return Ok::<bool, kube::Error>(false);
            }
            lease.spec = Some(held(&s, Some(&spec)));
            api.replace(&s.name, &PostParams::default(), &lease).await?;
            Ok(true)
        };
        match tokio::time::timeout(left, attempt).await {
            Ok(Ok(true)) => last_ok = sent,
            Ok(Ok(false)) => {
                tracing::error!(lease = %s.name, "another process holds the leader Lease now");
                let _ = lost.send(true);
                return;
            }
            Ok(Err(e)) => tracing::warn!(lease = %s.name, error = %e, "renewing the leader Lease failed"),
            Err(_) => tracing::warn!(lease = %s.name, "renewing the leader Lease timed out"),
        }
        if last_ok.elapsed() >= s.renew_deadline() {
            tracing::error!(lease = %s.name, deadline = ?s.renew_deadline(), "could not renew the leader Lease in time");
            let _ = lost.send(true);
            return;
        }
    }
}

impl Leadership {
    /// Resolves when the Lease is lost.
    pub async fn lost(&self) {
        let mut rx = self.lost.clone();
        let _ = rx.wait_for(|lost| *lost).await;
    }

    /// Gives the Lease up (on shutdown) so the other replica takes over at once.
    pub async fn release(self) {
        self.task.abort();
        if let Ok(mut lease) = self.api.get(&self.settings.name).await {
            let spec = lease.spec.clone().unwrap_or_default();
            if spec.holder_identity.as_deref() == Some(self.settings.identity.as_str()) {
                lease.spec = Some(LeaseSpec { holder_identity: None, lease_duration_seconds: Some(1), ..spec });
                if let Err(e) = self.api.replace(&self.settings.name, &PostParams::default(), &lease).await {
                    tracing::warn!(error = %e, "releasing the leader Lease failed");
                }
            }
        }
    }
}
