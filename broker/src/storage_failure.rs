//! What the broker does when its log storage fails in a way it cannot recover from in place.
//!
//! A failed fsync of log data ([`LogError::Sync`]) leaves the kernel's copy of the file in an
//! unknown state: the dirty pages may have been dropped, and a later fsync can succeed without
//! them (PostgreSQL's "fsyncgate", 2018). Going on would let the broker acknowledge, replicate
//! or serve records it no longer holds. Kafka marks the log directory offline and halts when no
//! directory is left; Strom has one data directory, so it halts: an error log naming the
//! file, then exit status [`EXIT_CODE`]. The supervisor (Kubernetes, systemd, `strom dev`)
//! starts it again, and recovery rescans the log from its last checkpoint, as after any crash;
//! the followers meanwhile lead. An acks=all produce that waited on the failed fsync was not
//! acknowledged.

use crate::log::LogError;

/// The exit status of a broker whose storage failed (EX_SOFTWARE, as for a failed metadata
/// quorum member).
pub const EXIT_CODE: i32 = crate::metadata::watchdog::EXIT_CODE;

/// Whether `error` means the log can no longer be trusted in place.
pub fn is_fatal(error: &LogError) -> bool {
    matches!(error, LogError::Sync { .. })
}

/// Ends the process if `error` is fatal, after logging it for `topic`-`partition`.
pub fn halt_if_fatal(topic: &str, partition: i32, error: &LogError) {
    if is_fatal(error) {
        tracing::error!(%topic, partition, error = %error, exit_code = EXIT_CODE, "an fsync of log data failed: what it covered may be lost from the page cache; exiting so that recovery runs on the next start");
        std::process::exit(EXIT_CODE);
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn only_a_failed_fsync_of_log_data_is_fatal() {
        let io = || std::io::Error::from_raw_os_error(libc::EIO);
        let sync = LogError::Sync { op: "fsync segment log", path: PathBuf::from("x.log"), source: io() };
        let other = LogError::Io { op: "append to segment log", path: PathBuf::from("x.log"), source: io() };
        assert!(is_fatal(&sync));
        assert!(!is_fatal(&other));
        assert!(!is_fatal(&LogError::EmptyAppend));
    }
}
