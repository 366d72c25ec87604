//! Bad input on the internal port (issue 4): bytes that are not gRPC, a raft vote from a node
//! that is not a voter, an undecodable raft body, and a second process registering with a
//! live broker's id. Each is refused with a clear error and logged; the cluster keeps serving.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use e2e::broker::{free_local_addrs, strom_bin};
use e2e::cluster::{Cluster, ClusterSpec};
use strom_proto::raft::raft_client::RaftClient;
use strom_proto::raft::RaftRequest;

const SETTLE: Duration = Duration::from_secs(30);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

/// Waits until the broker's log holds a line with every one of `needles`.
fn wait_for_log(cluster: &Cluster, id: usize, needles: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = cluster.brokers[id].log_tail(400);
        if let Some(line) = log.lines().find(|l| needles.iter().all(|n| l.contains(n))) {
            return line.to_string();
        }
        assert!(Instant::now() < deadline, "broker {id} logged no line with {needles:?}; tail:\n{log}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn garbage_a_vote_from_a_non_voter_and_an_undecodable_body_are_refused_and_logged() {
    let mut cluster = Cluster::start(ClusterSpec::new(3, 3)).expect("start 3 brokers");
    let internal = cluster.brokers[1].internal_addr();

    // Not gRPC at all: the connection is closed and the broker says who sent it.
    let mut garbage = TcpStream::connect(internal).expect("connect");
    garbage.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    garbage.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nnot grpc at all").expect("write");
    let mut buf = [0u8; 64];
    assert!(matches!(garbage.read(&mut buf), Ok(0) | Err(_)), "the connection is closed");
    let local = garbage.local_addr().expect("local addr").to_string();
    let line = wait_for_log(&cluster, 1, &["not gRPC", &local]);
    println!("logged: {line}");

    let rt = runtime();
    let endpoint = format!("http://{internal}");
    let status = rt
        .block_on(async {
            let mut client = RaftClient::connect(endpoint.clone()).await.expect("gRPC connect");
            let vote = br#"{"vote":{"leader_id":{"term":99,"node_id":99},"committed":false},"last_log_id":null}"#;
            client.vote(RaftRequest { cluster_id: String::new(), from_node: 99, body: vote.to_vec().into() }).await
        })
        .expect_err("a vote from node 99 is refused");
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    assert!(status.message().contains("node 99 is not a voter (voters: 0,1,2)"), "{status:?}");
    wait_for_log(&cluster, 1, &["not a voter", "from_node=99"]);

    let status = rt
        .block_on(async {
            let mut client = RaftClient::connect(endpoint.clone()).await.expect("gRPC connect");
            client
                .append_entries(RaftRequest { cluster_id: String::new(), from_node: 0, body: b"{oops".to_vec().into() })
                .await
        })
        .expect_err("an undecodable body is refused");
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("undecodable"), "{status:?}");
    wait_for_log(&cluster, 1, &["undecodable raft request"]);

    // The cluster never noticed.
    cluster.brokers[1].wait_ready(Duration::from_secs(5)).expect("broker 1 still ready");
    let view = cluster.wait_same_metadata(&[0, 1, 2], SETTLE).expect("still one cluster");
    assert_eq!(view.brokers.len(), 3);
}

#[test]
fn a_second_process_with_a_live_brokers_id_is_refused_and_exits_while_the_first_keeps_serving() {
    let mut cluster = Cluster::start(ClusterSpec::new(4, 3)).expect("start 3 voters and a learner");
    let [kafka, http, internal] = free_local_addrs::<3>().expect("ports");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut args: Vec<String> = [
        "serve",
        "--node-id",
        "3",
        "--data-dir",
        &dir.path().join("data").display().to_string(),
        "--kafka-listen",
        &kafka.to_string(),
        "--http-listen",
        &http.to_string(),
        "--internal-listen",
        &internal.to_string(),
        "--voters",
        &cluster.voters,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(e2e::cluster::FAST_SESSIONS.iter().map(|s| s.to_string()));
    let started = Instant::now();
    let out =
        Command::new(strom_bin().expect("strom binary")).args(&args).env_remove("RUST_LOG").output().expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("the impostor exited with {} after {:?}", out.status, started.elapsed());
    assert!(!out.status.success(), "a second broker 3 must not run: {stderr}");
    assert!(stderr.contains("broker id 3 is already in use by another live broker"), "it says why:\n{stderr}");
    assert!(stderr.contains("DUPLICATE") || stderr.contains("still heartbeating"), "it names the refusal:\n{stderr}");

    cluster.brokers[3].wait_ready(Duration::from_secs(5)).expect("the real broker 3 keeps serving");
    let view = cluster.wait_same_metadata(&[0, 1, 2, 3], SETTLE).expect("one cluster");
    assert_eq!(view.brokers.get(&3).map(String::as_str), Some(cluster.brokers[3].bootstrap().as_str()));
}
