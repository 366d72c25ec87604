//! The pod runner (`e2e::k8s::kubelet`) runs the pods an operator generates, unchanged:
//! ConfigMap and Secret volumes and env (`envFrom`, key refs, `optional`), a pod waiting for
//! a ConfigMap that is not there yet, startup, liveness and readiness probes (a failing
//! liveness probe restarts the container), the pod fields it cannot honour, and Service names
//! that resolve to a Ready pod the Service selects and follow it when that pod goes.
//!
//! Each test has its own namespace and runner on the test process's control plane; the pods'
//! programs are `sh`, `sleep` and `strom`, mapped to local binaries.

#![allow(clippy::unwrap_used)]

use std::net::{Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use e2e::broker::strom_bin;
use e2e::cluster::metadata_view;
use e2e::k8s::controlplane::ControlPlane;
use e2e::k8s::kubelet::{wait_for, PodRunner};

const START: Duration = Duration::from_secs(60);

/// A namespace of its own, a runner for it, and kubectl in it.
struct Ground {
    plane: &'static ControlPlane,
    ns: String,
    runner: PodRunner,
}

impl Ground {
    fn new(prefix: &str) -> Ground {
        let plane = ControlPlane::shared().unwrap();
        let ns = plane.namespace(prefix).unwrap();
        let strom = strom_bin().unwrap();
        let commands = [("sh", Path::new("/bin/sh")), ("sleep", Path::new("/bin/sleep")), ("strom", strom.as_path())];
        let runner = PodRunner::start(plane, &ns, &commands).unwrap();
        Ground { plane, ns, runner }
    }

    /// `kubectl apply` of `yaml`, with `@NS@` standing for the namespace.
    fn apply(&self, yaml: &str) {
        let applied = self.plane.kubectl_with_input(&["apply", "-f", "-"], &yaml.replace("@NS@", &self.ns)).unwrap();
        assert_eq!(applied.code, 0, "{applied:?}");
    }

    fn kubectl(&self, args: &[&str]) -> Result<String> {
        let mut all = vec!["-n", self.ns.as_str()];
        all.extend_from_slice(args);
        self.plane.kubectl_ok(&all)
    }

    fn pod_field(&self, pod: &str, jsonpath: &str) -> Result<String> {
        self.kubectl(&["get", "pod", pod, "-o", &format!("jsonpath={jsonpath}")])
    }

    /// The address of `pod`'s running process.
    fn pod_ip(&self, pod: &str) -> Result<Ipv4Addr> {
        self.runner.observed().running.get(pod).map(|r| r.ip).with_context(|| format!("{pod} is not running"))
    }

    fn ready(&self, pod: &str) -> bool {
        self.runner.observed().running.get(pod).is_some_and(|r| r.ready)
    }

    /// What `<service>.<namespace>.svc.cluster.local` resolves to, as a client resolves it.
    fn resolve(&self, service: &str) -> Option<Ipv4Addr> {
        let name = format!("{service}.{}.svc.cluster.local:9092", self.ns);
        let addr = name.to_socket_addrs().ok()?.next()?;
        match addr {
            SocketAddr::V4(v4) => Some(*v4.ip()),
            SocketAddr::V6(_) => None,
        }
    }
}

/// A pod that prints its files and env, with every pod field the runner cannot honour, and
/// volumes and env from objects created only after the pod.
const READER: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: reader
  namespace: @NS@
  labels: {app: reader}
  annotations: {strom.dev/config-hash: "0123abcd"}
spec:
  automountServiceAccountToken: false
  securityContext: {runAsNonRoot: true, runAsUser: 1000, fsGroup: 1000, seccompProfile: {type: RuntimeDefault}}
  nodeSelector: {kubernetes.io/os: linux}
  tolerations: [{key: dedicated, operator: Equal, value: kafka, effect: NoSchedule}]
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - {labelSelector: {matchLabels: {app: reader}}, topologyKey: kubernetes.io/hostname}
  topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: reader}}}
  containers:
  - name: reader
    image: busybox:1.36
    imagePullPolicy: IfNotPresent
    securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
    resources: {requests: {cpu: 10m, memory: 16Mi}, limits: {memory: 64Mi}}
    command: [sh, -c]
    args:
    - |
      cd /var/lib/strom && echo "data volume: $PWD"
      echo "--- broker.toml"; cat /etc/strom/broker.toml
      echo "--- creds"; ls /etc/creds; cat /etc/creds/password; echo
      echo "--- projected"; cat /etc/all/conf/broker.toml /etc/all/user; echo
      echo "--- env"; env | sort; echo "--- end"
      exec sleep 3600
    envFrom:
    - configMapRef: {name: strom-env}
    - {prefix: SECRET_, secretRef: {name: strom-creds}}
    - configMapRef: {name: absent, optional: true}
    env:
    - {name: LOG_LEVEL, value: debug}
    - {name: BROKER_PASSWORD, valueFrom: {secretKeyRef: {name: strom-creds, key: password}}}
    - {name: PARTITIONS, valueFrom: {configMapKeyRef: {name: strom-env, key: NUM_PARTITIONS}}}
    - {name: NOT_SET, valueFrom: {configMapKeyRef: {name: absent, key: x, optional: true}}}
    - {name: GREETING, value: "partitions=$(PARTITIONS)"}
    volumeMounts:
    - {name: config, mountPath: /etc/strom}
    - {name: creds, mountPath: /etc/creds, readOnly: true}
    - {name: all, mountPath: /etc/all}
    - {name: maybe, mountPath: /etc/maybe}
    - {name: data, mountPath: /var/lib/strom}
  volumes:
  - {name: config, configMap: {name: strom-config}}
  - {name: creds, secret: {secretName: strom-creds, defaultMode: 0400, items: [{key: password, path: password}]}}
  - name: all
    projected:
      sources:
      - {secret: {name: strom-creds, items: [{key: user, path: user}]}}
      - {configMap: {name: strom-config, items: [{key: broker.toml, path: conf/broker.toml}]}}
      - {secret: {name: absent, optional: true}}
  - {name: maybe, configMap: {name: absent, optional: true}}
  - {name: data, emptyDir: {}}
"#;

const READER_OBJECTS: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: strom-config, namespace: @NS@}
data:
  broker.toml: |
    node_id = 7
    data_dir = "/var/lib/strom/data"
---
apiVersion: v1
kind: ConfigMap
metadata: {name: strom-env, namespace: @NS@}
data: {LOG_LEVEL: info, NUM_PARTITIONS: "5"}
---
apiVersion: v1
kind: Secret
metadata: {name: strom-creds, namespace: @NS@}
stringData: {password: s3cret, user: strom}
"#;

#[test]
fn config_maps_and_secrets_reach_the_process_as_files_and_env_once_they_exist() {
    let g = Ground::new("runner-config");
    g.apply(READER);
    let waiting = wait_for(&g.runner, START, "reader waiting for its ConfigMap", || {
        let reason = g.pod_field("reader", "{.status.containerStatuses[0].state.waiting.reason}")?;
        ensure!(reason == "CreateContainerConfigError", "waiting reason {reason:?}");
        g.pod_field("reader", "{.status.containerStatuses[0].state.waiting.message}")
    })
    .unwrap();
    assert!(waiting.contains("envFrom ConfigMap strom-env: not found"), "{waiting}");
    assert!(!g.runner.observed().running.contains_key("reader"));
    // At least one retry (every 2 s) before the objects come, reported only once.
    std::thread::sleep(Duration::from_millis(2500));

    g.apply(READER_OBJECTS);
    let log = wait_for(&g.runner, START, "reader printed its files and env", || {
        let log = g.runner.pod_log_tail("reader", 100);
        // A line of its own: the runner's start header quotes the script, `echo "--- end"` too.
        ensure!(log.lines().any(|l| l == "--- end"), "not yet:\n{log}");
        Ok(log)
    })
    .unwrap();
    let problems = g.runner.observed().problems;
    let reported = problems.iter().filter(|p| p.contains("strom-env: not found")).count();
    assert_eq!(reported, 1, "the reason is reported once: {problems:#?}");

    let line = |prefix: &str| log.lines().find_map(|l| l.strip_prefix(prefix)).map(str::to_string);
    let data_volume = line("data volume: ").expect("the data volume's directory");
    assert_ne!(data_volume, "/var/lib/strom", "the mount path is the emptyDir's directory");
    let broker_toml = format!("node_id = 7\ndata_dir = \"{data_volume}/data\"\n");
    assert!(log.contains(&format!("--- broker.toml\n{broker_toml}--- creds")), "the ConfigMap file:\n{log}");
    assert!(log.contains("--- creds\npassword\ns3cret\n"), "only the Secret's listed key, decoded:\n{log}");
    assert!(log.contains(&format!("--- projected\n{broker_toml}strom\n")), "the projected volume:\n{log}");
    let env: Vec<&str> = log.lines().skip_while(|l| *l != "--- env").take_while(|l| *l != "--- end").collect();
    for expected in [
        "LOG_LEVEL=debug",
        "NUM_PARTITIONS=5",
        "SECRET_password=s3cret",
        "SECRET_user=strom",
        "BROKER_PASSWORD=s3cret",
        "PARTITIONS=5",
        "GREETING=partitions=5",
    ] {
        assert!(env.contains(&expected), "{expected} in the env: {env:#?}");
    }
    assert!(!env.iter().any(|l| l.starts_with("NOT_SET=")), "an optional absent key sets nothing: {env:#?}");
    let ready = g.pod_field("reader", "{.status.conditions[?(@.type==\"Ready\")].status}").unwrap();
    assert_eq!(ready, "True");
}

const STUCK: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: stuck, namespace: @NS@}
spec:
  terminationGracePeriodSeconds: 30
  containers:
  - name: stuck
    image: busybox:1.36
    command: [sleep, "3600"]
    livenessProbe: {tcpSocket: {port: 1}, periodSeconds: 1, failureThreshold: 2, terminationGracePeriodSeconds: 2}
"#;

#[test]
fn a_failing_liveness_probe_restarts_the_container() {
    let g = Ground::new("runner-liveness");
    g.apply(STUCK);
    wait_for(&g.runner, START, "stuck restarted twice by its liveness probe", || {
        let restarts: i32 = g.pod_field("stuck", "{.status.containerStatuses[0].restartCount}")?.parse()?;
        ensure!(restarts >= 2, "restartCount {restarts}");
        Ok(())
    })
    .unwrap();
    let exit = g.pod_field("stuck", "{.status.containerStatuses[0].lastState.terminated.exitCode}").unwrap();
    assert_eq!(exit, "143", "stopped with SIGTERM (sleep dies of it)");
    assert!(g.runner.observed().starts["stuck"] >= 3);
    assert!(g.runner.log_tail(50).contains("pod stuck: liveness probe failed 2 times in a row"));
}

/// Two single-broker `strom` pods reading `broker.toml` from a ConfigMap, with startup,
/// liveness and readiness probes, a pod that never becomes Ready, and two Services selecting
/// all three.
const BROKERS: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: strom-config, namespace: @NS@}
data:
  broker.toml: |
    node_id = 7
    data_dir = "/var/lib/strom/data"
    group_initial_rebalance_delay_ms = 0
---
apiVersion: v1
kind: Service
metadata: {name: bootstrap, namespace: @NS@}
spec:
  selector: {app: strom}
  ports: [{name: kafka, port: 9092, targetPort: 9092}]
---
apiVersion: v1
kind: Service
metadata: {name: everyone, namespace: @NS@}
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector: {app: strom}
  ports: [{name: kafka, port: 9092}]
---
apiVersion: v1
kind: Pod
metadata: {name: never-ready, namespace: @NS@, labels: {app: strom}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: idle
    image: busybox:1.36
    command: [sleep, "3600"]
    readinessProbe: {tcpSocket: {port: 1}, periodSeconds: 1}
"#;

fn broker_pod(name: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: @NS@, labels: {{app: strom}}}}
spec:
  terminationGracePeriodSeconds: 10
  securityContext: {{runAsNonRoot: true, runAsUser: 1000}}
  containers:
  - name: strom
    image: strom:dev
    imagePullPolicy: IfNotPresent
    command: [strom, serve]
    args: [--config=/etc/strom/broker.toml, --kafka-listen=$(POD_IP):9092, --internal-listen=$(POD_IP):9093,
           --http-listen=$(POD_IP):9094]
    env: [{{name: POD_IP, valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}}}]
    ports: [{{name: kafka, containerPort: 9092}}, {{name: http, containerPort: 9094}}]
    resources: {{requests: {{cpu: 100m, memory: 128Mi}}}}
    startupProbe: {{httpGet: {{path: /healthz, port: http}}, periodSeconds: 1, failureThreshold: 30}}
    livenessProbe: {{httpGet: {{path: /healthz, port: http}}, periodSeconds: 1, failureThreshold: 3}}
    readinessProbe: {{httpGet: {{path: /readyz, port: http}}, periodSeconds: 1}}
    volumeMounts: [{{name: config, mountPath: /etc/strom}}, {{name: data, mountPath: /var/lib/strom}}]
  volumes: [{{name: config, configMap: {{name: strom-config}}}}, {{name: data, emptyDir: {{}}}}]
"#
    )
}

#[test]
fn a_service_name_resolves_to_a_ready_pod_and_follows_it() {
    let g = Ground::new("runner-services");
    g.apply(&format!("{BROKERS}---{}---{}", broker_pod("strom-a"), broker_pod("strom-b")));
    let first = wait_for(&g.runner, START, "bootstrap resolving to a Ready broker", || {
        ensure!(g.ready("strom-a") && g.ready("strom-b"), "brokers not Ready yet");
        let ip = g.resolve("bootstrap").context("bootstrap does not resolve")?;
        let (a, b) = (g.pod_ip("strom-a")?, g.pod_ip("strom-b")?);
        match ip {
            ip if ip == a => Ok("strom-a"),
            ip if ip == b => Ok("strom-b"),
            other => bail!("bootstrap resolves to {other}, neither broker ({a}, {b})"),
        }
    })
    .unwrap();
    assert!(!g.ready("never-ready"));
    let everyone = g.resolve("everyone").expect("a publishNotReadyAddresses Service resolves");
    let running: Vec<Ipv4Addr> = g.runner.observed().running.values().map(|r| r.ip).collect();
    assert!(running.contains(&everyone), "{everyone} is one of {running:?}");

    // A client reaches the broker through the Service's name (port == targetPort), and the
    // broker runs with the ConfigMap's broker.toml: node id 7, data under the emptyDir.
    let view = metadata_view(addr_of(&g, "bootstrap"), None).unwrap();
    assert!(view.brokers.contains_key(&7), "node_id from broker.toml: {view:?}");
    let log = g.runner.pod_log_tail(first, 50);
    assert!(log.contains("data_dir=") && !log.contains("data_dir=/var/lib/strom"), "{log}");
    for pod in ["strom-a", "strom-b"] {
        let status =
            g.pod_field(pod, "{.status.containerStatuses[0].started} {.status.containerStatuses[0].restartCount}");
        assert_eq!(status.unwrap(), "true 0", "{pod}: started by its startup probe, alive by its liveness probe");
    }

    // Its pod deleted, the name follows the other Ready broker.
    let second = if first == "strom-a" { "strom-b" } else { "strom-a" };
    let second_ip = g.pod_ip(second).unwrap();
    g.kubectl(&["delete", "pod", first, "--wait=false"]).unwrap();
    wait_for(&g.runner, START, "bootstrap re-pointed", || {
        ensure!(g.resolve("bootstrap") == Some(second_ip), "bootstrap resolves to {:?}", g.resolve("bootstrap"));
        Ok(())
    })
    .unwrap();
    let view = metadata_view(addr_of(&g, "bootstrap"), None).unwrap();
    assert!(view.brokers.contains_key(&7));

    // No Ready pod left: the name is withdrawn; the publishNotReadyAddresses Service keeps
    // resolving, to the one pod still running.
    g.kubectl(&["delete", "pod", second, "--wait=false"]).unwrap();
    let idle = g.pod_ip("never-ready").unwrap();
    wait_for(&g.runner, START, "bootstrap withdrawn, everyone on never-ready", || {
        ensure!(g.resolve("bootstrap").is_none(), "bootstrap still resolves to {:?}", g.resolve("bootstrap"));
        ensure!(g.resolve("everyone") == Some(idle), "everyone resolves to {:?}", g.resolve("everyone"));
        Ok(())
    })
    .unwrap();

    // A deleted Service's names go.
    g.kubectl(&["delete", "service", "everyone"]).unwrap();
    // (The runner publishes what it observed after its tick, so the two may differ for one tick.)
    wait_for(&g.runner, START, "everyone withdrawn", || {
        ensure!(g.resolve("everyone").is_none(), "everyone still resolves to {:?}", g.resolve("everyone"));
        ensure!(!g.runner.observed().services.contains_key("everyone"), "the runner still lists everyone");
        Ok(())
    })
    .unwrap();
}

/// `<service>.<namespace>.svc.cluster.local:9092`, resolved.
fn addr_of(g: &Ground, service: &str) -> SocketAddr {
    format!("{service}.{}.svc.cluster.local:9092", g.ns).to_socket_addrs().unwrap().next().unwrap()
}
