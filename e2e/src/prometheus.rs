//! A real Prometheus (and promtool), built from github.com/prometheus/prometheus by
//! e2e/prometheus/build.sh once per machine, scraping brokers and the operator on loopback,
//! and its HTTP API for the tests' queries.

use std::collections::BTreeMap;
use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{anyhow, bail, ensure, Context, Result};
use serde_json::Value;

use crate::broker::{free_local_addrs, http_get};
use crate::cluster::wait_until;
use crate::process::{run_to_end, Finished};

const BUILD_DEADLINE: Duration = Duration::from_secs(40 * 60);

/// The directory with `prometheus` and `promtool`, built on first use.
pub fn bin_dir() -> Result<PathBuf> {
    static DIR: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        let mut cmd = Command::new("bash");
        cmd.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/prometheus/build.sh"));
        match run_to_end(cmd, "e2e/prometheus/build.sh", BUILD_DEADLINE) {
            Ok(f) if f.code == 0 => Ok(PathBuf::from(f.stdout.trim())),
            Ok(f) => Err(format!("e2e/prometheus/build.sh exited {}:\n{}{}", f.code, f.stdout, f.stderr)),
            Err(e) => Err(format!("{e:#}")),
        }
    })
    .clone()
    .map_err(|e| anyhow!("prometheus could not be built (needs go >= 1.26): {e}"))
}

/// The chart's alert rules (`charts/strom/files/prometheus-rules.yaml`).
pub fn rules_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../charts/strom/files/prometheus-rules.yaml")
}

/// The chart's Grafana dashboard (`charts/strom/files/dashboard.json`).
pub fn dashboard_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../charts/strom/files/dashboard.json")
}

/// `promtool` with `args`, whatever its exit code.
pub fn promtool(args: &[&str]) -> Result<Finished> {
    let mut cmd = Command::new(bin_dir()?.join("promtool"));
    cmd.args(args);
    run_to_end(cmd, &format!("promtool {}", args.join(" ")), Duration::from_secs(120))
}

/// One scrape job: its targets and the labels every series of them gets.
#[derive(Debug, Clone)]
pub struct Job {
    pub name: String,
    pub targets: Vec<SocketAddr>,
    pub labels: BTreeMap<String, String>,
    /// Keep the scraped series' own labels where they clash with the target's (`namespace` on
    /// the operator's Cluster gauges), as the chart's ServiceMonitor does.
    pub honor_labels: bool,
}

/// A running Prometheus; dropping it kills it.
#[derive(Debug)]
pub struct Prometheus {
    child: Option<Child>,
    pub addr: SocketAddr,
    dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts Prometheus scraping `jobs` every `interval` and evaluating `rule_files` as
    /// often; waits until it is ready.
    pub fn start(jobs: &[Job], rule_files: &[PathBuf], interval: Duration) -> Result<Prometheus> {
        let dir = tempfile::Builder::new().prefix("strom-prometheus-").tempdir()?;
        let [addr] = free_local_addrs::<1>()?;
        let secs = format!("{}s", interval.as_secs().max(1));
        // OpenMetrics only, so that a target serving it wrongly is down rather than parsed
        // with the classic format as a fallback.
        let mut config = serde_json::json!({
            "global": {
                "scrape_interval": secs,
                "evaluation_interval": secs,
                "scrape_timeout": secs,
                "scrape_protocols": ["OpenMetricsText1.0.0"],
            },
            "rule_files": rule_files.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "scrape_configs": [],
        });
        for job in jobs {
            let targets: Vec<String> = job.targets.iter().map(ToString::to_string).collect();
            config["scrape_configs"].as_array_mut().context("scrape_configs")?.push(serde_json::json!({
                "job_name": job.name,
                "honor_labels": job.honor_labels,
                "static_configs": [{"targets": targets, "labels": job.labels}],
            }));
        }
        // JSON is YAML.
        let config_path = dir.path().join("prometheus.yml");
        fs::write(&config_path, serde_json::to_string_pretty(&config)?)?;
        let log = fs::File::create(dir.path().join("prometheus.log"))?;
        let mut cmd = Command::new(bin_dir()?.join("prometheus"));
        cmd.arg(format!("--config.file={}", config_path.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log));
        let child = cmd.spawn().context("spawn prometheus")?;
        let prometheus = Prometheus { child: Some(child), addr, dir };
        wait_until(Duration::from_secs(60), || {
            let r = http_get(addr, "/-/ready")?;
            ensure!(r.status == 200, "/-/ready: {} {}", r.status, r.body);
            Ok(())
        })
        .map_err(|e| e.context(format!("prometheus not ready; its log:\n{}", prometheus.log())))?;
        Ok(prometheus)
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// An instant query: each sample's labels and value.
    pub fn query(&self, expr: &str) -> Result<Vec<(BTreeMap<String, String>, f64)>> {
        let r = http_get(self.addr, &format!("/api/v1/query?query={}", percent_encode(expr)))?;
        let body: Value = serde_json::from_str(&r.body).with_context(|| format!("{expr}: {}", r.body))?;
        if body["status"] != "success" {
            bail!("query {expr} failed: {}", r.body);
        }
        let samples = body["data"]["result"].as_array().cloned().unwrap_or_default();
        samples
            .into_iter()
            .map(|s| {
                let labels: BTreeMap<String, String> = s["metric"]
                    .as_object()
                    .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect())
                    .unwrap_or_default();
                let value = s["value"][1].as_str().context("a sample's value")?.parse::<f64>()?;
                Ok((labels, value))
            })
            .collect()
    }

    /// The alerts in `state` ("pending" or "firing"): each one's labels.
    pub fn alerts(&self, state: &str) -> Result<Vec<BTreeMap<String, String>>> {
        let r = http_get(self.addr, "/api/v1/alerts")?;
        let body: Value = serde_json::from_str(&r.body)?;
        Ok(body["data"]["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["state"] == state)
            .map(|a| {
                a["labels"]
                    .as_object()
                    .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect())
                    .unwrap_or_default()
            })
            .collect())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `s` percent-encoded for a URL query value.
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The alert rules of a rule file: (alert name, expression), in file order.
pub fn alert_rules(path: &Path) -> Result<Vec<(String, String)>> {
    // promtool prints nothing parseable; the file's own shape is simple enough: each
    // `- alert: X` followed by its `expr:` line.
    let text = fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let mut out = Vec::new();
    let mut name: Option<String> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(n) = t.strip_prefix("- alert:") {
            name = Some(n.trim().to_string());
        } else if let Some(e) = t.strip_prefix("expr:") {
            let n = name.take().with_context(|| format!("an expr without an alert: {t}"))?;
            out.push((n, e.trim().to_string()));
        }
    }
    Ok(out)
}

/// An alert expression split as the rule file's convention has it: `<query> <op> <number>`.
pub fn split_comparison(expr: &str) -> Result<(&str, &str, f64)> {
    for op in [" != ", " >= ", " <= ", " == ", " > ", " < "] {
        if let Some(i) = expr.rfind(op) {
            let number = expr[i + op.len()..].trim();
            if let Ok(n) = number.parse::<f64>() {
                return Ok((expr[..i].trim(), op.trim(), n));
            }
        }
    }
    bail!("{expr:?} is not `<query> <comparison> <number>`")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_split_off_the_end() {
        assert_eq!(split_comparison("sum by (a) (x) != 1").unwrap(), ("sum by (a) (x)", "!=", 1.0));
        assert_eq!(split_comparison("min(x / y) < 0.1").unwrap(), ("min(x / y)", "<", 0.1));
        assert!(split_comparison("x > y").is_err());
        assert_eq!(percent_encode("a b{c=\"d\"}"), "a%20b%7Bc%3D%22d%22%7D");
    }

    #[test]
    fn the_charts_rule_file_follows_the_convention() {
        let rules = alert_rules(&rules_file()).unwrap();
        assert!(rules.len() >= 9, "{rules:?}");
        for (name, expr) in &rules {
            assert!(split_comparison(expr).is_ok(), "{name}: {expr}");
        }
    }
}
