//! What the pod runner makes of a pod (pure; no API calls, no processes): the first
//! container's command line under Kubernetes' rules — env from values, the downward API and
//! the ConfigMaps and Secrets the kubelet fetched (`envFrom` first, then `env`, a later name
//! replacing an earlier one), `$(VAR)` expansion in env values, command and args — its
//! startup, liveness and readiness probes, and its volume mounts. A local process has no mount
//! namespace, so a path at or under a mount's `mountPath` in an argument, env value or working
//! directory is rewritten to the volume's host directory; that is the one liberty the runner
//! takes with a pod spec (it extends to the text of ConfigMap and Secret files,
//! [`super::volumes`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Container, EnvVar, Pod, Probe, Secret};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// How to start a pod's first container here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub container: String,
    pub image: String,
    /// `command[0]`, as the pod names it (the runner maps it to a local binary).
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub working_dir: Option<PathBuf>,
    /// The container's mounts: (mountPath, host directory), longest mountPath first.
    pub mounts: Vec<(String, PathBuf)>,
    pub startup: Option<ProbeSpec>,
    pub liveness: Option<ProbeSpec>,
    pub readiness: Option<ProbeSpec>,
    /// `terminationGracePeriodSeconds` (30 when unset, as in Kubernetes).
    pub grace: Duration,
    /// `restartPolicy` (Always when unset).
    pub restart: RestartPolicy,
}

/// A pod's `restartPolicy`: whether its container is started again after it exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RestartPolicy {
    #[default]
    Always,
    OnFailure,
    Never,
}

impl RestartPolicy {
    /// Whether a container that exited with `code` is started again.
    pub fn restarts(self, code: i32) -> bool {
        match self {
            RestartPolicy::Always => true,
            RestartPolicy::OnFailure => code != 0,
            RestartPolicy::Never => false,
        }
    }
}

/// A probe the runner can run, with Kubernetes' defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSpec {
    pub check: Check,
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
    /// The probe's own `terminationGracePeriodSeconds` (liveness and startup probes): the
    /// grace of the kill that a failure causes, instead of the pod's.
    pub termination_grace: Option<Duration>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// An HTTP GET that must answer 200–399.
    Http { host: Ipv4Addr, port: u16, path: String },
    /// A TCP connect that must succeed.
    Tcp { host: Ipv4Addr, port: u16 },
}

/// What the runner knows about where the pod runs.
#[derive(Debug, Clone, Copy)]
pub struct Placement<'a> {
    pub pod_ip: Ipv4Addr,
    pub host_ip: Ipv4Addr,
    pub node_name: &'a str,
}

/// The two kinds of object a pod takes keys from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    ConfigMap,
    Secret,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::ConfigMap => "ConfigMap",
            Kind::Secret => "Secret",
        })
    }
}

/// The ConfigMaps and Secrets of its namespace that a pod refers to ([`references`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct References {
    pub config_maps: BTreeSet<String>,
    pub secrets: BTreeSet<String>,
}

/// The referenced objects as the kubelet found them just before the start, by name; a name
/// that is absent was not found.
#[derive(Debug, Clone, Default)]
pub struct Objects {
    pub config_maps: BTreeMap<String, ConfigMap>,
    pub secrets: BTreeMap<String, Secret>,
}

impl Objects {
    /// The keys env can take from an object: a ConfigMap's `data` (not `binaryData`, as in
    /// the kubelet), a Secret's `data` as text. `None`: not found.
    pub fn env_data(&self, kind: Kind, name: &str) -> Option<BTreeMap<String, String>> {
        match kind {
            Kind::ConfigMap => self.config_maps.get(name).map(|m| m.data.clone().unwrap_or_default()),
            Kind::Secret => self.secrets.get(name).map(|s| {
                s.data.iter().flatten().map(|(k, v)| (k.clone(), String::from_utf8_lossy(&v.0).into_owned())).collect()
            }),
        }
    }

    /// The keys a volume can take from an object: a ConfigMap's `data` and `binaryData`, a
    /// Secret's `data` (the client has decoded the base64). `None`: not found.
    pub fn file_data(&self, kind: Kind, name: &str) -> Option<BTreeMap<String, Vec<u8>>> {
        match kind {
            Kind::ConfigMap => self.config_maps.get(name).map(|m| {
                let text = m.data.iter().flatten().map(|(k, v)| (k.clone(), v.clone().into_bytes()));
                let binary = m.binary_data.iter().flatten().map(|(k, v)| (k.clone(), v.0.clone()));
                text.chain(binary).collect()
            }),
            Kind::Secret => {
                self.secrets.get(name).map(|s| s.data.iter().flatten().map(|(k, v)| (k.clone(), v.0.clone())).collect())
            }
        }
    }
}

/// Why a pod cannot be run here, or not yet (reported on the pod's status).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LaunchError {
    #[error("the pod has no containers")]
    NoContainer,
    #[error("container {0}: no command (the runner has no images, so the pod must name its program)")]
    NoCommand(String),
    #[error("container {container}: env {name}: {reason}")]
    Env { container: String, name: String, reason: String },
    #[error("container {container}: envFrom {kind} {name}: {reason}")]
    EnvFrom { container: String, kind: Kind, name: String, reason: String },
    #[error("container {container}: volume mount {mount}: {reason}")]
    Mount { container: String, mount: String, reason: String },
    #[error("container {container}: {probe} probe: {reason}")]
    Probe { container: String, probe: &'static str, reason: String },
    #[error("volume {volume}: {reason}")]
    Volume { volume: String, reason: String },
}

/// The ConfigMaps and Secrets `pod` needs: those its volumes and its first container's env
/// name, optional ones included.
pub fn references(pod: &Pod) -> References {
    let mut refs = References::default();
    let Some(spec) = pod.spec.as_ref() else { return refs };
    for v in spec.volumes.iter().flatten() {
        if let Some(cm) = &v.config_map {
            refs.config_maps.insert(cm.name.clone());
        }
        if let Some(name) = v.secret.as_ref().and_then(|s| s.secret_name.clone()) {
            refs.secrets.insert(name);
        }
        for source in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(cm) = &source.config_map {
                refs.config_maps.insert(cm.name.clone());
            }
            if let Some(s) = &source.secret {
                refs.secrets.insert(s.name.clone());
            }
        }
    }
    let Some(c) = spec.containers.first() else { return refs };
    for from in c.env_from.iter().flatten() {
        if let Some(cm) = &from.config_map_ref {
            refs.config_maps.insert(cm.name.clone());
        }
        if let Some(s) = &from.secret_ref {
            refs.secrets.insert(s.name.clone());
        }
    }
    for from in c.env.iter().flatten().filter_map(|v| v.value_from.as_ref()) {
        if let Some(k) = &from.config_map_key_ref {
            refs.config_maps.insert(k.name.clone());
        }
        if let Some(k) = &from.secret_key_ref {
            refs.secrets.insert(k.name.clone());
        }
    }
    refs
}

/// The launch of `pod`'s first container at `at`, with `volumes` (volume name → host dir) and
/// the `objects` its env refers to.
pub fn launch(
    pod: &Pod,
    at: Placement<'_>,
    volumes: &BTreeMap<String, PathBuf>,
    objects: &Objects,
) -> Result<Launch, LaunchError> {
    let spec = pod.spec.as_ref().ok_or(LaunchError::NoContainer)?;
    let c = spec.containers.first().ok_or(LaunchError::NoContainer)?;
    let mounts = mounts(c, volumes)?;
    let env = env(pod, c, at, objects, &mounts)?;
    let command = c.command.clone().unwrap_or_default();
    let (program, rest) = command.split_first().ok_or_else(|| LaunchError::NoCommand(c.name.clone()))?;
    let args = rest.iter().chain(c.args.iter().flatten()).map(|a| rewrite_mounts(&expand(a, &env), &mounts)).collect();
    let working_dir = c.working_dir.as_deref().map(|d| PathBuf::from(rewrite_mounts(d, &mounts)));
    let probe = |name: &'static str, p: &Option<Probe>| p.as_ref().map(|p| probe(c, name, p, at.pod_ip)).transpose();
    let grace = spec.termination_grace_period_seconds.unwrap_or(30).max(0);
    Ok(Launch {
        container: c.name.clone(),
        image: c.image.clone().unwrap_or_default(),
        program: expand(program, &env),
        args,
        env,
        working_dir,
        startup: probe("startup", &c.startup_probe)?,
        liveness: probe("liveness", &c.liveness_probe)?,
        readiness: probe("readiness", &c.readiness_probe)?,
        mounts,
        grace: Duration::from_secs(u64::try_from(grace).unwrap_or(0)),
        restart: match spec.restart_policy.as_deref() {
            Some("Never") => RestartPolicy::Never,
            Some("OnFailure") => RestartPolicy::OnFailure,
            _ => RestartPolicy::Always,
        },
    })
}

/// The container's mounts: (mountPath, host dir), longest mountPath first.
fn mounts(c: &Container, volumes: &BTreeMap<String, PathBuf>) -> Result<Vec<(String, PathBuf)>, LaunchError> {
    let mut out = Vec::new();
    for m in c.volume_mounts.iter().flatten() {
        let fail = |reason: &str| LaunchError::Mount {
            container: c.name.clone(),
            mount: m.mount_path.clone(),
            reason: reason.to_string(),
        };
        let dir = volumes.get(&m.name).ok_or_else(|| fail(&format!("no volume {} the runner can provide", m.name)))?;
        let dir = match m.sub_path.as_deref().filter(|s| !s.is_empty()) {
            Some(sub) if Path::new(sub).is_relative() && !sub.split('/').any(|p| p == "..") => dir.join(sub),
            Some(_) => return Err(fail("subPath must be a relative path without ..")),
            None => dir.clone(),
        };
        out.push((m.mount_path.trim_end_matches('/').to_string(), dir));
    }
    out.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
    Ok(out)
}

/// The container's environment in Kubernetes' order: every `envFrom` source, then `env`, a
/// name set again replacing the earlier value; `$(VAR)` in an `env` value expands against the
/// variables before it (values taken from objects or fields are not expanded, as in the
/// kubelet).
fn env(
    pod: &Pod,
    c: &Container,
    at: Placement<'_>,
    objects: &Objects,
    mounts: &[(String, PathBuf)],
) -> Result<Vec<(String, String)>, LaunchError> {
    let mut out: Vec<(String, String)> = Vec::new();
    let set = |out: &mut Vec<(String, String)>, name: String, value: String| {
        out.retain(|(n, _)| *n != name);
        out.push((name, rewrite_mounts(&value, mounts)));
    };
    for from in c.env_from.iter().flatten() {
        let (kind, name, optional) = match (&from.config_map_ref, &from.secret_ref) {
            (Some(cm), _) => (Kind::ConfigMap, &cm.name, cm.optional),
            (None, Some(s)) => (Kind::Secret, &s.name, s.optional),
            (None, None) => continue,
        };
        let Some(data) = objects.env_data(kind, name) else {
            if optional == Some(true) {
                continue;
            }
            let reason = "not found".to_string();
            return Err(LaunchError::EnvFrom { container: c.name.clone(), kind, name: name.clone(), reason });
        };
        let prefix = from.prefix.as_deref().unwrap_or("");
        for (key, value) in data {
            let var = format!("{prefix}{key}");
            // The kubelet skips keys that make no variable name (and says so in an Event).
            if is_env_name(&var) {
                set(&mut out, var, value);
            }
        }
    }
    for var in c.env.iter().flatten() {
        match env_value(pod, var, at, objects, &out) {
            Ok(Some(value)) => set(&mut out, var.name.clone(), value),
            Ok(None) => {}
            Err(reason) => return Err(LaunchError::Env { container: c.name.clone(), name: var.name.clone(), reason }),
        }
    }
    Ok(out)
}

/// A name the kubelet accepts from `envFrom`: printable ASCII without `=` (Kubernetes 1.34's
/// relaxed validation).
fn is_env_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_graphic() && c != '=')
}

/// One `env` entry's value; `None` when it takes a key of an optional object that is absent.
fn env_value(
    pod: &Pod,
    var: &EnvVar,
    at: Placement<'_>,
    objects: &Objects,
    before: &[(String, String)],
) -> Result<Option<String>, String> {
    let Some(from) = &var.value_from else { return Ok(Some(expand(var.value.as_deref().unwrap_or(""), before))) };
    if let Some(field) = &from.field_ref {
        return field_value(pod, &field.field_path, at).map(Some);
    }
    let (kind, name, key, optional) = match (&from.config_map_key_ref, &from.secret_key_ref) {
        (Some(k), _) => (Kind::ConfigMap, &k.name, &k.key, k.optional == Some(true)),
        (None, Some(k)) => (Kind::Secret, &k.name, &k.key, k.optional == Some(true)),
        (None, None) => {
            return Err("only value and valueFrom fieldRef, configMapKeyRef and secretKeyRef are supported by the \
                        pod runner"
                .into())
        }
    };
    let Some(data) = objects.env_data(kind, name) else {
        return if optional { Ok(None) } else { Err(format!("{kind} {name} not found")) };
    };
    match data.get(key) {
        Some(value) => Ok(Some(value.clone())),
        None if optional => Ok(None),
        None => Err(format!("{kind} {name} has no key {key}")),
    }
}

/// A downward-API field, as the kubelet resolves `fieldRef.fieldPath`.
pub fn field_value(pod: &Pod, path: &str, at: Placement<'_>) -> Result<String, String> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let keyed = |prefix: &str, map: Option<&BTreeMap<String, String>>| -> Option<String> {
        let key = path.strip_prefix(prefix)?.strip_suffix("']")?;
        Some(map.and_then(|m| m.get(key)).cloned().unwrap_or_default())
    };
    if let Some(v) = keyed("metadata.labels['", meta.labels.as_ref()) {
        return Ok(v);
    }
    if let Some(v) = keyed("metadata.annotations['", meta.annotations.as_ref()) {
        return Ok(v);
    }
    Ok(match path {
        "metadata.labels" => downward_map(meta.labels.as_ref()),
        "metadata.annotations" => downward_map(meta.annotations.as_ref()),
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "spec.nodeName" => at.node_name.to_string(),
        "spec.serviceAccountName" => spec.and_then(|s| s.service_account_name.clone()).unwrap_or_default(),
        "status.podIP" | "status.podIPs" => at.pod_ip.to_string(),
        "status.hostIP" | "status.hostIPs" => at.host_ip.to_string(),
        other => return Err(format!("fieldPath {other:?} is not supported")),
    })
}

/// A whole label or annotation map as the kubelet writes it into a downward-API file: one
/// `key="value"` line per key, sorted, values quoted as Go's `%q` quotes them.
pub fn downward_map(map: Option<&BTreeMap<String, String>>) -> String {
    let quote = |v: &str| {
        let mut out = String::from('"');
        for c in v.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    };
    map.into_iter().flatten().map(|(k, v)| format!("{k}={}", quote(v))).collect::<Vec<_>>().join("\n")
}

/// Kubernetes' `$(VAR)` expansion: a defined variable is replaced, an undefined reference is
/// left as written, and `$$` is a literal `$`.
pub fn expand(text: &str, env: &[(String, String)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some((name, tail)) = after.strip_prefix('(').and_then(|a| a.split_once(')')) {
            match env.iter().rev().find(|(n, _)| n == name) {
                Some((_, value)) => out.push_str(value),
                None => {
                    out.push_str("$(");
                    out.push_str(name);
                    out.push(')');
                }
            }
            rest = tail;
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// `text` with every path at or under a mountPath (a whole path component) moved to its host
/// directory.
pub fn rewrite_mounts(text: &str, mounts: &[(String, PathBuf)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    'scan: while i < text.len() {
        for (path, dir) in mounts {
            if !text[i..].starts_with(path.as_str()) || path.is_empty() {
                continue;
            }
            let starts_component = i == 0 || !is_path_char(text[..i].chars().next_back().unwrap_or(' '));
            let end = i + path.len();
            let ends_component = text[end..].chars().next().is_none_or(|c| c == '/' || !is_path_char(c));
            if starts_component && ends_component {
                out.push_str(&dir.display().to_string());
                i = end;
                continue 'scan;
            }
        }
        let c = text[i..].chars().next().unwrap_or(' ');
        out.push(c);
        i += c.len_utf8();
    }
    out
}

fn is_path_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '/' | '.' | '-' | '_')
}

/// A probe of container `c` (`which`: startup, liveness or readiness) with Kubernetes'
/// defaults; only httpGet (scheme HTTP) and tcpSocket can be run here.
fn probe(c: &Container, which: &'static str, p: &Probe, pod_ip: Ipv4Addr) -> Result<ProbeSpec, LaunchError> {
    let fail = |reason: String| LaunchError::Probe { container: c.name.clone(), probe: which, reason };
    let port = |port: &IntOrString| -> Result<u16, LaunchError> {
        match port {
            IntOrString::Int(n) => u16::try_from(*n).map_err(|_| fail(format!("port {n} out of range"))),
            IntOrString::String(name) => c
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .and_then(|p| u16::try_from(p.container_port).ok())
                .ok_or_else(|| fail(format!("no container port named {name}"))),
        }
    };
    let host = |h: Option<&String>| -> Result<Ipv4Addr, LaunchError> {
        match h {
            Some(h) => h.parse().map_err(|_| fail(format!("host {h:?} is not an IPv4 address"))),
            None => Ok(pod_ip),
        }
    };
    let check = if let Some(http) = &p.http_get {
        if http.scheme.as_deref().is_some_and(|s| !s.eq_ignore_ascii_case("http")) {
            return Err(fail("only scheme HTTP is supported".into()));
        }
        Check::Http {
            host: host(http.host.as_ref())?,
            port: port(&http.port)?,
            path: http.path.clone().unwrap_or_else(|| "/".into()),
        }
    } else if let Some(tcp) = &p.tcp_socket {
        Check::Tcp { host: host(tcp.host.as_ref())?, port: port(&tcp.port)? }
    } else {
        return Err(fail("only httpGet and tcpSocket probes are supported".into()));
    };
    let secs =
        |v: Option<i32>, default: i32| Duration::from_secs(u64::try_from(v.unwrap_or(default).max(0)).unwrap_or(0));
    let count = |v: Option<i32>, default: i32| u32::try_from(v.unwrap_or(default).max(1)).unwrap_or(1);
    Ok(ProbeSpec {
        check,
        initial_delay: secs(p.initial_delay_seconds, 0),
        period: secs(p.period_seconds, 10).max(Duration::from_secs(1)),
        timeout: secs(p.timeout_seconds, 1).max(Duration::from_secs(1)),
        success_threshold: count(p.success_threshold, 1),
        failure_threshold: count(p.failure_threshold, 3),
        termination_grace: p
            .termination_grace_period_seconds
            .map(|s| Duration::from_secs(u64::try_from(s).unwrap_or(0))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
    }

    #[test]
    fn whole_label_and_annotation_maps_are_written_as_the_kubelet_writes_them() {
        let map = BTreeMap::from([
            ("strom.dev/rack".to_string(), "zone-a".to_string()),
            ("a".to_string(), "say \"hi\"\\n".to_string()),
        ]);
        assert_eq!(downward_map(Some(&map)), "a=\"say \\\"hi\\\"\\\\n\"\nstrom.dev/rack=\"zone-a\"");
        assert_eq!(downward_map(None), "");
    }

    #[test]
    fn expansion_follows_kubernetes_rules() {
        let env = env_of(&[("A", "x"), ("B", "y/$(A)")]);
        assert_eq!(expand("$(A)-$(B)", &env), "x-y/$(A)", "values are not expanded twice");
        assert_eq!(expand("$(MISSING) $$(A) $ $x", &env), "$(MISSING) $(A) $ $x");
        assert_eq!(expand("$(A", &env), "$(A");
    }

    #[test]
    fn mount_paths_are_rewritten_only_as_whole_components() {
        let mounts = vec![("/var/lib/strom".to_string(), PathBuf::from("/tmp/pv/data-0"))];
        assert_eq!(rewrite_mounts("--data-dir=/var/lib/strom/data", &mounts), "--data-dir=/tmp/pv/data-0/data");
        assert_eq!(rewrite_mounts("/var/lib/strom", &mounts), "/tmp/pv/data-0");
        assert_eq!(rewrite_mounts("/var/lib/stromx /x/var/lib/strom", &mounts), "/var/lib/stromx /x/var/lib/strom");
        assert_eq!(rewrite_mounts("a:/var/lib/strom,b", &mounts), "a:/tmp/pv/data-0,b");
    }

    #[test]
    fn a_pod_becomes_a_launch_with_downward_api_values() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "strom-1", "namespace": "ns", "labels": {"apps.kubernetes.io/pod-index": "1"}},
            "spec": {
                "terminationGracePeriodSeconds": 5,
                "containers": [{
                    "name": "strom",
                    "image": "strom:dev",
                    "command": ["strom", "serve"],
                    "args": ["--node-id=$(ID)", "--kafka-listen=$(POD_IP):9092", "--data-dir=/data/log"],
                    "env": [
                        {"name": "ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['apps.kubernetes.io/pod-index']"}}},
                        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                        {"name": "HOST", "value": "$(ID).svc"}
                    ],
                    "ports": [{"name": "http", "containerPort": 9094}],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    "readinessProbe": {"httpGet": {"path": "/readyz", "port": "http"}, "periodSeconds": 1}
                }]
            }
        }))
        .expect("pod");
        let at = Placement { pod_ip: Ipv4Addr::new(127, 16, 0, 3), host_ip: Ipv4Addr::LOCALHOST, node_name: "n" };
        let volumes = BTreeMap::from([("data".to_string(), PathBuf::from("/pv/data-strom-1"))]);
        let l = launch(&pod, at, &volumes, &Objects::default()).expect("launch");
        assert_eq!(l.program, "strom");
        assert_eq!(
            l.args,
            ["serve", "--node-id=1", "--kafka-listen=127.16.0.3:9092", "--data-dir=/pv/data-strom-1/log"]
        );
        assert_eq!(l.env, env_of(&[("ID", "1"), ("POD_IP", "127.16.0.3"), ("HOST", "1.svc")]));
        assert_eq!(l.grace, Duration::from_secs(5));
        let r = l.readiness.expect("probe");
        assert_eq!(r.check, Check::Http { host: at.pod_ip, port: 9094, path: "/readyz".into() });
        assert_eq!((r.period, r.failure_threshold), (Duration::from_secs(1), 3));

        let no_volume = launch(&pod, at, &BTreeMap::new(), &Objects::default());
        assert!(matches!(no_volume, Err(LaunchError::Mount { .. })), "{no_volume:?}");
    }

    const AT: Placement<'static> =
        Placement { pod_ip: Ipv4Addr::new(127, 16, 0, 3), host_ip: Ipv4Addr::LOCALHOST, node_name: "n" };

    /// A pod whose first container is `container` (command `sh` unless given).
    fn pod_with(container: serde_json::Value, spec: serde_json::Value) -> Pod {
        let mut container = container;
        if container.get("command").is_none() {
            container["command"] = serde_json::json!(["sh"]);
        }
        container["name"] = serde_json::json!("c");
        let mut spec = spec;
        spec["containers"] = serde_json::json!([container]);
        serde_json::from_value(serde_json::json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec}))
            .expect("pod")
    }

    fn objects(config_maps: &[(&str, &[(&str, &str)])], secrets: &[(&str, &[(&str, &str)])]) -> Objects {
        let data = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let config_maps = config_maps
            .iter()
            .map(|(name, pairs)| (name.to_string(), ConfigMap { data: Some(data(pairs)), ..ConfigMap::default() }))
            .collect();
        let secrets = secrets
            .iter()
            .map(|(name, pairs)| {
                let bytes = pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), k8s_openapi::ByteString(v.as_bytes().to_vec())))
                    .collect();
                (name.to_string(), Secret { data: Some(bytes), ..Secret::default() })
            })
            .collect();
        Objects { config_maps, secrets }
    }

    #[test]
    fn env_comes_from_config_maps_and_secrets_in_kubernetes_order() {
        let pod = pod_with(
            serde_json::json!({
                "envFrom": [
                    {"configMapRef": {"name": "cfg"}},
                    {"prefix": "S_", "secretRef": {"name": "creds"}},
                    {"configMapRef": {"name": "absent", "optional": true}}
                ],
                "env": [
                    {"name": "LEVEL", "value": "debug"},
                    {"name": "URL", "value": "$(HOST):$(S_PORT)"},
                    {"name": "RAW", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "RAW"}}},
                    {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
                    {"name": "GONE", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "x", "optional": true}}},
                    {"name": "NO_KEY", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "nope", "optional": true}}},
                    {"name": "CONF", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "CONF"}}}
                ],
                "volumeMounts": [{"name": "config", "mountPath": "/etc/strom"}]
            }),
            serde_json::json!({}),
        );
        let objects = objects(
            &[(
                "cfg",
                &[
                    ("HOST", "h"),
                    ("LEVEL", "info"),
                    ("RAW", "$(HOST)"),
                    ("bad=name", "x"),
                    ("CONF", "/etc/strom/broker.toml"),
                ],
            )],
            &[("creds", &[("PORT", "9092"), ("password", "s3cret")])],
        );
        let volumes = BTreeMap::from([("config".to_string(), PathBuf::from("/pods/u/config"))]);
        let l = launch(&pod, AT, &volumes, &objects).expect("launch");
        assert_eq!(
            l.env,
            env_of(&[
                ("HOST", "h"),
                ("S_PORT", "9092"),
                ("S_password", "s3cret"),
                ("LEVEL", "debug"),
                ("URL", "h:9092"),
                ("RAW", "$(HOST)"),
                ("PASSWORD", "s3cret"),
                ("CONF", "/pods/u/config/broker.toml"),
            ]),
            "envFrom first, env after it (a later name wins and moves last); only env values expand; a key that \
             is no variable name is skipped; optional absent objects and keys set nothing; paths under a \
             mount are rewritten"
        );
    }

    #[test]
    fn a_missing_object_or_key_stops_the_launch_unless_optional() {
        let env_from = |optional: bool| {
            pod_with(
                serde_json::json!({"envFrom": [{"configMapRef": {"name": "cfg", "optional": optional}}]}),
                serde_json::json!({}),
            )
        };
        let none = Objects::default();
        let err = launch(&env_from(false), AT, &BTreeMap::new(), &none).expect_err("a missing ConfigMap");
        assert_eq!(err.to_string(), "container c: envFrom ConfigMap cfg: not found");
        assert!(launch(&env_from(true), AT, &BTreeMap::new(), &none).is_ok());

        let key_ref = pod_with(
            serde_json::json!({"env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}}]}),
            serde_json::json!({}),
        );
        let err = launch(&key_ref, AT, &BTreeMap::new(), &none).expect_err("a missing Secret");
        assert_eq!(err.to_string(), "container c: env P: Secret creds not found");
        let no_key = objects(&[], &[("creds", &[("user", "u")])]);
        let err = launch(&key_ref, AT, &BTreeMap::new(), &no_key).expect_err("a missing key");
        assert_eq!(err.to_string(), "container c: env P: Secret creds has no key password");
    }

    #[test]
    fn references_name_every_config_map_and_secret_the_pod_uses() {
        let pod = pod_with(
            serde_json::json!({
                "envFrom": [{"configMapRef": {"name": "env-cm"}}, {"secretRef": {"name": "env-secret"}}],
                "env": [
                    {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "key-cm", "key": "a"}}},
                    {"name": "B", "valueFrom": {"secretKeyRef": {"name": "key-secret", "key": "b"}}}
                ]
            }),
            serde_json::json!({"volumes": [
                {"name": "v1", "configMap": {"name": "vol-cm"}},
                {"name": "v2", "secret": {"secretName": "vol-secret"}},
                {"name": "v3", "projected": {"sources": [
                    {"configMap": {"name": "kube-root-ca.crt"}},
                    {"secret": {"name": "proj-secret"}},
                    {"serviceAccountToken": {"path": "token"}}
                ]}}
            ]}),
        );
        let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>();
        assert_eq!(
            references(&pod),
            References {
                config_maps: set(&["env-cm", "key-cm", "kube-root-ca.crt", "vol-cm"]),
                secrets: set(&["env-secret", "key-secret", "proj-secret", "vol-secret"]),
            }
        );
    }

    #[test]
    fn liveness_and_startup_probes_are_read_like_readiness() {
        let pod = pod_with(
            serde_json::json!({
                "ports": [{"name": "http", "containerPort": 9094}],
                "startupProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 1, "failureThreshold": 30},
                "livenessProbe": {"tcpSocket": {"port": 9092}, "terminationGracePeriodSeconds": 2},
                "readinessProbe": {"httpGet": {"path": "/readyz", "port": 9094}}
            }),
            serde_json::json!({}),
        );
        let l = launch(&pod, AT, &BTreeMap::new(), &Objects::default()).expect("launch");
        let startup = l.startup.expect("startup probe");
        assert_eq!(startup.check, Check::Http { host: AT.pod_ip, port: 9094, path: "/healthz".into() });
        assert_eq!((startup.period, startup.failure_threshold), (Duration::from_secs(1), 30));
        let liveness = l.liveness.expect("liveness probe");
        assert_eq!(liveness.check, Check::Tcp { host: AT.pod_ip, port: 9092 });
        assert_eq!(
            (liveness.period, liveness.failure_threshold, liveness.termination_grace),
            (Duration::from_secs(10), 3, Some(Duration::from_secs(2))),
            "Kubernetes' defaults, the probe's own grace"
        );
        assert!(l.readiness.is_some());

        let exec =
            pod_with(serde_json::json!({"livenessProbe": {"exec": {"command": ["true"]}}}), serde_json::json!({}));
        let err = launch(&exec, AT, &BTreeMap::new(), &Objects::default()).expect_err("an exec probe");
        assert_eq!(err.to_string(), "container c: liveness probe: only httpGet and tcpSocket probes are supported");
    }

    #[test]
    fn fields_the_runner_cannot_honour_do_not_stop_a_pod() {
        let pod = pod_with(
            serde_json::json!({
                "image": "strom:dev",
                "imagePullPolicy": "IfNotPresent",
                "securityContext": {"runAsNonRoot": true, "runAsUser": 1000, "readOnlyRootFilesystem": true,
                                    "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
                "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
                "lifecycle": {"preStop": {"exec": {"command": ["sleep", "5"]}}}
            }),
            serde_json::json!({
                "securityContext": {"fsGroup": 1000, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
                "automountServiceAccountToken": false,
                "nodeSelector": {"kubernetes.io/os": "linux", "disk": "ssd"},
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "kafka", "effect": "NoSchedule"}],
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "strom"}}, "topologyKey": "kubernetes.io/hostname"}
                ]}},
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "strom"}}}],
                "priorityClassName": "high",
                "serviceAccountName": "strom"
            }),
        );
        let mut pod = pod;
        pod.metadata.annotations = Some(BTreeMap::from([("strom.dev/config-hash".to_string(), "abc".to_string())]));
        let l = launch(&pod, AT, &BTreeMap::new(), &Objects::default());
        assert!(l.is_ok(), "{l:?}");
    }
}
