//! Running a command to completion the way a script would: stdin closed, stdout and stderr
//! captured, killed if it outlives its deadline.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

/// What a finished command printed and how it exited.
#[derive(Debug, Clone)]
pub struct Finished {
    /// The exit code (-1 when a signal ended it).
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cmd` with stdin closed until it exits, or kills it after `deadline`; `what` names it
/// in errors.
pub fn run_to_end(cmd: Command, what: &str, deadline: Duration) -> Result<Finished> {
    run_with_stdin(cmd, Stdio::null(), what, deadline)
}

/// [`run_to_end`] with `stdin` as the command's standard input (a file, say).
pub fn run_with_stdin(mut cmd: Command, stdin: Stdio, what: &str, deadline: Duration) -> Result<Finished> {
    cmd.stdin(stdin).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().with_context(|| format!("spawn {what}"))?;
    let mut stdout_pipe = child.stdout.take().ok_or_else(|| anyhow!("no stdout pipe"))?;
    let mut stderr_pipe = child.stderr.take().ok_or_else(|| anyhow!("no stderr pipe"))?;
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout_pipe.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr_pipe.read_to_string(&mut s);
        s
    });
    let until = Instant::now() + deadline;
    let status = loop {
        if let Some(status) = child.try_wait().with_context(|| format!("wait for {what}"))? {
            break status;
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{what} did not finish within {deadline:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = out.join().map_err(|_| anyhow!("stdout reader panicked"))?;
    let stderr = err.join().map_err(|_| anyhow!("stderr reader panicked"))?;
    Ok(Finished { code: status.code().unwrap_or(-1), stdout, stderr })
}

/// The name libtest knows test `name` of the module at `module_path` by (what `--exact`
/// matches), for a test that runs another test of its own binary as a child process:
/// `module_path!()` of `tests/suite/powercut.rs` is `suite::powercut`, its tests are
/// `powercut::NAME`.
pub fn test_path(module_path: &str, name: &str) -> String {
    match module_path.split_once("::") {
        Some((_crate, module)) => format!("{module}::{name}"),
        None => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_test_is_named_by_its_module_without_the_crate() {
        assert_eq!(super::test_path("suite::powercut", "rust_std_child"), "powercut::rust_std_child");
        assert_eq!(super::test_path("suite", "top"), "top");
    }
}
