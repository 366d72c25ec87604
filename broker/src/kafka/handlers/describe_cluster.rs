//! DescribeCluster: the cluster id, the active controller and the live brokers.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};

use crate::node::Node;

use super::str_bytes;

pub fn handle(node: &Node, req: DescribeClusterRequest) -> DescribeClusterResponse {
    let image = node.catalog.image();
    let mut resp = DescribeClusterResponse::default();
    resp.cluster_id = str_bytes(image.cluster_id.as_deref().unwrap_or_default());
    resp.controller_id = BrokerId(node.controller_id());
    resp.endpoint_type = req.endpoint_type;
    resp.brokers = image
        .live_brokers()
        .map(|b| {
            let mut broker = DescribeClusterBroker::default();
            broker.broker_id = BrokerId(b.id);
            broker.host = str_bytes(&b.kafka.host);
            broker.port = b.kafka.port;
            broker.rack = b.rack.as_deref().map(str_bytes);
            broker
        })
        .collect();
    resp
}
