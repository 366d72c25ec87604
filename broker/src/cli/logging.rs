//! Logs go to stderr through `tracing`: human text by default, JSON lines with
//! `--log-format json`; the level comes from `RUST_LOG` (default `info,openraft=warn`: openraft
//! logs every vote and election at info).
//!
//! openraft also logs every failed attempt to reach a peer, four lines per peer twice a second
//! while it is gone, which on a real node fills the disk. [`RepeatLimit`] lets one event per
//! openraft call site through per [`REPEAT_INTERVAL`] and counts the rest;
//! [`report_suppressed`] says every minute how many were held back.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tracing::callsite::Identifier;
use tracing::subscriber::Interest;
use tracing::Metadata;
use tracing_subscriber::layer::{Context, Filter, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// One event per openraft call site per this long.
pub const REPEAT_INTERVAL: Duration = Duration::from_secs(30);

static LIMIT: LazyLock<RepeatLimit> = LazyLock::new(RepeatLimit::default);

pub fn init(format: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,openraft=warn"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(ansi);
    let registry = tracing_subscriber::registry().with(filter);
    let result = if format == "json" {
        registry.with(fmt.json().with_filter(&*LIMIT)).try_init()
    } else {
        registry.with(fmt.with_filter(&*LIMIT)).try_init()
    };
    if let Err(e) = result {
        eprintln!("strom: logging was already initialised: {e}");
    }
}

/// Logs, every `every`, how many repeated openraft events were held back since the last time
/// (nothing when none were).
pub async fn report_suppressed(every: Duration) {
    let mut ticker = tokio::time::interval(every);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let suppressed = LIMIT.take_suppressed();
        if suppressed > 0 {
            tracing::warn!(
                suppressed,
                every_secs = REPEAT_INTERVAL.as_secs(),
                "repeated openraft messages held back (each kind is shown once per interval)"
            );
        }
    }
}

/// The per-call-site limit on openraft's events.
#[derive(Debug, Default)]
pub struct RepeatLimit {
    last: Mutex<HashMap<Identifier, Instant>>,
    suppressed: AtomicU64,
}

impl RepeatLimit {
    fn limited(meta: &Metadata<'_>) -> bool {
        meta.is_event() && meta.target().starts_with("openraft")
    }

    /// Whether an event of `callsite` at `now` is shown; counts it when it is not.
    fn admit(&self, callsite: Identifier, now: Instant) -> bool {
        let mut last = self.last.lock();
        match last.get(&callsite) {
            Some(shown) if now.duration_since(*shown) < REPEAT_INTERVAL => {
                self.suppressed.fetch_add(1, Ordering::Relaxed);
                false
            }
            _ => {
                last.insert(callsite, now);
                true
            }
        }
    }

    fn take_suppressed(&self) -> u64 {
        self.suppressed.swap(0, Ordering::Relaxed)
    }
}

impl<S> Filter<S> for &'static RepeatLimit {
    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        !RepeatLimit::limited(meta) || self.admit(meta.callsite(), Instant::now())
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if RepeatLimit::limited(meta) {
            Interest::sometimes()
        } else {
            Interest::always()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_event_per_call_site_per_interval_is_shown_and_the_rest_counted() {
        struct A;
        struct B;
        static CA: A = A;
        static CB: B = B;
        impl tracing::callsite::Callsite for A {
            fn set_interest(&self, _: Interest) {}
            fn metadata(&self) -> &Metadata<'_> {
                unimplemented!()
            }
        }
        impl tracing::callsite::Callsite for B {
            fn set_interest(&self, _: Interest) {}
            fn metadata(&self) -> &Metadata<'_> {
                unimplemented!()
            }
        }
        let limit = RepeatLimit::default();
        let t0 = Instant::now();
        let a = || Identifier(&CA);
        let b = || Identifier(&CB);
        assert!(limit.admit(a(), t0));
        assert!(limit.admit(b(), t0), "another call site is shown too");
        for i in 1..10 {
            assert!(!limit.admit(a(), t0 + Duration::from_millis(500 * i)));
        }
        assert_eq!(limit.take_suppressed(), 9);
        assert_eq!(limit.take_suppressed(), 0);
        assert!(limit.admit(a(), t0 + REPEAT_INTERVAL), "shown again once the interval passed");
    }
}
