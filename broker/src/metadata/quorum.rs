//! Who votes in the metadata quorum, and how openraft is tuned.
//!
//! `--voters 0@h0:9093,1@h1:9093,2@h2:9093` is Kafka's `controller.quorum.voters`: the id and
//! internal gRPC address of each voter, the same list on every broker. A broker listed there
//! votes and may become the active controller; every other broker is a learner that applies
//! the same log. Without `--voters` a broker is a one-voter cluster of its own.

use std::collections::BTreeMap;
use std::sync::Arc;

use openraft::{BasicNode, SnapshotPolicy};

/// The voters of the quorum: broker id → internal address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoterSet {
    voters: BTreeMap<i32, String>,
}

/// `--voters` could not be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VotersError {
    #[error("--voters is empty")]
    Empty,
    #[error("--voters entry {entry:?}: {reason}")]
    Entry { entry: String, reason: String },
    #[error("--voters names broker {0} twice")]
    Duplicate(i32),
}

impl VoterSet {
    /// Parses `id@host:port,...`.
    pub fn parse(text: &str) -> Result<VoterSet, VotersError> {
        let mut voters = BTreeMap::new();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let fail = |reason: &str| VotersError::Entry { entry: entry.to_string(), reason: reason.to_string() };
            let (id, addr) = entry.split_once('@').ok_or_else(|| fail("expected id@host:port"))?;
            let id: i32 = id.trim().parse().map_err(|_| fail("the id is not a number"))?;
            if id < 0 {
                return Err(fail("the id must be >= 0"));
            }
            let (host, port) = addr.rsplit_once(':').ok_or_else(|| fail("the address has no port"))?;
            if host.is_empty() {
                return Err(fail("the address has no host"));
            }
            port.parse::<u16>().map_err(|_| fail("the port is not a number between 0 and 65535"))?;
            if voters.insert(id, addr.to_string()).is_some() {
                return Err(VotersError::Duplicate(id));
            }
        }
        if voters.is_empty() {
            return Err(VotersError::Empty);
        }
        if ![1, 3, 5].contains(&voters.len()) {
            tracing::warn!(voters = voters.len(), "a metadata quorum of 1, 3 or 5 voters is recommended");
        }
        Ok(VoterSet { voters })
    }

    /// A quorum of one: this broker alone.
    pub fn single(id: i32, addr: String) -> VoterSet {
        VoterSet { voters: BTreeMap::from([(id, addr)]) }
    }

    pub fn contains(&self, id: i32) -> bool {
        self.voters.contains_key(&id)
    }

    pub fn addr(&self, id: i32) -> Option<&str> {
        self.voters.get(&id).map(String::as_str)
    }

    pub fn ids(&self) -> impl Iterator<Item = i32> + '_ {
        self.voters.keys().copied()
    }

    pub fn iter(&self) -> impl Iterator<Item = (i32, &str)> + '_ {
        self.voters.iter().map(|(id, a)| (*id, a.as_str()))
    }

    /// The one voter that initializes a new cluster: the lowest id (openraft initializes
    /// exactly one node; the others learn the membership from its log).
    pub fn bootstrapper(&self) -> Option<i32> {
        self.voters.keys().next().copied()
    }

    /// The membership openraft is initialized with.
    pub fn membership(&self) -> BTreeMap<u64, BasicNode> {
        self.voters.iter().map(|(id, addr)| (super::types::node_id(*id), BasicNode { addr: addr.clone() })).collect()
    }

    /// `0,1,2` for messages.
    pub fn describe(&self) -> String {
        self.voters.keys().map(i32::to_string).collect::<Vec<_>>().join(",")
    }
}

/// The quorum's timing and snapshot settings (Kafka-style names in `BrokerConfig`).
#[derive(Debug, Clone, Copy)]
pub struct QuorumTuning {
    /// `controller.quorum.election.timeout.ms`: a follower waits this long (up to twice it)
    /// without hearing from a leader before it campaigns.
    pub election_timeout_ms: u64,
    /// How often the leader sends heartbeats; also the AppendEntries RPC timeout in openraft.
    pub heartbeat_interval_ms: u64,
    /// Entries between snapshots.
    pub snapshot_interval_entries: u64,
    /// Entries kept in the log below the last snapshot (for followers slightly behind).
    pub max_retained_entries: u64,
}

/// The openraft configuration for these settings.
pub fn raft_config(t: QuorumTuning) -> Result<Arc<openraft::Config>, Box<openraft::ConfigError>> {
    let config = openraft::Config {
        cluster_name: "strom".to_string(),
        election_timeout_min: t.election_timeout_ms,
        election_timeout_max: t.election_timeout_ms * 2,
        heartbeat_interval: t.heartbeat_interval_ms,
        // The last chunk includes installing the image on the follower.
        install_snapshot_timeout: 10_000,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(t.snapshot_interval_entries),
        max_in_snapshot_log_to_keep: t.max_retained_entries,
        snapshot_max_chunk_size: 1024 * 1024,
        ..Default::default()
    };
    Ok(Arc::new(config.validate().map_err(Box::new)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn voters_parse_and_the_lowest_id_bootstraps() {
        let v = VoterSet::parse("2@h2:9093, 0@h0:9093,1@[::1]:9093").expect("parse");
        assert_eq!(v.ids().collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!(v.bootstrapper(), Some(0));
        assert_eq!(v.addr(1), Some("[::1]:9093"));
        assert!(v.contains(2) && !v.contains(3));
        assert_eq!(v.describe(), "0,1,2");
    }

    #[test]
    fn bad_voter_lists_name_the_entry_at_fault() {
        assert_eq!(VoterSet::parse(""), Err(VotersError::Empty));
        assert_eq!(VoterSet::parse("0@a:1,0@b:2"), Err(VotersError::Duplicate(0)));
        for (text, bad) in [
            ("x@h:1", "x@h:1"),
            ("1h:1", "1h:1"),
            ("1@h", "1@h"),
            ("1@:9", "1@:9"),
            ("-1@h:1", "-1@h:1"),
            ("1@h:99999", "1@h:99999"),
        ] {
            match VoterSet::parse(text) {
                Err(VotersError::Entry { entry, .. }) => assert_eq!(entry, bad),
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_raft_config_is_valid_for_the_defaults() {
        let t = QuorumTuning {
            election_timeout_ms: 1000,
            heartbeat_interval_ms: 250,
            snapshot_interval_entries: 5000,
            max_retained_entries: 1000,
        };
        let c = raft_config(t).expect("valid");
        assert_eq!((c.election_timeout_min, c.election_timeout_max), (1000, 2000));
    }
}
