//! `Proxy::FromEnvironment` end to end: `HTTPS_PROXY` and `NO_PROXY` as the process environment
//! holds them, read when the client is built.
//!
//! A binary of its own with a single test: it sets process environment variables, which no
//! other test may be reading meanwhile. The environment's proxy never applies to loopback
//! addresses, so the server is named `kubernetes.test` and the test proxy resolves that name to
//! the simulator's address; a client that went direct could not resolve it at all.

use std::time::Duration;

use reflector::{Client, ClusterConfig, Proxy};
use sim_apiserver::SimServer;

mod test_proxy;
use test_proxy::{Mode, TestProxy};

const PODS: &str = "/api/v1/namespaces/default/pods";

#[test]
fn https_proxy_from_the_environment_carries_the_connection_unless_no_proxy_matches() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let sim = SimServer::builder().tls(true).start().await.unwrap();
        let proxy = TestProxy::start(Mode::Pass, None).await;
        let name = format!("kubernetes.test:{}", sim.addr().port());
        proxy.alias(&name, sim.addr());
        // Lower-case variables lose to upper-case ones, and an empty one counts as unset (PX2).
        std::env::set_var("HTTPS_PROXY", format!("127.0.0.1:{}", proxy.addr.port()));
        std::env::set_var("https_proxy", "http://127.0.0.1:9");
        std::env::set_var("NO_PROXY", "example.com,10.0.0.0/8");

        let mut config = ClusterConfig::new(&format!("https://{name}")).unwrap();
        assert_eq!(config.proxy, Proxy::FromEnvironment, "the default");
        config.certificate_authority = Some(sim.ca_pem().unwrap().as_bytes().to_vec());
        config.tls_server_name = Some("localhost".into());
        let client = Client::new(&config).unwrap();
        client.get_bytes(PODS).await.unwrap();
        assert_eq!(proxy.tunnels(), vec![name.clone()]);

        // The environment is read when a client is built: NO_PROXY matching the server now
        // sends the next client direct, where the name does not resolve.
        std::env::set_var("NO_PROXY", ".test");
        let direct = Client::new(&config).unwrap();
        let err = tokio::time::timeout(Duration::from_secs(60), direct.get_bytes(PODS))
            .await
            .expect("an error, not a hang")
            .unwrap_err();
        assert!(err.to_string().contains("kubernetes.test"), "{err}");
        assert_eq!(proxy.tunnels().len(), 1, "the proxy saw nothing more");
        // The first client still goes through the proxy.
        client.get_bytes(PODS).await.unwrap();
    });
}
