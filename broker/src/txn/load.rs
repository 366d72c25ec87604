//! A `__transaction_state` partition read back when this broker becomes its leader: the
//! latest metadata of every transactional id on it (a tombstone removes one). Ids left in
//! PrepareCommit or PrepareAbort had their outcome decided by the coordinator before; the
//! new one writes their markers again (markers are idempotent at the partitions) and
//! completes them.

use std::collections::BTreeMap;

use super::records::{decode_key, decode_value};
use super::state::TxnMetadata;
use crate::group::batch::{scan_partition, Scanned};
use crate::partition::Partition;

/// The transactional ids of `partition`, by id.
pub fn load(partition: &Partition) -> BTreeMap<String, TxnMetadata> {
    let mut latest: BTreeMap<String, Option<bytes::Bytes>> = BTreeMap::new();
    scan_partition(partition, |scanned| {
        // The coordinator writes no transactions of its own here: records only.
        let Scanned::Record(r) = scanned else { return };
        match decode_key(r.key) {
            Ok(id) => {
                latest.insert(id, r.value);
            }
            Err(e) => tracing::warn!(partition = partition.index, offset = r.offset, error = %e, "skipping record"),
        }
    });
    latest
        .into_iter()
        .filter_map(|(id, value)| {
            let value = value?;
            match decode_value(&id, value) {
                Ok(m) => Some((id, m)),
                Err(e) => {
                    tracing::warn!(transactional_id = %id, error = %e, "skipping transaction metadata");
                    None
                }
            }
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::BTreeMap as Map;
    use std::sync::Arc;

    use super::*;
    use crate::config::BrokerConfig;
    use crate::group::batch::encode;
    use crate::metadata::topic_config::TopicConfig;
    use crate::partition::Leadership;
    use crate::txn::records::{encode_key, encode_value};
    use crate::txn::state::{add_partitions, end_txn, init_producer_id, EndDecision, InitDecision, TxnState};

    fn leader(dir: &std::path::Path) -> Arc<Partition> {
        let config = TopicConfig::resolve(&BrokerConfig::default(), &Map::new()).unwrap();
        let p = Arc::new(Partition::open(dir, "__transaction_state", 0, uuid::Uuid::from_u128(2), 0, config).unwrap());
        p.set_leadership(Leadership {
            is_leader: true,
            leader_epoch: 0,
            leader: 0,
            replicas: vec![0],
            isr: vec![0],
            partition_epoch: 0,
            adding: vec![],
            fenced: vec![],
        });
        p
    }

    #[test]
    fn the_latest_metadata_of_each_id_is_loaded_and_tombstones_remove_ids() {
        let dir = tempfile::tempdir().unwrap();
        let p = leader(dir.path());
        let write = |records: &[(bytes::Bytes, Option<bytes::Bytes>)]| {
            p.append(&encode(records, 1_000), -1, 1_000).unwrap();
        };
        let Ok(InitDecision::Ready(a)) = init_producer_id(None, "a", 60_000, 900_000, None, Some(1), 0) else {
            panic!()
        };
        write(&[(encode_key("a"), Some(encode_value(&a)))]);
        let a = add_partitions(Some(&a), 1, 0, &[("out".into(), 0)], 1).unwrap().unwrap();
        write(&[(encode_key("a"), Some(encode_value(&a)))]);
        let Ok(EndDecision::Prepare(a)) = end_txn(Some(&a), 1, 0, true, 2) else { panic!() };
        let Ok(InitDecision::Ready(gone)) = init_producer_id(None, "gone", 60_000, 900_000, None, Some(2), 0) else {
            panic!()
        };
        write(&[(encode_key("a"), Some(encode_value(&a))), (encode_key("gone"), Some(encode_value(&gone)))]);
        write(&[(encode_key("gone"), None)]);

        let loaded = load(&p);
        assert_eq!(loaded.keys().collect::<Vec<_>>(), ["a"]);
        // Left decided but not completed: the new coordinator finishes the commit.
        assert_eq!(loaded["a"].state, TxnState::PrepareCommit);
        assert_eq!(loaded["a"], a);
    }
}
