//! Credentials end to end: exec plugins that return client certificates, the one re-run on 401,
//! plugin timeouts and install hints, OpenID Connect refresh against a small issuer, and the
//! impersonation headers as a server receives them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use parking_lot::Mutex;
use reflector::{
    Client, ClientError, ClusterConfig, Credentials, ExecConfig, Impersonate, OidcConfig,
};
use sim_apiserver::SimServer;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

mod test_proxy;
use test_proxy::{Mode, TestProxy};

const PODS: &str = "/api/v1/namespaces/default/pods";

/// A directory of its own for one test, removed when dropped (at the end of the test, or when
/// it panics).
struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("auth-e2e-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

/// An exec plugin (a shell script) that appends a line to `dir/runs` on each run and prints the
/// ExecCredential `status` returned by `status_for(run)` for runs 1, 2 and 3 and more.
fn plugin(dir: &Path, statuses: [serde_json::Value; 3]) -> ExecConfig {
    let mut script = format!(
        "echo run >> '{0}/runs'\nn=$(wc -l < '{0}/runs')\n",
        dir.display()
    );
    for (i, status) in statuses.iter().enumerate() {
        let cred = serde_json::json!({
            "apiVersion": "client.authentication.k8s.io/v1",
            "kind": "ExecCredential",
            "status": status,
        });
        let file = dir.join(format!("cred{}.json", i + 1));
        std::fs::write(&file, cred.to_string()).unwrap();
    }
    script.push_str(&format!(
        "if [ \"$n\" -gt 3 ]; then n=3; fi\ncat '{}/cred'$n'.json'\n",
        dir.display()
    ));
    let path = dir.join("plugin.sh");
    std::fs::write(&path, script).unwrap();
    ExecConfig {
        command: "sh".into(),
        args: vec![path.display().to_string()],
        api_version: "client.authentication.k8s.io/v1".into(),
        ..ExecConfig::default()
    }
}

fn runs(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("runs"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

fn code(err: &ClientError) -> Option<u16> {
    err.status().map(|s| s.code)
}

#[tokio::test]
async fn an_exec_plugin_client_certificate_authenticates_over_tls() {
    let sim = SimServer::builder()
        .tls(true)
        .token("only-for-others")
        .client_cert_auth(true)
        .start()
        .await
        .unwrap();
    let tls = sim.tls_material().unwrap().clone();
    let mut config = ClusterConfig::new(&sim.url()).unwrap();
    config.certificate_authority = Some(sim.ca_pem().unwrap().as_bytes().to_vec());

    // Without a credential the server refuses.
    let err = Client::new(&config)
        .unwrap()
        .get_bytes(PODS)
        .await
        .unwrap_err();
    assert_eq!(code(&err), Some(401), "{err}");

    let dir = scratch("exec-cert");
    let status = serde_json::json!({
        "clientCertificateData": tls.client_cert_pem,
        "clientKeyData": tls.client_key_pem,
        "expirationTimestamp": "2999-01-01T00:00:00Z",
    });
    config.credentials = Credentials::Exec(plugin(&dir, [status.clone(), status.clone(), status]));
    let client = Client::new(&config).unwrap();
    let body = client.get_bytes(PODS).await.unwrap();
    assert!(
        body.starts_with(b"{"),
        "a list: {:?}",
        &body[..body.len().min(80)]
    );
    // Watches on their own connections present it too.
    client
        .watch(
            &format!("{PODS}?watch=true&timeoutSeconds=1"),
            "application/json",
        )
        .await
        .unwrap();
    assert_eq!(runs(&dir), 1, "the credential is cached until it expires");
    let debug = format!("{config:?} {client:?}");
    assert!(!debug.contains("PRIVATE KEY"), "{debug}");
}

#[tokio::test]
async fn a_401_runs_the_exec_plugin_again_once() {
    let sim = SimServer::builder().token("fresh").start().await.unwrap();
    let token = |t: &str| serde_json::json!({ "token": t });
    let dir = scratch("exec-401");
    let mut config = ClusterConfig::new(&sim.url()).unwrap();
    // A token the server no longer accepts, though its expiry says it is valid.
    config.credentials = Credentials::Exec(plugin(
        &dir,
        [token("revoked"), token("fresh"), token("fresh")],
    ));
    let client = Client::new(&config).unwrap();
    client.get_bytes(PODS).await.unwrap();
    assert_eq!(runs(&dir), 2, "one run, a 401, one more run");
    client.get_bytes(PODS).await.unwrap();
    client
        .watch(
            &format!("{PODS}?watch=true&timeoutSeconds=1"),
            "application/json",
        )
        .await
        .unwrap();
    assert_eq!(runs(&dir), 2, "the renewed token is cached");

    // A plugin whose tokens are always refused: one re-run per request, never a loop.
    let dir = scratch("exec-401-always");
    config.credentials =
        Credentials::Exec(plugin(&dir, [token("bad"), token("bad"), token("bad")]));
    let client = Client::new(&config).unwrap();
    let err = client.get_bytes(PODS).await.unwrap_err();
    assert_eq!(code(&err), Some(401), "{err}");
    assert_eq!(runs(&dir), 2);
    let err = client
        .watch(&format!("{PODS}?watch=true"), "application/json")
        .await
        .unwrap_err();
    assert_eq!(code(&err), Some(401), "{err}");
    // The watch went out with the cached credential, got a 401 and re-ran the plugin once.
    assert_eq!(runs(&dir), 3, "a watch re-runs it once too");
}

/// `n` lists of the pods sent together from clones of `client`; each must succeed.
async fn list_concurrently(client: &Client, n: usize) {
    let calls: Vec<_> = (0..n)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.get_bytes(PODS).await })
        })
        .collect();
    for call in calls {
        call.await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn concurrent_401s_renew_an_exec_credential_once() {
    let sim = SimServer::builder().token("fresh").start().await.unwrap();
    let token = |t: &str| serde_json::json!({ "token": t });
    let dir = scratch("exec-401-concurrent");
    let mut config = ClusterConfig::new(&sim.url()).unwrap();
    config.credentials = Credentials::Exec(plugin(
        &dir,
        [token("revoked"), token("fresh"), token("fresh")],
    ));
    let client = Client::new(&config).unwrap();
    list_concurrently(&client, 4).await;
    assert_eq!(runs(&dir), 2, "four requests refused together renew once");
}

/// The error of a first request from a client whose credential comes from `exec` (no server: the
/// plugin fails before any connection).
async fn exec_failure(exec: ExecConfig) -> ClientError {
    let config = ClusterConfig {
        credentials: Credentials::Exec(exec),
        ..ClusterConfig::new("http://127.0.0.1:9").unwrap()
    };
    let err = Client::new(&config)
        .unwrap()
        .get_bytes(PODS)
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Auth(_)), "{err}");
    err
}

#[tokio::test]
async fn a_hung_exec_plugin_is_killed_at_its_timeout() {
    let err = exec_failure(ExecConfig {
        command: "sh".into(),
        args: vec!["-c".into(), "sleep 60".into()],
        timeout: Duration::from_millis(200),
        ..ExecConfig::default()
    })
    .await;
    assert!(
        err.to_string().contains("killed after running for 200ms"),
        "{err}"
    );
}

#[tokio::test]
async fn an_exec_plugin_writing_without_end_is_stopped_at_the_output_bound() {
    let err = exec_failure(ExecConfig {
        command: "sh".into(),
        // Endless standard output and some standard error: neither may fill memory, and the run
        // ends at the bound, long before the timeout.
        args: vec!["-c".into(), "echo oops >&2; exec yes token".into()],
        ..ExecConfig::default()
    })
    .await;
    let text = err.to_string();
    assert!(
        text.contains("its output is larger than 1048576 bytes"),
        "{text}"
    );
    assert!(!text.contains("token"), "{text}");
}

#[tokio::test]
async fn a_missing_exec_program_error_carries_its_install_hint() {
    let err = exec_failure(ExecConfig {
        command: "/nonexistent/get-token".into(),
        install_hint: Some("get-token is in the cloud SDK: apt install cloud-sdk".into()),
        ..ExecConfig::default()
    })
    .await;
    let text = err.to_string();
    assert!(text.contains("executable not found"), "{text}");
    assert!(text.contains("apt install cloud-sdk"), "{text}");
}

#[tokio::test]
async fn provide_cluster_info_passes_the_server_to_the_plugin() {
    let sim = SimServer::builder().token("t").start().await.unwrap();
    let dir = scratch("exec-info");
    let script = dir.join("plugin.sh");
    std::fs::write(
        &script,
        format!(
            "printf '%s' \"$KUBERNETES_EXEC_INFO\" > '{}/info'\necho '{}'\n",
            dir.display(),
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t"}}"#
        ),
    )
    .unwrap();
    let mut config = ClusterConfig::new(&sim.url()).unwrap();
    config.credentials = Credentials::Exec(ExecConfig {
        command: "sh".into(),
        args: vec![script.display().to_string()],
        provide_cluster_info: true,
        ..ExecConfig::default()
    });
    Client::new(&config).unwrap().get_bytes(PODS).await.unwrap();
    let info: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("info")).unwrap()).unwrap();
    assert_eq!(info["kind"], "ExecCredential");
    assert_eq!(info["spec"]["interactive"], false);
    assert_eq!(info["spec"]["cluster"]["server"], config.server.as_str());
}

/// A tiny HTTP/1.1 server: answers each request with `answer(head, body)` and keeps every
/// request it received.
struct TinyServer {
    url: String,
    requests: Arc<Mutex<Vec<(String, String)>>>,
}

type Answer = dyn Fn(&str, &str) -> (u16, String) + Send + Sync;

async fn tiny_server(answer: Arc<Answer>) -> TinyServer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let requests: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let seen = requests.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let answer = answer.clone();
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let (head, body) = loop {
                    let n = conn.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).into_owned();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let head = text[..end].to_string();
                        let len = head
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length")
                                    .then(|| v.trim().parse::<usize>().ok())?
                            })
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + len {
                            break (head, text[end + 4..end + 4 + len].to_string());
                        }
                    }
                };
                let (code, reply) = answer(&head, &body);
                seen.lock().push((head, body));
                let resp = format!(
                    "HTTP/1.1 {code} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                    reply.len()
                );
                let _ = conn.write_all(resp.as_bytes()).await;
            });
        }
    });
    TinyServer { url, requests }
}

fn jwt(exp: u64) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    format!(
        "{}.{}.signature",
        b64(r#"{"alg":"RS256","typ":"JWT"}"#),
        b64(&format!(r#"{{"sub":"jane","exp":{exp}}}"#))
    )
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// An issuer whose token endpoint answers a refresh with `reply` (code and JSON body). Requests
/// may come in origin form or, through a forwarding proxy, in absolute form.
async fn issuer(reply: (u16, String)) -> TinyServer {
    let base: Arc<Mutex<String>> = Arc::default();
    let base_in = base.clone();
    let server = tiny_server(Arc::new(move |head: &str, _body: &str| {
        let target = head.split(' ').nth(1).unwrap_or_default();
        let path = target
            .strip_prefix("http://")
            .and_then(|rest| rest.find('/').map(|i| &rest[i..]))
            .unwrap_or(target);
        if head.starts_with("GET ") && path == "/realm/.well-known/openid-configuration" {
            let endpoint = format!("{}/realm/token", base_in.lock());
            (
                200,
                serde_json::json!({ "token_endpoint": endpoint }).to_string(),
            )
        } else if head.starts_with("POST ") && path == "/realm/token" {
            reply.clone()
        } else {
            (404, "{}".into())
        }
    }))
    .await;
    *base.lock() = server.url.clone();
    server
}

fn oidc(issuer: &TinyServer, id_token: &str) -> OidcConfig {
    OidcConfig::new(
        url::Url::parse(&format!("{}/realm", issuer.url)).unwrap(),
        "kube client",
    )
    .client_secret("client-secret-value".into())
    .id_token(id_token.into())
    .refresh_token("refresh-token-one".into())
}

#[tokio::test]
async fn an_expired_oidc_id_token_is_refreshed_at_the_issuer() {
    let new_token = jwt(now() + 3600);
    let reply = serde_json::json!({
        "access_token": "unused",
        "id_token": new_token,
        "refresh_token": "refresh-token-two",
        "token_type": "Bearer",
    });
    let issuer = issuer((200, reply.to_string())).await;
    let sim = SimServer::builder()
        .token(&new_token)
        .start()
        .await
        .unwrap();
    let mut config = ClusterConfig::new(&sim.url()).unwrap();
    config.credentials = Credentials::Oidc(oidc(&issuer, &jwt(now() - 60)));
    let client = Client::new(&config).unwrap();
    client.get_bytes(PODS).await.unwrap();
    client.get_bytes(PODS).await.unwrap();

    let requests = issuer.requests.lock().clone();
    assert_eq!(
        requests.len(),
        2,
        "discovery, then one refresh: {requests:?}"
    );
    let (head, body) = &requests[1];
    assert!(body.contains("grant_type=refresh_token"), "{body}");
    assert!(body.contains("refresh_token=refresh-token-one"), "{body}");
    // Client id and secret in HTTP basic, each form-encoded first (RFC 6749 §2.3.1).
    let basic = base64::engine::general_purpose::STANDARD.encode("kube+client:client-secret-value");
    assert!(
        head.to_ascii_lowercase().contains(&format!(
            "authorization: basic {}",
            basic.to_ascii_lowercase()
        )),
        "{head}"
    );
    let debug = format!("{config:?}");
    for secret in [
        "refresh-token-one",
        "client-secret-value",
        new_token.as_str(),
    ] {
        assert!(!debug.contains(secret), "{debug}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oidc_refresh_goes_through_the_clusters_proxy_with_the_clients_user_agent() {
    let new_token = jwt(now() + 3600);
    let reply = serde_json::json!({ "id_token": new_token });
    let issuer = issuer((200, reply.to_string())).await;
    let sim = SimServer::builder()
        .token(&new_token)
        .start()
        .await
        .unwrap();
    let proxy = TestProxy::start(Mode::Pass, Some("admin:proxy-pw")).await;
    let mut config = ClusterConfig::new(&sim.url()).unwrap();
    // A kubeconfig's proxy-url: every connection goes through it, loopback ones too.
    config.proxy = reflector::Proxy::Url(proxy.url_with_user_info("admin:proxy-pw"));
    config.user_agent = "oidc-test/1.0 (linux/amd64) informer-rs/0".into();
    config.credentials = Credentials::Oidc(oidc(&issuer, &jwt(now() - 60)));
    Client::new(&config).unwrap().get_bytes(PODS).await.unwrap();

    let issuer_addr = issuer.url.trim_start_matches("http://").to_string();
    let forwards = proxy.forwards();
    assert_eq!(
        forwards.iter().filter(|f| **f == issuer_addr).count(),
        2,
        "discovery and the token endpoint, both through the proxy: {forwards:?}"
    );
    assert!(forwards.contains(&sim.addr().to_string()), "{forwards:?}");
    // The proxy demanded its credentials of every request: the issuer's carried them too.
    assert!(proxy.seen.lock().authorizations.iter().all(Option::is_some));
    let requests = issuer.requests.lock().clone();
    assert_eq!(requests.len(), 2, "{requests:?}");
    for (head, _) in &requests {
        assert!(
            head.to_ascii_lowercase()
                .contains("user-agent: oidc-test/1.0 (linux/amd64) informer-rs/0"),
            "{head}"
        );
    }
}

#[tokio::test]
async fn a_401_to_an_unexpired_oidc_id_token_refreshes_it_once_and_sends_again() {
    let fresh = jwt(now() + 3600);
    let reply = serde_json::json!({ "id_token": fresh, "refresh_token": "refresh-token-two" });
    let idp = issuer((200, reply.to_string())).await;
    let sim = SimServer::builder().token(&fresh).start().await.unwrap();
    let mut config = ClusterConfig::new(&sim.url()).unwrap();
    // Valid by its `exp` for an hour, but revoked: the server refuses it.
    let revoked = format!("{}x", jwt(now() + 3600));
    config.credentials = Credentials::Oidc(oidc(&idp, &revoked));
    let client = Client::new(&config).unwrap();
    list_concurrently(&client, 3).await;
    client.get_bytes(PODS).await.unwrap();
    let requests = idp.requests.lock().clone();
    assert_eq!(
        requests.len(),
        2,
        "one discovery and one refresh for every 401 together: {requests:?}"
    );

    // A refreshed token the server refuses too: one refresh per request, then the 401.
    let refused = issuer((200, serde_json::json!({ "id_token": revoked }).to_string())).await;
    config.credentials = Credentials::Oidc(oidc(&refused, &revoked));
    let err = Client::new(&config)
        .unwrap()
        .get_bytes(PODS)
        .await
        .unwrap_err();
    assert_eq!(code(&err), Some(401), "{err}");
    assert_eq!(
        refused.requests.lock().len(),
        2,
        "one refresh, never a loop"
    );
}

#[tokio::test]
async fn a_valid_oidc_id_token_is_used_without_asking_the_issuer() {
    let token = jwt(now() + 3600);
    let issuer = issuer((500, "{}".into())).await;
    let sim = SimServer::builder().token(&token).start().await.unwrap();
    let mut config = ClusterConfig::new(&sim.url()).unwrap();
    config.credentials = Credentials::Oidc(oidc(&issuer, &token));
    Client::new(&config).unwrap().get_bytes(PODS).await.unwrap();
    assert!(issuer.requests.lock().is_empty());
}

#[tokio::test]
async fn a_refused_oidc_refresh_is_an_error_naming_the_reason_not_the_tokens() {
    let reply =
        serde_json::json!({"error": "invalid_grant", "error_description": "Token is not active"});
    let issuer = issuer((400, reply.to_string())).await;
    let mut config = ClusterConfig::new("http://127.0.0.1:9").unwrap();
    config.credentials = Credentials::Oidc(oidc(&issuer, &jwt(now() - 60)));
    let err = Client::new(&config)
        .unwrap()
        .get_bytes(PODS)
        .await
        .unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(matches!(err, ClientError::Auth(_)), "{text}");
    assert!(
        text.contains("HTTP 400") && text.contains("invalid_grant"),
        "{text}"
    );
    assert!(
        !text.contains("refresh-token-one") && !text.contains("client-secret-value"),
        "{text}"
    );

    // An answer without an id token is an error too, never a request without credentials.
    let issuer2 = issuer_with_no_id_token().await;
    config.credentials = Credentials::Oidc(oidc(&issuer2, &jwt(now() - 60)));
    let err = Client::new(&config)
        .unwrap()
        .get_bytes(PODS)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no id_token"), "{err}");
}

async fn issuer_with_no_id_token() -> TinyServer {
    issuer((200, r#"{"access_token":"secret-access"}"#.into())).await
}

#[tokio::test]
async fn impersonation_headers_reach_the_server() {
    let server = tiny_server(Arc::new(|_: &str, _: &str| {
        (
            200,
            r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}"#
                .into(),
        )
    }))
    .await;
    let mut config = ClusterConfig::new(&server.url).unwrap();
    config.impersonate = Some(Impersonate {
        user: "jane".into(),
        uid: Some("1234".into()),
        groups: vec!["developers".into(), "system:authenticated".into()],
        extra: [(
            "example.com/scopes".to_string(),
            vec!["view".into(), "edit".into()],
        )]
        .into_iter()
        .collect(),
    });
    Client::new(&config).unwrap().get_bytes(PODS).await.unwrap();
    let head = server.requests.lock()[0].0.to_ascii_lowercase();
    for line in [
        "impersonate-user: jane",
        "impersonate-uid: 1234",
        "impersonate-group: developers",
        "impersonate-group: system:authenticated",
        "impersonate-extra-example.com%2fscopes: view",
        "impersonate-extra-example.com%2fscopes: edit",
    ] {
        assert!(head.contains(line), "{line} not in {head}");
    }
}

/// A kubeconfig whose current user `jane` uses OIDC with an expired id token against `issuer`,
/// beside another user, another cluster and fields this library does not know.
fn oidc_kubeconfig(sim: &SimServer, issuer: &TinyServer, expired: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nx-vendor-extension: {{keep: me}}\npreferences: {{colors: true}}\n\
         current-context: jane@sim\n\
         clusters:\n- name: sim\n  cluster:\n    server: {server}\n- name: other\n  cluster:\n    server: https://other.example:6443\n\
         contexts:\n- name: jane@sim\n  context: {{cluster: sim, user: jane}}\n- name: bob@other\n  context: {{cluster: other, user: bob}}\n\
         users:\n- name: bob\n  user:\n    token: bob-token\n\
         - name: jane\n  user:\n    auth-provider:\n      name: oidc\n      config:\n        client-id: kube client\n        client-secret: client-secret-value\n        idp-issuer-url: {issuer}/realm\n        id-token: {expired}\n        refresh-token: refresh-token-one\n        x-custom: kept\n",
        server = sim.url(),
        issuer = issuer.url,
    )
}

fn yaml(path: &Path) -> serde_json::Value {
    serde_saphyr::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[tokio::test]
async fn a_refreshed_oidc_token_is_written_back_to_the_kubeconfig_keeping_the_rest() {
    use std::os::unix::fs::PermissionsExt as _;
    let new_token = jwt(now() + 3600);
    let reply = serde_json::json!({"id_token": new_token, "refresh_token": "refresh-token-two"});
    let issuer = issuer((200, reply.to_string())).await;
    let sim = SimServer::builder()
        .token(&new_token)
        .start()
        .await
        .unwrap();
    let dir = scratch("oidc-write-back");
    let path = dir.join("config");
    std::fs::write(&path, oidc_kubeconfig(&sim, &issuer, &jwt(now() - 60))).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let before = yaml(&path);

    let config = ClusterConfig::from_kubeconfig_files(std::slice::from_ref(&path), None).unwrap();
    let client = Client::new(&config).unwrap();
    client.get_bytes(PODS).await.unwrap();

    let after = yaml(&path);
    let jane = &after["users"][1]["user"]["auth-provider"]["config"];
    assert_eq!(jane["id-token"], new_token.as_str());
    assert_eq!(jane["refresh-token"], "refresh-token-two");
    // Everything else is as it was: the other user and cluster, the provider's other keys, the
    // fields this library does not know.
    let mut expected = before.clone();
    expected["users"][1]["user"]["auth-provider"]["config"]["id-token"] = new_token.as_str().into();
    expected["users"][1]["user"]["auth-provider"]["config"]["refresh-token"] =
        "refresh-token-two".into();
    assert_eq!(after, expected);
    assert_eq!(after["x-vendor-extension"]["keep"], "me");
    assert_eq!(jane["x-custom"], "kept");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the file keeps its permissions");
    let leftovers: Vec<_> = std::fs::read_dir(&*dir).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "no temporary file left: {leftovers:?}");

    // The next process starts from the new tokens: no refresh needed.
    let reloaded = ClusterConfig::from_kubeconfig_files(std::slice::from_ref(&path), None).unwrap();
    let refreshes = issuer.requests.lock().len();
    Client::new(&reloaded)
        .unwrap()
        .get_bytes(PODS)
        .await
        .unwrap();
    assert_eq!(issuer.requests.lock().len(), refreshes);
}

#[tokio::test]
async fn a_kubeconfig_that_cannot_be_written_back_is_logged_and_the_request_goes_on() {
    let new_token = jwt(now() + 3600);
    let reply = serde_json::json!({"id_token": new_token});
    let issuer = issuer((200, reply.to_string())).await;
    let sim = SimServer::builder()
        .token(&new_token)
        .start()
        .await
        .unwrap();
    let dir = scratch("oidc-write-back-fails");
    let path = dir.join("config");
    std::fs::write(&path, oidc_kubeconfig(&sim, &issuer, &jwt(now() - 60))).unwrap();
    let config = ClusterConfig::from_kubeconfig_files(std::slice::from_ref(&path), None).unwrap();
    // The user is gone from the file by the time the token is refreshed.
    std::fs::write(&path, "users: []\n").unwrap();

    let captured: Arc<Mutex<Vec<u8>>> = Arc::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer({
            let captured = captured.clone();
            move || CapturedWriter(captured.clone())
        })
        .finish();
    let _logging = tracing::subscriber::set_default(subscriber);
    let client = Client::new(&config).unwrap();
    client.get_bytes(PODS).await.unwrap();

    let logs = String::from_utf8(captured.lock().clone()).unwrap();
    assert!(
        logs.contains("could not write the refreshed OIDC tokens back"),
        "{logs}"
    );
    assert!(
        logs.contains("no longer has a user named \"jane\""),
        "{logs}"
    );
    assert!(logs.contains(&path.display().to_string()), "{logs}");
    assert!(!logs.contains(&new_token), "{logs}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "users: []\n");
}

struct CapturedWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for CapturedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
