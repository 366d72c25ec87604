//! DNS names for the pod runner: `/etc/hosts` lines that make
//! `<pod>.<service>.<namespace>.svc.cluster.local` (and its short forms) resolve to the pod's
//! loopback address, and `<service>.<namespace>.svc.cluster.local` to one pod the Service
//! selects, as cluster DNS does in Kubernetes. Every resolver the tests use reads that file on
//! each lookup (glibc's `getaddrinfo`: the `strom` processes, librdkafka, Java).
//!
//! Names are published per [`Owner`] (a pod, a Service), so a pod's own names and the names
//! of the Services that resolve to it come and go independently; owners pointing at the same
//! address share one line when the block is written, the pod's names first (the name a
//! reverse lookup answers).
//!
//! Each test process owns one block between marker lines carrying its pid; a change rewrites
//! only that block (in place: `/etc/hosts` may be a bind mount that cannot be renamed over),
//! under an advisory lock shared with other test processes. Blocks of processes that are gone
//! are dropped on the next write, so a SIGKILLed test leaves nothing behind for long.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result};

const BEGIN: &str = "# strom-e2e-k8s begin pid=";
const END: &str = "# strom-e2e-k8s end pid=";

/// Who published a set of names; a pod's names sort before a Service's.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Owner {
    /// A pod, by uid: its own names.
    Pod(String),
    /// A Service, as `<namespace>/<name>`: the names that resolve to one of its pods.
    Service(String),
}

/// The host names this process has published: owner → (address, names).
static ENTRIES: Mutex<BTreeMap<Owner, (Ipv4Addr, Vec<String>)>> = Mutex::new(BTreeMap::new());

fn hosts_path() -> PathBuf {
    PathBuf::from("/etc/hosts")
}

/// Makes `owner`'s `names` resolve to `ip` (replacing what `owner` had published).
pub fn publish(owner: Owner, ip: Ipv4Addr, names: Vec<String>) -> Result<()> {
    let mut entries = ENTRIES.lock().unwrap_or_else(|e| e.into_inner());
    entries.insert(owner, (ip, names));
    write_block(&merge(&entries))
}

/// Removes the names `owner` published.
pub fn withdraw(owner: &Owner) -> Result<()> {
    let mut entries = ENTRIES.lock().unwrap_or_else(|e| e.into_inner());
    if entries.remove(owner).is_none() {
        return Ok(());
    }
    write_block(&merge(&entries))
}

/// One list of names per address, in owner order, each name once.
pub fn merge(entries: &BTreeMap<Owner, (Ipv4Addr, Vec<String>)>) -> BTreeMap<Ipv4Addr, Vec<String>> {
    let mut out: BTreeMap<Ipv4Addr, Vec<String>> = BTreeMap::new();
    for (ip, names) in entries.values() {
        let line = out.entry(*ip).or_default();
        for name in names {
            if !line.contains(name) {
                line.push(name.clone());
            }
        }
    }
    out.retain(|_, names| !names.is_empty());
    out
}

fn write_block(entries: &BTreeMap<Ipv4Addr, Vec<String>>) -> Result<()> {
    let path = hosts_path();
    let _lock = lock(&path)?;
    let text = fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
    let next = rewrite(&text, std::process::id(), entries, |pid| Path::new(&format!("/proc/{pid}")).exists());
    if next != text {
        let mut file = OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .with_context(|| format!("open {} to publish pod names (the pod runner needs root)", path.display()))?;
        file.write_all(next.as_bytes()).with_context(|| format!("write {}", path.display()))?;
    }
    Ok(())
}

/// An exclusive `flock` on a file beside the hosts file's name in the temp directory.
fn lock(path: &Path) -> Result<nix::fcntl::Flock<fs::File>> {
    let name = path.file_name().map_or_else(|| "hosts".into(), |n| n.to_string_lossy().to_string());
    let lock_path = std::env::temp_dir().join(format!("strom-e2e-{name}.lock"));
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("open {}", lock_path.display()))?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| anyhow::anyhow!("flock {}: {e}", lock_path.display()))
}

/// `text` with this process's block replaced by `entries` (none when empty), and the blocks
/// of processes that are not `alive` removed. Everything else is kept as it was.
pub fn rewrite(text: &str, pid: u32, entries: &BTreeMap<Ipv4Addr, Vec<String>>, alive: impl Fn(u32) -> bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut skipping: Option<u32> = None;
    for line in text.lines() {
        if let Some(owner) = skipping {
            if line.strip_prefix(END).and_then(|p| p.trim().parse::<u32>().ok()) == Some(owner) {
                skipping = None;
            }
            continue;
        }
        if let Some(owner) = line.strip_prefix(BEGIN).and_then(|p| p.trim().parse::<u32>().ok()) {
            if owner == pid || !alive(owner) {
                skipping = Some(owner);
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    if !entries.is_empty() {
        out.push_str(&format!("{BEGIN}{pid}\n"));
        for (ip, names) in entries {
            out.push_str(&format!("{ip} {}\n", names.join(" ")));
        }
        out.push_str(&format!("{END}{pid}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(list: &[(&str, &[&str])]) -> BTreeMap<Ipv4Addr, Vec<String>> {
        list.iter()
            .map(|(ip, names)| (ip.parse().expect("ip"), names.iter().map(|n| n.to_string()).collect()))
            .collect()
    }

    #[test]
    fn a_block_is_added_replaced_and_removed_leaving_other_lines_alone() {
        let base = "127.0.0.1 localhost\n::1 localhost\n";
        let one = rewrite(base, 7, &entries(&[("127.16.0.2", &["a.s.ns.svc.cluster.local", "a.s"])]), |_| true);
        assert_eq!(
            one,
            "127.0.0.1 localhost\n::1 localhost\n# strom-e2e-k8s begin pid=7\n\
             127.16.0.2 a.s.ns.svc.cluster.local a.s\n# strom-e2e-k8s end pid=7\n"
        );
        let two = rewrite(&one, 7, &entries(&[("127.16.0.3", &["b.s"])]), |_| true);
        assert!(two.contains("127.16.0.3 b.s\n") && !two.contains("a.s"), "{two}");
        assert_eq!(rewrite(&two, 7, &BTreeMap::new(), |_| true), base);
    }

    #[test]
    fn a_pods_names_and_the_service_names_on_its_address_share_one_line() {
        let pod = |uid: &str| Owner::Pod(uid.to_string());
        let svc = |name: &str| Owner::Service(format!("ns/{name}"));
        let ip = |s: &str| -> Ipv4Addr { s.parse().expect("ip") };
        let names = |list: &[&str]| list.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let mut published = BTreeMap::from([
            (svc("front"), (ip("127.16.0.2"), names(&["front.ns.svc.cluster.local", "front.ns.svc", "front.ns"]))),
            (pod("u1"), (ip("127.16.0.2"), names(&["a.s.ns.svc.cluster.local", "a.s"]))),
            (pod("u2"), (ip("127.16.0.3"), names(&["b.s.ns.svc.cluster.local", "b.s"]))),
            (svc("again"), (ip("127.16.0.3"), names(&["b.s"]))),
        ]);
        let block = rewrite("", 7, &merge(&published), |_| true);
        assert_eq!(
            block,
            "# strom-e2e-k8s begin pid=7\n\
             127.16.0.2 a.s.ns.svc.cluster.local a.s front.ns.svc.cluster.local front.ns.svc front.ns\n\
             127.16.0.3 b.s.ns.svc.cluster.local b.s\n\
             # strom-e2e-k8s end pid=7\n",
            "the pod's own names first, each name once"
        );

        // The pod goes; the Service still points at its address until it is re-pointed.
        published.remove(&pod("u1"));
        let block = rewrite(&block, 7, &merge(&published), |_| true);
        assert!(block.contains("127.16.0.2 front.ns.svc.cluster.local front.ns.svc front.ns\n"), "{block}");

        // Re-pointed to the other pod: one line, both owners' names.
        published.insert(svc("front"), (ip("127.16.0.3"), names(&["front.ns.svc.cluster.local"])));
        let block = rewrite(&block, 7, &merge(&published), |_| true);
        assert!(!block.contains("127.16.0.2"), "{block}");
        assert!(block.contains("127.16.0.3 b.s.ns.svc.cluster.local b.s front.ns.svc.cluster.local\n"), "{block}");
    }

    #[test]
    fn blocks_of_live_processes_stay_and_those_of_dead_ones_go() {
        let other = rewrite("", 8, &entries(&[("127.17.0.2", &["x"])]), |_| true);
        let gone = rewrite(&other, 9, &entries(&[("127.18.0.2", &["y"])]), |_| true);
        let mine = rewrite(&gone, 7, &entries(&[("127.16.0.2", &["z"])]), |pid| pid != 9);
        assert!(mine.contains("127.17.0.2 x") && mine.contains("127.16.0.2 z"), "{mine}");
        assert!(!mine.contains("pid=9") && !mine.contains("127.18.0.2"), "{mine}");
    }
}
