//! Graceful shutdown that every task observes (the mini-redis pattern): a `watch` channel
//! that flips to `true` once; tasks select on [`Shutdown::wait`].

use tokio::sync::watch;

/// The sending side, held by whoever decides to stop the node.
#[derive(Debug, Clone)]
pub struct ShutdownTrigger(watch::Sender<bool>);

/// A handle tasks clone and wait on.
#[derive(Debug, Clone)]
pub struct Shutdown(watch::Receiver<bool>);

/// A new trigger and the handle that observes it.
pub fn channel() -> (ShutdownTrigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (ShutdownTrigger(tx), Shutdown(rx))
}

impl ShutdownTrigger {
    /// Asks every task to stop; idempotent.
    pub fn trigger(&self) {
        self.0.send_replace(true);
    }
}

impl Shutdown {
    /// Whether shutdown was already requested.
    pub fn is_triggered(&self) -> bool {
        *self.0.borrow()
    }

    /// Completes once shutdown is requested (or the trigger is dropped).
    pub async fn wait(&mut self) {
        // An error means the trigger is gone, which also means "stop".
        let _ = self.0.wait_for(|stop| *stop).await;
    }
}
