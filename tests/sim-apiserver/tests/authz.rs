//! Users and authorization: tokens and client certificates name users, rules say what they
//! may do, denials are 403 in kube-apiserver's words, and the self reviews answer.

mod common;

use std::sync::Arc;

use bytes::Bytes;
use common::Client;
use http::{Method, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};
use sim_apiserver::{Rule, SimServer, Subject, User};

/// A server with `alice` (reads pods in `default`, everything on configmaps named `x`),
/// `bob` (no rules), `root` (system:masters) and group `ops` allowed to scale deployments.
async fn server(tls: bool) -> SimServer {
    SimServer::builder()
        .tls(tls)
        .client_cert_auth(tls)
        .user(User::new("alice").token("alice-token"))
        .user(User::new("bob").token("bob-token").group("ops"))
        .user(
            User::new("root")
                .token("root-token")
                .group("system:masters"),
        )
        .allow(
            Subject::user("alice"),
            Rule::new(&["get", "list", "watch"], &[""], &["pods"]).in_namespaces(&["default"]),
        )
        .allow(
            Subject::user("alice"),
            Rule::new(&["*"], &[""], &["configmaps"]).names(&["x"]),
        )
        .allow(
            Subject::group("ops"),
            Rule::new(
                &["get", "update", "patch"],
                &["apps"],
                &["deployments/scale"],
            ),
        )
        .start()
        .await
        .unwrap()
}

fn as_user(sim: &SimServer, token: &str) -> Client {
    Client::with(sim, false, Some(token.to_string()), false)
}

fn forbidden(r: &common::Resp, message: &str) {
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    assert_eq!(r.body["kind"], "Status");
    assert_eq!(r.body["reason"], "Forbidden");
    assert_eq!(r.body["code"], 403);
    assert_eq!(r.body["message"], message);
}

#[tokio::test]
async fn rules_allow_what_they_grant_and_deny_the_rest_in_kube_apiserver_words() {
    let sim = server(false).await;
    sim.create("pods", Some("default"), common::pod("p", json!({})))
        .unwrap();
    let alice = as_user(&sim, "alice-token");
    assert_eq!(
        alice.get("/api/v1/namespaces/default/pods").await.status,
        StatusCode::OK
    );
    assert_eq!(
        alice.get("/api/v1/namespaces/default/pods/p").await.status,
        StatusCode::OK
    );
    forbidden(
        &alice.get("/api/v1/namespaces/kube-system/pods").await,
        "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"kube-system\"",
    );
    forbidden(
        &alice.get("/api/v1/pods").await,
        "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" at the cluster scope",
    );
    forbidden(
        &alice
            .post("/api/v1/namespaces/default/pods", common::pod("q", json!({})))
            .await,
        "pods is forbidden: User \"alice\" cannot create resource \"pods\" in API group \"\" in the namespace \"default\"",
    );
    let r = alice
        .send(
            Method::PATCH,
            "/api/v1/namespaces/default/pods/p/status",
            Some((
                "application/merge-patch+json",
                json!({"status": {"phase": "Running"}}),
            )),
        )
        .await;
    forbidden(&r, "pods \"p\" is forbidden: User \"alice\" cannot patch resource \"pods/status\" in API group \"\" in the namespace \"default\"");
    assert_eq!(r.body["details"], json!({"name": "p", "kind": "pods"}));
    forbidden(
        &alice.get("/apis/apps/v1/namespaces/default/deployments").await,
        "deployments.apps is forbidden: User \"alice\" cannot list resource \"deployments\" in API group \"apps\" in the namespace \"default\"",
    );
    forbidden(
        &alice.get("/api/v1/namespaces/default").await,
        "namespaces \"default\" is forbidden: User \"alice\" cannot get resource \"namespaces\" in API group \"\" in the namespace \"default\"",
    );
    // Resource names: `x` only, and never a list.
    let cm = |n: &str| json!({"metadata": {"name": n}});
    sim.create("configmaps", Some("default"), cm("x")).unwrap();
    assert_eq!(
        alice
            .get("/api/v1/namespaces/default/configmaps/x")
            .await
            .status,
        StatusCode::OK
    );
    let r = alice
        .send(
            Method::DELETE,
            "/api/v1/namespaces/default/configmaps/x",
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        alice
            .get("/api/v1/namespaces/default/configmaps/y")
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        alice
            .get("/api/v1/namespaces/default/configmaps")
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    // A watch of one object by name is that object's, as in kube-apiserver.
    let one = "/api/v1/namespaces/default/configmaps?watch=true&fieldSelector=metadata.name%3Dx";
    let r = alice.raw(Method::GET, one, None).await;
    assert_eq!(r.status(), StatusCode::OK);
    let r = alice
        .get("/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dy")
        .await;
    forbidden(&r, "configmaps \"y\" is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\"");
    // Watches are their own verb.
    let bob = as_user(&sim, "bob-token");
    forbidden(
        &bob.get("/api/v1/namespaces/default/pods?watch=true").await,
        "pods is forbidden: User \"bob\" cannot watch resource \"pods\" in API group \"\" in the namespace \"default\"",
    );
    // Group rules and wildcard subresources.
    sim.create(
        "deployments.apps",
        Some("default"),
        json!({"metadata": {"name": "d"}, "spec": {"replicas": 1}}),
    )
    .unwrap();
    assert_eq!(
        bob.get("/apis/apps/v1/namespaces/default/deployments/d/scale")
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        bob.get("/apis/apps/v1/namespaces/default/deployments/d")
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    // Everyone authenticated reads discovery; system:masters does anything.
    assert_eq!(bob.get("/api/v1").await.status, StatusCode::OK);
    let root = as_user(&sim, "root-token");
    let r = root
        .post(
            "/api/v1/namespaces/default/pods",
            common::pod("r", json!({})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
}

#[tokio::test]
async fn requests_without_known_credentials_are_401() {
    let sim = server(false).await;
    for c in [
        Client::with(&sim, false, None, false),
        as_user(&sim, "nope"),
    ] {
        for path in ["/api/v1/namespaces/default/pods", "/api"] {
            let r = c.get(path).await;
            assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{path}");
            assert_eq!(r.body["reason"], "Unauthorized");
        }
    }
}

#[tokio::test]
#[allow(deprecated)]
async fn the_older_shorthands_keep_their_meaning() {
    let sim = SimServer::builder()
        .token("main")
        .user_token("replica-token", "replica")
        .readonly_token("viewer")
        .start()
        .await
        .unwrap();
    let pod = || common::pod("a", json!({}));
    let r = as_user(&sim, "main")
        .post("/api/v1/namespaces/default/pods", pod())
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    let r = as_user(&sim, "replica-token")
        .send(Method::DELETE, "/api/v1/namespaces/default/pods/a", None)
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let viewer = as_user(&sim, "viewer");
    assert_eq!(
        viewer.get("/apis/apps/v1/deployments").await.status,
        StatusCode::OK
    );
    forbidden(
        &viewer.post("/api/v1/namespaces/default/pods", pod()).await,
        "pods is forbidden: User \"viewer\" cannot create resource \"pods\" in API group \"\" in the namespace \"default\"",
    );
    // A server without a main token or users asks for no credentials.
    let open = SimServer::start().await.unwrap();
    let r = Client::new(&open)
        .post("/api/v1/namespaces/default/pods", pod())
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
}

async fn review(c: &Client, path: &str, kind: &str, spec: Value) -> Value {
    let api_version = path
        .trim_start_matches("/apis/")
        .rsplit_once('/')
        .unwrap()
        .0;
    let r = c
        .post(
            path,
            json!({"apiVersion": api_version, "kind": kind, "spec": spec}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["kind"], kind);
    r.body
}

const SSAR: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
const SSRR: &str = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews";
const SSR: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";

#[tokio::test]
async fn self_subject_access_reviews_say_what_a_request_would_get() {
    let sim = server(false).await;
    let alice = as_user(&sim, "alice-token");
    let can = |verb: &str, ns: &str, resource: &str| json!({"resourceAttributes": {"verb": verb, "namespace": ns, "resource": resource}});
    let r = review(
        &alice,
        SSAR,
        "SelfSubjectAccessReview",
        can("list", "default", "pods"),
    )
    .await;
    assert_eq!(r["status"]["allowed"], true);
    assert_eq!(r["spec"]["resourceAttributes"]["verb"], "list");
    let r = review(
        &alice,
        SSAR,
        "SelfSubjectAccessReview",
        can("delete", "default", "pods"),
    )
    .await;
    assert_eq!(r["status"]["allowed"], false);
    let r = review(
        &alice,
        SSAR,
        "SelfSubjectAccessReview",
        can("list", "other", "pods"),
    )
    .await;
    assert_eq!(r["status"]["allowed"], false);
    let r = review(
        &alice,
        SSAR,
        "SelfSubjectAccessReview",
        json!({"nonResourceAttributes": {"verb": "get", "path": "/apis"}}),
    )
    .await;
    assert_eq!(r["status"]["allowed"], true);
    let root = as_user(&sim, "root-token");
    let r = review(
        &root,
        SSAR,
        "SelfSubjectAccessReview",
        can("delete", "x", "nodes"),
    )
    .await;
    assert_eq!(r["status"]["allowed"], true);
    // Neither attribute set: 422.
    let r = alice
        .post(SSAR, json!({"kind": "SelfSubjectAccessReview", "spec": {}}))
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(r.body["reason"], "Invalid");
    // Not a stored resource: no list.
    assert_eq!(alice.get(SSAR).await.status, StatusCode::METHOD_NOT_ALLOWED);
    // The rules in a namespace, and who am I.
    let r = review(
        &alice,
        SSRR,
        "SelfSubjectRulesReview",
        json!({"namespace": "default"}),
    )
    .await;
    let rules = r["status"]["resourceRules"].as_array().unwrap();
    assert!(
        rules.iter().any(|x| x["resources"] == json!(["pods"])),
        "{r}"
    );
    let r = review(
        &alice,
        SSRR,
        "SelfSubjectRulesReview",
        json!({"namespace": "other"}),
    )
    .await;
    let rules = r["status"]["resourceRules"].as_array().unwrap();
    assert!(
        !rules.iter().any(|x| x["resources"] == json!(["pods"])),
        "{r}"
    );
    let r = review(
        &as_user(&sim, "bob-token"),
        SSR,
        "SelfSubjectReview",
        json!({}),
    )
    .await;
    assert_eq!(
        r["status"]["userInfo"],
        json!({"username": "bob", "groups": ["ops", "system:authenticated"]})
    );
}

#[tokio::test]
async fn discovery_lists_the_reviews_short_names_and_categories() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let v1 = c.get("/api/v1").await.body;
    let find = |list: &Value, name: &str| {
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} not in {list}"))
    };
    assert_eq!(find(&v1, "pods")["shortNames"], json!(["po"]));
    assert_eq!(find(&v1, "pods")["categories"], json!(["all"]));
    assert_eq!(find(&v1, "configmaps")["shortNames"], json!(["cm"]));
    assert!(find(&v1, "configmaps").get("categories").is_none());
    assert_eq!(find(&v1, "namespaces")["shortNames"], json!(["ns"]));
    assert_eq!(find(&v1, "events")["shortNames"], json!(["ev"]));
    let apps = c.get("/apis/apps/v1").await.body;
    assert_eq!(find(&apps, "deployments")["shortNames"], json!(["deploy"]));
    assert_eq!(find(&apps, "deployments")["categories"], json!(["all"]));
    let authz = c.get("/apis/authorization.k8s.io/v1").await.body;
    let ssar = find(&authz, "selfsubjectaccessreviews");
    assert_eq!(ssar["verbs"], json!(["create"]));
    assert_eq!(ssar["namespaced"], false);
    find(&authz, "selfsubjectrulesreviews");
    let authn = c.get("/apis/authentication.k8s.io/v1").await.body;
    find(&authn, "selfsubjectreviews");
    let groups = c.get("/apis").await.body.to_string();
    assert!(groups.contains("authorization.k8s.io") && groups.contains("authentication.k8s.io"));
}

/// A client presenting `cert`/`key` to `sim` (TLS).
async fn get_with_cert(sim: &SimServer, cert: &str, key: &str, path: &str) -> (StatusCode, Value) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut sim.ca_pem().unwrap().as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let certs = rustls_pemfile::certs(&mut cert.as_bytes())
        .map(Result::unwrap)
        .collect();
    let key = rustls_pemfile::private_key(&mut key.as_bytes())
        .unwrap()
        .unwrap();
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(certs, key)
        .unwrap();
    let conn = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(cfg)
        .https_only()
        .enable_http1()
        .build();
    let client: HyperClient<_, Full<Bytes>> =
        HyperClient::builder(TokioExecutor::new()).build(conn);
    let req = http::Request::get(format!("{}{path}", sim.url()))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let r = client.request(req).await.unwrap();
    let status = r.status();
    let body = r.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&body).unwrap())
}

#[tokio::test]
async fn client_certificates_name_the_user_and_its_groups() {
    let sim = server(true).await;
    let (cert, key) = sim.client_cert("alice", &[]).unwrap();
    let (s, _) = get_with_cert(&sim, &cert, &key, "/api/v1/namespaces/default/pods").await;
    assert_eq!(s, StatusCode::OK);
    let (s, body) = get_with_cert(&sim, &cert, &key, "/api/v1/namespaces/default/configmaps").await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert_eq!(body["message"], "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\"");
    // Groups come from the O entries; the generated client certificate is in system:masters.
    let (cert, key) = sim
        .client_cert("carol", &["ops", "system:masters"])
        .unwrap();
    let (s, _) = get_with_cert(&sim, &cert, &key, "/apis/apps/v1/deployments").await;
    assert_eq!(s, StatusCode::OK);
    let m = sim.tls_material().unwrap();
    let (s, _) = get_with_cert(&sim, &m.client_cert_pem, &m.client_key_pem, "/api/v1/pods").await;
    assert_eq!(s, StatusCode::OK);
    assert!(sim.client_cert("dave", &["a", "b", "c"]).is_err());
    assert!(matches!(
        server(false).await.client_cert("x", &[]),
        Err(sim_apiserver::SimError::NotTls)
    ));
}

#[tokio::test]
async fn the_binary_serves_users_from_flags_and_files_with_rules_and_prints_no_token() {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let dir = std::env::temp_dir().join(format!("sim-authz-binary-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let users = dir.join("users.csv");
    std::fs::write(
        &users,
        "# token,user,uid,groups\nfile-secret,erin,1,\"dev,qa\"\n",
    )
    .unwrap();
    let rules = dir.join("rules");
    std::fs::write(
        &rules,
        "# dev reads configmaps\ngroup=dev;verbs=get,list;resources=configmaps\n",
    )
    .unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_sim-apiserver"))
        .args([
            "--user",
            "alice:alice-secret",
            "--user",
            "root:root-secret:system:masters",
        ])
        .arg("--users-file")
        .arg(&users)
        .args([
            "--rule",
            "user=alice;verbs=get,list,watch;resources=pods;namespaces=default",
        ])
        .arg("--rules-file")
        .arg(&rules)
        .stdout(std::process::Stdio::piped())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut out = Vec::new();
    for _ in 0..4 {
        let l = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
            .await
            .expect("binary output timed out")
            .unwrap()
            .expect("binary exited early");
        out.push(l);
    }
    assert_eq!(out[1..], ["user: alice", "user: root", "user: erin"]);
    assert!(!out.join("\n").contains("secret"), "{out:?}");
    let url = out[0].strip_prefix("url: ").unwrap();
    let c = Client::at(url);
    let call = |method: Method, token: &'static str, path: &'static str, body: Option<Value>| {
        let c = c.clone();
        async move {
            let auth = format!("Bearer {token}");
            let body = body.map(|b| ("application/json", b));
            c.raw_with(method, path, body, &[("authorization", auth.as_str())])
                .await
                .status()
        }
    };
    let get = |token, path| call(Method::GET, token, path, None);
    assert_eq!(
        get("alice-secret", "/api/v1/namespaces/default/pods").await,
        StatusCode::OK
    );
    assert_eq!(
        get("alice-secret", "/api/v1/namespaces/default/configmaps").await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        get("file-secret", "/api/v1/namespaces/kube-system/configmaps").await,
        StatusCode::OK
    );
    assert_eq!(
        get("file-secret", "/api/v1/namespaces/default/pods").await,
        StatusCode::FORBIDDEN
    );
    let pod = Some(common::pod("p", json!({})));
    let created = call(
        Method::POST,
        "root-secret",
        "/api/v1/namespaces/default/pods",
        pod,
    )
    .await;
    assert_eq!(created, StatusCode::CREATED);
    assert_eq!(
        Client::at(url).get("/api/v1/pods").await.status,
        StatusCode::UNAUTHORIZED
    );
    child.kill().await.unwrap();
    // A bad rule stops it before it serves, naming the problem.
    let o = tokio::process::Command::new(env!("CARGO_BIN_EXE_sim-apiserver"))
        .args(["--rule", "user=alice;verbs=get"])
        .output()
        .await
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("needs verbs= and resources="));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[allow(deprecated)]
fn the_builders_debug_shows_no_token() {
    let b = SimServer::builder()
        .token("main-secret")
        .user_token("user-secret", "replica")
        .readonly_token("viewer-secret")
        .user(User::new("alice").token("alice-secret"));
    let text = format!("{b:?}");
    assert!(!text.contains("secret"), "{text}");
    assert!(text.contains("alice") && text.contains("replica"), "{text}");
}
