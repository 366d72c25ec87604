//! Requirement (issue 37, observability): the alert rules Strom ships
//! (`charts/strom/files/prometheus-rules.yaml`) pass `promtool check rules`, and their unit
//! tests (`e2e/prometheus/alerts_test.yaml`) show each alert pending, firing and resolved; a
//! real Prometheus (built from its Go module) scraping three brokers under RF 3 load has data
//! for every broker alert's query; a broker killed under that load makes the
//! under-replicated expression true within a minute; exactly one active controller is
//! reported before and after the controller is killed; the consumer lag the brokers serve for
//! a stopped group grows and equals what `kafka-consumer-groups.sh --describe` prints.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use e2e::cluster::{wait_until, Cluster, ClusterSpec};
use e2e::prometheus::{alert_rules, promtool, rules_file, split_comparison, Job, Prometheus};
use e2e::{clients, kafka};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};

const SCRAPE: Duration = Duration::from_secs(1);
const LIVE: Duration = Duration::from_secs(60);

#[test]
fn the_alert_rules_pass_promtool_and_their_unit_tests() {
    let rules = rules_file().display().to_string();
    let check = promtool(&["check", "rules", &rules]).expect("run promtool");
    assert!(check.code == 0 && check.stdout.contains("SUCCESS: 9 rules found"), "{check:?}");
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("prometheus/alerts_test.yaml");
    let run = promtool(&["test", "rules", &tests.display().to_string()]).expect("run promtool");
    assert!(
        run.code == 0 && run.stdout.contains("SUCCESS"),
        "promtool test rules failed:\n{}{}",
        run.stdout,
        run.stderr
    );
}

/// A synchronous commit, retried while the group's coordinator is still being chosen or
/// loaded (the first commit of a cluster creates `__consumer_offsets`), as an application
/// retries it.
fn commit_until_done(consumer: &BaseConsumer, offsets: &TopicPartitionList) {
    wait_until(LIVE, || consumer.commit(offsets, CommitMode::Sync).context("commit")).unwrap();
}

/// The summed value of a query's samples (none: an error).
fn value(p: &Prometheus, expr: &str) -> Result<f64> {
    let samples = p.query(expr)?;
    ensure!(!samples.is_empty(), "{expr}: no data");
    Ok(samples.iter().map(|(_, v)| v).sum())
}

/// kafka-consumer-groups.sh --describe: the group's total LAG.
fn tool_lag(cluster: &Cluster, group: &str) -> Result<i64> {
    let bootstrap = cluster.bootstrap();
    let run = kafka::tool("consumer-groups", &["--bootstrap-server", &bootstrap, "--describe", "--group", group])?
        .success()?;
    let rows = run.rows(group);
    ensure!(!rows.is_empty(), "no rows for {group}: {run}");
    rows.iter().map(|cols| cols.get(5).context("a LAG column")?.parse::<i64>().context("LAG")).sum()
}

#[test]
fn prometheus_scraping_three_brokers_under_load_sees_what_the_alerts_need() {
    let mut cluster = Cluster::start(ClusterSpec::new(3, 3).with_args(&[
        "--consumer-lag-interval-ms",
        "500",
        "--metrics-partition-series",
        "true",
    ]))
    .expect("start 3 brokers");
    let labels: BTreeMap<String, String> =
        [("namespace", "local"), ("strom_cluster", "dev")].into_iter().map(|(k, v)| (k.into(), v.into())).collect();
    let targets = cluster.brokers.iter().map(|b| b.http_addr()).collect();
    let job = Job { name: "strom".into(), targets, labels, honor_labels: false };
    let prometheus = Prometheus::start(&[job], &[rules_file()], SCRAPE).expect("start prometheus");
    let bootstrap = cluster.bootstrap();
    let admin = clients::admin_client(&bootstrap).unwrap();
    for topic in ["load", "lagged"] {
        clients::create_topic_with(&admin, topic, 3, 3, &[("min.insync.replicas", "2")]).unwrap().unwrap();
    }

    // RF 3 load for the whole test.
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (stop, bootstrap) = (stop.clone(), bootstrap.clone());
        std::thread::spawn(move || {
            let producer: ThreadedProducer<_> = clients::producer_config(&bootstrap, "all").create().expect("producer");
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let key = n.to_string();
                let _ = producer.send(BaseRecord::to("load").key(&key).payload("a record of load"));
                n += 1;
                if n.is_multiple_of(100) {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            let _ = producer.flush(Duration::from_secs(10));
            n
        })
    };

    // A group that read part of `lagged` and stopped: committed 10 per partition of 50.
    let records: Vec<(i32, String)> = (0..150).map(|i| (i % 3, format!("r{i}"))).collect();
    clients::produce_to_partitions(&bootstrap, "lagged", &records).unwrap();
    let group: BaseConsumer = clients::consumer_config(&bootstrap).set("group.id", "stopped-group").create().unwrap();
    let mut commit = TopicPartitionList::new();
    for p in 0..3 {
        commit.add_partition_offset("lagged", p, Offset::Offset(10)).unwrap();
    }
    commit_until_done(&group, &commit);
    drop(group);

    // Every broker alert's query has data (the operator's are checked with the operator).
    let lag_query = r#"sum(strom_consumer_group_lag{group="stopped-group",topic="lagged"})"#;
    wait_until(LIVE, || {
        ensure!(value(&prometheus, lag_query)? == 120.0, "lag not 120 yet");
        Ok(())
    })
    .unwrap();
    for (name, expr) in alert_rules(&rules_file()).unwrap() {
        if name.starts_with("StromCluster") || name.starts_with("StromOperator") {
            continue;
        }
        let (query, _, _) = split_comparison(&expr).unwrap();
        wait_until(LIVE, || value(&prometheus, query).map(|_| ()))
            .unwrap_or_else(|e| panic!("{name}: {e:#}\nprometheus log:\n{}", prometheus.log()));
    }

    // Error codes in responses are counted per API and code: a real client's CreateTopics of
    // a topic that exists.
    let exists = clients::create_topic_with(&admin, "load", 3, 3, &[]).unwrap();
    assert!(exists.is_err(), "{exists:?}");
    let errors = r#"sum(strom_kafka_response_errors_total{api="CreateTopics",error="TOPIC_ALREADY_EXISTS"})"#;
    wait_until(LIVE, || {
        ensure!(value(&prometheus, errors)? == 1.0, "{errors}: not 1 yet");
        Ok(())
    })
    .unwrap();

    // The followers' side of replication: bytes fetched, and a lag series per followed
    // partition (3 partitions of 2 topics, 2 followers each).
    wait_until(LIVE, || {
        ensure!(value(&prometheus, "sum(strom_replica_fetcher_bytes_total)")? > 0.0, "no replica fetcher bytes");
        let followed = prometheus.query(r#"strom_replica_fetcher_lag{topic=~"load|lagged"}"#)?;
        ensure!(followed.len() == 12, "{} followed partitions: {followed:?}", followed.len());
        Ok(())
    })
    .unwrap();

    // Every panel of the dashboard has data ($cluster: all; Grafana's rate interval: 30 s).
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(e2e::prometheus::dashboard_file()).unwrap()).unwrap();
    let mut queries = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap().replace("$cluster", ".*").replace("$__rate_interval", "30s");
            wait_until(LIVE, || value(&prometheus, &expr).map(|_| ()))
                .unwrap_or_else(|e| panic!("panel {}: {e:#}", panel["title"]));
            queries += 1;
        }
    }
    assert!(queries >= 15, "{queries} panel queries");

    // The lag the brokers serve equals kafka-consumer-groups.sh's, and grows with new records.
    assert_eq!(tool_lag(&cluster, "stopped-group").unwrap(), 120);
    let more: Vec<(i32, String)> = (0..30).map(|i| (0, format!("more{i}"))).collect();
    clients::produce_to_partitions(&bootstrap, "lagged", &more).unwrap();
    wait_until(LIVE, || {
        ensure!(value(&prometheus, lag_query)? == 150.0, "lag not 150 yet");
        Ok(())
    })
    .unwrap();
    assert_eq!(tool_lag(&cluster, "stopped-group").unwrap(), 150);
    let per_partition =
        prometheus.query(r#"strom_consumer_group_partition_lag{group="stopped-group",partition="0"}"#).unwrap();
    assert_eq!(per_partition.iter().map(|(_, v)| v).sum::<f64>(), 70.0, "{per_partition:?}");

    // Per-topic traffic: the 180 records produced to `lagged`, and at least their bytes read.
    let records_in = r#"sum(strom_topic_records_in_total{topic="lagged"})"#;
    wait_until(LIVE, || {
        ensure!(value(&prometheus, records_in)? == 180.0, "records in not 180 yet");
        Ok(())
    })
    .unwrap();
    assert_eq!(clients::consume_n(&bootstrap, "lagged", 180, LIVE).unwrap().len(), 180);
    wait_until(LIVE, || {
        let bytes_in = value(&prometheus, r#"sum(strom_topic_bytes_in_total{topic="lagged"})"#)?;
        let bytes_out = value(&prometheus, r#"sum(strom_topic_bytes_out_total{topic="lagged"})"#)?;
        ensure!(bytes_in > 0.0 && bytes_out >= bytes_in, "in {bytes_in}, out {bytes_out}");
        Ok(())
    })
    .unwrap();

    // Exactly one active controller; the controller killed under load: exactly one again (a
    // different broker), and its partitions under-replicated, in Prometheus, within a minute.
    let controllers = r#"sum by (strom_cluster) (strom_metadata_is_controller)"#;
    assert_eq!(value(&prometheus, controllers).unwrap(), 1.0);
    let before = prometheus.query("strom_metadata_is_controller == 1").unwrap();
    let old = before[0].0.get("instance").cloned().unwrap_or_default();
    let id = cluster.agreed_controller(LIVE).unwrap();
    assert_eq!(old, cluster.brokers[usize::try_from(id).unwrap()].http_addr().to_string());
    cluster.broker(id).kill().unwrap();
    let urp = alert_rules(&rules_file())
        .unwrap()
        .into_iter()
        .find(|(n, _)| n == "StromUnderReplicatedPartitions")
        .map(|(_, e)| e)
        .unwrap();
    wait_until(LIVE, || {
        ensure!(!prometheus.query(&urp)?.is_empty(), "{urp}: false");
        Ok(())
    })
    .unwrap();
    wait_until(LIVE, || {
        let now = prometheus.query("strom_metadata_is_controller == 1")?;
        ensure!(value(&prometheus, controllers)? == 1.0, "controllers: {now:?}");
        ensure!(now.len() == 1 && now[0].0.get("instance") != Some(&old), "controller still {old}: {now:?}");
        Ok(())
    })
    .unwrap();
    wait_until(LIVE, || {
        let pending = prometheus.alerts("pending")?;
        let urp =
            pending.iter().any(|a| a.get("alertname").map(String::as_str) == Some("StromUnderReplicatedPartitions"));
        ensure!(urp, "pending {pending:?}; per broker: {:?}", prometheus.query("strom_under_replicated_partitions"));
        Ok(())
    })
    .unwrap();

    stop.store(true, Ordering::Relaxed);
    let produced = load.join().unwrap();
    assert!(produced > 0);
}

#[test]
fn prometheus_scraping_the_operator_and_its_brokers_has_data_for_every_alert() {
    use e2e::k8s::operated::{Operated, FORM};
    let c = Operated::start("observed", "events").unwrap();
    c.apply_cluster(3, 3, "").unwrap();
    c.wait_ready(3, FORM).unwrap();
    let bootstrap = c.bootstrap().unwrap();
    let admin = clients::admin_client(&bootstrap).unwrap();
    clients::create_topic_with(&admin, "read", 3, 3, &[]).unwrap().unwrap();
    let records: Vec<(i32, String)> = (0..30).map(|i| (i % 3, format!("r{i}"))).collect();
    clients::produce_to_partitions(&bootstrap, "read", &records).unwrap();
    let group: BaseConsumer = clients::consumer_config(&bootstrap).set("group.id", "readers").create().unwrap();
    let mut commit = TopicPartitionList::new();
    commit.add_partition_offset("read", 0, Offset::Offset(5)).unwrap();
    commit_until_done(&group, &commit);
    drop(group);

    let brokers: Vec<std::net::SocketAddr> =
        c.runner.observed().running.values().map(|p| std::net::SocketAddr::new(p.ip.into(), 9094)).collect();
    assert_eq!(brokers.len(), 3);
    let label = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    let jobs = [
        Job {
            name: "strom".into(),
            targets: brokers,
            labels: label(&[("namespace", &c.ns), ("strom_cluster", "events")]),
            honor_labels: false,
        },
        Job {
            name: "strom-operator".into(),
            targets: vec![c.operators[0].http],
            labels: label(&[("namespace", "strom-system")]),
            honor_labels: true,
        },
    ];
    let prometheus = Prometheus::start(&jobs, &[rules_file()], SCRAPE).expect("start prometheus");
    for (name, expr) in alert_rules(&rules_file()).unwrap() {
        let (query, _, _) = split_comparison(&expr).unwrap();
        wait_until(LIVE, || value(&prometheus, query).map(|_| ()))
            .unwrap_or_else(|e| panic!("{name}: {e:#}\nprometheus log:\n{}", prometheus.log()));
    }
    // The operator's view of the Cluster beside the brokers' own.
    let ready = format!(r#"strom_operator_cluster_ready_brokers{{namespace="{}",cluster="events"}}"#, c.ns);
    assert_eq!(value(&prometheus, &ready).unwrap(), 3.0);
    let stalled = format!(r#"strom_operator_cluster_stalled{{namespace="{}",cluster="events"}}"#, c.ns);
    assert_eq!(value(&prometheus, &stalled).unwrap(), 0.0);
    // On a healthy cluster no alert is pending or firing (once every target has been
    // scraped: before that, the controller count may lack the controller), except the disk
    // alert when this machine's disk is in fact nearly full: then it must be pending.
    let free = value(&prometheus, "min(strom_log_dir_free_bytes / strom_log_dir_total_bytes)").unwrap();
    wait_until(LIVE, || {
        let (pending, firing) = (prometheus.alerts("pending")?, prometheus.alerts("firing")?);
        let mut names: Vec<&str> = pending.iter().filter_map(|a| a.get("alertname").map(String::as_str)).collect();
        // Near the 10 % line the disk may cross it while the test looks: not judged there.
        if (0.09..0.11).contains(&free) {
            names.retain(|n| *n != "StromDiskNearlyFull");
        }
        let want: Vec<&str> = if free < 0.09 { vec!["StromDiskNearlyFull"; 3] } else { vec![] };
        ensure!(names == want && firing.is_empty(), "free {free}: pending {pending:?}, firing {firing:?}");
        Ok(())
    })
    .unwrap();
}

/// Scrapes `/metrics` back to back until stopped: (scrapes answered 200, the longest one).
fn scrape_in_a_loop(addr: std::net::SocketAddr, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<(usize, Duration)> {
    std::thread::spawn(move || {
        let (mut ok, mut longest) = (0, Duration::ZERO);
        while !stop.load(Ordering::Relaxed) {
            let started = std::time::Instant::now();
            match e2e::broker::http_get(addr, "/metrics") {
                Ok(r) if r.status == 200 => {
                    ok += 1;
                    longest = longest.max(started.elapsed());
                }
                // Refused once the broker has gone: the loop goes on until told to stop.
                _ => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        (ok, longest)
    })
}

/// The request path and a scrape of thousands of partitions: an acks=all producer's delays
/// beside back-to-back scrapes (printed for docs/benchmarks.md, not judged: the machine is
/// shared), and a SIGTERM in the middle of them exits cleanly in time.
#[test]
fn scraping_in_a_loop_blocks_neither_produce_nor_shutdown_with_thousands_of_partitions() {
    const PARTITIONS: i32 = 2000;
    let mut cluster = Cluster::start(ClusterSpec::new(1, 1).with_args(&["--metrics-partition-series", "true"]))
        .expect("start a broker");
    let bootstrap = cluster.bootstrap();
    let admin = clients::admin_client(&bootstrap).unwrap();
    clients::create_topic_with(&admin, "wide", PARTITIONS, 1, &[]).unwrap().unwrap();
    let addr = cluster.brokers[0].http_addr();
    let last = format!(r#"strom_log_end_offset{{topic="wide",partition="{}"}}"#, PARTITIONS - 1);
    wait_until(LIVE, || {
        let body = e2e::broker::http_get(addr, "/metrics")?.body;
        ensure!(body.contains(&last), "no {last} yet");
        Ok(())
    })
    .unwrap();

    // An acks=all producer beside scrapes of every partition's series, back to back.
    let stop = Arc::new(AtomicBool::new(false));
    let scraper = scrape_in_a_loop(addr, stop.clone());
    // STROM_MEASURE_NO_SCRAPE=1: the same run without the scrapes, the baseline of the
    // producer's p99 in docs/benchmarks.md.
    let baseline = std::env::var_os("STROM_MEASURE_NO_SCRAPE").is_some();
    if baseline {
        stop.store(true, Ordering::Relaxed);
    }
    let writer = e2e::workload::Writer::start(&bootstrap, "wide", PARTITIONS, 2000).unwrap();
    writer.wait_progress(20_000, LIVE).unwrap();
    let written = writer.stop().unwrap();
    assert!(written.reports.failed.is_empty(), "{:?}", &written.reports.failed[..written.reports.failed.len().min(5)]);
    // After the producer's start (its metadata of 2,000 partitions, its producer id).
    let warm = written.started + Duration::from_secs(2);
    let mut delays: Vec<Duration> =
        written.delays().into_iter().filter(|(due, _)| *due >= warm).map(|(_, d)| d).collect();
    delays.sort();
    let p99 = delays[(delays.len() * 99 / 100).min(delays.len() - 1)];
    println!(
        "{} records acknowledged beside back-to-back scrapes of {PARTITIONS} partitions: delay p99 {p99:?}, max {:?}",
        delays.len(),
        delays.last().copied().unwrap_or_default()
    );

    // SIGTERM while the scrapes go on: the broker exits cleanly, in time.
    let status = cluster.broker(0).terminate().expect("a clean exit beside the scrapes");
    assert!(status.success(), "{status:?}");
    stop.store(true, Ordering::Relaxed);
    let (scrapes, longest) = scraper.join().unwrap();
    println!("{scrapes} scrapes, the longest {longest:?}");
    assert!(baseline || scrapes >= 10, "only {scrapes} scrapes answered");
}
