//! `strom-operator`: `run` the controllers, or print the `crds`.

use clap::{Parser, Subcommand};
use operator::run::{run, RunArgs};

#[derive(Debug, Parser)]
#[command(name = "strom-operator", version, about = "Kubernetes operator for Strom clusters")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log format: text or json.
    #[arg(long, global = true, env = "STROM_OPERATOR_LOG_FORMAT", default_value = "text")]
    log_format: String,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the controllers (kubeconfig or in-cluster configuration, as kube finds them).
    Run(RunArgs),
    /// Print the CustomResourceDefinitions as YAML.
    Crds,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube_runtime=warn,tower=warn,hyper=warn"));
    // Colours only on a terminal: a pod's log is a file (`kubectl logs`).
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    if cli.log_format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
    let result = match cli.command {
        Command::Crds => operator::crd::yaml().map(|yaml| print!("{yaml}")).map_err(anyhow::Error::from),
        Command::Run(args) => match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
            Ok(rt) => rt.block_on(run(args)).map_err(anyhow::Error::from),
            Err(e) => Err(anyhow::Error::from(e).context("starting the tokio runtime")),
        },
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "strom-operator failed");
            eprintln!("strom-operator: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
