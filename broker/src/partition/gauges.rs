//! A replica's log positions, size and largest follower lag for `/metrics`, read without
//! waiting on the partition's lock: fresh when the lock is free, else the values of the last
//! read. A scrape never waits behind a Produce (an append, or an fsync in durable mode), and a
//! Produce never waits behind a scrape for more than the copy of four numbers.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// What a scrape reports of one replica.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogGauges {
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub size_bytes: u64,
    /// The largest lag, in offsets, of a follower (0 unless this replica leads).
    pub max_follower_lag: i64,
    /// High watermark − last stable offset (offsets held back from read_committed).
    pub last_stable_offset_lag: i64,
    /// Producers with a transaction open here.
    pub open_transactions: i64,
}

/// The last [`LogGauges`] read.
#[derive(Debug, Default)]
pub struct LastGauges {
    log_start_offset: AtomicI64,
    log_end_offset: AtomicI64,
    size_bytes: AtomicU64,
    max_follower_lag: AtomicI64,
    last_stable_offset_lag: AtomicI64,
    open_transactions: AtomicI64,
}

impl LastGauges {
    pub fn store(&self, g: LogGauges) {
        self.log_start_offset.store(g.log_start_offset, Ordering::Relaxed);
        self.log_end_offset.store(g.log_end_offset, Ordering::Relaxed);
        self.size_bytes.store(g.size_bytes, Ordering::Relaxed);
        self.max_follower_lag.store(g.max_follower_lag, Ordering::Relaxed);
        self.last_stable_offset_lag.store(g.last_stable_offset_lag, Ordering::Relaxed);
        self.open_transactions.store(g.open_transactions, Ordering::Relaxed);
    }

    pub fn load(&self) -> LogGauges {
        LogGauges {
            log_start_offset: self.log_start_offset.load(Ordering::Relaxed),
            log_end_offset: self.log_end_offset.load(Ordering::Relaxed),
            size_bytes: self.size_bytes.load(Ordering::Relaxed),
            max_follower_lag: self.max_follower_lag.load(Ordering::Relaxed),
            last_stable_offset_lag: self.last_stable_offset_lag.load(Ordering::Relaxed),
            open_transactions: self.open_transactions.load(Ordering::Relaxed),
        }
    }
}
