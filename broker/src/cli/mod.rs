//! The `strom` command line.
//!
//! - [`serve`]: `strom serve` runs one broker (flags > `STROM_*` environment > `--config` file).
//! - [`dev`]: `strom dev` runs a local cluster of `strom serve` child processes for development.
//! - [`signals`]: waiting for Ctrl-C / SIGTERM.
//! - [`logging`]: tracing output, text or JSON.
//! - [`rack_file`]: `--rack-from-file`, the rack of a broker run by strom-operator.
//! - [`admin`]: `strom cluster|topic|rebalance|broker|group`, over the admin gRPC API.

pub mod admin;
pub mod dev;
pub mod logging;
pub mod rack_file;
pub mod serve;
pub mod signals;

use clap::{Parser, Subcommand};

/// Strom: a Kafka-compatible event-streaming broker.
#[derive(Debug, Parser)]
#[command(name = "strom", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one broker.
    Serve(Box<serve::ServeArgs>),
    /// Run a local cluster for development and demos (no Kubernetes needed).
    Dev(dev::DevArgs),
    /// `cluster`, `topic`, `rebalance`, `broker`, `group`: the admin commands.
    #[command(flatten)]
    Admin(admin::AdminCommand),
}
