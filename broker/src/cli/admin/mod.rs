//! The admin commands of the `strom` CLI, for people and scripts, over the admin gRPC API
//! (`strom.admin.v1`) of any broker:
//!
//! - this file: the flags every admin command shares, the connection, errors and exit codes.
//! - [`commands`]: the clap definitions of `cluster`, `topic`, `rebalance`, `broker`, `group`,
//!   `transactions`.
//! - [`cluster`]: `strom cluster`, `strom rebalance`, `strom broker`.
//! - [`topics`]: `strom topic`.
//! - [`groups`]: `strom group`.
//! - [`transactions`]: `strom transactions`.
//! - [`output`]: human tables and JSON.
//! - [`progress`]: waiting for a rebalance or drain, with a progress bar.
//!
//! Exit codes (see docs/cli.md): 0 done; 1 the cluster refused (its state forbids it);
//! 2 bad input (also clap's usage errors); 3 not found; 4 the cluster is unreachable or has
//! no controller right now; 5 `--timeout` passed before a rebalance finished.

pub mod cluster;
pub mod commands;
pub mod groups;
pub mod output;
pub mod progress;
pub mod topics;
pub mod transactions;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, ValueEnum};
use strom_proto::admin::admin_client::AdminClient;
use tonic::transport::{Channel, Endpoint};
use tonic::Code;

pub use commands::AdminCommand;

/// Flags shared by every admin command.
#[derive(Debug, Clone, Args)]
pub struct Connection {
    /// A broker's internal (gRPC) address; any broker will do.
    #[arg(long, global = true, env = "STROM_ADMIN", default_value = "127.0.0.1:9093")]
    pub admin: String,
    /// `table` for people, `json` for scripts.
    #[arg(long, short = 'o', global = true, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// How long one call may take, in seconds.
    #[arg(long, global = true, default_value_t = 30)]
    pub request_timeout: u64,
}

/// How answers are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Table,
    Json,
}

/// Why an admin command failed; each kind has its own exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("cannot reach the admin API at {addr}: {source}")]
    Connect {
        addr: String,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("{0}")]
    BadInput(String),
    #[error("{}", describe_status(.0))]
    Status(tonic::Status),
    #[error("{0}")]
    TimedOut(String),
    #[error("writing the output: {0}")]
    Output(#[from] std::io::Error),
}

fn describe_status(s: &tonic::Status) -> String {
    let message = if s.message().is_empty() { format!("{:?}", s.code()) } else { s.message().to_string() };
    match s.code() {
        Code::Unavailable | Code::DeadlineExceeded => format!("the cluster is unavailable: {message}"),
        _ => message,
    }
}

impl From<tonic::Status> for CliError {
    fn from(s: tonic::Status) -> Self {
        CliError::Status(s)
    }
}

impl CliError {
    /// The process exit code scripts can rely on.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::BadInput(_) => 2,
            CliError::Connect { .. } => 4,
            CliError::TimedOut(_) => 5,
            CliError::Output(_) => 1,
            CliError::Status(s) => match s.code() {
                Code::InvalidArgument | Code::OutOfRange => 2,
                Code::NotFound => 3,
                Code::Unavailable | Code::DeadlineExceeded => 4,
                _ => 1,
            },
        }
    }
}

/// A client of the admin API at `conn.admin`.
pub async fn connect(conn: &Connection) -> Result<AdminClient<Channel>, CliError> {
    let addr = conn.admin.clone();
    let uri = if addr.contains("://") { addr.clone() } else { format!("http://{addr}") };
    let endpoint = Endpoint::from_shared(uri)
        .map_err(|e| CliError::BadInput(format!("--admin {addr} is not an address: {e}")))?
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(conn.request_timeout.max(1)));
    let channel = endpoint.connect().await.map_err(|source| CliError::Connect { addr, source })?;
    Ok(AdminClient::new(channel).max_decoding_message_size(64 << 20))
}

/// Runs one admin command; prints its answer or its error and returns the exit code.
pub async fn run(command: AdminCommand) -> ExitCode {
    let conn = command.connection().clone();
    let result = async {
        let mut client = connect(&conn).await?;
        let out = &mut std::io::stdout().lock();
        match command {
            AdminCommand::Cluster(a) => cluster::cluster(&mut client, &conn, a.command, out).await,
            AdminCommand::Rebalance(a) => cluster::rebalance(&mut client, &conn, a.command, out).await,
            AdminCommand::Broker(a) => cluster::broker(&mut client, &conn, a.command, out).await,
            AdminCommand::Topic(a) => topics::run(&mut client, &conn, a.command, out).await,
            AdminCommand::Group(a) => groups::run(&mut client, &conn, a.command, out).await,
            AdminCommand::Transactions(a) => transactions::run(&mut client, &conn, a.command, out).await,
        }
    }
    .await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strom: {}", crate::error_chain::display(&e));
            ExitCode::from(e.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_failure_has_its_own_exit_code() {
        let code = |c: Code| CliError::Status(tonic::Status::new(c, "x")).exit_code();
        assert_eq!(code(Code::FailedPrecondition), 1);
        assert_eq!(code(Code::AlreadyExists), 1);
        assert_eq!(code(Code::InvalidArgument), 2);
        assert_eq!(code(Code::NotFound), 3);
        assert_eq!(code(Code::Unavailable), 4);
        assert_eq!(CliError::BadInput("x".into()).exit_code(), 2);
        assert_eq!(CliError::TimedOut("x".into()).exit_code(), 5);
    }
}
