//! Figures for docs/benchmarks.md ("The operator"), not a test: run by hand with
//! `cargo test --release -p e2e --test k8s_operator_measure -- --ignored --nocapture`.
//! Apply → 3 Ready brokers; scale 3 → 5 wall time and the producer's p99 during it against
//! steady state; a rolling restart of 3 brokers, wall time and the longest producer stall;
//! the operator's RSS, CPU and reconciles per minute over 5 idle minutes.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use e2e::clients;
use e2e::k8s::operated::{Operated, FORM};
use e2e::workload::{Writer, Written};

const IDLE: Duration = Duration::from_secs(300);

fn percentile(mut v: Vec<Duration>, p: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort();
    let i = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

/// p50, p99 and max delay of the records due in [from, to).
fn window(w: &Written, from: Instant, to: Instant) -> (usize, Duration, Duration, Duration) {
    let d: Vec<Duration> =
        w.delays().into_iter().filter(|(due, _)| *due >= from && *due < to).map(|(_, d)| d).collect();
    let max = d.iter().max().copied().unwrap_or_default();
    (d.len(), percentile(d.clone(), 0.5), percentile(d, 0.99), max)
}

/// utime + stime of `pid` in seconds, and its RSS in KiB.
fn cpu_and_rss(pid: u32) -> (f64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // /proc reports clock ticks in USER_HZ, 100 on Linux whatever the kernel tick.
    let hz = 100.0;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss =
        status.lines().find(|l| l.starts_with("VmRSS:")).unwrap().split_whitespace().nth(1).unwrap().parse().unwrap();
    (ticks / hz, rss)
}

#[test]
#[ignore = "measurement for docs/benchmarks.md; run by hand"]
fn measure_the_operator() {
    let c = Operated::start("op-measure", "bench").unwrap();
    let t = Instant::now();
    c.apply_cluster(3, 3, "").unwrap();
    c.wait_ready(3, FORM).unwrap();
    let apply_to_ready = t.elapsed();
    println!("apply -> 3 brokers Ready: {apply_to_ready:.1?}");

    let bootstrap = c.bootstrap().unwrap();
    let admin = clients::admin_client(&bootstrap).unwrap();
    let created = clients::create_topic_with(&admin, "load", 12, 3, &[("min.insync.replicas", "2")]).unwrap();
    assert!(created.is_ok());
    c.wait_in_sync(0, "load", 3, 3, FORM).unwrap();
    let writer = Writer::start(&bootstrap, "load", 12, 500).unwrap();
    std::thread::sleep(Duration::from_secs(30));
    let steady = (Instant::now() - Duration::from_secs(25), Instant::now());

    let t = Instant::now();
    c.kubectl(&["scale", "cluster/bench", "--replicas=5"]).unwrap();
    c.wait_ready(5, Duration::from_secs(600)).unwrap();
    let scale = (t, Instant::now());
    println!("scale 3 -> 5: {:.1?}", scale.1 - scale.0);
    std::thread::sleep(Duration::from_secs(10));

    // A rolling restart of 5 would be the cluster's; the issue asks for 3: scale back first.
    c.kubectl(&["scale", "cluster/bench", "--replicas=3"]).unwrap();
    c.wait_ready(3, Duration::from_secs(600)).unwrap();
    std::thread::sleep(Duration::from_secs(10));
    let t = Instant::now();
    c.kubectl(&[
        "patch",
        "cluster",
        "bench",
        "--type=merge",
        "-p",
        r#"{"spec":{"config":{"log.retention.ms":"86400000"}}}"#,
    ])
    .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    c.wait_ready(3, Duration::from_secs(600)).unwrap();
    let roll = (t, Instant::now());
    println!("rolling restart of 3: {:.1?}", roll.1 - roll.0);
    std::thread::sleep(Duration::from_secs(5));
    let written = writer.stop().unwrap();
    let read = clients::read_to_end(&bootstrap, "load", Duration::from_secs(120)).unwrap();
    let checked = e2e::workload::check_exactly_once_in_order(&written, &read).unwrap();
    println!("records: {checked:?}");

    let (n, p50, p99, max) = window(&written, steady.0, steady.1);
    println!("steady state (500 records/s, acks=all, RF 3): {n} records, p50 {p50:.1?}, p99 {p99:.1?}, max {max:.1?}");
    let (n, p50, p99, max) = window(&written, scale.0, scale.1);
    println!("during scale 3 -> 5: {n} records, p50 {p50:.1?}, p99 {p99:.1?}, max {max:.1?}");
    let (n, p50, p99, max) = window(&written, roll.0, roll.1);
    println!("during the rolling restart: {n} records, p50 {p50:.1?}, p99 {p99:.1?}, max (longest stall) {max:.1?}");

    // Idle: nothing changes for 5 minutes.
    let op = &c.operators[0];
    let pid = op.pid().unwrap();
    let reconciles = |o: &e2e::k8s::operator::OperatorProcess| {
        o.metrics()
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("strom_operator_reconciles_total"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    std::thread::sleep(Duration::from_secs(30));
    let (cpu0, _) = cpu_and_rss(pid);
    let r0 = reconciles(op);
    std::thread::sleep(IDLE);
    let (cpu1, rss) = cpu_and_rss(pid);
    let r1 = reconciles(op);
    let minutes = IDLE.as_secs_f64() / 60.0;
    println!(
        "operator idle {minutes} min: CPU {:.2} s ({:.3} % of a core), RSS {:.1} MiB, {:.1} reconciles/min",
        cpu1 - cpu0,
        (cpu1 - cpu0) / IDLE.as_secs_f64() * 100.0,
        rss as f64 / 1024.0,
        (r1 - r0) / minutes
    );
}
