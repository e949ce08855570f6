//! Starting and stopping etcd and kube-apiserver, and the kubeconfig that reaches them.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;

use crate::pki::{self, Pki};
use crate::process::{free_port, Supervised};
use crate::{target_dir, Binaries, Error};

/// How the control plane is started.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerOptions {
    /// Feature gates, as `--feature-gates` takes them. Default: the gates this project tests,
    /// `WatchList`, `ShardedListAndWatch` and `CoordinatedLeaderElection`.
    pub feature_gates: Vec<(String, bool)>,
    /// `--runtime-config` entries. Default: the beta `coordination.k8s.io` versions that
    /// coordinated leader election's LeaseCandidate needs.
    pub runtime_config: Vec<String>,
    /// How often kube-apiserver compacts etcd (`--etcd-compaction-interval`). Default 30 s, so
    /// that tests of 410 Gone need not wait upstream's five minutes.
    pub compaction_interval: Duration,
    /// Whether the apiserver serves from its watch cache (`--watch-cache`). Default true.
    pub watch_cache: bool,
    /// The apiserver's secure port; `None` (the default) takes a free one.
    pub secure_port: Option<u16>,
    /// How long to wait for each server to be ready. Default 120 s: a loaded 2-core machine
    /// takes most of a minute to start kube-apiserver.
    pub ready_timeout: Duration,
    /// More kube-apiserver flags, appended after ours (a later flag wins).
    pub extra_args: Vec<String>,
    /// More etcd flags, appended after ours (a later flag wins): for example
    /// `--quota-backend-bytes=8589934592` for a store of more than etcd's default 2 GiB.
    pub etcd_extra_args: Vec<String>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            feature_gates: [
                "WatchList",
                "ShardedListAndWatch",
                "CoordinatedLeaderElection",
            ]
            .into_iter()
            .map(|gate| (gate.to_string(), true))
            .collect(),
            runtime_config: vec!["coordination.k8s.io/v1beta1=true".to_string()],
            compaction_interval: Duration::from_secs(30),
            watch_cache: true,
            secure_port: None,
            ready_timeout: Duration::from_secs(120),
            extra_args: Vec::new(),
            etcd_extra_args: Vec::new(),
        }
    }
}

/// A user the server knows, by bearer token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum User {
    /// `admin`, in `system:masters`: allowed everything (RBAC is bypassed).
    Admin,
    /// `viewer`, in no group but `system:authenticated`: what RBAC grants it, nothing by
    /// default (a 403 for most requests).
    Viewer,
}

/// A bearer token, kept out of `Debug`.
#[derive(Clone)]
struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// A running etcd and kube-apiserver on 127.0.0.1. Dropping it stops both and removes its run
/// directory (see [`RealServer::stop`]).
#[derive(Debug)]
pub struct RealServer {
    apiserver: Option<Supervised>,
    etcd: Option<Supervised>,
    dir: PathBuf,
    url: String,
    pki: Arc<Pki>,
    admin_token: Token,
    viewer_token: Token,
    kubeconfig: PathBuf,
    version: String,
}

/// Numbers the run directories of one process.
static RUNS: AtomicU32 = AtomicU32::new(0);

impl RealServer {
    /// Finds or builds the binaries ([`Binaries::ensure`]), then starts etcd and kube-apiserver
    /// with `options` and waits until both are ready. Blocking: from async code, call it on a
    /// blocking thread.
    pub fn start(options: ServerOptions) -> Result<RealServer, Error> {
        let binaries = Binaries::ensure()?;
        Self::start_with(&binaries, options)
    }

    /// As [`RealServer::start`], with binaries found already.
    pub fn start_with(binaries: &Binaries, options: ServerOptions) -> Result<RealServer, Error> {
        let runs = target_dir().join("real-apiserver").join("run");
        remove_stale_runs(&runs);
        let dir = runs.join(format!(
            "{}-{}",
            std::process::id(),
            RUNS.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(dir.join("pki"))
            .map_err(Error::io(format!("creating {}", dir.display())))?;
        let started = Instant::now();
        let mut server = RealServer {
            apiserver: None,
            etcd: None,
            url: String::new(),
            pki: Arc::new(Pki::generate()?),
            admin_token: Token(pki::token()),
            viewer_token: Token(pki::token()),
            kubeconfig: dir.join("kubeconfig"),
            version: String::new(),
            dir,
        };
        // From here on, dropping `server` (an error below) stops what was started.
        let files = server.write_pki()?;
        let etcd_url = server.start_etcd(binaries, &options)?;
        let port = server.start_apiserver(binaries, &options, &etcd_url, &files)?;
        server.url = format!("https://127.0.0.1:{port}");
        server.version = server.wait_ready(&options)?;
        server.write_kubeconfig()?;
        println!(
            "real-apiserver: kube-apiserver {} ready at {} in {:.1} s (kubeconfig {})",
            server.version,
            server.url,
            started.elapsed().as_secs_f64(),
            server.kubeconfig.display()
        );
        Ok(server)
    }

    /// The apiserver's URL, `https://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The version `/version` answered (`v1.36.3`).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The CA that signed the serving certificate (PEM).
    pub fn ca_pem(&self) -> &str {
        &self.pki.ca_pem
    }

    /// The bearer token of `user`.
    pub fn token(&self, user: User) -> &str {
        match user {
            User::Admin => &self.admin_token.0,
            User::Viewer => &self.viewer_token.0,
        }
    }

    /// A client certificate and key (PEM) for `user` in `groups` (at most two), signed by the
    /// CA the apiserver trusts.
    pub fn client_cert(&self, user: &str, groups: &[&str]) -> Result<(String, String), Error> {
        self.pki.client_cert(user, groups)
    }

    /// A kubeconfig whose current context is the admin user by client certificate; the context
    /// `real-token` is the same user by bearer token.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// Sends one HTTPS request as `user` (`method`, `path` with its query, an optional body with
    /// its content type) and returns the status and the body: a client of its own, independent
    /// of the client under test, for seeding a server and reading the truth back. Blocking.
    pub fn request(
        &self,
        user: User,
        method: &str,
        path: &str,
        body: Option<(&str, &[u8])>,
    ) -> Result<(u16, String), Error> {
        let port = self.port();
        let tls = Arc::new(tls_config(&self.pki.ca_pem)?);
        https_request(&tls, port, method, path, self.token(user), body).map_err(|detail| {
            Error::Io {
                what: format!("{method} {path}"),
                source: std::io::Error::other(detail),
            }
        })
    }

    /// Streams a watch (`path` with `watch=1` and its parameters) as `user`, handing each event
    /// (one JSON document) to `on_event` until the server ends the watch or `stop` is set
    /// (checked at least every 200 ms). An observer of its own, independent of the client under
    /// test. Blocking: run it on a thread of its own.
    pub fn watch(
        &self,
        user: User,
        path: &str,
        stop: &std::sync::atomic::AtomicBool,
        mut on_event: impl FnMut(serde_json::Value),
    ) -> Result<(), Error> {
        let fail = |detail: String| Error::Io {
            what: format!("watching {path}"),
            source: std::io::Error::other(detail),
        };
        let tls = Arc::new(tls_config(&self.pki.ca_pem)?);
        let tcp =
            TcpStream::connect(("127.0.0.1", self.port())).map_err(|e| fail(e.to_string()))?;
        tcp.set_read_timeout(Some(Duration::from_millis(200)))
            .map_err(|e| fail(e.to_string()))?;
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1")
            .map_err(|e| fail(e.to_string()))?;
        let connection =
            rustls::ClientConnection::new(tls, name).map_err(|e| fail(e.to_string()))?;
        let mut stream = rustls::StreamOwned::new(connection, tcp);
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
            self.token(user)
        )
        .map_err(|e| fail(e.to_string()))?;
        stream.flush().map_err(|e| fail(e.to_string()))?;
        let mut events = WatchLines::default();
        let mut buffer = [0u8; 64 * 1024];
        while !stop.load(Ordering::Relaxed) {
            match stream.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => {
                    for event in events.feed(&buffer[..n]).map_err(fail)? {
                        on_event(event);
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                // A peer that closes without close_notify: the watch has ended.
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                Err(e) => return Err(fail(e.to_string())),
            }
        }
        Ok(())
    }

    fn port(&self) -> u16 {
        self.url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or(0)
    }

    /// The run directory: certificates, etcd's data, both servers' logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stops kube-apiserver, then etcd, and removes the run directory. Dropping the server does
    /// the same, ignoring errors.
    pub fn stop(mut self) -> Result<(), Error> {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> Result<(), Error> {
        let mut result = Ok(());
        for process in [self.apiserver.take(), self.etcd.take()]
            .into_iter()
            .flatten()
        {
            let mut process = process;
            if let Err(e) = process.stop() {
                result = result.and(Err(e));
            }
        }
        if self.dir.exists() {
            if let Err(e) = std::fs::remove_dir_all(&self.dir) {
                result = result.and(Err(Error::io(format!("removing {}", self.dir.display()))(
                    e,
                )));
            }
        }
        result
    }

    /// Writes the certificates, keys and the token file; returns their paths.
    fn write_pki(&self) -> Result<PkiFiles, Error> {
        let pki_dir = self.dir.join("pki");
        let write = |name: &str, text: &str| -> Result<PathBuf, Error> {
            let path = pki_dir.join(name);
            std::fs::write(&path, text)
                .map_err(Error::io(format!("writing {}", path.display())))?;
            Ok(path)
        };
        // The kubeconfig's admin user, by certificate.
        let (admin_cert, admin_key) = self.pki.client_cert("admin", &["system:masters"])?;
        write("admin.crt", &admin_cert)?;
        write("admin.key", &admin_key)?;
        Ok(PkiFiles {
            ca: write("ca.crt", &self.pki.ca_pem)?,
            serving_cert: write("apiserver.crt", &self.pki.serving.0)?,
            serving_key: write("apiserver.key", &self.pki.serving.1)?,
            service_account_key: write("sa.key", &self.pki.service_account_key)?,
            service_account_public_key: write("sa.pub", &self.pki.service_account_public_key)?,
            tokens: write(
                "tokens.csv",
                &format!(
                    "{},admin,admin-uid,\"system:masters\"\n{},viewer,viewer-uid\n",
                    self.admin_token.0, self.viewer_token.0
                ),
            )?,
        })
    }

    fn start_etcd(
        &mut self,
        binaries: &Binaries,
        options: &ServerOptions,
    ) -> Result<String, Error> {
        let client = free_port(None)?;
        let peer = free_port(None)?;
        let client_url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let args: Vec<String> = [
            "--name=real".to_string(),
            format!("--data-dir={}", self.dir.join("etcd").display()),
            format!("--listen-client-urls={client_url}"),
            format!("--advertise-client-urls={client_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=real={peer_url}"),
            "--unsafe-no-fsync=true".to_string(),
            "--log-level=warn".to_string(),
        ]
        .into_iter()
        .chain(options.etcd_extra_args.iter().cloned())
        .collect();
        let etcd = self.etcd.insert(Supervised::spawn(
            "etcd",
            &binaries.etcd,
            &args,
            self.dir.join("etcd.log"),
        )?);
        wait_until(etcd, options.ready_timeout, || {
            http_get(client, "/health").and_then(|(status, body)| {
                if status == 200 && body.contains("\"health\":\"true\"") {
                    Ok(())
                } else {
                    Err(format!("{status} {}", body.trim()))
                }
            })
        })?;
        Ok(client_url)
    }

    fn start_apiserver(
        &mut self,
        binaries: &Binaries,
        options: &ServerOptions,
        etcd_url: &str,
        files: &PkiFiles,
    ) -> Result<u16, Error> {
        let port = free_port(options.secure_port)?;
        let path = |p: &Path| p.display().to_string();
        let mut args = vec![
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".to_string(),
            "--advertise-address=127.0.0.1".to_string(),
            format!("--secure-port={port}"),
            format!("--tls-cert-file={}", path(&files.serving_cert)),
            format!("--tls-private-key-file={}", path(&files.serving_key)),
            format!("--client-ca-file={}", path(&files.ca)),
            format!("--token-auth-file={}", path(&files.tokens)),
            "--authorization-mode=RBAC".to_string(),
            "--service-account-issuer=https://kubernetes.default.svc".to_string(),
            format!(
                "--service-account-key-file={}",
                path(&files.service_account_public_key)
            ),
            format!(
                "--service-account-signing-key-file={}",
                path(&files.service_account_key)
            ),
            "--service-cluster-ip-range=10.0.0.0/24".to_string(),
            "--disable-admission-plugins=ServiceAccount".to_string(),
            "--allow-privileged=true".to_string(),
            format!(
                "--etcd-compaction-interval={}s",
                options.compaction_interval.as_secs().max(1)
            ),
            format!("--watch-cache={}", options.watch_cache),
            // One line per request would bury the log; warnings and errors are what a failed
            // start needs.
            "--v=1".to_string(),
        ];
        if !options.feature_gates.is_empty() {
            let gates: Vec<String> = options
                .feature_gates
                .iter()
                .map(|(gate, on)| format!("{gate}={on}"))
                .collect();
            args.push(format!("--feature-gates={}", gates.join(",")));
        }
        if !options.runtime_config.is_empty() {
            args.push(format!(
                "--runtime-config={}",
                options.runtime_config.join(",")
            ));
        }
        args.extend(options.extra_args.iter().cloned());
        self.apiserver = Some(Supervised::spawn(
            "kube-apiserver",
            &binaries.kube_apiserver,
            &args,
            self.dir.join("kube-apiserver.log"),
        )?);
        Ok(port)
    }

    /// Waits for `/readyz`, then asks `/version`.
    fn wait_ready(&mut self, options: &ServerOptions) -> Result<String, Error> {
        let port = self.port();
        let tls = Arc::new(tls_config(&self.pki.ca_pem)?);
        let token = self.admin_token.0.clone();
        let apiserver = self.apiserver.as_mut().expect("started above");
        wait_until(apiserver, options.ready_timeout, || {
            match https_request(&tls, port, "GET", "/readyz", &token, None)? {
                (200, _) => Ok(()),
                (status, body) => Err(format!("{status} {}", crate::tail(body.trim(), 3))),
            }
        })?;
        let (status, body) =
            https_request(&tls, port, "GET", "/version", &token, None).map_err(|last| {
                Error::NotReady {
                    process: "kube-apiserver",
                    seconds: 0,
                    last,
                    log: apiserver.log.clone(),
                }
            })?;
        let version: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        Ok(version["gitVersion"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| format!("(/version answered {status})")))
    }

    fn write_kubeconfig(&self) -> Result<(), Error> {
        let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
        let read = |path: &str| -> Result<String, Error> {
            let path = self.dir.join("pki").join(path);
            std::fs::read_to_string(&path).map_err(Error::io(format!("reading {}", path.display())))
        };
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: real\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\n\
             users:\n- name: admin\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\n\
             - name: admin-token\n  user:\n    token: {token}\n\
             contexts:\n- name: real\n  context:\n    cluster: real\n    user: admin\n\
             - name: real-token\n  context:\n    cluster: real\n    user: admin-token\n\
             current-context: real\n",
            url = self.url,
            ca = b64(&self.pki.ca_pem),
            cert = b64(&read("admin.crt")?),
            key = b64(&read("admin.key")?),
            token = self.admin_token.0,
        );
        std::fs::write(&self.kubeconfig, text)
            .map_err(Error::io(format!("writing {}", self.kubeconfig.display())))
    }
}

impl Drop for RealServer {
    fn drop(&mut self) {
        let _ = self.stop_inner();
    }
}

/// Paths of the files [`RealServer::write_pki`] wrote.
struct PkiFiles {
    ca: PathBuf,
    serving_cert: PathBuf,
    serving_key: PathBuf,
    service_account_key: PathBuf,
    service_account_public_key: PathBuf,
    tokens: PathBuf,
}

/// Removes run directories whose process is gone (it died without stopping its servers; its
/// supervisors ended the servers, but nobody removed the data).
fn remove_stale_runs(runs: &Path) {
    let Ok(entries) = std::fs::read_dir(runs) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name.to_string_lossy();
        let pid = pid.split('-').next().unwrap_or("");
        if !pid.is_empty() && !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Polls `ready` every 250 ms until it answers `Ok`, the process exits, or `timeout` passes.
fn wait_until(
    process: &mut Supervised,
    timeout: Duration,
    mut ready: impl FnMut() -> Result<(), String>,
) -> Result<(), Error> {
    let started = Instant::now();
    loop {
        process.check_running()?;
        let last = match ready() {
            Ok(()) => return Ok(()),
            Err(answer) => answer,
        };
        if started.elapsed() >= timeout {
            return Err(Error::NotReady {
                process: process.name,
                seconds: timeout.as_secs(),
                last,
                log: process.log.clone(),
            });
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// A plain HTTP/1.1 GET of 127.0.0.1:`port``path`: the status and the body.
fn http_get(port: u16, path: &str) -> Result<(u16, String), String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    exchange(&mut stream, "GET", path, None, None)
}

/// An HTTPS request with a bearer token, verifying the server against the CA.
fn https_request(
    tls: &Arc<rustls::ClientConfig>,
    port: u16,
    method: &str,
    path: &str,
    token: &str,
    body: Option<(&str, &[u8])>,
) -> Result<(u16, String), String> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").map_err(|e| e.to_string())?;
    let connection = rustls::ClientConnection::new(tls.clone(), name).map_err(|e| e.to_string())?;
    let mut stream = rustls::StreamOwned::new(connection, tcp);
    exchange(&mut stream, method, path, Some(token), body)
}

/// A watch answer read as it arrives: the head, then HTTP/1.1 chunks, then one JSON event per
/// line. Holds at most one chunk and one line beyond what was handed on.
#[derive(Default)]
struct WatchLines {
    raw: Vec<u8>,
    head_done: bool,
    /// Bytes of the current chunk still to come.
    chunk_left: usize,
    /// Bytes of the CRLF that ends the current chunk still to skip.
    crlf_left: usize,
    /// The last (empty) chunk came: nothing more is read.
    ended: bool,
    line: Vec<u8>,
}

impl WatchLines {
    /// The longest line (event) accepted.
    const MAX_LINE: usize = 16 << 20;

    fn feed(&mut self, bytes: &[u8]) -> Result<Vec<serde_json::Value>, String> {
        let mut events = Vec::new();
        if self.ended {
            return Ok(events);
        }
        self.raw.extend_from_slice(bytes);
        if !self.head_done {
            let Some(end) = self.raw.windows(4).position(|w| w == b"\r\n\r\n") else {
                return Ok(events);
            };
            let head = String::from_utf8_lossy(&self.raw[..end]).into_owned();
            let status = head.split_whitespace().nth(1).unwrap_or("");
            if status != "200" {
                return Err(format!(
                    "the watch answered {}",
                    head.lines().next().unwrap_or("")
                ));
            }
            self.raw.drain(..end + 4);
            self.head_done = true;
        }
        loop {
            if self.chunk_left == 0 {
                // The CRLF that ended the previous chunk, perhaps cut between two reads.
                let skip = self.crlf_left.min(self.raw.len());
                self.raw.drain(..skip);
                self.crlf_left -= skip;
                if self.crlf_left > 0 {
                    return Ok(events);
                }
                // A chunk's size line.
                let Some(end) = self.raw.windows(2).position(|w| w == b"\r\n") else {
                    return Ok(events);
                };
                let text = String::from_utf8_lossy(&self.raw[..end]).into_owned();
                let size = usize::from_str_radix(text.split(';').next().unwrap_or("").trim(), 16)
                    .map_err(|_| format!("a bad chunk size {text:?}"))?;
                self.raw.drain(..end + 2);
                if size == 0 {
                    self.ended = true;
                    return Ok(events);
                }
                self.chunk_left = size;
            }
            if self.raw.is_empty() {
                return Ok(events);
            }
            let take = self.chunk_left.min(self.raw.len());
            for &byte in &self.raw[..take] {
                if byte == b'\n' {
                    let line = std::mem::take(&mut self.line);
                    if !line.is_empty() {
                        events.push(
                            serde_json::from_slice(&line)
                                .map_err(|e| format!("a watch event that is not JSON: {e}"))?,
                        );
                    }
                } else if self.line.len() < Self::MAX_LINE {
                    self.line.push(byte);
                } else {
                    return Err("a watch event over 16 MiB".into());
                }
            }
            self.raw.drain(..take);
            self.chunk_left -= take;
            if self.chunk_left == 0 {
                self.crlf_left = 2;
            }
        }
    }
}

/// The largest answer [`exchange`] reads.
const MAX_ANSWER: u64 = 256 << 20;

/// Sends one request with `Connection: close` and reads the whole answer (chunked or not).
fn exchange(
    stream: &mut (impl Read + Write),
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<(&str, &[u8])>,
) -> Result<(u16, String), String> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    if let Some(token) = token {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    if let Some((content_type, bytes)) = body {
        head.push_str(&format!(
            "Content-Type: {content_type}\r\nContent-Length: {}\r\n",
            bytes.len()
        ));
    }
    head.push_str("\r\n");
    stream
        .write_all(head.as_bytes())
        .map_err(|e| e.to_string())?;
    if let Some((_, bytes)) = body {
        stream.write_all(bytes).map_err(|e| e.to_string())?;
    }
    stream.flush().map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    // A TLS peer that closes without close_notify ends the read with an error after the whole
    // answer arrived; what was read is still the answer.
    let _ = stream.take(MAX_ANSWER).read_to_end(&mut answer);
    parse_answer(&answer)
}

/// The status and body of a whole HTTP/1.1 answer, its chunked coding undone.
fn parse_answer(answer: &[u8]) -> Result<(u16, String), String> {
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("no HTTP answer ({} bytes)", answer.len()))?;
    let head = String::from_utf8_lossy(&answer[..split]);
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status line in {:?}", head.lines().next()))?;
    let chunked = head.lines().any(|line| {
        let line = line.to_ascii_lowercase();
        line.starts_with("transfer-encoding:") && line.contains("chunked")
    });
    let raw = &answer[split + 4..];
    let body = if chunked { unchunk(raw)? } else { raw.to_vec() };
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// Undoes HTTP/1.1 chunked coding.
fn unchunk(mut raw: &[u8]) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let line_end = raw
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("a chunk size line without its end")?;
        let size_text = String::from_utf8_lossy(&raw[..line_end]);
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| format!("a bad chunk size {size_text:?}"))?;
        raw = &raw[line_end + 2..];
        if size == 0 {
            return Ok(body);
        }
        let chunk = raw.get(..size).ok_or("a chunk cut short")?;
        body.extend_from_slice(chunk);
        raw = raw.get(size + 2..).ok_or("a chunk without its line end")?;
    }
}

/// A rustls client configuration that trusts only `ca_pem`.
fn tls_config(ca_pem: &str) -> Result<rustls::ClientConfig, Error> {
    let der = pem_body(ca_pem).ok_or_else(|| Error::Pki("the CA is not PEM".into()))?;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(der))
        .map_err(|e| Error::Pki(e.to_string()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Pki(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// The DER bytes of the first PEM block of `pem`.
fn pem_body(pem: &str) -> Option<Vec<u8>> {
    let body: String = pem
        .lines()
        .skip_while(|line| !line.starts_with("-----BEGIN"))
        .skip(1)
        .take_while(|line| !line.starts_with("-----END"))
        .collect();
    base64::engine::general_purpose::STANDARD.decode(body).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_events_are_read_across_chunks_cut_anywhere() {
        let stream = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
            d\r\n{\"type\":\"A\"}\n\r\n8\r\n{\"type\":\r\n5\r\n\"B\"}\n\r\n0\r\n\r\n";
        for cut in 1..stream.len() {
            let mut lines = WatchLines::default();
            let mut events = lines.feed(&stream[..cut]).unwrap();
            events.extend(lines.feed(&stream[cut..]).unwrap());
            let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
            assert_eq!(types, ["A", "B"], "cut at {cut}");
        }
        let mut refused = WatchLines::default();
        assert!(refused.feed(b"HTTP/1.1 410 Gone\r\n\r\n").is_err());
    }

    #[test]
    fn a_chunked_answer_is_read_whole_and_a_plain_one_as_it_is() {
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n7;x=y\r\n, world\r\n0\r\n\r\n";
        assert_eq!(
            parse_answer(chunked).unwrap(),
            (200, "hello, world".to_string())
        );
        let plain = b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(parse_answer(plain).unwrap(), (404, "{}".to_string()));
        assert!(
            parse_answer(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err()
        );
        assert!(parse_answer(b"garbage").is_err());
    }
}
