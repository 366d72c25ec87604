//! The error codes a response carries, for `strom_kafka_response_errors_total{api,error}`
//! (Kafka's `kafka.network:type=RequestMetrics,name=ErrorsPerSec,request=*,error=*`): every
//! top-level, per-resource and per-partition code that is not NONE, as Kafka's
//! `AbstractResponse.errorCounts()` counts them.

use std::sync::OnceLock;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    AddOffsetsToTxnResponse, AddPartitionsToTxnResponse, AlterConfigsResponse, AlterPartitionReassignmentsResponse,
    ApiVersionsResponse, CreatePartitionsResponse, CreateTopicsResponse, DeleteGroupsResponse, DeleteRecordsResponse,
    DeleteTopicsResponse, DescribeClusterResponse, DescribeConfigsResponse, DescribeGroupsResponse,
    DescribeProducersResponse, DescribeQuorumResponse, DescribeTransactionsResponse, ElectLeadersResponse,
    EndTxnResponse, FetchResponse, FindCoordinatorResponse, HeartbeatResponse, IncrementalAlterConfigsResponse,
    InitProducerIdResponse, JoinGroupResponse, LeaveGroupResponse, ListGroupsResponse, ListOffsetsResponse,
    ListPartitionReassignmentsResponse, ListTransactionsResponse, MetadataResponse, OffsetCommitResponse,
    OffsetDeleteResponse, OffsetFetchResponse, ProduceResponse, SyncGroupResponse, TxnOffsetCommitResponse,
    WriteTxnMarkersResponse,
};

/// A response that can list the error codes it holds.
pub trait ErrorCodes {
    /// Calls `f` with each code in the response, NONE included (the caller skips it).
    fn each_code(&self, f: &mut dyn FnMut(i16));

    /// The codes other than NONE.
    fn errors(&self) -> Vec<i16> {
        let mut out = Vec::new();
        self.each_code(&mut |c| {
            if c != 0 {
                out.push(c);
            }
        });
        out
    }
}

/// Implements [`ErrorCodes`] from a list of paths to `error_code` fields: `top` for fields
/// of the response, `nested(a => b)` for fields of the elements of a vector, and so on.
macro_rules! error_codes {
    ($ty:ty { $($body:tt)* }) => {
        impl ErrorCodes for $ty {
            #[allow(unused_variables)]
            fn each_code(&self, f: &mut dyn FnMut(i16)) {
                let r = self;
                error_codes!(@walk r f $($body)*);
            }
        }
    };
    (@walk $r:ident $f:ident) => {};
    (@walk $r:ident $f:ident $field:ident; $($rest:tt)*) => {
        $f($r.$field);
        error_codes!(@walk $r $f $($rest)*);
    };
    (@walk $r:ident $f:ident $vec:ident [ $($inner:tt)* ] $($rest:tt)*) => {
        for item in &$r.$vec {
            error_codes!(@walk item $f $($inner)*);
        }
        error_codes!(@walk $r $f $($rest)*);
    };
}

error_codes!(ApiVersionsResponse { error_code; });
error_codes!(MetadataResponse { error_code; topics [ error_code; partitions [ error_code; ] ] });
error_codes!(ProduceResponse { responses [ partition_responses [ error_code; ] ] });
error_codes!(FetchResponse { error_code; responses [ partitions [ error_code; ] ] });
error_codes!(ListOffsetsResponse { topics [ partitions [ error_code; ] ] });
error_codes!(CreateTopicsResponse { topics [ error_code; ] });
error_codes!(DeleteTopicsResponse { responses [ error_code; ] });
error_codes!(CreatePartitionsResponse { results [ error_code; ] });
error_codes!(DescribeConfigsResponse { results [ error_code; ] });
error_codes!(AlterConfigsResponse { responses [ error_code; ] });
error_codes!(IncrementalAlterConfigsResponse { responses [ error_code; ] });
error_codes!(DescribeQuorumResponse { error_code; topics [ partitions [ error_code; ] ] });
error_codes!(ElectLeadersResponse { error_code; replica_election_results [ partition_result [ error_code; ] ] });
error_codes!(AlterPartitionReassignmentsResponse { error_code; responses [ partitions [ error_code; ] ] });
error_codes!(ListPartitionReassignmentsResponse { error_code; });
error_codes!(DescribeClusterResponse { error_code; });
error_codes!(DeleteRecordsResponse { topics [ partitions [ error_code; ] ] });
error_codes!(InitProducerIdResponse { error_code; });
error_codes!(FindCoordinatorResponse { error_code; coordinators [ error_code; ] });
error_codes!(JoinGroupResponse { error_code; });
error_codes!(SyncGroupResponse { error_code; });
error_codes!(HeartbeatResponse { error_code; });
error_codes!(LeaveGroupResponse { error_code; members [ error_code; ] });
error_codes!(OffsetCommitResponse { topics [ partitions [ error_code; ] ] });
error_codes!(OffsetFetchResponse {
    error_code;
    topics [ partitions [ error_code; ] ]
    groups [ error_code; topics [ partitions [ error_code; ] ] ]
});
error_codes!(DescribeGroupsResponse { groups [ error_code; ] });
error_codes!(ListGroupsResponse { error_code; });
error_codes!(DeleteGroupsResponse { results [ error_code; ] });
error_codes!(AddPartitionsToTxnResponse {
    error_code;
    results_by_topic_v3_and_below [ results_by_partition [ partition_error_code; ] ]
});
error_codes!(EndTxnResponse { error_code; });
error_codes!(AddOffsetsToTxnResponse { error_code; });
error_codes!(TxnOffsetCommitResponse { topics [ partitions [ error_code; ] ] });
error_codes!(WriteTxnMarkersResponse { markers [ topics [ partitions [ error_code; ] ] ] });
error_codes!(DescribeTransactionsResponse { transaction_states [ error_code; ] });
error_codes!(ListTransactionsResponse { error_code; });
error_codes!(DescribeProducersResponse { topics [ partitions [ error_code; ] ] });
error_codes!(OffsetDeleteResponse { error_code; topics [ partitions [ error_code; ] ] });

/// Kafka's name of an error code (`NOT_LEADER_OR_FOLLOWER`), as its `error` metric tag
/// spells it; `UNKNOWN_<code>` for codes this build does not know.
pub fn error_name(code: i16) -> &'static str {
    /// Every code Kafka defines lies in -1..=MAX_KNOWN; the names are made once.
    const MAX_KNOWN: i16 = 255;
    static NAMES: OnceLock<Vec<&'static str>> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        (-1..=MAX_KNOWN)
            .map(|c| match ResponseError::try_from_code(c) {
                None => "NONE",
                Some(ResponseError::Unknown(_)) => "",
                Some(e) => &*Box::leak(screaming_snake(&e.to_string()).into_boxed_str()),
            })
            .collect()
    });
    match usize::try_from(i32::from(code) + 1).ok().and_then(|i| names.get(i)).copied() {
        Some(name) if !name.is_empty() => name,
        _ => "UNKNOWN",
    }
}

/// `NotLeaderOrFollower` → `NOT_LEADER_OR_FOLLOWER`.
fn screaming_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, ch) in camel.chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(ch.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::offset_fetch_response::{
        OffsetFetchResponseGroup, OffsetFetchResponsePartitions, OffsetFetchResponseTopics,
    };
    use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};

    use super::*;

    #[test]
    fn nested_codes_are_found_and_none_is_skipped() {
        let partition = |code| PartitionProduceResponse::default().with_error_code(code);
        let response = ProduceResponse::default().with_responses(vec![
            TopicProduceResponse::default().with_partition_responses(vec![partition(0), partition(6)]),
            TopicProduceResponse::default().with_partition_responses(vec![partition(6), partition(19)]),
        ]);
        assert_eq!(response.errors(), vec![6, 6, 19]);

        let group = OffsetFetchResponseGroup::default()
            .with_error_code(16)
            .with_topics(vec![OffsetFetchResponseTopics::default()
                .with_partitions(vec![OffsetFetchResponsePartitions::default().with_error_code(3)])]);
        let response = OffsetFetchResponse::default().with_groups(vec![group]);
        assert_eq!(response.errors(), vec![16, 3]);
        assert!(HeartbeatResponse::default().errors().is_empty());
    }

    #[test]
    fn codes_have_kafkas_names() {
        assert_eq!(error_name(6), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(error_name(0), "NONE");
        assert_eq!(error_name(19), "NOT_ENOUGH_REPLICAS");
        assert_eq!(error_name(16), "NOT_COORDINATOR");
        assert_eq!(error_name(9999), "UNKNOWN");
        assert_eq!(error_name(-7), "UNKNOWN");
    }
}
