//! The probes of one running container, as the kubelet's prober workers run them:
//! - a startup probe runs until it passes; until then liveness and readiness do not run (the
//!   container is not `started` and not ready);
//! - each probe first runs `initialDelaySeconds` after the container started, then every
//!   `periodSeconds`; a result counts once `successThreshold` / `failureThreshold` results in a
//!   row agree (a readiness result starts as "not ready", liveness as "alive");
//! - a liveness or startup failure that counts asks for the container to be restarted, and
//!   that probe holds until the next container (a new [`Probes`]).
//!
//! The thresholds are pure ([`Probes::record`]); [`Probes::poll`] runs the checks as tasks on
//! the runner's runtime, so a probe that hangs until its timeout delays nothing else.

use std::time::{Duration, Instant};

use tokio::sync::oneshot::{self, error::TryRecvError};

use super::podspec::{Check, Launch, ProbeSpec};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Startup,
    Liveness,
    Readiness,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Startup => "startup",
            Kind::Liveness => "liveness",
            Kind::Readiness => "readiness",
        }
    }
}

/// What a counted result changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The startup probe passed: liveness and readiness probes start.
    Started,
    /// The container failed its liveness or startup probe this many times in a row: kill it
    /// (with `grace`, the probe's own or the pod's) and restart it.
    Restart { probe: Kind, failures: u32, grace: Duration },
}

/// One probe's worker.
#[derive(Debug)]
struct Worker {
    kind: Kind,
    spec: ProbeSpec,
    /// The last result and how many times in a row it came.
    last: Option<bool>,
    run: u32,
    next: Instant,
    on_hold: bool,
    /// The result of the check running now.
    in_flight: Option<oneshot::Receiver<bool>>,
}

/// The probes of one container process, from its start.
#[derive(Debug)]
pub struct Probes {
    workers: Vec<Worker>,
    /// The grace of a restart when the probe has none of its own.
    pod_grace: Duration,
    started: bool,
    ready: bool,
}

impl Probes {
    /// The probes of `launch`'s container, started at `at`.
    pub fn new(launch: &Launch, at: Instant) -> Probes {
        let workers: Vec<Worker> = [
            (Kind::Startup, &launch.startup),
            (Kind::Liveness, &launch.liveness),
            (Kind::Readiness, &launch.readiness),
        ]
        .into_iter()
        .filter_map(|(kind, spec)| {
            let spec = spec.clone()?;
            let next = at + spec.initial_delay;
            Some(Worker { kind, spec, last: None, run: 0, next, on_hold: false, in_flight: None })
        })
        .collect();
        let started = !workers.iter().any(|w| w.kind == Kind::Startup);
        let ready = started && !workers.iter().any(|w| w.kind == Kind::Readiness);
        Probes { workers, pod_grace: launch.grace, started, ready }
    }

    /// The startup probe has passed, or there is none (the container status's `started`).
    pub fn started(&self) -> bool {
        self.started
    }

    /// Ready by the readiness probe (or, without one, once started).
    pub fn ready(&self) -> bool {
        self.ready
    }

    /// Counts one result of probe `kind`; what it changes, if anything.
    pub fn record(&mut self, kind: Kind, ok: bool) -> Option<Verdict> {
        let w = self.workers.iter_mut().find(|w| w.kind == kind)?;
        if w.last == Some(ok) {
            w.run += 1;
        } else {
            w.last = Some(ok);
            w.run = 1;
        }
        let threshold = if ok { w.spec.success_threshold } else { w.spec.failure_threshold };
        if w.run < threshold {
            return None;
        }
        match (kind, ok) {
            (Kind::Readiness, ready) => {
                self.ready = ready;
                None
            }
            (Kind::Startup, true) => {
                w.on_hold = true;
                self.started = true;
                self.ready = !self.workers.iter().any(|w| w.kind == Kind::Readiness);
                Some(Verdict::Started)
            }
            (Kind::Liveness, true) => None,
            (Kind::Startup | Kind::Liveness, false) => {
                w.on_hold = true;
                let failures = w.run;
                let grace = w.spec.termination_grace.unwrap_or(self.pod_grace);
                Some(Verdict::Restart { probe: kind, failures, grace })
            }
        }
    }

    /// Counts the checks that have finished and starts those that are due; the verdicts.
    pub fn poll(&mut self, now: Instant) -> Vec<Verdict> {
        let mut results = Vec::new();
        for w in &mut self.workers {
            let Some(rx) = w.in_flight.as_mut() else { continue };
            let ok = match rx.try_recv() {
                Ok(ok) => ok,
                Err(TryRecvError::Empty) => continue,
                // The task is gone without an answer (never expected): a failure.
                Err(TryRecvError::Closed) => false,
            };
            w.in_flight = None;
            results.push((w.kind, ok));
        }
        let verdicts = results.into_iter().filter_map(|(kind, ok)| self.record(kind, ok)).collect();
        let started = self.started;
        for w in &mut self.workers {
            let runs_now = if w.kind == Kind::Startup { !started } else { started };
            if !runs_now || w.on_hold || w.in_flight.is_some() || now < w.next {
                continue;
            }
            w.next = now + w.spec.period;
            let (tx, rx) = oneshot::channel();
            let (what, timeout) = (w.spec.check.clone(), w.spec.timeout);
            tokio::spawn(async move {
                let _ = tx.send(check(what, timeout).await);
            });
            w.in_flight = Some(rx);
        }
        verdicts
    }
}

/// One check, failed when it takes longer than `timeout`.
pub async fn check(check: Check, timeout: Duration) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let attempt = async {
        match &check {
            Check::Tcp { host, port } => tokio::net::TcpStream::connect((*host, *port)).await.is_ok(),
            Check::Http { host, port, path } => {
                let Ok(mut s) = tokio::net::TcpStream::connect((*host, *port)).await else { return false };
                let request =
                    format!("GET {path} HTTP/1.0\r\nHost: {host}:{port}\r\nUser-Agent: kube-probe/e2e\r\n\r\n");
                if s.write_all(request.as_bytes()).await.is_err() {
                    return false;
                }
                let mut head = [0u8; 64];
                let Ok(n) = s.read(&mut head).await else { return false };
                let line = String::from_utf8_lossy(&head[..n]);
                let code: u16 = line.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
                (200..400).contains(&code)
            }
        }
    };
    tokio::time::timeout(timeout, attempt).await.unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn spec(success_threshold: u32, failure_threshold: u32) -> ProbeSpec {
        ProbeSpec {
            check: Check::Tcp { host: Ipv4Addr::LOCALHOST, port: 1 },
            initial_delay: Duration::ZERO,
            period: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            success_threshold,
            failure_threshold,
            termination_grace: None,
        }
    }

    fn launch(startup: Option<ProbeSpec>, liveness: Option<ProbeSpec>, readiness: Option<ProbeSpec>) -> Launch {
        Launch {
            container: "c".into(),
            image: String::new(),
            program: "sh".into(),
            args: Vec::new(),
            env: Vec::new(),
            working_dir: None,
            mounts: Vec::new(),
            startup,
            liveness,
            readiness,
            grace: Duration::from_secs(30),
            restart: Default::default(),
        }
    }

    #[test]
    fn without_probes_a_running_container_is_started_and_ready() {
        let p = Probes::new(&launch(None, None, None), Instant::now());
        assert!(p.started() && p.ready());
    }

    #[test]
    fn readiness_follows_its_thresholds() {
        let mut p = Probes::new(&launch(None, None, Some(spec(2, 3))), Instant::now());
        assert!(p.started() && !p.ready(), "not ready before a probe passes");
        p.record(Kind::Readiness, true);
        assert!(!p.ready(), "one success of two");
        p.record(Kind::Readiness, true);
        assert!(p.ready());
        p.record(Kind::Readiness, false);
        p.record(Kind::Readiness, false);
        p.record(Kind::Readiness, true);
        p.record(Kind::Readiness, false);
        assert!(p.ready(), "failures must come in a row");
        p.record(Kind::Readiness, false);
        p.record(Kind::Readiness, false);
        assert!(!p.ready(), "three failures in a row");
    }

    #[test]
    fn liveness_failures_in_a_row_ask_for_a_restart_once() {
        let mut live = spec(1, 3);
        live.termination_grace = Some(Duration::from_secs(2));
        let mut p = Probes::new(&launch(None, Some(live), None), Instant::now());
        assert_eq!(p.record(Kind::Liveness, false), None);
        assert_eq!(p.record(Kind::Liveness, true), None, "a success resets the run");
        assert_eq!(p.record(Kind::Liveness, false), None);
        assert_eq!(p.record(Kind::Liveness, false), None);
        assert_eq!(
            p.record(Kind::Liveness, false),
            Some(Verdict::Restart { probe: Kind::Liveness, failures: 3, grace: Duration::from_secs(2) }),
            "the probe's own grace"
        );
        assert!(p.ready(), "liveness does not decide readiness");
    }

    #[test]
    fn a_startup_probe_holds_back_readiness_and_liveness_until_it_passes() {
        let mut p = Probes::new(&launch(Some(spec(1, 5)), Some(spec(1, 3)), None), Instant::now());
        assert!(!p.started() && !p.ready());
        assert_eq!(p.record(Kind::Startup, false), None);
        assert_eq!(p.record(Kind::Startup, true), Some(Verdict::Started));
        assert!(p.started() && p.ready(), "no readiness probe: ready once started");

        let mut failing = Probes::new(&launch(Some(spec(1, 2)), None, Some(spec(1, 1))), Instant::now());
        assert_eq!(failing.record(Kind::Startup, false), None);
        assert_eq!(
            failing.record(Kind::Startup, false),
            Some(Verdict::Restart { probe: Kind::Startup, failures: 2, grace: Duration::from_secs(30) }),
            "the pod's grace when the probe has none"
        );
        assert!(!failing.ready());
    }

    #[tokio::test]
    async fn poll_runs_due_checks_as_tasks_and_counts_their_results() {
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let mut ready = spec(1, 1);
        ready.check = Check::Tcp { host: Ipv4Addr::LOCALHOST, port };
        let start = Instant::now();
        let mut p = Probes::new(&launch(None, None, Some(ready)), start);
        assert!(p.poll(start).is_empty());
        let deadline = Instant::now() + Duration::from_secs(5);
        while !p.ready() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
            p.poll(Instant::now());
        }
        assert!(p.ready(), "a listening port passes a tcpSocket probe");
        drop(listener);
        let deadline = Instant::now() + Duration::from_secs(5);
        while p.ready() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
            p.poll(Instant::now() + Duration::from_secs(2));
        }
        assert!(!p.ready(), "a closed port fails it");
    }
}
