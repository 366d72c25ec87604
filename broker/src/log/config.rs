//! Per-log settings, named after Kafka's topic configs, with Kafka's defaults.

/// Settings of one partition log. Field names are Kafka's topic config keys with `_` for `.`.
#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: roll the active segment before it would exceed this size. Default 1 GiB.
    /// Capped at i32::MAX, as in Kafka, because index entries hold 32-bit file positions.
    pub segment_bytes: u64,
    /// `segment.ms`: roll a non-empty active segment this long after its first append.
    /// Default 7 days.
    pub segment_ms: i64,
    /// `segment.index.bytes`: preallocated size of each of the two index files of the active
    /// segment; a segment rolls when either is full. Default 10 MiB.
    pub segment_index_bytes: u64,
    /// `index.interval.bytes`: bytes of log between two sparse index entries. Default 4096.
    pub index_interval_bytes: u64,
    /// `retention.ms`: delete closed segments whose newest timestamp is older. -1 = forever.
    /// Default 7 days.
    pub retention_ms: i64,
    /// `retention.bytes`: delete the oldest closed segments while the log stays at least this
    /// big without them. -1 = unlimited (the default).
    pub retention_bytes: i64,
    /// `flush.messages`: fsync once this many messages (offsets) are unflushed.
    /// Default i64::MAX: never; durability comes from replication, as in Kafka.
    pub flush_messages: i64,
    /// `flush.ms`: fsync once data has been unflushed this long. Default i64::MAX: never.
    pub flush_ms: i64,
}

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * DAY_MS,
            segment_index_bytes: 10 << 20,
            index_interval_bytes: 4096,
            retention_ms: 7 * DAY_MS,
            retention_bytes: -1,
            flush_messages: i64::MAX,
            flush_ms: i64::MAX,
        }
    }
}

impl LogConfig {
    /// The size at which the active segment rolls. File positions in the offset index are
    /// u32, and every indexed batch starts below this bound.
    pub(crate) fn roll_bytes(&self) -> u64 {
        self.segment_bytes.clamp(1, i32::MAX as u64)
    }

    /// The preallocated size of a new index file: at least two time-index entries, so that
    /// one slot stays reserved for the entry written when the segment closes.
    pub(crate) fn index_bytes(&self) -> u64 {
        self.segment_index_bytes.clamp(24, i32::MAX as u64)
    }
}
