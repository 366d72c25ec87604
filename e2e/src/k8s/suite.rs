//! The user's path on a Kubernetes cluster, step by step, for any cluster kubectl reaches: a
//! real one (kind, k3d, a cloud cluster: `STROM_E2E_KUBECONFIG`) or the test control plane
//! with pod runners (where CI runs it): e2e/tests/suite/k8s_real_cluster.rs.
//!
//! The chart is installed, the examples applied (the Cluster with the image under test and
//! small requests), then, with Kafka clients running as pods (kcat) through the bootstrap
//! Service: records produced (acks=all, idempotent) and every record acknowledged so far read
//! back, after each of: the Cluster Ready, a scale 3 → 5, a scale 5 → 3, a broker pod deleted,
//! a rolling restart forced with a pod annotation. Before each check the Cluster must be
//! Ready at its current generation with no operation in progress, and the pods must agree:
//! brokers `0..n` exist, no other, all Ready; a restart or recreation must have given the
//! pods new uids.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use serde_json::{json, Value};

use super::controlplane::KubectlRun;
use super::helm::{chart_dir, Helm};
use crate::cluster::wait_until;
use crate::process::{run_to_end, run_with_stdin};

const KUBECTL_DEADLINE: Duration = Duration::from_secs(120);
/// The Cluster of examples/cluster.yaml.
const CLUSTER: &str = "my-cluster";
/// A topic of examples/topics.yaml (6 partitions, replication factor 3, min.insync.replicas 2).
const TOPIC: &str = "orders";
const RECORDS_PER_BATCH: usize = 1000;

/// kubectl with one kubeconfig.
#[derive(Debug, Clone)]
pub struct Kube {
    pub kubectl: PathBuf,
    pub kubeconfig: PathBuf,
}

impl Kube {
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.kubectl);
        cmd.arg("--kubeconfig").arg(&self.kubeconfig).args(args);
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Result<KubectlRun> {
        run_to_end(self.command(args), &format!("kubectl {}", args.join(" ")), KUBECTL_DEADLINE)
    }

    /// kubectl that must exit 0; its stdout.
    pub fn ok(&self, args: &[&str]) -> Result<String> {
        let run = self.run(args)?;
        ensure!(run.code == 0, "kubectl {} exited {}: {}{}", args.join(" "), run.code, run.stdout, run.stderr);
        Ok(run.stdout)
    }

    /// `kubectl apply -f -` of `manifest` (YAML or JSON) in `ns`.
    pub fn apply(&self, ns: &str, manifest: &str) -> Result<()> {
        let file = tempfile::NamedTempFile::new()?;
        std::fs::write(file.path(), manifest)?;
        let stdin = Stdio::from(std::fs::File::open(file.path())?);
        let run =
            run_with_stdin(self.command(&["-n", ns, "apply", "-f", "-"]), stdin, "kubectl apply", KUBECTL_DEADLINE)?;
        ensure!(run.code == 0, "kubectl apply exited {}: {}{}\n{manifest}", run.code, run.stdout, run.stderr);
        Ok(())
    }

    pub fn json(&self, args: &[&str]) -> Result<Value> {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&all)?).context("kubectl's JSON")
    }
}

/// Where and with what the scenario runs.
#[derive(Debug)]
pub struct Target {
    pub kube: Kube,
    pub helm: Helm,
    /// The image with `strom` and `strom-operator` (`repository:tag`), for the chart and
    /// the Cluster.
    pub image: String,
    /// An image whose `kcat` and `sh` (with `sort`, `comm`, `wc`) run the clients.
    pub client_image: String,
    /// The operator's namespace (the release's).
    pub release_ns: String,
    /// The Cluster's namespace.
    pub ns: String,
    /// At most this long for each step to settle.
    pub step_timeout: Duration,
}

/// How long each step took to settle, in order.
#[derive(Debug, Default)]
pub struct Report {
    pub steps: Vec<(String, Duration)>,
}

/// `repository:tag` split at the tag's colon (a registry's port is not a tag).
pub fn split_image(image: &str) -> Result<(&str, &str)> {
    match image.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') && !repo.is_empty() && !tag.is_empty() => Ok((repo, tag)),
        _ => bail!("image {image:?} is not repository:tag"),
    }
}

/// The whole scenario; the first step that fails stops it.
pub fn run(t: &Target) -> Result<Report> {
    let mut report = Report::default();
    let mut step = |name: &str, started: Instant| {
        let took = started.elapsed();
        println!("real-cluster suite: {name}: {took:?}");
        report.steps.push((name.to_string(), took));
    };
    for ns in [&t.release_ns, &t.ns] {
        if t.kube.run(&["get", "namespace", ns])?.code != 0 {
            t.kube.ok(&["create", "namespace", ns])?;
        }
    }

    let started = Instant::now();
    let (repository, tag) = split_image(&t.image)?;
    let chart = chart_dir().display().to_string();
    let timeout = format!("{}s", t.step_timeout.as_secs());
    let sets = [
        format!("image.repository={repository}"),
        format!("image.tag={tag}"),
        format!("operator.watchNamespace={}", t.ns),
    ];
    let mut args =
        vec!["upgrade", "--install", "strom", &chart, "--namespace", &t.release_ns, "--wait", "--timeout", &timeout];
    for set in &sets {
        args.extend(["--set", set.as_str()]);
    }
    t.helm.ok(&args)?;
    step("helm install: operator Ready", started);

    let started = Instant::now();
    apply_examples(t)?;
    wait_cluster(t, 3, &BTreeMap::new())?;
    wait_topic(t)?;
    step("examples applied: Cluster Ready with 3 brokers, Topic orders InSync", started);
    let mut batches = 0;
    produce_and_verify(t, &mut batches)?;

    let started = Instant::now();
    t.kube.ok(&["-n", &t.ns, "scale", "cluster", CLUSTER, "--replicas=5"])?;
    wait_cluster(t, 5, &BTreeMap::new())?;
    step("scaled 3 -> 5", started);
    produce_and_verify(t, &mut batches)?;

    let started = Instant::now();
    t.kube.ok(&["-n", &t.ns, "scale", "cluster", CLUSTER, "--replicas=3"])?;
    let uids = wait_cluster(t, 3, &BTreeMap::new())?;
    step("scaled 5 -> 3", started);
    produce_and_verify(t, &mut batches)?;

    let started = Instant::now();
    let victim = format!("{CLUSTER}-broker-1");
    t.kube.ok(&["-n", &t.ns, "delete", "pod", &victim, "--wait=false"])?;
    let must_change: BTreeMap<String, String> =
        uids.iter().filter(|(p, _)| **p == victim).map(|(p, u)| (p.clone(), u.clone())).collect();
    ensure!(!must_change.is_empty(), "no pod {victim} among {uids:?}");
    let uids = wait_cluster(t, 3, &must_change)?;
    step("broker pod 1 deleted and back", started);
    produce_and_verify(t, &mut batches)?;

    let started = Instant::now();
    let stamp = format!("{:?}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs());
    let patch = json!({"spec": {"pod": {"annotations": {"strom.dev/restartedAt": stamp}}}}).to_string();
    t.kube.ok(&["-n", &t.ns, "patch", "cluster", CLUSTER, "--type=merge", "-p", &patch])?;
    wait_cluster(t, 3, &uids)?;
    step("rolling restart (every broker pod replaced)", started);
    produce_and_verify(t, &mut batches)?;
    Ok(report)
}

/// examples/ as a user applies them, the Cluster with the image under test and requests
/// small enough for a laptop's cluster.
fn apply_examples(t: &Target) -> Result<()> {
    let examples = chart_dir().join("../../examples");
    let file = |name: &str| examples.join(name).display().to_string();
    let mut cluster = t.kube.json(&["-n", &t.ns, "create", "--dry-run=client", "-f", &file("cluster.yaml")])?;
    cluster["spec"]["image"] = json!(t.image);
    cluster["spec"]["resources"] = json!({"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}});
    cluster["spec"]["storage"]["size"] = json!("1Gi");
    t.kube.apply(&t.ns, &cluster.to_string())?;
    t.kube.ok(&["-n", &t.ns, "apply", "-f", &file("topics.yaml"), "-f", &file("consumer-group.yaml")])?;
    Ok(())
}

/// Waits until the Cluster says Ready with `brokers` brokers at its current generation, no
/// operation in progress, and the pods agree: exactly brokers `0..brokers`, all Ready, and
/// each pod of `must_change` with a uid other than the one given. The pods' uids.
fn wait_cluster(
    t: &Target,
    brokers: usize,
    must_change: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>> {
    let what = format!("Cluster {CLUSTER} Ready with {brokers} brokers");
    wait_until(t.step_timeout, || {
        let c = t.kube.json(&["-n", &t.ns, "get", "cluster", CLUSTER])?;
        let status = &c["status"];
        let ready = status["conditions"].as_array().into_iter().flatten().find(|x| x["type"] == "Ready");
        let ready = ready.cloned().unwrap_or(Value::Null);
        ensure!(
            ready["status"] == "True" && ready["observedGeneration"] == c["metadata"]["generation"],
            "Ready: {ready}; operation {}",
            status["operation"]
        );
        ensure!(status["operation"].is_null(), "operation in progress: {}", status["operation"]);
        ensure!(status["readyReplicas"].as_u64() == Some(brokers as u64), "readyReplicas {}", status["readyReplicas"]);
        let pods = t.kube.json(&["-n", &t.ns, "get", "pods"])?;
        let prefix = format!("{CLUSTER}-broker-");
        let mut uids = BTreeMap::new();
        for pod in pods["items"].as_array().into_iter().flatten() {
            let name = pod["metadata"]["name"].as_str().unwrap_or_default();
            if !name.starts_with(&prefix) {
                continue;
            }
            let pod_ready = pod["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|x| x["type"] == "Ready" && x["status"] == "True");
            ensure!(pod_ready && pod["metadata"]["deletionTimestamp"].is_null(), "pod {name} is not Ready (yet)");
            uids.insert(name.to_string(), pod["metadata"]["uid"].as_str().unwrap_or_default().to_string());
        }
        let want: Vec<String> = (0..brokers).map(|i| format!("{prefix}{i}")).collect();
        ensure!(uids.keys().cloned().collect::<Vec<_>>() == want, "broker pods {:?}, want {want:?}", uids.keys());
        for (pod, old) in must_change {
            ensure!(uids.get(pod) != Some(old), "pod {pod} not replaced yet");
        }
        Ok(uids)
    })
    .map_err(|e| e.context(what))
}

fn wait_topic(t: &Target) -> Result<()> {
    wait_until(t.step_timeout, || {
        let topic = t.kube.json(&["-n", &t.ns, "get", "topic", TOPIC])?;
        let ready = topic["status"]["conditions"].as_array().into_iter().flatten().find(|x| x["type"] == "Ready");
        ensure!(ready.is_some_and(|r| r["status"] == "True"), "Topic {TOPIC}: {}", topic["status"]);
        Ok(())
    })
}

fn bootstrap(t: &Target) -> Result<String> {
    let c = t.kube.json(&["-n", &t.ns, "get", "cluster", CLUSTER])?;
    c["status"]["bootstrapServers"].as_str().map(str::to_string).ok_or_else(|| anyhow!("no status.bootstrapServers"))
}

/// Produces batch `*batches` (acks=all, idempotent: the pod succeeds only if every record
/// was acknowledged), then reads the topic back and checks every batch so far is there.
fn produce_and_verify(t: &Target, batches: &mut usize) -> Result<()> {
    let batch = *batches;
    let bootstrap = bootstrap(t)?;
    let records: String = (0..RECORDS_PER_BATCH).map(|i| format!("batch{batch}-{i}\n")).collect();
    let name = format!("produce-{batch}");
    t.kube.apply(&t.ns, &config_map(&name, "records.txt", &records).to_string())?;
    let args = [
        "-P",
        "-b",
        &bootstrap,
        "-t",
        TOPIC,
        "-X",
        "acks=all",
        "-X",
        "enable.idempotence=true",
        "-X",
        "message.timeout.ms=60000",
        "-l",
        "/records/records.txt",
    ];
    let pod = client_pod(t, &name, &["kcat"], &args, "/records");
    run_pod(t, &name, &pod).with_context(|| format!("producing batch {batch}"))?;
    *batches += 1;

    let expected: String =
        (0..*batches).flat_map(|b| (0..RECORDS_PER_BATCH).map(move |i| format!("batch{b}-{i}\n"))).collect();
    let name = format!("verify-{batch}");
    t.kube.apply(&t.ns, &config_map(&name, "expected.txt", &expected).to_string())?;
    let script = format!(
        "set -e; kcat -C -b {bootstrap} -t {TOPIC} -o beginning -e -q -f '%s\\n' > /work/got.txt; \
         sort -u /work/got.txt > /work/got.sorted; sort -u /expected/expected.txt > /work/expected.sorted; \
         missing=$(comm -23 /work/expected.sorted /work/got.sorted | wc -l); \
         echo \"read $(wc -l < /work/got.txt) records; $missing acknowledged records missing\"; \
         comm -23 /work/expected.sorted /work/got.sorted | head -20; test \"$missing\" -eq 0"
    );
    let pod = client_pod(t, &name, &["sh", "-c"], &[&script], "/expected");
    run_pod(t, &name, &pod).with_context(|| format!("reading back batches 0..={batch}"))
}

fn config_map(name: &str, key: &str, data: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {key: data}})
}

/// A pod that runs a client once: ConfigMap `name` at `mount`, an emptyDir at /work.
fn client_pod(t: &Target, name: &str, command: &[&str], args: &[&str], mount: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "strom-e2e-client"}},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "containers": [{
                "name": "client", "image": t.client_image,
                "command": command, "args": args,
                "volumeMounts": [{"name": "data", "mountPath": mount}, {"name": "work", "mountPath": "/work"}],
                "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
            }],
            "volumes": [{"name": "data", "configMap": {"name": name}}, {"name": "work", "emptyDir": {}}],
        },
    })
}

/// Creates the pod and waits until it Succeeded; its log (where kubectl can read it) in the
/// error otherwise.
fn run_pod(t: &Target, name: &str, pod: &Value) -> Result<()> {
    t.kube.apply(&t.ns, &pod.to_string())?;
    let phase = wait_until(t.step_timeout, || {
        let p = t.kube.json(&["-n", &t.ns, "get", "pod", name])?;
        let phase = p["status"]["phase"].as_str().unwrap_or_default().to_string();
        ensure!(phase == "Succeeded" || phase == "Failed", "pod {name}: {phase}");
        Ok(phase)
    })
    .with_context(|| format!("client pod {name} did not finish"))?;
    if phase != "Succeeded" {
        let log = t.kube.run(&["-n", &t.ns, "logs", name]).map(|r| r.stdout + &r.stderr).unwrap_or_default();
        let status = t.kube.ok(&["-n", &t.ns, "get", "pod", name, "-o", "jsonpath={.status}"]).unwrap_or_default();
        bail!("client pod {name} {phase}: {status}\n{log}");
    }
    Ok(())
}

/// The kubectl to use against a real cluster: `STROM_E2E_KUBECTL`, else `kubectl` on PATH.
pub fn kubectl_from_env() -> PathBuf {
    std::env::var_os("STROM_E2E_KUBECTL").map_or_else(|| PathBuf::from("kubectl"), PathBuf::from)
}

/// Removes what [`run`] made (the release, the Cluster, the namespaces), for a real cluster.
pub fn clean_up(t: &Target) {
    let _ = t.helm.run(&["uninstall", "strom", "--namespace", &t.release_ns, "--wait"]);
    let _ = t.kube.run(&["-n", &t.ns, "delete", "cluster", CLUSTER, "--wait=true", "--timeout=120s"]);
    for ns in [&t.ns, &t.release_ns] {
        let _ = t.kube.run(&["delete", "namespace", ns, "--wait=false"]);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn images_split_at_the_tag() {
        assert_eq!(split_image("strom:dev").unwrap(), ("strom", "dev"));
        assert_eq!(split_image("registry:5000/strom:0.1.0").unwrap(), ("registry:5000/strom", "0.1.0"));
        assert!(split_image("registry:5000/strom").is_err());
        assert!(split_image("strom").is_err());
    }
}
