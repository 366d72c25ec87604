//! Ends the process when this broker's member of the metadata quorum stops for good.
//!
//! openraft ends its core on a storage error (ENOSPC or EIO from the metadata log) or a panic,
//! and from then on the broker would live on without metadata: no controller, no new images,
//! readiness stuck. Kafka halts when its metadata log directory fails; Strom does the same.
//! The process exits with [`EXIT_CODE`] after an error log naming the cause; the supervisor
//! (Kubernetes, systemd, `strom dev`) starts it again, and recovery treats the exit like any
//! crash. A full disk is kept from getting here by the free-space floor
//! ([`crate::disk_space`]).

use openraft::error::Fatal;
use tokio::sync::watch;

use super::types::RaftMetrics;

/// The exit status of a broker whose metadata quorum member failed (EX_SOFTWARE).
pub const EXIT_CODE: i32 = 70;

/// The failure that must end the process, if `state` shows one. A normal stop is not one.
pub fn fatal(state: &Result<(), Fatal<u64>>) -> Option<String> {
    match state {
        Ok(()) | Err(Fatal::Stopped) => None,
        Err(fatal) => Some(fatal.to_string()),
    }
}

/// Watches `metrics` until it closes; exits the process on a failure. Abort it before
/// shutting raft down.
pub async fn run(mut metrics: watch::Receiver<RaftMetrics>) {
    loop {
        let failure = fatal(&metrics.borrow_and_update().running_state);
        if let Some(cause) = failure {
            tracing::error!(cause = %cause, exit_code = EXIT_CODE, "the metadata quorum member stopped for good; exiting so that the broker is started again");
            std::process::exit(EXIT_CODE);
        }
        if metrics.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_failure_ends_the_process() {
        assert_eq!(fatal(&Ok(())), None);
        assert_eq!(fatal(&Err(Fatal::Stopped)), None);
        assert_eq!(fatal(&Err(Fatal::Panicked)).as_deref(), Some("panicked"));
    }
}
