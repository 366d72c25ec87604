//! Waiting for a rebalance (or drain) to finish: polls `RebalanceStatus` and draws a progress
//! bar on stderr — redrawn in place on a terminal, a line every few seconds otherwise.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use strom_proto::admin::admin_client::AdminClient;
use strom_proto::admin::{RebalanceProgress, RebalanceStatusRequest};
use tonic::transport::Channel;

use super::output::bytes;
use super::CliError;

const POLL: Duration = Duration::from_millis(500);
const LINE_EVERY: Duration = Duration::from_secs(5);
const WIDTH: usize = 30;

/// One line of progress: `[#####-----] 12/24 replicas moved, 3 partitions left, 1.2 MiB behind`.
/// `total` is the number of replicas the plan moves (0 if unknown).
pub fn render(total: i32, p: &RebalanceProgress) -> String {
    let remaining = p.replicas_remaining.max(0);
    if total <= 0 {
        return format!(
            "{} partition(s) moving, {} replica(s) catching up, {} behind",
            p.partitions_remaining,
            remaining,
            bytes(p.bytes_behind)
        );
    }
    let done = (total - remaining.min(total)).max(0);
    let filled = usize::try_from(done).unwrap_or(0) * WIDTH / usize::try_from(total).unwrap_or(1).max(1);
    format!(
        "[{}{}] {done}/{total} replicas moved, {} partition(s) left, {} behind",
        "#".repeat(filled),
        "-".repeat(WIDTH - filled.min(WIDTH)),
        p.partitions_remaining,
        bytes(p.bytes_behind)
    )
}

/// Polls until no partition is being reassigned; `draw` is false for JSON output. Returns
/// the last progress seen (all zero when done).
pub async fn wait(
    client: &mut AdminClient<Channel>,
    total: i32,
    timeout: Option<u64>,
    draw: bool,
) -> Result<RebalanceProgress, CliError> {
    let started = Instant::now();
    let tty = std::io::stderr().is_terminal();
    let mut last_line: Option<Instant> = None;
    loop {
        let progress = client.rebalance_status(RebalanceStatusRequest {}).await?.into_inner();
        let done = progress.partitions_remaining == 0;
        if draw {
            let line = render(total, &progress);
            let mut err = std::io::stderr().lock();
            if tty {
                let _ = write!(err, "\r\x1b[2K{line}");
                if done {
                    let _ = writeln!(err);
                }
            } else if done || last_line.is_none_or(|t| t.elapsed() >= LINE_EVERY) {
                let _ = writeln!(err, "{line}");
                last_line = Some(Instant::now());
            }
        }
        if done {
            return Ok(progress);
        }
        if let Some(limit) = timeout {
            if started.elapsed() >= Duration::from_secs(limit) {
                if draw && tty {
                    eprintln!();
                }
                return Err(CliError::TimedOut(format!(
                    "still moving after {limit} s: {} (the moves carry on; see `strom rebalance status`)",
                    render(total, &progress)
                )));
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_fills_as_replicas_catch_up() {
        let p = |replicas, partitions| RebalanceProgress {
            partitions_remaining: partitions,
            replicas_remaining: replicas,
            bytes_behind: 2048,
            in_progress: vec![],
        };
        let half = render(10, &p(5, 4));
        assert!(half.starts_with(&format!("[{}{}] 5/10", "#".repeat(15), "-".repeat(15))), "{half}");
        assert!(half.contains("4 partition(s) left") && half.contains("2.0 KiB behind"), "{half}");
        assert!(render(10, &p(0, 0)).contains("10/10"));
        assert!(render(0, &p(3, 2)).starts_with("2 partition(s) moving, 3 replica(s)"));
        assert!(render(2, &p(7, 1)).contains("0/2"), "more remaining than planned is clamped");
    }
}
