//! Running a real kubectl against an in-process `SimServer`: finding the binary, a private
//! kubeconfig/HOME/cache per run, and one invocation with a deadline.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use sim_apiserver::SimServer;
use tokio::process::Command;

/// The kubectl to drive: `SIM_KUBECTL` when set (to probe another version), else the machine's,
/// else the one `cargo xtask ci` built from the Go module proxy on a machine that has none.
/// `None` (the test then skips with a message) when none exists.
pub fn find_kubectl() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("SIM_KUBECTL") {
        let p = PathBuf::from(p);
        return p.exists().then_some(p);
    }
    ["/usr/bin/kubectl", "/usr/local/bin/kubectl"]
        .iter()
        .map(PathBuf::from)
        .chain(real_apiserver::BuildModule::Kubectl.cached().ok())
        .find(|p| p.exists())
}

/// One kubectl bound to one server, with its own directory (kubeconfig, HOME, cache, files).
pub struct Kube {
    pub bin: PathBuf,
    pub dir: PathBuf,
}

/// What one invocation gave.
#[derive(Debug)]
pub struct Output {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Kube {
    pub fn new(bin: PathBuf, sim: &SimServer, tag: &str) -> Self {
        Self::with_kubeconfig(bin, sim, tag, &sim.kubeconfig())
    }

    /// [`new`](Self::new) with another kubeconfig for the same server (another user's).
    pub fn with_kubeconfig(bin: PathBuf, sim: &SimServer, tag: &str, kubeconfig: &str) -> Self {
        Self::for_server(bin, sim.addr().port(), tag, kubeconfig)
    }

    /// A kubectl for the server on `port` (any server: the simulator or a real one), with
    /// `kubeconfig`; `tag` tells this run's directory apart from others on the same server.
    pub fn for_server(bin: PathBuf, port: u16, tag: &str, kubeconfig: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("sim-kubectl-{}-{port}-{tag}", std::process::id(),));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config"), kubeconfig).unwrap();
        Self { bin, dir }
    }

    /// A command with this run's kubeconfig, HOME and cache directory.
    pub fn cmd<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Command {
        let mut c = Command::new(&self.bin);
        c.env("KUBECONFIG", self.dir.join("config"))
            .env("HOME", &self.dir)
            .env_remove("KUBECTL_EXTERNAL_DIFF")
            .current_dir(&self.dir)
            .arg("--cache-dir")
            .arg(self.dir.join("cache"))
            .args(args)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        c
    }

    /// The kubectl version as `(major, minor)`, from `version --client -o json`.
    pub async fn client_version(&self) -> (u32, u32) {
        let out = self
            .cmd(&["version", "--client", "-o", "json"])
            .output()
            .await
            .expect("kubectl runs");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let num = |k: &str| {
            v["clientVersion"][k]
                .as_str()
                .unwrap_or("0")
                .trim_end_matches('+')
                .parse()
                .unwrap_or(0)
        };
        (num("major"), num("minor"))
    }

    /// Runs to completion and returns stdout, failing the test (with stderr) on a non-zero exit.
    pub async fn run(&self, args: &[&str]) -> String {
        let out = tokio::time::timeout(Duration::from_secs(60), self.cmd(args).output())
            .await
            .expect("kubectl timed out")
            .expect("kubectl runs");
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Writes a file in this run's directory and returns its path.
    pub fn file(&self, name: &str, text: &str) -> String {
        let p = self.dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    }

    /// [`output`](Self::output) of string slices, within a minute.
    pub async fn try_run(&self, args: &[&str]) -> Output {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        self.output(&args, Duration::from_secs(60)).await
    }

    /// Runs to completion (at most `limit`); a run past the limit is killed and reported.
    pub async fn output(&self, args: &[String], limit: Duration) -> Output {
        match tokio::time::timeout(limit, self.cmd(args).output()).await {
            Ok(Ok(o)) => Output {
                code: o.status.code(),
                stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
            },
            Ok(Err(e)) => Output {
                code: None,
                stdout: String::new(),
                stderr: format!("could not start kubectl: {e}"),
            },
            Err(_) => Output {
                code: None,
                stdout: String::new(),
                stderr: format!("timed out after {limit:?}"),
            },
        }
    }
}

impl Drop for Kube {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
