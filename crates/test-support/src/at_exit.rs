//! A server a test binary starts, stopped when the binary exits.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::Mutex;

/// The stop command's supervisor: `$1` is the lock file, the rest the stop command. It takes
/// the lock, says so, then waits for `keep` (exit, stopping nothing) or end of input (this
/// process exited: run the stop command, still holding the lock).
const SUPERVISOR: &str = r#"exec 9>>"$1"; shift
flock 9 || exit 1
echo locked
read -r what || what=exit
[ "$what" = keep ] && exit 0
exec "$@" </dev/null"#;

/// Exclusive use of a shared server until this process exits, then its stop command.
///
/// Test binaries never drop their statics, so a server started once per binary cannot be
/// stopped from Rust. A detached `sh` holds a lock file (so the next binary, or another
/// `cargo test`, waits rather than reusing a server about to stop) and waits for end of
/// input on a pipe only this process holds; the kernel closes it at exit, and the shell
/// runs the stop command before it releases the lock.
#[derive(Debug)]
pub struct StopAtExit {
    pipe: ChildStdin,
}

impl StopAtExit {
    /// Waits for the lock file `lock`, then holds it with `stop` (program and arguments)
    /// to run at exit unless [`StopAtExit::keep`] is called.
    pub fn lock(lock: &Path, stop: &[&str]) -> std::io::Result<StopAtExit> {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(SUPERVISOR)
            .arg("sh")
            .arg(lock)
            .args(stop)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let (Some(pipe), Some(out)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(std::io::Error::other("the supervisor has no pipes"));
        };
        let mut line = String::new();
        BufReader::new(out).read_line(&mut line)?;
        if line.trim() != "locked" {
            return Err(std::io::Error::other(format!(
                "cannot lock {}",
                lock.display()
            )));
        }
        Ok(StopAtExit { pipe })
    }

    /// Stops nothing at exit (the server was someone else's) and releases the lock now.
    pub fn keep(mut self) {
        let _ = self.pipe.write_all(b"keep\n");
    }

    /// Holds the lock until this process exits, then runs the stop command.
    pub fn arm(self) {
        static ARMED: Mutex<Vec<ChildStdin>> = Mutex::new(Vec::new());
        ARMED
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(self.pipe);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn kept_runs_nothing_and_released_runs_the_stop_command() {
        let dir = std::env::temp_dir().join(format!("pal-at-exit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let (lock, marker) = (dir.join("lock"), dir.join("stopped"));
        let marker_text = marker.to_string_lossy().into_owned();
        let stop = ["touch", marker_text.as_str()];

        StopAtExit::lock(&lock, &stop).expect("lock").keep();
        // The lock is free again: a second guard gets it, and closing its pipe (as the
        // process's exit would) runs the stop command.
        drop(StopAtExit::lock(&lock, &stop).expect("lock again"));
        let (_, _) = crate::wait_until(
            Duration::from_secs(10),
            || "the stop command".into(),
            || marker.exists().then_some(()),
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
