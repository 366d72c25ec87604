//! Black-box tests of `strom` processes with real Kafka clients, and the load generator.
//!
//! Nothing here links the broker: every test starts the `strom` binary as a child process on
//! 127.0.0.1 ports of its own and talks to it the way a user would — through librdkafka
//! (`rdkafka`), through hand-built protocol frames, or by looking at the files it leaves on disk.
//!
//! Module map:
//! - [`broker`]: [`broker::BrokerProcess`] — spawn `strom serve` with its own ports and data dir,
//!   wait for `/readyz`, SIGKILL / SIGTERM / restart, a tiny HTTP client, RSS, log capture.
//! - [`cluster`]: [`cluster::Cluster`] — several brokers forming one metadata quorum (voters
//!   and learners), each broker's Metadata normalised for comparison, the agreed controller,
//!   metrics, and a polling `wait_until`.
//! - [`cli`]: running the `strom` admin CLI as a child process (exit code, stdout, stderr).
//! - [`kafka`]: Apache Kafka's own tools (kafka-topics, kafka-consumer-groups, ...) and a small
//!   Java client program, on jars `e2e/kafka/kafka.sh` fetches from Maven Central.
//! - [`disk`]: [`disk::SmallDisk`] — a size-capped tmpfs over a broker's data dir and a filler
//!   file, for disk-full tests.
//! - [`k8s`]: a real Kubernetes control plane (etcd, kube-apiserver with its own CA and RBAC,
//!   kube-controller-manager) built from Go modules by `e2e/k8s/controlplane/build.sh`, one
//!   per test process, a namespace per test, kubectl against it; and [`k8s::kubelet::PodRunner`],
//!   scheduler and kubelet of one fake Node running a namespace's pods as local processes
//!   (PVs for claims, loopback pod IPs, DNS names of pods and Services in /etc/hosts,
//!   ConfigMap/Secret/downward-API volumes, probes, status, deletion); [`k8s::operator`] runs
//!   `strom-operator` against it and [`k8s::operated`] is a Cluster applied with kubectl and
//!   reconciled by it, what the operator's tests share. The `strom-sandbox` binary runs the two in the foreground for trying the operator with
//!   kubectl (docs/sandbox.md).
//! - [`powercut`]: [`powercut::PowerCut`] — a simulated power cut: the processes under test
//!   preload the `e2e/powercut` shim, which logs what they fsynced, renamed and unlinked; after
//!   a SIGKILL every file is cut back to its last synced length (0 if never synced).
//! - [`process`]: run a child process to completion with its output captured and a deadline.
//! - [`prometheus`]: a real Prometheus and promtool (built from their Go module) scraping
//!   brokers and the operator, and queries through its HTTP API.
//! - [`proxy`]: [`proxy::TcpProxy`] — a user-space TCP proxy in front of a broker's port that can
//!   drop every live connection (once or every N ms), refuse all or one peer's connections,
//!   and delay or blackhole one direction; [`cluster::Cluster::isolate`] uses it to cut one
//!   broker off from the others.
//! - [`reliability`]: the reliability suite's harness — a workload writing a history of JSON
//!   lines, the checker of RELIABILITY.md's P1–P8 over it, and seeded scenarios with a fault
//!   schedule, phases and a throughput floor.
//! - [`clients`]: rdkafka helpers — producer configs, a delivery-tracking producer context,
//!   admin calls, and an assign-based consumer that reads partitions from the beginning.
//! - [`batch_consume`]: [`batch_consume::BatchReader`] — a consumer's messages many per call
//!   (`rd_kafka_consume_batch_queue`), for the load generator's consume loop.
//! - [`bench_charts`]: SVG charts of a side-by-side benchmark run's raw results, Kafka beside
//!   Strom (`strom-load charts`).
//! - [`cpu_handoff`]: how long a cache line takes between two pinned CPUs and back — a probe
//!   of the machine the benchmark scripts record before every run.
//! - [`groups`]: consumer groups — [`groups::GroupMember`] (a `subscribe`-based librdkafka
//!   member on a thread of its own, committing only what it processed), waits for a settled
//!   assignment, DescribeGroups / ListGroups / OffsetFetch; [`groups::raw`], a hand-driven
//!   member over raw frames for bad-input tests; [`groups::fixtures`], what the group test
//!   files share.
//! - [`workload`]: [`workload::Writer`], an idempotent acks=all producer writing unique
//!   values while a test injects faults, and the check that every acknowledged record is read
//!   exactly once, at its offset, in send order.
//! - [`wire`]: raw Kafka framing for the hostile-input tests (encode a request, read one response).
//! - [`segment`]: parse record-batch headers straight out of a partition's `.log` file, so crash
//!   tests can compute what recovery must keep without trusting the broker.

pub mod batch_consume;
pub mod bench_charts;
pub mod broker;
pub mod cli;
pub mod clients;
pub mod cluster;
pub mod cpu_handoff;
pub mod disk;
pub mod groups;
pub mod k8s;
pub mod kafka;
pub mod powercut;
pub mod process;
pub mod prometheus;
pub mod proxy;
pub mod reliability;
pub mod segment;
pub mod txn_load;
pub mod wire;
pub mod workload;
