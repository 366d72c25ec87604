//! The APIs Strom serves and the versions it advertises.
//!
//! Ranges follow a real Kafka release (3.9) so that clients which infer "the broker's Kafka
//! version" from them (kafka-python) gate features correctly, capped by what the
//! kafka-protocol crate can decode. Produce is advertised from version 0 although only v3+
//! (record batch v2) can be used: librdkafka before 2.11.1 turns compression off when the
//! advertised Produce range misses a codec's minimum version (KAFKA-18659).

use kafka_protocol::messages::ApiKey;

/// One routed API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SupportedApi {
    pub key: ApiKey,
    pub name: &'static str,
    pub min: i16,
    pub max: i16,
}

const fn api(key: ApiKey, name: &'static str, min: i16, max: i16) -> SupportedApi {
    SupportedApi { key, name, min, max }
}

/// Every API Strom answers, in API-key order.
pub const SUPPORTED: &[SupportedApi] = &[
    api(ApiKey::Produce, "Produce", 0, 11),
    api(ApiKey::Fetch, "Fetch", 4, 16),
    api(ApiKey::ListOffsets, "ListOffsets", 1, 8),
    api(ApiKey::Metadata, "Metadata", 0, 12),
    api(ApiKey::OffsetCommit, "OffsetCommit", 2, 9),
    api(ApiKey::OffsetFetch, "OffsetFetch", 1, 9),
    api(ApiKey::FindCoordinator, "FindCoordinator", 0, 5),
    api(ApiKey::JoinGroup, "JoinGroup", 0, 9),
    api(ApiKey::Heartbeat, "Heartbeat", 0, 4),
    api(ApiKey::LeaveGroup, "LeaveGroup", 0, 5),
    api(ApiKey::SyncGroup, "SyncGroup", 0, 5),
    api(ApiKey::DescribeGroups, "DescribeGroups", 0, 5),
    api(ApiKey::ListGroups, "ListGroups", 0, 5),
    api(ApiKey::ApiVersions, "ApiVersions", 0, 3),
    api(ApiKey::CreateTopics, "CreateTopics", 2, 7),
    api(ApiKey::DeleteTopics, "DeleteTopics", 1, 6),
    api(ApiKey::DeleteRecords, "DeleteRecords", 0, 2),
    api(ApiKey::InitProducerId, "InitProducerId", 0, 5),
    // The client forms (v4+ is KIP-890's broker-to-coordinator verification).
    api(ApiKey::AddPartitionsToTxn, "AddPartitionsToTxn", 0, 3),
    // v5 is KIP-890's transactions v2 (the epoch bumped on every commit).
    api(ApiKey::EndTxn, "EndTxn", 0, 4),
    api(ApiKey::AddOffsetsToTxn, "AddOffsetsToTxn", 0, 4),
    api(ApiKey::TxnOffsetCommit, "TxnOffsetCommit", 0, 4),
    // What the admin client sends a leader to abort a hanging transaction (kafka-transactions.sh).
    api(ApiKey::WriteTxnMarkers, "WriteTxnMarkers", 1, 1),
    api(ApiKey::DescribeConfigs, "DescribeConfigs", 1, 4),
    api(ApiKey::AlterConfigs, "AlterConfigs", 0, 2),
    api(ApiKey::CreatePartitions, "CreatePartitions", 0, 3),
    api(ApiKey::DeleteGroups, "DeleteGroups", 0, 2),
    api(ApiKey::IncrementalAlterConfigs, "IncrementalAlterConfigs", 0, 1),
    api(ApiKey::OffsetDelete, "OffsetDelete", 0, 0),
    api(ApiKey::ElectLeaders, "ElectLeaders", 0, 2),
    api(ApiKey::AlterPartitionReassignments, "AlterPartitionReassignments", 0, 0),
    api(ApiKey::ListPartitionReassignments, "ListPartitionReassignments", 0, 0),
    api(ApiKey::DescribeQuorum, "DescribeQuorum", 0, 2),
    api(ApiKey::DescribeCluster, "DescribeCluster", 0, 1),
    api(ApiKey::DescribeProducers, "DescribeProducers", 0, 0),
    api(ApiKey::DescribeTransactions, "DescribeTransactions", 0, 0),
    // v2 adds a transactional id regex filter (KIP-1152), not served.
    api(ApiKey::ListTransactions, "ListTransactions", 0, 1),
];

/// The entry for `key`, if Strom serves it.
pub fn lookup(key: ApiKey) -> Option<&'static SupportedApi> {
    SUPPORTED.iter().find(|a| a.key == key)
}

/// The ApiVersions entry for ApiVersions itself (sent with UNSUPPORTED_VERSION, KIP-511).
pub fn api_versions_range() -> (i16, i16) {
    lookup(ApiKey::ApiVersions).map_or((0, 3), |a| (a.min, a.max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_advertised_range_is_decodable_by_the_crate() {
        for api in SUPPORTED {
            let crate_range = api.key.valid_versions();
            assert!(api.max <= crate_range.max, "{} advertises {} > crate max {}", api.name, api.max, crate_range.max);
            if api.key != ApiKey::Produce {
                assert!(
                    api.min >= crate_range.min,
                    "{} advertises {} < crate min {}",
                    api.name,
                    api.min,
                    crate_range.min
                );
            }
        }
    }
}
