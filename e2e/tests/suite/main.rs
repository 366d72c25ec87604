//! The black-box suite: every e2e test in one binary (one link, one copy of librdkafka and
//! kube on disk instead of one per file). One module per former test file; run one with
//! `cargo test --release -p e2e --test suite <module>::` (e2e/README.md).

mod admin;
mod admin_cli;
mod bad_input;
mod cluster;
mod cluster_failover;
mod cluster_snapshots;
mod compaction;
mod connection_flood;
mod crash;
mod crash_consistency;
mod dev;
mod disk_errors;
mod disk_full;
mod fetch_sessions;
mod fuzz_seeds;
mod group_bad_input;
mod groups;
mod idempotence;
mod internal_bad_input;
mod k8s_chart;
mod k8s_controlplane;
mod k8s_operator;
mod k8s_operator_measure;
mod k8s_real_cluster;
mod k8s_runner;
mod k8s_sandbox;
mod k8s_topics;
mod kafka_tools;
mod kip_sequences;
mod lifecycle;
mod load_generator;
mod observability;
mod observability_measure;
mod power_cut;
mod powercut;
mod rebalance;
mod reliability;
mod replication;
mod replication_faults;
mod retention;
mod roundtrip;
mod transactions;
mod transactions_bad_input;
mod transactions_copier;
mod transactions_failover;
mod transactions_tools;

mod versions;
