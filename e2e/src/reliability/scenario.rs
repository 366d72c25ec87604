//! The frame of every reliability scenario: a seeded run with a logged fault schedule, phases
//! whose throughput is measured (steady, under fault, recovery), and a finish that stops the
//! workload, reads everything back, checks the history and fails — printing the seed and the
//! history's path — on any anomaly or when throughput under fault fell below the floor, so a
//! stall cannot pass.
//!
//! `STROM_SEED` replays a run's choices; `STROM_RELIABILITY_DIR` says where histories go
//! (default: `$TMPDIR/strom-reliability/<scenario>-<seed>/`).

use std::fmt::Display;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};

use super::check::{self, Report};
use super::history::History;
use super::workload::{self, Workload, WorkloadSpec};

/// A small, seeded generator (SplitMix64): the same seed makes the same choices.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// A duration between `low` and `high`.
    pub fn between(&mut self, low: Duration, high: Duration) -> Duration {
        let span = u64::try_from(high.saturating_sub(low).as_millis()).unwrap_or(0);
        low + Duration::from_millis(self.below(span + 1))
    }
}

/// The least throughput, as a share of what the producers offer, each phase must keep.
#[derive(Debug, Clone, Copy)]
pub struct Floor {
    /// Under the fault (a majority remains, so the cluster must make progress: P11).
    pub under_fault: f64,
    /// After healing.
    pub recovery: f64,
}

impl Default for Floor {
    fn default() -> Floor {
        Floor { under_fault: 0.25, recovery: 0.5 }
    }
}

/// Acknowledgements in one phase.
#[derive(Debug, Clone)]
pub struct Phase {
    pub name: &'static str,
    pub acked: usize,
    pub took: Duration,
    /// When it began and ended, on the history's clock (µs).
    pub span: (u64, u64),
    /// The longest time in the phase with no send acknowledged (a stall the backlog made
    /// up for afterwards still shows here).
    pub longest_gap: Duration,
}

impl Phase {
    pub fn per_second(&self) -> f64 {
        self.acked as f64 / self.took.as_secs_f64().max(0.001)
    }
}

/// The longest stretch of `span` (µs) holding none of the sorted instants `acks`.
pub fn longest_gap(acks: &[u64], span: (u64, u64)) -> Duration {
    let (from, to) = span;
    let mut previous = from;
    let mut longest = 0;
    for &t in acks.iter().filter(|&&t| t >= from && t <= to) {
        longest = longest.max(t - previous);
        previous = t;
    }
    Duration::from_micros(longest.max(to.saturating_sub(previous)))
}

/// What a finished scenario measured.
#[derive(Debug, Clone)]
pub struct Figures {
    pub report: Report,
    pub phases: Vec<Phase>,
    /// Records a second the producers offered.
    pub offered: f64,
}

impl Figures {
    pub fn rate(&self, phase: &str) -> f64 {
        self.phases.iter().find(|p| p.name == phase).map_or(0.0, Phase::per_second)
    }
}

/// A scenario being run.
#[derive(Debug)]
pub struct Scenario {
    pub name: String,
    pub seed: u64,
    pub rng: Rng,
    dir: PathBuf,
    began: Instant,
    schedule: File,
    history: Arc<History>,
    spec: Option<WorkloadSpec>,
    phases: Vec<Phase>,
}

impl Scenario {
    /// Starts scenario `name`: picks the seed, creates its directory, history and schedule log.
    pub fn begin(name: &str) -> Result<Scenario> {
        let seed = match std::env::var("STROM_SEED") {
            Ok(s) => s.parse().with_context(|| format!("STROM_SEED={s} is not a number"))?,
            Err(_) => SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64),
        };
        let root = std::env::var_os("STROM_RELIABILITY_DIR")
            .map_or_else(|| std::env::temp_dir().join("strom-reliability"), PathBuf::from);
        // A replay of a seed keeps the history of the run it replays.
        let mut dir = root.join(format!("{name}-{seed}"));
        for n in 2.. {
            if !dir.exists() {
                break;
            }
            dir = root.join(format!("{name}-{seed}-{n}"));
        }
        fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        let history = Arc::new(History::create(&dir.join("history.jsonl"))?);
        let schedule_path = dir.join("schedule.log");
        let schedule = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&schedule_path)
            .with_context(|| format!("create {}", schedule_path.display()))?;
        eprintln!("scenario {name}: seed {seed} (STROM_SEED={seed} replays it), history in {}", dir.display());
        let mut scenario = Scenario {
            name: name.to_string(),
            seed,
            rng: Rng::new(seed),
            dir,
            began: Instant::now(),
            schedule,
            history,
            spec: None,
            phases: Vec::new(),
        };
        scenario.log(format_args!("seed {seed}"));
        Ok(scenario)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends a line to the fault schedule (and stderr), stamped with the run's clock.
    pub fn log(&mut self, what: impl Display) {
        let line = format!("{:>8.3}s {what}", self.began.elapsed().as_secs_f64());
        eprintln!("{}: {line}", self.name);
        // The schedule is for people reading a failure: a write error must not fail the run.
        let _ = writeln!(self.schedule, "{line}");
    }

    /// Starts the workload of `spec` against `bootstrap`, writing this scenario's history.
    pub fn start_workload(&mut self, bootstrap: &str, spec: &WorkloadSpec) -> Result<Workload> {
        self.log(format_args!(
            "workload: {} producers x {}/s, {} consumers, topic {} ({} partitions)",
            spec.producers, spec.per_second, spec.consumers, spec.topic, spec.partitions
        ));
        self.spec = Some(spec.clone());
        Workload::start(bootstrap, spec, Arc::clone(&self.history))
    }

    /// Runs `body` as the phase `name`, counting the acknowledgements during it.
    pub fn phase(
        &mut self,
        workload: &Workload,
        name: &'static str,
        body: impl FnOnce(&mut Scenario) -> Result<()>,
    ) -> Result<()> {
        self.log(format_args!("phase {name} begins"));
        let (acked, started, from) = (workload.acked(), Instant::now(), self.history.now());
        body(self).with_context(|| format!("phase {name}"))?;
        let phase = Phase {
            name,
            acked: workload.acked().saturating_sub(acked),
            took: started.elapsed(),
            span: (from, self.history.now()),
            longest_gap: Duration::ZERO,
        };
        self.log(format_args!(
            "phase {name} ends: {} acknowledged in {:.1?} ({:.0}/s)",
            phase.acked,
            phase.took,
            phase.per_second()
        ));
        self.phases.push(phase);
        Ok(())
    }

    /// A phase with no fault: the workload runs for `length`.
    pub fn hold(&mut self, workload: &Workload, name: &'static str, length: Duration) -> Result<()> {
        self.phase(workload, name, |_| {
            thread::sleep(length);
            Ok(())
        })
    }

    /// Stops the workload, reads `topic` back through `bootstrap`, checks the history, and
    /// fails on any anomaly or when a phase fell below `floor`. Prints the figures either way.
    pub fn finish(mut self, workload: Workload, bootstrap: &str, floor: Floor) -> Result<Figures> {
        let spec = self.spec.clone().context("finish before start_workload")?;
        self.log("stopping the workload");
        workload.stop().with_context(|| self.where_to_look())?;
        let read = workload::final_read(bootstrap, &spec.topic, &self.history, Duration::from_secs(60))
            .with_context(|| self.where_to_look())?;
        self.log(format_args!("final read: {read} records"));
        self.history.flush()?;
        let ops = self.history.ops();
        let report = check::check(&ops);
        let acks: Vec<u64> = ops
            .iter()
            .filter(|op| op.f == super::history::F::Send && op.kind == super::history::Type::Ok)
            .map(|op| op.time)
            .collect();
        for phase in &mut self.phases {
            phase.longest_gap = longest_gap(&acks, phase.span);
        }
        let offered = spec.producers as f64 * f64::from(spec.per_second);
        let figures = Figures { report, phases: self.phases.clone(), offered };
        let rates: Vec<String> = figures
            .phases
            .iter()
            .map(|p| format!("{} {:.0} (longest gap {:.2} s)", p.name, p.per_second(), p.longest_gap.as_secs_f64()))
            .collect();
        let summary = format!(
            "scenario {}: {}; ops/s offered {:.0}, {}; seed {}",
            self.name,
            figures.report,
            offered,
            rates.join(", "),
            self.seed
        );
        self.log(&summary);
        println!("{summary}");
        let anomalies = &figures.report.anomalies;
        if !anomalies.is_empty() {
            let shown: Vec<String> = anomalies.iter().take(10).map(ToString::to_string).collect();
            bail!("{} anomalies, e.g.:\n  {}\n{}", anomalies.len(), shown.join("\n  "), self.where_to_look());
        }
        for (phase, share) in [("fault", floor.under_fault), ("recovery", floor.recovery)] {
            if figures.phases.iter().any(|p| p.name == phase) && figures.rate(phase) < share * offered {
                bail!(
                    "throughput {phase}: {:.0}/s is below the floor of {:.0}/s ({share} of {offered:.0} offered)\n{}",
                    figures.rate(phase),
                    share * offered,
                    self.where_to_look()
                );
            }
        }
        Ok(figures)
    }

    fn where_to_look(&self) -> String {
        format!(
            "seed {} (STROM_SEED={} replays it); history and schedule in {}",
            self.seed,
            self.seed,
            self.dir.display()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_makes_the_same_choices() {
        let (mut a, mut b) = (Rng::new(42), Rng::new(42));
        let xs: Vec<u64> = (0..5).map(|_| a.below(10)).collect();
        let ys: Vec<u64> = (0..5).map(|_| b.below(10)).collect();
        assert_eq!(xs, ys);
        assert!(xs.iter().all(|&x| x < 10));
        let d = Rng::new(7).between(Duration::from_millis(100), Duration::from_millis(200));
        assert!((100..=200).contains(&d.as_millis()));
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
    }

    #[test]
    fn the_longest_gap_counts_the_phase_edges() {
        assert_eq!(longest_gap(&[], (0, 500)), Duration::from_micros(500));
        assert_eq!(longest_gap(&[100, 150, 400], (0, 500)), Duration::from_micros(250));
        assert_eq!(longest_gap(&[10, 20], (0, 900)), Duration::from_micros(880));
        assert_eq!(longest_gap(&[5, 700, 1000], (100, 600)), Duration::from_micros(500));
    }
}
