//! With no certificate authority configured, the server is verified against the system's trust
//! store; with one, against that one alone. The system store is pointed at test roots through
//! `SSL_CERT_FILE`, which is why this file holds one test: the variable is process-wide.

use reflector::{Client, ClientError, ClusterConfig};
use sim_apiserver::SimServer;

const PODS: &str = "/api/v1/namespaces/default/pods";

fn unrelated_ca() -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.self_signed(&key).unwrap().pem()
}

fn is_unknown_issuer(err: &ClientError) -> bool {
    format!("{err:?}").contains("UnknownIssuer")
}

#[tokio::test]
async fn system_roots_are_used_only_when_no_certificate_authority_is_configured() {
    let sim = SimServer::builder().tls(true).start().await.unwrap();
    let dir = std::env::temp_dir().join(format!("system-roots-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sim_ca = dir.join("sim-ca.pem");
    let other_ca = dir.join("other-ca.pem");
    std::fs::write(&sim_ca, sim.ca_pem().unwrap()).unwrap();
    std::fs::write(&other_ca, unrelated_ca()).unwrap();
    let config = ClusterConfig::new(&sim.url()).unwrap();

    // A system store that does not hold the server's root: refused.
    std::env::set_var("SSL_CERT_FILE", &other_ca);
    let err = Client::new(&config)
        .unwrap()
        .get_bytes(PODS)
        .await
        .unwrap_err();
    assert!(is_unknown_issuer(&err), "{err:?}");

    // One that does: accepted, with no CA in the configuration.
    std::env::set_var("SSL_CERT_FILE", &sim_ca);
    Client::new(&config).unwrap().get_bytes(PODS).await.unwrap();

    // A configured CA is the only one trusted, whatever the system store holds.
    let mut pinned = config.clone();
    pinned.certificate_authority = Some(std::fs::read(&other_ca).unwrap());
    let err = Client::new(&pinned)
        .unwrap()
        .get_bytes(PODS)
        .await
        .unwrap_err();
    assert!(is_unknown_issuer(&err), "{err:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
