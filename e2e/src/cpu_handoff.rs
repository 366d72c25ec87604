//! How long a cache line takes to go from one CPU to another and back: a probe of the
//! machine, not of any broker, for the benchmark scripts.
//!
//! Every client run of a benchmark hands data between threads on different CPUs (broker
//! thread to socket to librdkafka's broker thread to the application thread). On this
//! machine's 2 KVM vCPUs that handoff costs ~90 ns or ~400 ns per round trip, depending on
//! where the host has put the two vCPUs at the moment; the state lasts from seconds to minutes
//! and halves a 100-byte consume run of either Kafka or Strom (docs/benchmarks.md, "Two
//! vCPUs, near or far"). `bench-vs-kafka.sh` records this figure before every run.
//!
//! Two threads, each pinned to its CPU with `sched_setaffinity`, pass a counter back and forth
//! through one 64-byte-aligned atomic: the first writes odd values and waits for the next
//! even one, the second answers each odd value with the even one after it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use nix::sched::{sched_getcpu, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// One counter on a cache line of its own.
#[repr(align(64))]
struct Line(AtomicU64);

/// What one probe measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Handoff {
    /// The CPU the first thread ran on, and the CPU the second ran on.
    pub cpus: (usize, usize),
    pub round_trips: u64,
    /// Mean nanoseconds per round trip.
    pub round_trip_ns: f64,
}

/// The CPUs this process may run on (its affinity mask), in order.
pub fn allowed_cpus() -> Result<Vec<usize>> {
    let set = nix::sched::sched_getaffinity(Pid::from_raw(0)).context("sched_getaffinity")?;
    Ok((0..CpuSet::count()).filter(|&cpu| set.is_set(cpu).unwrap_or(false)).collect())
}

/// Pin the calling thread to `cpu`; fails if the CPU is not one this process may use.
fn pin(cpu: usize) -> Result<()> {
    let mut set = CpuSet::new();
    set.set(cpu).with_context(|| format!("CPU {cpu} is beyond the CPU set's size"))?;
    sched_setaffinity(Pid::from_raw(0), &set).with_context(|| format!("pin a thread to CPU {cpu}"))?;
    let on = sched_getcpu().context("sched_getcpu")?;
    if on != cpu {
        bail!("pinned to CPU {cpu} but running on CPU {on}");
    }
    Ok(())
}

/// Measure `round_trips` handoffs between `first` and `second` (two different CPUs).
pub fn measure(first: usize, second: usize, round_trips: u64) -> Result<Handoff> {
    if first == second {
        bail!("the two threads need two different CPUs, got {first} twice");
    }
    if round_trips == 0 {
        bail!("round_trips must be at least 1");
    }
    // On threads of their own, so the caller's affinity stays as it was.
    thread::Builder::new()
        .name("cpu-handoff-ask".into())
        .spawn(move || ask(first, second, round_trips))
        .context("spawn the asking thread")?
        .join()
        .map_err(|_| anyhow::anyhow!("the asking thread panicked"))?
}

/// The asking side, pinned to `first`; it starts the answering side on `second`.
fn ask(first: usize, second: usize, round_trips: u64) -> Result<Handoff> {
    pin(first)?;
    let line = Arc::new(Line(AtomicU64::new(0)));
    let answerer = {
        let line = Arc::clone(&line);
        thread::Builder::new()
            .name("cpu-handoff-answer".into())
            .spawn(move || answer(&line, second, round_trips))
            .context("spawn the answering thread")?
    };
    let joined = |answerer: thread::JoinHandle<Result<usize>>| {
        answerer.join().map_err(|_| anyhow::anyhow!("the answering thread panicked"))?
    };
    while line.0.load(Ordering::Acquire) != READY {
        if answerer.is_finished() {
            joined(answerer)?; // its error: it never got ready
            bail!("the answering thread ended before it was ready");
        }
        std::hint::spin_loop();
    }
    let started = Instant::now();
    for i in 1..=round_trips {
        let asked = 2 * i + 1;
        line.0.store(asked, Ordering::Release);
        while line.0.load(Ordering::Acquire) != asked + 1 {
            std::hint::spin_loop();
        }
    }
    let round_trip_ns = started.elapsed().as_nanos() as f64 / round_trips as f64;
    let first_cpu = sched_getcpu().context("sched_getcpu")?;
    let second_cpu = joined(answerer)?;
    Ok(Handoff { cpus: (first_cpu, second_cpu), round_trips, round_trip_ns })
}

const READY: u64 = 1;

/// The answering side: each odd value `2i + 1` gets `2i + 2` back; returns the CPU it ran on.
fn answer(line: &Line, cpu: usize, round_trips: u64) -> Result<usize> {
    pin(cpu)?;
    line.0.store(READY, Ordering::Release);
    for i in 1..=round_trips {
        let asked = 2 * i + 1;
        while line.0.load(Ordering::Acquire) != asked {
            std::hint::spin_loop();
        }
        line.0.store(asked + 1, Ordering::Release);
    }
    sched_getcpu().context("sched_getcpu")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first two CPUs this process may run on, if it may run on two.
    fn two_allowed_cpus() -> Option<(usize, usize)> {
        let allowed = allowed_cpus().expect("affinity");
        Some((*allowed.first()?, *allowed.get(1)?))
    }

    #[test]
    fn two_pinned_threads_hand_a_line_back_and_forth() {
        let Some((first, second)) = two_allowed_cpus() else {
            eprintln!("fewer than two CPUs allowed: nothing to measure");
            return;
        };
        let handoff = measure(first, second, 10_000).expect("measure");
        assert_eq!(handoff.cpus, (first, second), "each thread ran where it was pinned");
        assert_eq!(handoff.round_trips, 10_000);
        // A round trip is a store seen by the other CPU twice: more than a nanosecond, and far
        // less than a millisecond unless the threads were not really running at once.
        assert!(handoff.round_trip_ns > 1.0 && handoff.round_trip_ns < 1_000_000.0, "{handoff:?}");
    }

    #[test]
    fn bad_arguments_are_errors() {
        assert!(measure(0, 0, 10).is_err());
        assert!(measure(0, 1, 0).is_err());
        let first = two_allowed_cpus().map_or(0, |(first, _)| first);
        let beyond = measure(first, 100_000, 10).expect_err("no such CPU");
        assert!(format!("{beyond:#}").contains("CPU 100000"), "{beyond:#}");
    }
}
