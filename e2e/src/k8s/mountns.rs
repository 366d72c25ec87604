//! A pod process's own mount namespace, for the few container paths that programs hard-code
//! and that therefore cannot be rewritten the way arguments and ConfigMap text are
//! ([`super::podspec::rewrite_mounts`]).
//!
//! The one such path today is the ServiceAccount directory: every Kubernetes client's
//! in-cluster configuration (kube-rs, client-go, the Java client) reads
//! `/var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt,namespace}` and nothing
//! else. A pod that mounts a volume there gets, in a mount namespace of its own (the runner
//! runs as root), that volume's directory bound over the path, read-only, as the kubelet
//! mounts it; other processes, the runner's included, still see the host's (empty) directory.

use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result};

/// Container paths bound in the pod's mount namespace when one of its volumes is mounted there.
pub const FIXED_PATHS: [&str; 1] = ["/var/run/secrets/kubernetes.io/serviceaccount"];

/// The binds `mounts` (a launch's (mountPath, host directory) pairs) need: (host directory,
/// container path), for the mounts at one of [`FIXED_PATHS`].
pub fn binds(mounts: &[(String, PathBuf)]) -> Vec<(PathBuf, PathBuf)> {
    mounts
        .iter()
        .filter(|(at, _)| FIXED_PATHS.contains(&at.trim_end_matches('/')))
        .map(|(at, dir)| (dir.clone(), PathBuf::from(at)))
        .collect()
}

/// Makes `cmd`'s process start in a mount namespace of its own with each (source, target) of
/// `binds` bound read-only. The targets are created on the host first (empty directories),
/// since a bind needs a mount point. Nothing is done for no binds.
#[allow(unsafe_code)]
pub fn bind_in_own_namespace(cmd: &mut Command, binds: &[(PathBuf, PathBuf)]) -> Result<()> {
    use std::os::unix::process::CommandExt;
    if binds.is_empty() {
        return Ok(());
    }
    let mut paths = Vec::with_capacity(binds.len());
    for (source, target) in binds {
        fs::create_dir_all(target).with_context(|| format!("create the mount point {}", target.display()))?;
        let c = |p: &PathBuf| CString::new(p.as_os_str().as_bytes()).context("a path with a NUL byte");
        paths.push((c(source)?, c(target)?));
    }
    // SAFETY: the closure runs in the forked child before exec and only makes the unshare(2)
    // and mount(2) system calls, both async-signal-safe, on C strings allocated before the
    // fork; it touches no memory shared with the parent.
    unsafe {
        cmd.pre_exec(move || {
            let check = |rc: libc::c_int| if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) };
            check(libc::unshare(libc::CLONE_NEWNS))?;
            // Mounts made here must not propagate back to the host's namespace.
            let root = c"/";
            check(libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ))?;
            for (source, target) in &paths {
                check(libc::mount(
                    source.as_ptr(),
                    target.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                ))?;
                check(libc::mount(
                    std::ptr::null(),
                    target.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
                    std::ptr::null(),
                ))?;
            }
            Ok(())
        });
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn only_the_fixed_paths_are_bound() {
        let mounts = vec![
            ("/var/lib/strom".to_string(), PathBuf::from("/r/v/data")),
            ("/var/run/secrets/kubernetes.io/serviceaccount".to_string(), PathBuf::from("/r/p/uid/kube-api-access")),
            ("/etc/strom".to_string(), PathBuf::from("/r/p/uid/config")),
        ];
        assert_eq!(
            binds(&mounts),
            vec![(
                PathBuf::from("/r/p/uid/kube-api-access"),
                PathBuf::from("/var/run/secrets/kubernetes.io/serviceaccount")
            )]
        );
        assert!(binds(&mounts[..1]).is_empty());
    }

    /// The bound directory is what the process sees at the target, read-only, and the host's
    /// own view of the target is untouched.
    #[test]
    fn a_process_sees_the_bound_directory_and_the_host_does_not() {
        if std::os::unix::fs::MetadataExt::uid(&fs::metadata("/proc/self").unwrap()) != 0 {
            eprintln!("skipped: mount namespaces need root");
            return;
        }
        let base = std::env::temp_dir().join(format!("strom-mountns-{}", std::process::id()));
        let (source, target) = (base.join("volume"), base.join("target"));
        fs::create_dir_all(&source).unwrap();
        fs::write(source.join("token"), "secret").unwrap();
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(format!(
            "cat {t}/token; echo; touch {t}/new 2>/dev/null && echo writable || echo read-only",
            t = target.display()
        ));
        bind_in_own_namespace(&mut cmd, &[(source.clone(), target.clone())]).unwrap();
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(text, "secret\nread-only\n", "stderr: {}", String::from_utf8_lossy(&out.stderr));
        assert!(!target.join("token").exists(), "the bind leaked into the host's namespace");
        fs::remove_dir_all(&base).unwrap();
    }
}
