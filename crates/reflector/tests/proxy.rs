//! The client through an HTTP proxy, end to end: the small proxy of `tests/test_proxy` (tunnels
//! by `CONNECT`, forwards absolute-form requests, can refuse or demand credentials) between the
//! real `Client` and the simulated API server, over each protocol the client speaks.
//!
//! Every test names the proxy with `Proxy::Url`: the environment's proxy never applies to
//! loopback addresses, which is where these servers listen. Waiting is event-driven (frames of a
//! watch, answers of requests) with generous deadlines; the one test about a silent proxy runs on
//! a paused clock.

use std::time::Duration;

use base64::Engine as _;
use http_body_util::BodyExt as _;
use reflector::{Client, ClientError, ClusterConfig, Proxy};
use serde_json::json;
use sim_apiserver::SimServer;

mod test_proxy;
use test_proxy::{Mode, TestProxy};

fn config_for(sim: &SimServer, proxy: url::Url) -> ClusterConfig {
    let mut c = ClusterConfig::new(&sim.url()).unwrap();
    if let Some(ca) = sim.ca_pem() {
        c.certificate_authority = Some(ca.as_bytes().to_vec());
    }
    c.proxy = Proxy::Url(proxy);
    c
}

const PODS: &str = "/api/v1/namespaces/default/pods";

/// A list, then a watch from the list's resource version that must deliver a pod created after
/// it started.
async fn list_then_watch(client: &Client, sim: &SimServer, name: &str) {
    sim.create(
        "pods",
        Some("default"),
        json!({"metadata": {"name": format!("{name}-before")}}),
    )
    .unwrap();
    let list = client
        .get_bytes(PODS)
        .await
        .unwrap_or_else(|e| panic!("{name}: list: {e}"));
    let list: serde_json::Value = serde_json::from_slice(&list).unwrap();
    assert!(
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["metadata"]["name"] == format!("{name}-before")),
        "{name}: {list}"
    );
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap();
    let mut body = client
        .watch(
            &format!("{PODS}?watch=true&resourceVersion={rv}"),
            "application/json",
        )
        .await
        .unwrap_or_else(|e| panic!("{name}: watch: {e}"))
        .body;
    let after = format!("{name}-after");
    sim.create(
        "pods",
        Some("default"),
        json!({"metadata": {"name": after}}),
    )
    .unwrap();
    let mut text = Vec::new();
    while !String::from_utf8_lossy(&text).contains(&after) {
        let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
            .await
            .unwrap_or_else(|_| panic!("{name}: no event through the proxy"))
            .expect("the watch stays open")
            .unwrap();
        text.extend_from_slice(&frame.into_data().unwrap_or_default());
    }
    assert!(String::from_utf8_lossy(&text).contains(r#""type":"ADDED""#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_and_watches_tunnel_through_connect_to_tls_servers_over_http2_and_http1() {
    let h2 = SimServer::builder().tls(true).start().await.unwrap();
    let h1 = SimServer::builder()
        .tls(true)
        .http2(false)
        .start()
        .await
        .unwrap();
    for (name, sim, version) in [
        ("h2", &h2, http::Version::HTTP_2),
        ("h1", &h1, http::Version::HTTP_11),
    ] {
        let proxy = TestProxy::start(Mode::Pass, None).await;
        let client = Client::new(&config_for(sim, proxy.url())).unwrap();
        let resp = client.send(PODS).await.unwrap();
        assert_eq!(resp.version(), version, "{name}: ALPN inside the tunnel");
        list_then_watch(&client, sim, name).await;
        let tunnels = proxy.tunnels();
        assert!(!tunnels.is_empty(), "{name}");
        assert!(
            tunnels.iter().all(|t| *t == sim.addr().to_string()),
            "{name}: {tunnels:?}"
        );
        assert!(proxy.forwards().is_empty(), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_is_forwarded_in_absolute_form_and_h2c_is_tunnelled() {
    let sim = SimServer::start().await.unwrap();
    let proxy = TestProxy::start(Mode::Pass, None).await;
    let client = Client::new(&config_for(&sim, proxy.url())).unwrap();
    list_then_watch(&client, &sim, "forwarded").await;
    let forwards = proxy.forwards();
    // The list on a pooled connection, the watch on one of its own.
    assert!(forwards.len() >= 2, "{forwards:?}");
    assert!(forwards.iter().all(|f| *f == sim.addr().to_string()));
    assert!(proxy.tunnels().is_empty());

    // A forwarding proxy cannot carry HTTP/2 with prior knowledge: that goes through a tunnel.
    let proxy = TestProxy::start(Mode::Pass, None).await;
    let mut config = config_for(&sim, proxy.url());
    config.http2_prior_knowledge = true;
    let client = Client::new(&config).unwrap();
    assert_eq!(
        client.send(PODS).await.unwrap().version(),
        http::Version::HTTP_2
    );
    list_then_watch(&client, &sim, "h2c").await;
    assert_eq!(proxy.tunnels(), vec![sim.addr().to_string()]);
    assert!(proxy.forwards().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusing_proxy_is_a_clear_error_for_lists_and_watches() {
    let tls = SimServer::builder().tls(true).start().await.unwrap();
    let proxy = TestProxy::start(Mode::Refuse, None).await;
    let client = Client::new(&config_for(&tls, proxy.url())).unwrap();
    let within = |fut| tokio::time::timeout(Duration::from_secs(10), fut);
    let err = within(client.get_bytes(PODS))
        .await
        .expect("an error, not a hang")
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, ClientError::Transport { .. }), "{err:?}");
    assert!(
        text.contains(&format!("proxy http://{}/", proxy.addr)),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "refused CONNECT {}: HTTP/1.1 403 Forbidden",
            tls.addr()
        )),
        "{text}"
    );
    let err = tokio::time::timeout(
        Duration::from_secs(10),
        client.watch(&format!("{PODS}?watch=true"), "application/json"),
    )
    .await
    .expect("an error, not a hang")
    .unwrap_err();
    assert!(err.to_string().contains("403 Forbidden"), "{err}");

    // Forwarding: the proxy's 403 is the answer to the request itself.
    let plain = SimServer::start().await.unwrap();
    let client = Client::new(&config_for(&plain, proxy.url())).unwrap();
    let err = within(client.get_bytes(PODS)).await.unwrap().unwrap_err();
    assert_eq!(err.status().map(|s| s.code), Some(403), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_answering_garbage_or_an_endless_head_is_an_error_not_a_panic() {
    let tls = SimServer::builder().tls(true).start().await.unwrap();
    for (mode, words) in [
        (Mode::Garbage, "something other than HTTP/1.x"),
        (Mode::Flood, "exceeds 64 KiB"),
    ] {
        let proxy = TestProxy::start(mode, None).await;
        let client = Client::new(&config_for(&tls, proxy.url())).unwrap();
        let err = tokio::time::timeout(Duration::from_secs(10), client.get_bytes(PODS))
            .await
            .expect("an error, not a hang")
            .unwrap_err();
        assert!(err.to_string().contains(words), "{mode:?}: {err}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_silent_proxy_fails_the_connection_after_the_connect_timeout() {
    let proxy = TestProxy::start(Mode::Silent, None).await;
    // No server is needed: the proxy never gets that far.
    let mut config = ClusterConfig::new("https://10.255.0.1:6443").unwrap();
    config.proxy = Proxy::Url(proxy.url());
    config.connect_timeout = Some(Duration::from_secs(5));
    let client = Client::new(&config).unwrap();
    let started = tokio::time::Instant::now();
    let err = client.get_bytes(PODS).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("no answer to CONNECT 10.255.0.1:6443 within 5s"),
        "{err}"
    );
    assert_eq!(started.elapsed().as_secs(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_info_in_the_proxy_url_authenticates_and_its_password_never_shows() {
    let password = "pa:ss@w0rd";
    let user_info = "admin:pa%3Ass%40w0rd";
    let tls = SimServer::builder().tls(true).start().await.unwrap();
    let plain = SimServer::start().await.unwrap();
    let proxy = TestProxy::start(Mode::Pass, Some(&format!("admin:{password}"))).await;

    // Through a tunnel (the credentials go with CONNECT) and forwarded (with every request).
    for (name, sim) in [("tunnel", &tls), ("forward", &plain)] {
        let config = config_for(sim, proxy.url_with_user_info(user_info));
        let debug = format!("{config:?}");
        assert!(!debug.contains("w0rd"), "{debug}");
        assert!(debug.contains("admin:[REDACTED]@127.0.0.1"), "{debug}");
        let client = Client::new(&config).unwrap();
        list_then_watch(&client, sim, name).await;
    }
    assert_eq!(proxy.tunnels().len(), 1, "one TLS connection, HTTP/2");
    assert!(proxy.forwards().len() >= 2);
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("admin:{password}"))
    );
    assert!(proxy
        .seen
        .lock()
        .authorizations
        .iter()
        .all(|a| a.as_deref() == Some(expected.as_str())));

    // A wrong password: the proxy's 407, and still no password in the error.
    for sim in [&tls, &plain] {
        let config = config_for(sim, proxy.url_with_user_info("admin:wr0ng-s3cret"));
        let err = Client::new(&config)
            .unwrap()
            .get_bytes(PODS)
            .await
            .unwrap_err();
        let text = format!("{err} {err:?}");
        assert!(text.contains("407"), "{text}");
        assert!(!text.contains("s3cret"), "{text}");
    }
}

#[test]
fn the_configuration_debug_never_shows_the_proxy_password() {
    let mut config = ClusterConfig::new("https://10.0.0.1:6443").unwrap();
    config.proxy = Proxy::Url("http://me:hunter2@proxy.corp:3128".parse().unwrap());
    let debug = format!("{config:?}");
    assert!(!debug.contains("hunter2"), "{debug}");
    assert!(
        debug.contains(r#"proxy: Url("http://me:[REDACTED]@proxy.corp:3128/")"#),
        "{debug}"
    );
    config.proxy = Proxy::FromEnvironment;
    assert!(format!("{config:?}").contains("proxy: FromEnvironment"));
}

#[test]
fn unusable_proxy_urls_fail_the_client_naming_the_setting_without_the_password() {
    for (url, words) in [
        ("socks5://me:hunter2@proxy.corp:1080", "SOCKS5 is not"),
        ("https://me:hunter2@proxy.corp", "https:// proxies"),
    ] {
        let mut config = ClusterConfig::new("https://10.0.0.1:6443").unwrap();
        config.proxy = Proxy::Url(url.parse().unwrap());
        let err = Client::new(&config).unwrap_err();
        let text = format!("{err} {err:?}");
        assert!(text.contains("proxy-url") && text.contains(words), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
    }
}
