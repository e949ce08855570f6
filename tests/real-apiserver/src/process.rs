//! A server process that cannot outlive us.
//!
//! Each server runs as the child of a small `sh` supervisor, in a process group of its own. The
//! supervisor's standard input is a pipe from this process: when we close it (a stop, a drop)
//! or the kernel does (we died, however), the supervisor sends the server `SIGTERM`, then
//! `SIGKILL` after a grace period, and exits when the server has. A stop that does not finish in
//! time kills the whole group.

use std::fs::File;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{tail, Error};

/// How long a server has to exit after `SIGTERM` before the supervisor kills it.
const GRACE_SECONDS: u32 = 10;

/// The supervisor: `"$@"` is the server's command line. The watcher reads our pipe (kept as fd
/// 3: a shell without job control gives a background list `/dev/null` as its stdin) until it
/// closes, then ends the server; `wait` returns with the server's status.
const SUPERVISOR: &str = r#"
exec 3<&0
"$@" </dev/null 3<&- &
server=$!
(
  cat <&3 >/dev/null
  kill -TERM "$server" 2>/dev/null
  i=0
  while kill -0 "$server" 2>/dev/null && [ "$i" -lt GRACE ]; do sleep 1; i=$((i+1)); done
  kill -KILL "$server" 2>/dev/null
) &
exec 3<&-
wait "$server"
"#;

/// A running, supervised server.
#[derive(Debug)]
pub(crate) struct Supervised {
    /// `etcd` or `kube-apiserver`.
    pub name: &'static str,
    child: Child,
    /// Our end of the supervisor's stdin: closing it stops the server.
    lifeline: Option<ChildStdin>,
    /// Where the server's stdout and stderr go.
    pub log: PathBuf,
}

impl Supervised {
    /// Starts `binary args` under a supervisor, its output appended to `log`.
    pub fn spawn(
        name: &'static str,
        binary: &Path,
        args: &[String],
        log: PathBuf,
    ) -> Result<Supervised, Error> {
        let out = File::create(&log).map_err(Error::io(format!("creating {}", log.display())))?;
        let err = out
            .try_clone()
            .map_err(Error::io(format!("opening {}", log.display())))?;
        let script = SUPERVISOR.replace("GRACE", &GRACE_SECONDS.to_string());
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(script)
            // `$0` of the script, then `$@`: the server's own command line.
            .arg(format!("{name}-supervisor"))
            .arg(binary)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .map_err(Error::io(format!("starting {name} ({})", binary.display())))?;
        let lifeline = child.stdin.take();
        Ok(Supervised {
            name,
            child,
            lifeline,
            log,
        })
    }

    /// Fails with the end of the log if the server has exited.
    pub fn check_running(&mut self) -> Result<(), Error> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(self.exited(status.to_string())),
            Err(e) => Err(Error::io(format!("checking on {}", self.name))(e)),
        }
    }

    /// The error for a server that exited with `status`: a port conflict when its log says so.
    fn exited(&self, status: String) -> Error {
        let mut text = String::new();
        if let Ok(mut file) = File::open(&self.log) {
            let _ = file.read_to_string(&mut text);
        }
        if let Some(port) = port_in_use(&text) {
            return Error::PortInUse(port);
        }
        Error::Exited {
            process: self.name,
            status,
            log: self.log.clone(),
            tail: tail(&text, 15),
        }
    }

    /// Stops the server and waits for it: closes the lifeline, waits out the grace period and a
    /// little more, then kills the whole process group.
    pub fn stop(&mut self) -> Result<(), Error> {
        drop(self.lifeline.take());
        let deadline = Instant::now() + Duration::from_secs(u64::from(GRACE_SECONDS) + 5);
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(Some(_)) => return Ok(()),
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                Err(e) => return Err(Error::io(format!("waiting for {}", self.name))(e)),
            }
        }
        // The group's id is the supervisor's pid (process_group(0)); `kill` takes it negated.
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        self.child.wait().map(|_| ()).map_err(Error::io(format!(
            "waiting for {} after killing it",
            self.name
        )))
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.stop();
        }
    }
}

/// The port a server's log says it could not bind, if it says so.
fn port_in_use(log: &str) -> Option<u16> {
    let line = log
        .lines()
        .find(|line| line.contains("address already in use"))?;
    // "listen tcp 127.0.0.1:2379: bind: address already in use"
    let at = line.find("127.0.0.1:")? + "127.0.0.1:".len();
    let digits: String = line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// A port of 127.0.0.1 that was free a moment ago (the kernel's choice), or `wanted` if it is
/// free now.
pub(crate) fn free_port(wanted: Option<u16>) -> Result<u16, Error> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", wanted.unwrap_or(0)));
    match listener {
        Ok(listener) => listener
            .local_addr()
            .map(|addr| addr.port())
            .map_err(Error::io("reading a free port")),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            Err(Error::PortInUse(wanted.unwrap_or(0)))
        }
        Err(e) => Err(Error::io("finding a free port on 127.0.0.1")(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bind_failure_in_the_log_names_its_port() {
        let log = "I1129 starting\nE1129 run.go:72] \"command failed\" err=\"failed to listen on 127.0.0.1:6443: listen tcp 127.0.0.1:6443: bind: address already in use\"\n";
        assert_eq!(port_in_use(log), Some(6443));
        assert_eq!(port_in_use("all well\n"), None);
    }

    #[test]
    fn a_port_in_use_is_refused_by_number() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        match free_port(Some(port)) {
            Err(Error::PortInUse(p)) => assert_eq!(p, port),
            other => panic!("{other:?}"),
        }
        assert_ne!(free_port(None).unwrap(), 0);
    }

    #[test]
    fn a_stopped_server_is_ended_by_its_supervisor_and_a_dead_one_reports_its_log() {
        let dir = std::env::temp_dir().join(format!("real-apiserver-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A "server" that runs until told to stop, after it has seen a file we make: one
        // ended early by its supervisor never says it saw it.
        let go = dir.join("go");
        let script = format!(
            "echo started; while [ ! -e '{}' ]; do sleep 0.05; done; echo saw-go; exec sleep 60",
            go.display()
        );
        let log = dir.join("sleeper.log");
        let mut server = Supervised::spawn(
            "sleeper",
            Path::new("/bin/sh"),
            &["-c".to_string(), script],
            log.clone(),
        )
        .unwrap();
        std::fs::write(&go, "").unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !std::fs::read_to_string(&log).unwrap().contains("saw-go") {
            server
                .check_running()
                .expect("the server runs until it is stopped");
            assert!(Instant::now() < deadline, "the server never saw the file");
            std::thread::sleep(Duration::from_millis(20));
        }
        server.check_running().unwrap();
        let started = Instant::now();
        server.stop().unwrap();
        assert!(started.elapsed() < Duration::from_secs(GRACE_SECONDS.into()));

        let mut failing = Supervised::spawn(
            "failing",
            Path::new("/bin/sh"),
            &[
                "-c".to_string(),
                "echo 'listen tcp 127.0.0.1:7777: bind: address already in use'; exit 3"
                    .to_string(),
            ],
            dir.join("failing.log"),
        )
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let error = loop {
            match failing.check_running() {
                Ok(()) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Ok(()) => panic!("the failing server did not exit"),
                Err(e) => break e,
            }
        };
        assert!(matches!(error, Error::PortInUse(7777)), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
