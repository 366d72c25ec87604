//! A cluster of `strom serve` processes on 127.0.0.1, and what the tests read from it.
//!
//! [`Cluster::start`] picks every broker's ports first (the `--voters` list names the voters'
//! internal addresses), spawns every broker and only then waits for each to be ready: no broker
//! is ready before the quorum has a leader. [`Cluster::metadata_of`] asks one broker for its
//! Metadata over a raw connection and normalises it into a [`MetadataView`], so tests can
//! compare what different brokers serve, including the controller id that librdkafka does not
//! expose.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{ApiKey, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::broker::{free_local_addrs, strom_bin, BrokerOptions, BrokerProcess, READY_TIMEOUT};
use crate::proxy::TcpProxy;
use crate::wire;

/// The shape of a cluster to start.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    pub brokers: usize,
    /// The first `voters` brokers vote; the others are learners.
    pub voters: usize,
    /// `--rack` per broker (missing entries: none).
    pub racks: Vec<Option<String>>,
    /// Flags every broker gets.
    pub extra_args: Vec<String>,
    /// Brokers whose internal port the others reach through a [`TcpProxy`], so a test can
    /// partition them off (`Cluster::proxies`). A voter's proxy is its address in `--voters`.
    pub proxied: Vec<i32>,
    /// Each broker's outgoing connections leave from a loopback address of its own,
    /// 127.0.0.(10 + id) (the e2e shim, preloaded), so the proxies can refuse one broker's
    /// connections: [`Cluster::isolate`] cuts it off in both directions.
    pub source_addresses: bool,
    /// Whether clients reach every broker through a [`TcpProxy`] in front of its Kafka port
    /// (each broker advertises its proxy: `Cluster::client_proxies`).
    pub client_proxies: bool,
    /// Brokers (learners) that get their ports and data dirs but are not started: a test
    /// starts them later (`cluster.broker(id).start()`) to grow the cluster.
    pub held_back: Vec<i32>,
    /// Environment variables every broker gets ([`BrokerOptions::env`]).
    pub env: Vec<(String, String)>,
}

impl ClusterSpec {
    /// `brokers` brokers, `voters` of them voting, with the fast session settings tests use.
    pub fn new(brokers: usize, voters: usize) -> ClusterSpec {
        ClusterSpec {
            brokers,
            voters,
            racks: Vec::new(),
            extra_args: FAST_SESSIONS.iter().map(|s| s.to_string()).collect(),
            proxied: Vec::new(),
            source_addresses: false,
            client_proxies: false,
            held_back: Vec::new(),
            env: Vec::new(),
        }
    }

    pub fn with_args(mut self, args: &[&str]) -> ClusterSpec {
        self.extra_args.extend(args.iter().map(|s| s.to_string()));
        self
    }
}

/// Short broker sessions, so fencing happens within a test's patience (Kafka's defaults are
/// 9 s and 2 s).
pub const FAST_SESSIONS: &[&str] = &[
    "--broker-session-timeout-ms",
    "2000",
    "--broker-heartbeat-interval-ms",
    "250",
    "--group-initial-rebalance-delay-ms",
    "0",
];

/// Running brokers, indexed by broker id.
#[derive(Debug)]
pub struct Cluster {
    pub brokers: Vec<BrokerProcess>,
    pub voters: String,
    /// The proxies in front of the internal ports of `ClusterSpec::proxied` brokers.
    pub proxies: BTreeMap<i32, TcpProxy>,
    /// With `ClusterSpec::client_proxies`, the proxy in front of each broker's Kafka port.
    pub client_proxies: BTreeMap<i32, TcpProxy>,
}

/// One partition as a broker's Metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionView {
    pub error: i16,
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

/// One topic as a broker's Metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicView {
    pub id: String,
    pub partitions: Vec<PartitionView>,
}

/// A broker's Metadata answer, normalised for comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataView {
    pub cluster_id: Option<String>,
    pub controller: i32,
    /// Listed brokers: id → host:port.
    pub brokers: BTreeMap<i32, String>,
    pub topics: BTreeMap<String, TopicView>,
}

impl MetadataView {
    /// How many partitions each broker leads.
    pub fn leaders(&self) -> BTreeMap<i32, usize> {
        let mut out = BTreeMap::new();
        for t in self.topics.values() {
            for p in &t.partitions {
                *out.entry(p.leader).or_default() += 1;
            }
        }
        out
    }
}

impl Cluster {
    /// Starts the brokers of `spec` and waits until every one is ready.
    pub fn start(spec: ClusterSpec) -> Result<Cluster> {
        let mut cluster = Cluster::spawn(spec)?;
        cluster.wait_all_ready(READY_TIMEOUT)?;
        Ok(cluster)
    }

    /// Spawns the brokers of `spec` without waiting.
    pub fn spawn(spec: ClusterSpec) -> Result<Cluster> {
        if spec.voters == 0 || spec.voters > spec.brokers {
            bail!("a cluster of {} brokers cannot have {} voters", spec.brokers, spec.voters);
        }
        let bin = strom_bin()?;
        let mut addrs = Vec::new();
        for _ in 0..spec.brokers {
            addrs.push(free_local_addrs::<3>()?);
        }
        let mut proxies = BTreeMap::new();
        for &node in &spec.proxied {
            let [_, _, internal] =
                addrs.get(usize::try_from(node)?).with_context(|| format!("no broker {node} to proxy"))?;
            proxies.insert(node, TcpProxy::start(*internal)?);
        }
        let voters: Vec<String> = addrs
            .iter()
            .take(spec.voters)
            .enumerate()
            .map(|(id, [_, _, internal])| match i32::try_from(id).ok().and_then(|n| proxies.get(&n)) {
                Some(proxy) => format!("{id}@{}", proxy.addr()),
                None => format!("{id}@{internal}"),
            })
            .collect();
        let voters = voters.join(",");
        let mut brokers = Vec::new();
        let mut client_proxies = BTreeMap::new();
        for (id, [kafka, http, internal]) in addrs.into_iter().enumerate() {
            let mut extra_args = spec.extra_args.clone();
            if let Some(Some(rack)) = spec.racks.get(id) {
                extra_args.extend(["--rack".to_string(), rack.clone()]);
            }
            let node = i32::try_from(id).context("broker id")?;
            if let Some(proxy) = proxies.get(&node) {
                // A voter's address in --voters is already its proxy's.
                if id >= spec.voters {
                    extra_args.extend(["--advertised-internal".to_string(), proxy.addr().to_string()]);
                }
            }
            let mut env = spec.env.clone();
            if spec.source_addresses {
                if !env.iter().any(|(k, _)| k == "LD_PRELOAD") {
                    env.push(("LD_PRELOAD".into(), crate::powercut::shim_path()?.to_string_lossy().into_owned()));
                }
                env.push(("STROM_SHIM_SOURCE_IP".into(), source_ip(node).to_string()));
            }
            let mut advertised_kafka = None;
            if spec.client_proxies {
                let proxy = TcpProxy::start(kafka)?;
                advertised_kafka = Some(proxy.addr());
                client_proxies.insert(node, proxy);
            }
            let options = BrokerOptions {
                node_id: Some(i32::try_from(id).context("broker id")?),
                voters: Some(voters.clone()),
                advertised_kafka,
                extra_args,
                env,
                ..BrokerOptions::default()
            };
            let tmp = tempfile::Builder::new()
                .prefix(&format!("strom-e2e-b{id}-"))
                .tempdir()
                .context("create a broker's temp dir")?;
            let mut broker = BrokerProcess::with_addrs(bin.clone(), options, kafka, http, internal, tmp)?;
            if spec.held_back.contains(&node) {
                if id < spec.voters {
                    bail!("broker {id} is a voter: the quorum needs it from the start");
                }
            } else {
                broker.spawn()?;
            }
            brokers.push(broker);
        }
        Ok(Cluster { brokers, voters, proxies, client_proxies })
    }

    /// Cuts broker `id` off from every other broker, both ways: its proxy refuses every
    /// connection, and every other proxy refuses its (needs `proxied` to hold every broker and
    /// `source_addresses`). Clients still reach its Kafka port. Undone by [`Self::heal_all`].
    pub fn isolate(&self, id: i32) -> Result<()> {
        let own = self.proxies.get(&id).with_context(|| format!("broker {id} is not proxied"))?;
        own.partition();
        for (other, proxy) in &self.proxies {
            if *other != id {
                proxy.isolate_source(source_ip(id).into());
            }
        }
        Ok(())
    }

    /// Ends every partition [`Self::isolate`] made.
    pub fn heal_all(&self) {
        for proxy in self.proxies.values() {
            proxy.heal();
        }
    }

    /// Waits until every running broker answers `/readyz`.
    pub fn wait_all_ready(&mut self, timeout: Duration) -> Result<()> {
        for b in &mut self.brokers {
            if b.is_running() {
                b.wait_ready(timeout).with_context(|| format!("broker {}", b.node_id()))?;
            }
        }
        Ok(())
    }

    /// `bootstrap.servers` naming every broker.
    pub fn bootstrap(&self) -> String {
        self.brokers.iter().map(BrokerProcess::bootstrap).collect::<Vec<_>>().join(",")
    }

    /// `bootstrap.servers` naming only the brokers that run now.
    pub fn bootstrap_running(&mut self) -> String {
        let mut out = Vec::new();
        for b in &mut self.brokers {
            if b.is_running() {
                out.push(b.bootstrap());
            }
        }
        out.join(",")
    }

    pub fn broker(&mut self, id: i32) -> &mut BrokerProcess {
        &mut self.brokers[usize::try_from(id).unwrap_or(usize::MAX)]
    }

    /// What broker `id` answers to Metadata for every topic.
    pub fn metadata_of(&self, id: i32) -> Result<MetadataView> {
        let b = &self.brokers[usize::try_from(id).context("broker id")?];
        metadata_view(b.kafka_addr(), None)
    }

    /// The active controller as broker `id` names it (-1 if none).
    pub fn controller_seen_by(&self, id: i32) -> Result<i32> {
        Ok(self.metadata_of(id)?.controller)
    }

    /// The controller every running broker agrees on, once they do.
    pub fn agreed_controller(&mut self, timeout: Duration) -> Result<i32> {
        let running: Vec<i32> = self.running_ids();
        wait_until(timeout, || {
            let seen: Vec<i32> = running.iter().map(|id| self.controller_seen_by(*id)).collect::<Result<_>>()?;
            let first = *seen.first().ok_or_else(|| anyhow!("no broker running"))?;
            if first >= 0 && seen.iter().all(|c| *c == first) {
                Ok(first)
            } else {
                bail!("brokers {running:?} name controllers {seen:?}")
            }
        })
    }

    /// Ids of the brokers whose processes run (not paused or killed ones' state).
    pub fn running_ids(&mut self) -> Vec<i32> {
        let mut out = Vec::new();
        for b in &mut self.brokers {
            if b.is_running() {
                out.push(b.node_id());
            }
        }
        out
    }

    /// Waits until the Metadata of every broker in `ids` is identical; returns it.
    pub fn wait_same_metadata(&self, ids: &[i32], timeout: Duration) -> Result<MetadataView> {
        wait_until(timeout, || {
            let views: Vec<MetadataView> = ids.iter().map(|id| self.metadata_of(*id)).collect::<Result<_>>()?;
            let first = views.first().cloned().ok_or_else(|| anyhow!("no broker given"))?;
            for (id, v) in ids.iter().zip(&views) {
                if *v != first {
                    bail!("broker {id} serves {v:?}\nbroker {} serves {first:?}", ids[0]);
                }
            }
            Ok(first)
        })
    }

    /// Partition `partition` of `topic` as the first running broker of `via` describes it.
    pub fn partition_of(&self, via: &[i32], topic: &str, partition: usize) -> Result<PartitionView> {
        let mut last = None;
        for id in via {
            match self.metadata_of(*id) {
                Ok(view) => {
                    let t = view.topics.get(topic).ok_or_else(|| anyhow!("broker {id} has no topic {topic}"))?;
                    return t
                        .partitions
                        .get(partition)
                        .cloned()
                        .ok_or_else(|| anyhow!("{topic} has no partition {partition}"));
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| anyhow!("no broker to ask")))
    }

    /// Waits until every partition of `topic` has a live leader and all `replication_factor`
    /// replicas in sync, as `via` sees it.
    pub fn wait_fully_replicated(
        &self,
        via: &[i32],
        topic: &str,
        replication_factor: usize,
        timeout: Duration,
    ) -> Result<MetadataView> {
        wait_until(timeout, || {
            let view = self.metadata_of(via[0])?;
            let t = view.topics.get(topic).ok_or_else(|| anyhow!("no topic {topic}"))?;
            for (i, p) in t.partitions.iter().enumerate() {
                anyhow::ensure!(
                    p.leader >= 0 && view.brokers.contains_key(&p.leader),
                    "{topic}-{i} has no live leader: {p:?}"
                );
                anyhow::ensure!(p.isr.len() == replication_factor, "{topic}-{i} ISR {:?}", p.isr);
            }
            Ok(view)
        })
    }

    /// The value of a Prometheus gauge or counter (without labels) on broker `id`.
    pub fn metric(&self, id: i32, name: &str) -> Result<f64> {
        let b = &self.brokers[usize::try_from(id).context("broker id")?];
        let body = b.http_get("/metrics")?.body;
        metric_value(&body, name).ok_or_else(|| anyhow!("no metric {name} on broker {id}"))
    }
}

/// The value of a metric with exactly these labels (e.g. `topic="t",partition="0"`).
pub fn labelled_metric_value(text: &str, name: &str, labels: &str) -> Option<f64> {
    let prefix = format!("{name}{{{labels}}} ");
    text.lines().find_map(|l| l.strip_prefix(&prefix).and_then(|v| v.trim().parse().ok()))
}

/// The value of an unlabelled metric in a Prometheus text exposition.
pub fn metric_value(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')).and_then(|v| v.trim().parse().ok()))
}

/// The partition of an internal topic (`__consumer_offsets`, `__transaction_state`) that
/// holds `id` (a group or transactional id), as Kafka places it:
/// `abs(javaHashCode(id)) % partitions`. Its leader is the id's coordinator.
pub fn coordinator_partition(id: &str, partitions: usize) -> usize {
    let mut h: i32 = 0;
    for unit in id.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(i32::from(unit));
    }
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    usize::try_from(abs).unwrap_or(0) % partitions.max(1)
}

/// Polls `f` every 100 ms until it succeeds or `timeout` passes (then returns its last error).
/// A liveness bound, not a timing assertion.
pub fn wait_until<T>(timeout: Duration, mut f: impl FnMut() -> Result<T>) -> Result<T> {
    let deadline = Instant::now() + timeout;
    loop {
        match f() {
            Ok(v) => return Ok(v),
            Err(e) if Instant::now() >= deadline => return Err(e.context(format!("still failing after {timeout:?}"))),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// One Metadata v12 round trip to `addr` (all topics, or `topics`), normalised.
pub fn metadata_view(addr: SocketAddr, topics: Option<&[&str]>) -> Result<MetadataView> {
    const VERSION: i16 = 12;
    let mut req = MetadataRequest::default();
    req.topics = topics.map(|ts| {
        ts.iter()
            .map(|t| {
                let mut r = MetadataRequestTopic::default();
                r.name = Some(TopicName(StrBytes::from_string(t.to_string())));
                r
            })
            .collect()
    });
    req.allow_auto_topic_creation = false;
    let resp: MetadataResponse = roundtrip(addr, ApiKey::Metadata, VERSION, &req)?;
    Ok(MetadataView {
        cluster_id: resp.cluster_id.map(|c| c.to_string()),
        controller: resp.controller_id.0,
        brokers: resp.brokers.iter().map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port))).collect(),
        topics: resp
            .topics
            .iter()
            .map(|t| {
                let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
                let view = TopicView {
                    id: t.topic_id.to_string(),
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| PartitionView {
                            error: p.error_code,
                            leader: p.leader_id.0,
                            leader_epoch: p.leader_epoch,
                            replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
                            isr: p.isr_nodes.iter().map(|b| b.0).collect(),
                        })
                        .collect(),
                };
                (name, view)
            })
            .collect(),
    })
}

/// CreateTopics sent to exactly the broker at `addr` (rdkafka's admin would pick the
/// controller itself): exercises forwarding from any broker. Returns the topic's error code
/// and message.
pub fn create_topic_via(
    addr: SocketAddr,
    name: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) -> Result<(i16, Option<String>)> {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
    const VERSION: i16 = 5;
    let mut topic = CreatableTopic::default();
    topic.name = TopicName(StrBytes::from_string(name.to_string()));
    topic.num_partitions = partitions;
    topic.replication_factor = 1;
    topic.configs = configs
        .iter()
        .map(|(k, v)| {
            let mut c = CreatableTopicConfig::default();
            c.name = StrBytes::from_string(k.to_string());
            c.value = Some(StrBytes::from_string(v.to_string()));
            c
        })
        .collect();
    let mut req = CreateTopicsRequest::default();
    req.topics = vec![topic];
    req.timeout_ms = 30_000;
    let resp: CreateTopicsResponse = roundtrip(addr, ApiKey::CreateTopics, VERSION, &req)?;
    let t = resp.topics.first().ok_or_else(|| anyhow!("CreateTopics answered no topic"))?;
    Ok((t.error_code, t.error_message.as_ref().map(|m| m.to_string())))
}

/// DeleteTopics (by name) sent to exactly the broker at `addr`; returns the error code.
pub fn delete_topic_via(addr: SocketAddr, name: &str) -> Result<i16> {
    use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};
    const VERSION: i16 = 4;
    let mut req = DeleteTopicsRequest::default();
    req.topic_names = vec![TopicName(StrBytes::from_string(name.to_string()))];
    req.timeout_ms = 30_000;
    let resp: DeleteTopicsResponse = roundtrip(addr, ApiKey::DeleteTopics, VERSION, &req)?;
    Ok(resp.responses.first().map_or(-1, |r| r.error_code))
}

/// IncrementalAlterConfigs SET of one topic config, sent to exactly the broker at `addr`;
/// returns the error code.
pub fn set_topic_config_via(addr: SocketAddr, topic: &str, key: &str, value: &str) -> Result<i16> {
    use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};
    const VERSION: i16 = 1;
    let mut config = AlterableConfig::default();
    config.name = StrBytes::from_string(key.to_string());
    config.config_operation = 0;
    config.value = Some(StrBytes::from_string(value.to_string()));
    let mut resource = AlterConfigsResource::default();
    resource.resource_type = 2;
    resource.resource_name = StrBytes::from_string(topic.to_string());
    resource.configs = vec![config];
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources = vec![resource];
    let resp: IncrementalAlterConfigsResponse = roundtrip(addr, ApiKey::IncrementalAlterConfigs, VERSION, &req)?;
    Ok(resp.responses.first().map_or(-1, |r| r.error_code))
}

/// The config overrides of `topic` as DescribeConfigs on the broker at `addr` reports them
/// (non-default values only).
pub fn topic_configs_via(addr: SocketAddr, topic: &str) -> Result<BTreeMap<String, String>> {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
    const VERSION: i16 = 1;
    let mut resource = DescribeConfigsResource::default();
    resource.resource_type = 2;
    resource.resource_name = StrBytes::from_string(topic.to_string());
    resource.configuration_keys = None;
    let mut req = DescribeConfigsRequest::default();
    req.resources = vec![resource];
    let resp: DescribeConfigsResponse = roundtrip(addr, ApiKey::DescribeConfigs, VERSION, &req)?;
    let r = resp.results.first().ok_or_else(|| anyhow!("DescribeConfigs answered nothing"))?;
    if r.error_code != 0 {
        bail!("DescribeConfigs {topic}: error {}", r.error_code);
    }
    Ok(r.configs
        .iter()
        .filter(|c| c.config_source == 1)
        .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string()).unwrap_or_default()))
        .collect())
}

/// One request/response on a fresh connection to `addr`.
fn roundtrip<Req, Resp>(addr: SocketAddr, key: ApiKey, version: i16, req: &Req) -> Result<Resp>
where
    Req: kafka_protocol::protocol::Encodable,
    Resp: kafka_protocol::protocol::Decodable,
{
    let mut stream = wire::connect(addr, Duration::from_secs(40))?;
    stream.write_all(&wire::encode_request(key, version, 11, req)?).with_context(|| format!("send {key:?}"))?;
    let frame = wire::read_frame(&mut stream)?.ok_or_else(|| anyhow!("{addr} closed the connection on {key:?}"))?;
    Ok(wire::decode_response::<Resp>(key, version, frame)?.1)
}

/// The loopback address broker `id`'s outgoing connections leave from with
/// `ClusterSpec::source_addresses`.
pub fn source_ip(id: i32) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::new(127, 0, 0, u8::try_from(10 + id).unwrap_or(255))
}
