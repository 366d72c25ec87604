//! `strom-group-member`: one consumer-group member ([`e2e::groups::GroupMember`]) in a process
//! of its own, so that a test can SIGKILL it: a member that dies without sending LeaveGroup,
//! whose partitions the coordinator may only hand on once its session has timed out.
//!
//! Prints its [`e2e::groups::MemberStatus`] as one JSON line on stdout whenever it changes.
//! Exits (leaving the group cleanly) when its stdin reaches end of file, so a test that dies
//! does not leave members behind.

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use e2e::groups::{Assignor, CommitPolicy, GroupMember, GroupMemberOptions};

#[derive(Debug, Parser)]
#[command(name = "strom-group-member", about = "One Kafka consumer-group member that reports its status as JSON lines")]
struct Cli {
    /// bootstrap.servers
    #[arg(long)]
    bootstrap: String,
    /// group.id
    #[arg(long)]
    group: String,
    /// The topic to subscribe to.
    #[arg(long)]
    topic: String,
    /// client.id (how DescribeGroups names the member).
    #[arg(long, default_value = "strom-group-member")]
    client_id: String,
    /// partition.assignment.strategy: range, roundrobin or cooperative-sticky.
    #[arg(long, default_value = "range")]
    assignor: Assignor,
    /// session.timeout.ms
    #[arg(long, default_value_t = 6_000)]
    session_timeout_ms: u32,
    /// heartbeat.interval.ms
    #[arg(long, default_value_t = 1_000)]
    heartbeat_interval_ms: u32,
    /// Commit only at processed positions that are multiples of this (else every
    /// --commit-interval-ms).
    #[arg(long)]
    commit_every: Option<i64>,
    /// How often to commit what was processed, without --commit-every.
    #[arg(long, default_value_t = 200)]
    commit_interval_ms: u64,
    /// Process only the records below this offset of each partition, then idle.
    #[arg(long)]
    process_below: Option<i64>,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let commit = match cli.commit_every {
        Some(n) => CommitPolicy::AtMultiplesOf(n),
        None => CommitPolicy::Periodic(Duration::from_millis(cli.commit_interval_ms)),
    };
    let options = GroupMemberOptions {
        assignor: cli.assignor,
        session_timeout_ms: cli.session_timeout_ms,
        heartbeat_interval_ms: cli.heartbeat_interval_ms,
        commit,
        process_below: cli.process_below,
        ..GroupMemberOptions::new(&cli.group, &cli.client_id, &cli.topic)
    };
    let mut member = GroupMember::start(&cli.bootstrap, options)?;

    let stdin_closed = Arc::new(AtomicBool::new(false));
    {
        let stdin_closed = Arc::clone(&stdin_closed);
        thread::Builder::new()
            .name("stdin-watch".into())
            .spawn(move || {
                let mut sink = [0u8; 256];
                let mut stdin = std::io::stdin();
                while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
                stdin_closed.store(true, Ordering::SeqCst);
            })
            .context("spawn stdin watcher")?;
    }

    let mut last = None;
    while !stdin_closed.load(Ordering::SeqCst) {
        let status = member.status();
        if last.as_ref() != Some(&status) {
            println!("{}", serde_json::to_string(&status).context("encode status")?);
            if let Some(why) = &status.failed {
                anyhow::bail!("member failed: {why}");
            }
            last = Some(status);
        }
        thread::sleep(Duration::from_millis(20));
    }
    let status = member.leave()?;
    println!("{}", serde_json::to_string(&status).context("encode status")?);
    Ok(())
}
