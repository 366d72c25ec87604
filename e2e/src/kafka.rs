//! Apache Kafka's own command-line tools and its Java client, run as child processes against
//! a Strom cluster. `e2e/kafka/kafka.sh` fetches one pinned Kafka release's jars from Maven
//! Central into a per-version cache (once per machine) and compiles `CompatClient.java`
//! against them; [`tool`] runs a tool by its script name (`topics` for kafka-topics.sh,
//! `consumer-groups`, `reassign-partitions`, ...) or by class name.

use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};

use crate::process::{run_to_end, run_with_stdin, Finished};

/// How long one tool run may take before the test gives up on it (and kills it).
pub const TOOL_DEADLINE: Duration = Duration::from_secs(180);

/// The first fetch downloads about 100 MB of jars through Maven.
const FETCH_DEADLINE: Duration = Duration::from_secs(900);

fn script() -> &'static str {
    concat!(env!("CARGO_MANIFEST_DIR"), "/kafka/kafka.sh")
}

/// The jars are in place (fetched by the first caller in this process), or why not.
pub fn ensure_fetched() -> Result<()> {
    static FETCHED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    FETCHED
        .get_or_init(|| {
            let mut cmd = Command::new("bash");
            cmd.args([script(), "home"]);
            match run_to_end(cmd, "e2e/kafka/kafka.sh home", FETCH_DEADLINE) {
                Ok(f) if f.code == 0 => Ok(()),
                Ok(f) => Err(format!("e2e/kafka/kafka.sh home exited {}: {}{}", f.code, f.stdout, f.stderr)),
                Err(e) => Err(format!("{e:#}")),
            }
        })
        .clone()
        .map_err(|e| anyhow!("Kafka's jars are not available (needs java 17+ and mvn): {e}"))
}

/// One finished tool run.
#[derive(Debug, Clone)]
pub struct ToolRun {
    /// `tool arg...`, for messages.
    pub command: String,
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl ToolRun {
    /// This run, if it exited 0.
    pub fn success(self) -> Result<ToolRun> {
        if self.code != 0 {
            bail!("{self}");
        }
        Ok(self)
    }

    /// This run, if it exited non-zero (a refusal the test expects).
    pub fn failure(self) -> Result<ToolRun> {
        if self.code == 0 {
            bail!("expected a failure: {self}");
        }
        Ok(self)
    }

    /// stdout and stderr together: Kafka's tools print errors on either.
    pub fn output(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }

    /// The lines of stdout, each split on whitespace, that start with `first`.
    pub fn rows(&self, first: &str) -> Vec<Vec<String>> {
        self.stdout
            .lines()
            .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            .filter(|cols| cols.first().map(String::as_str) == Some(first))
            .collect()
    }
}

impl std::fmt::Display for ToolRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "kafka {} exited {}:\nstdout: {}\nstderr: {}", self.command, self.code, self.stdout, self.stderr)
    }
}

/// Runs Kafka's `tool` (a name from `kafka.sh tools` or a class) with `args`, stdin closed.
pub fn tool(tool: &str, args: &[&str]) -> Result<ToolRun> {
    run(tool, args, None)
}

/// Runs Kafka's `tool` with `input` as its standard input (the console producer's records).
pub fn tool_with_input(tool: &str, args: &[&str], input: &Path) -> Result<ToolRun> {
    run(tool, args, Some(input))
}

fn run(tool: &str, args: &[&str], input: Option<&Path>) -> Result<ToolRun> {
    ensure_fetched()?;
    let mut cmd = Command::new("bash");
    cmd.args([script(), "run", tool]).args(args);
    let command = format!("{tool} {}", args.join(" "));
    let Finished { code, stdout, stderr } = match input {
        None => run_to_end(cmd, &command, TOOL_DEADLINE)?,
        Some(path) => run_with_stdin(cmd, Stdio::from(File::open(path)?), &command, TOOL_DEADLINE)?,
    };
    Ok(ToolRun { command, code, stdout, stderr })
}
