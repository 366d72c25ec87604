//! `strom`: the broker binary. All logic lives in the library; see `broker::cli`.
//!
//! The process's allocator is jemalloc. With glibc's malloc the produce path's request
//! buffers (up to a MiB per request) came from memory the allocator had just handed back to
//! the kernel, and the broker spent about a tenth of its produce CPU on page faults and
//! zeroing fresh pages (`clear_page_erms`, `exc_page_fault`; docs/benchmarks.md, "The produce
//! path's overheads"); jemalloc keeps freed extents for reuse for a few seconds.
//!
//! Except, by jemalloc's default, allocations of 8 MiB and more: those get an arena of their
//! own whose freed pages go back to the kernel at once (`oversize_threshold`). A replica
//! fetch's answer is up to 10 MiB (`replica.fetch.response.max.bytes`), and its encoding on
//! the leader and its decoding on the follower then faulted in and zeroed fresh pages for
//! every answer: with the threshold off, the brokers of a 3-node 1 KiB acks=all produce spent
//! about 30 % less CPU on the same 2 GB (docs/benchmarks.md, "Replication's page faults").

use std::process::ExitCode;
use std::time::Duration;

use broker::cli::{dev, logging, signals, Cli, Command};
use clap::Parser;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read once at its start (the `MALLOC_CONF` environment variable still
/// overrides them): large allocations stay in the ordinary arenas and their decay.
// An exported symbol jemalloc looks up by name, a NUL-terminated string as it expects.
#[allow(unsafe_code, non_upper_case_globals)]
#[export_name = "malloc_conf"]
pub static malloc_conf: &[u8; 21] = b"oversize_threshold:0\0";

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
            let mut config = match args.into_config() {
                Ok(c) => c,
                Err(e) => return fail(&e),
            };
            logging::init(&config.log_format);
            runtime.block_on(async {
                if let (None, Some(file)) = (&config.rack, &config.rack_from_file) {
                    let wait = Duration::from_millis(config.rack_wait_ms);
                    match broker::cli::rack_file::wait_for_rack(file, &config.rack_key, wait).await {
                        Ok(rack) => config.rack = rack,
                        Err(e) => return fail(&e),
                    }
                }
                tokio::spawn(logging::report_suppressed(Duration::from_secs(60)));
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
