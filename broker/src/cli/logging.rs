//! Logs go to stderr through `tracing`: human text by default, JSON lines with
//! `--log-format json`; the level comes from `RUST_LOG` (default `info,openraft=warn`: openraft logs every vote and election at info).

use tracing_subscriber::EnvFilter;

pub fn init(format: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,openraft=warn"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    let result = if format == "json" { builder.json().try_init() } else { builder.try_init() };
    if let Err(e) = result {
        eprintln!("strom: logging was already initialised: {e}");
    }
}
