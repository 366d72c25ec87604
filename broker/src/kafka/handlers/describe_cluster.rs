//! DescribeCluster: the cluster id, the active controller and the brokers.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};

use crate::node::Node;

use super::str_bytes;

pub fn handle(node: &Node, req: DescribeClusterRequest) -> DescribeClusterResponse {
    let mut resp = DescribeClusterResponse::default();
    resp.cluster_id = str_bytes(&node.identity.cluster_id);
    resp.controller_id = BrokerId(node.config.node_id);
    resp.endpoint_type = req.endpoint_type;
    let mut broker = DescribeClusterBroker::default();
    broker.broker_id = BrokerId(node.config.node_id);
    broker.host = str_bytes(&node.advertised_host);
    broker.port = node.advertised_port;
    broker.rack = node.config.rack.as_deref().map(str_bytes);
    resp.brokers = vec![broker];
    resp
}
