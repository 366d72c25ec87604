//! `strom`: the broker binary. All logic lives in the library; see `broker::cli`.

use std::process::ExitCode;

use broker::cli::{dev, logging, signals, Cli, Command};
use clap::Parser;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("strom: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match cli.command {
        Command::Serve(args) => {
            let config = match args.into_config() {
                Ok(c) => c,
                Err(e) => return fail(&e),
            };
            logging::init(&config.log_format);
            runtime.block_on(async {
                let (trigger, shutdown) = broker::shutdown::channel();
                tokio::spawn(async move {
                    let sig = signals::stop_requested().await;
                    tracing::info!(signal = sig, "stop requested");
                    trigger.trigger();
                });
                match broker::server::run(config, shutdown, |_| {}).await {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) => {
                        tracing::error!(error = %broker::error_chain::display(&e), "strom broker failed");
                        fail(&e)
                    }
                }
            })
        }
        Command::Dev(args) => {
            logging::init("text");
            match runtime.block_on(dev::run(args)) {
                Ok(code) => code,
                Err(e) => fail(&e),
            }
        }
        Command::Admin(command) => runtime.block_on(broker::cli::admin::run(command)),
    }
}

fn fail(e: &(dyn std::error::Error + 'static)) -> ExitCode {
    eprintln!("strom: {}", broker::error_chain::display(e));
    ExitCode::FAILURE
}
