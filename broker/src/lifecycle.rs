//! The broker's lifecycle with the active controller: register (a new incarnation per
//! process start), heartbeat every `broker.heartbeat.interval.ms`, register again when the
//! controller says the epoch is stale, and on shutdown tell the controller, which fences this
//! broker at once so its partitions are led elsewhere instead of waiting for the session to
//! time out.
//!
//! A registration refused because another live process holds this broker id is retried until
//! that process's session must have ended (a restarted broker whose old process was killed
//! waits at most one session timeout); if it is still refused, the id really is taken and
//! the broker gives up with [`LifecycleError::DuplicateBrokerId`].

use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::metadata::client::{ClientError, ControllerClient};
use crate::metadata::controller::{ErrorKind, Registration};
use crate::metadata::state_machine::StateMachine;
use crate::shutdown::Shutdown;

/// Settings of the lifecycle loop.
#[derive(Debug, Clone, Copy)]
pub struct LifecycleTiming {
    pub heartbeat_interval: Duration,
    pub session_timeout: Duration,
}

/// Why the broker cannot stay in the cluster.
#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    #[error("broker id {id} is already in use by another live broker: {message}")]
    DuplicateBrokerId { id: i32, message: String },
}

/// Registers and heartbeats until shutdown; publishes the broker epoch on `epoch`.
pub async fn run(
    client: ControllerClient,
    state_machine: StateMachine,
    registration: Registration,
    timing: LifecycleTiming,
    epoch: watch::Sender<Option<u64>>,
    mut shutdown: Shutdown,
) -> Result<(), LifecycleError> {
    let id = registration.id;
    let applied = || state_machine.image().applied_index;
    'register: loop {
        epoch.send_replace(None);
        let mut first_refusal: Option<Instant> = None;
        let broker_epoch = loop {
            let attempt = client.register(&registration, applied(), Duration::from_secs(10));
            let result = tokio::select! {
                _ = shutdown.wait() => return Ok(()),
                r = attempt => r,
            };
            match result {
                Ok(e) => break e,
                Err(ClientError::Refused { code: ErrorKind::DuplicateBrokerRegistration, message }) => {
                    let since = *first_refusal.get_or_insert_with(Instant::now);
                    // Past two session timeouts the other process is certainly alive.
                    if since.elapsed() > timing.session_timeout * 2 + Duration::from_secs(2) {
                        return Err(LifecycleError::DuplicateBrokerId { id, message });
                    }
                    tracing::warn!(broker = id, %message, "registration refused; retrying until the previous process's session ends");
                }
                Err(e) => tracing::info!(broker = id, error = %e, "registration not accepted yet; retrying"),
            }
            tokio::select! {
                _ = shutdown.wait() => return Ok(()),
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        };
        tracing::info!(broker = id, epoch = broker_epoch, "registered with the controller");
        epoch.send_replace(Some(broker_epoch));
        let mut ticker = tokio::time::interval(timing.heartbeat_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.wait() => {
                    // Controlled shutdown: the controller fences this broker and moves its
                    // leaderships away; wait until this broker's image says so.
                    let bye = client.heartbeat(id, broker_epoch, applied(), true, Duration::from_secs(5));
                    match bye.await {
                        Ok((_, index)) => {
                            let applied = client.wait_applied(index, Duration::from_secs(5)).await;
                            tracing::info!(broker = id, applied = applied.is_ok(), "controlled shutdown: leaderships moved away");
                        }
                        Err(e) => tracing::warn!(broker = id, error = %e, "could not tell the controller about the shutdown"),
                    }
                    return Ok(());
                }
                _ = ticker.tick() => {}
            }
            match client
                .heartbeat(
                    id,
                    broker_epoch,
                    applied(),
                    false,
                    timing.heartbeat_interval.max(Duration::from_millis(500)),
                )
                .await
            {
                Ok(_) => {}
                Err(ClientError::Refused {
                    code: ErrorKind::StaleBrokerEpoch | ErrorKind::BrokerNotRegistered,
                    message,
                }) => {
                    tracing::warn!(broker = id, %message, "the controller does not know this registration; registering again");
                    continue 'register;
                }
                Err(e) => tracing::debug!(broker = id, error = %e, "heartbeat failed"),
            }
        }
    }
}
