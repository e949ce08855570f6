//! Transport rules: HTTPS with a generated CA, bearer tokens, HTTP/2, client certificates.

mod common;

use common::Client;
use http::{StatusCode, Version};
use sim_apiserver::SimServer;

#[tokio::test]
async fn https_requires_the_bearer_token() {
    let sim = SimServer::builder()
        .tls(true)
        .token("secret")
        .start()
        .await
        .unwrap();
    assert!(sim.url().starts_with("https://127.0.0.1:"));
    assert!(sim.ca_pem().unwrap().contains("BEGIN CERTIFICATE"));
    assert!(sim.ca_path().unwrap().exists());
    let ok = Client::new(&sim).get("/api/v1/pods").await;
    assert_eq!(ok.status, StatusCode::OK);
    for token in [None, Some("wrong".to_string())] {
        let r = Client::with(&sim, false, token, false)
            .get("/api/v1/pods")
            .await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        assert_eq!(r.body["reason"], "Unauthorized");
        assert_eq!(r.body["code"], 401);
    }
}

#[tokio::test]
async fn http2_is_negotiated_by_alpn_over_tls_and_by_prior_knowledge_over_http() {
    let tls = SimServer::builder().tls(true).start().await.unwrap();
    let r = Client::with(&tls, true, None, false).get("/version").await;
    assert_eq!(r.version, Version::HTTP_2);
    let r = Client::with(&tls, false, None, false).get("/version").await;
    assert_eq!(r.version, Version::HTTP_11);
    let plain = SimServer::start().await.unwrap();
    let r = Client::with(&plain, true, None, false)
        .get("/version")
        .await;
    assert_eq!(r.version, Version::HTTP_2);
}

#[tokio::test]
async fn watches_stream_over_http2() {
    let sim = SimServer::builder().tls(true).start().await.unwrap();
    let c = Client::with(&sim, true, None, false);
    let mut w = c.watch("/api/v1/pods?watch=true").await;
    sim.create("pods", None, common::pod("a", serde_json::json!({})))
        .unwrap();
    assert_eq!(common::name(&w.expect("ADDED").await), "a");
}

#[tokio::test]
async fn a_client_certificate_signed_by_the_ca_authenticates_without_a_token() {
    let sim = SimServer::builder()
        .tls(true)
        .token("secret")
        .client_cert_auth(true)
        .start()
        .await
        .unwrap();
    let r = Client::with(&sim, false, None, true)
        .get("/api/v1/pods")
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let r = Client::with(&sim, false, None, false)
        .get("/api/v1/pods")
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn unknown_paths_and_methods_answer_as_kube_apiserver() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    // Outside the API, kube-apiserver's mux answers in plain text; inside, with a Status.
    let r = c.get("/no/such/path").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.headers["content-type"], "text/plain; charset=utf-8");
    let r = c.get("/api/v1/nosuchresources").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.body["kind"], "Status");
    let r = c.send(http::Method::POST, "/version", None).await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    let r = c
        .send(
            http::Method::POST,
            "/api/v1/namespaces/default/pods",
            Some(("application/json", serde_json::json!("x"))),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_read_only_token_may_read_but_writes_are_403_forbidden() {
    let sim = SimServer::builder()
        .token("admin")
        .user(sim_apiserver::User::new("viewer").token("viewer"))
        .allow(
            sim_apiserver::Subject::user("viewer"),
            sim_apiserver::Rule::read_only(),
        )
        .start()
        .await
        .unwrap();
    let c = Client::with(&sim, false, Some("viewer".into()), false);
    assert_eq!(c.get("/api/v1/pods").await.status, StatusCode::OK);
    let r = c
        .post(
            "/api/v1/namespaces/default/pods",
            common::pod("a", serde_json::json!({})),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(r.body["reason"], "Forbidden");
    assert_eq!(
        r.body["message"],
        "pods is forbidden: User \"viewer\" cannot create resource \"pods\" in API group \"\" in the namespace \"default\""
    );
}
