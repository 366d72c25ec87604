//! What the pod runner makes of a pod (pure; no API calls, no processes): the first
//! container's command line under Kubernetes' rules — env from values and the downward API,
//! `$(VAR)` expansion in env values, command and args — its readiness probe, and its volume
//! mounts. A local process has no mount namespace, so a path at or under a mount's
//! `mountPath` in an argument, env value or working directory is rewritten to the volume's
//! host directory; that is the one liberty the runner takes with a pod spec.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, EnvVar, Pod, Probe};
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
    pub readiness: Option<Readiness>,
    /// `terminationGracePeriodSeconds` (30 when unset, as in Kubernetes).
    pub grace: Duration,
}

/// A readiness probe the runner can run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    pub check: Check,
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
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

/// Why a pod cannot be run here (reported on the pod's status).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LaunchError {
    #[error("the pod has no containers")]
    NoContainer,
    #[error("container {0}: no command (the runner has no images, so the pod must name its program)")]
    NoCommand(String),
    #[error("container {container}: env {name}: {reason}")]
    Env { container: String, name: String, reason: String },
    #[error("container {container}: volume mount {mount}: {reason}")]
    Mount { container: String, mount: String, reason: String },
    #[error("container {container}: readiness probe: {reason}")]
    Probe { container: String, reason: String },
}

/// The launch of `pod`'s first container at `at`, with `volumes` (volume name → host dir).
pub fn launch(pod: &Pod, at: Placement<'_>, volumes: &BTreeMap<String, PathBuf>) -> Result<Launch, LaunchError> {
    let spec = pod.spec.as_ref().ok_or(LaunchError::NoContainer)?;
    let c = spec.containers.first().ok_or(LaunchError::NoContainer)?;
    let mounts = mounts(c, volumes)?;
    let env = env(pod, c, at, &mounts)?;
    let command = c.command.clone().unwrap_or_default();
    let (program, rest) = command.split_first().ok_or_else(|| LaunchError::NoCommand(c.name.clone()))?;
    let args = rest.iter().chain(c.args.iter().flatten()).map(|a| rewrite_mounts(&expand(a, &env), &mounts)).collect();
    let working_dir = c.working_dir.as_deref().map(|d| PathBuf::from(rewrite_mounts(d, &mounts)));
    let readiness = c.readiness_probe.as_ref().map(|p| readiness(c, p, at.pod_ip)).transpose()?;
    let grace = spec.termination_grace_period_seconds.unwrap_or(30).max(0);
    Ok(Launch {
        container: c.name.clone(),
        image: c.image.clone().unwrap_or_default(),
        program: expand(program, &env),
        args,
        env,
        working_dir,
        readiness,
        grace: Duration::from_secs(u64::try_from(grace).unwrap_or(0)),
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

/// The container's environment in order, each value expanded against those before it.
fn env(
    pod: &Pod,
    c: &Container,
    at: Placement<'_>,
    mounts: &[(String, PathBuf)],
) -> Result<Vec<(String, String)>, LaunchError> {
    let mut out: Vec<(String, String)> = Vec::new();
    for var in c.env.iter().flatten() {
        let value = match env_value(pod, var, at) {
            Ok(v) => rewrite_mounts(&expand(&v, &out), mounts),
            Err(reason) => return Err(LaunchError::Env { container: c.name.clone(), name: var.name.clone(), reason }),
        };
        out.retain(|(name, _)| *name != var.name);
        out.push((var.name.clone(), value));
    }
    Ok(out)
}

fn env_value(pod: &Pod, var: &EnvVar, at: Placement<'_>) -> Result<String, String> {
    let Some(from) = &var.value_from else { return Ok(var.value.clone().unwrap_or_default()) };
    let Some(field) = &from.field_ref else {
        return Err("only value and valueFrom.fieldRef are supported by the pod runner".into());
    };
    field_value(pod, &field.field_path, at)
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

fn readiness(c: &Container, p: &Probe, pod_ip: Ipv4Addr) -> Result<Readiness, LaunchError> {
    let fail = |reason: String| LaunchError::Probe { container: c.name.clone(), reason };
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
    Ok(Readiness {
        check,
        initial_delay: secs(p.initial_delay_seconds, 0),
        period: secs(p.period_seconds, 10).max(Duration::from_secs(1)),
        timeout: secs(p.timeout_seconds, 1).max(Duration::from_secs(1)),
        success_threshold: count(p.success_threshold, 1),
        failure_threshold: count(p.failure_threshold, 3),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
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
        let l = launch(&pod, at, &volumes).expect("launch");
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

        let no_volume = launch(&pod, at, &BTreeMap::new());
        assert!(matches!(no_volume, Err(LaunchError::Mount { .. })), "{no_volume:?}");
    }
}
