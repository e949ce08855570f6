//! Scenario 5: the same informer workload over HTTPS with a bearer token (HTTP/1.1 only), HTTPS
//! with a client certificate (HTTP/2 by ALPN) and plain-text HTTP/2 with prior knowledge, each
//! with pods and configmaps informers under churn and cut, re-chunked watches; plus the negative
//! checks that an unauthenticated client is refused.

use std::time::Duration;

use sim_apiserver::SimServer;
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::{CompactObject, DynamicObject};
use workqueue::shared_informer::reflector::{Client, ClusterConfig, Credentials};

use crate::check::{converge, Failure, Outcome, Recorder};
use crate::harness::{churn, config_for, configmaps, fast_backoff, finish_all, pods, seed, synced};
use crate::{ensure, Opts};

#[derive(Debug, Clone, Copy)]
enum Transport {
    HttpsToken,
    HttpsClientCert,
    H2c,
}

async fn negotiated(config: &ClusterConfig) -> Result<http::Version, Failure> {
    let resp = Client::new(config)?.send("/api/v1/pods?limit=1").await?;
    ensure!(
        resp.status().is_success(),
        "GET /api/v1/pods answered {}",
        resp.status()
    );
    Ok(resp.version())
}

async fn one(transport: Transport) -> Outcome {
    let builder = SimServer::builder().token("integration-token");
    let sim = match transport {
        Transport::HttpsToken => builder.tls(true).http2(false),
        Transport::HttpsClientCert => builder.tls(true).client_cert_auth(true),
        Transport::H2c => builder,
    }
    .start()
    .await?;
    let mut config = config_for(&sim)?;
    let mut anonymous = config.clone();
    anonymous.credentials = Credentials::None;
    match transport {
        Transport::HttpsToken => {}
        Transport::HttpsClientCert => {
            let tls = sim
                .tls_material()
                .ok_or_else(|| Failure("a TLS simulator without TLS material".into()))?;
            config.credentials = Credentials::None;
            config.client_certificate = Some(tls.client_cert_pem.as_bytes().to_vec());
            config.client_key = Some(tls.client_key_pem.as_bytes().to_vec().into());
        }
        Transport::H2c => config.http2_prior_knowledge = true,
    }
    ensure!(
        Client::new(&anonymous)?
            .get_bytes("/api/v1/pods")
            .await
            .is_err(),
        "a client with neither token nor certificate was served"
    );
    let version = negotiated(&config).await?;
    let want = match transport {
        Transport::HttpsToken => http::Version::HTTP_11,
        _ => http::Version::HTTP_2,
    };
    ensure!(version == want, "negotiated {version:?}, want {want:?}");

    seed(&sim, "pods", "tp", 2, 300, 200)?;
    seed(&sim, "configmaps", "tp", 2, 100, 200)?;
    let factory = crate::harness::factory(config).reflector_options(fast_backoff(false));
    let pod_informer = factory.informer::<CompactObject>(pods())?;
    let cm_informer = factory.informer::<DynamicObject>(configmaps())?;
    let (pr, pod_seq) = Recorder::new();
    let (cr, cm_seq) = Recorder::new();
    pod_informer.add_event_handler(pr)?;
    cm_informer.add_event_handler(cr)?;
    sim.faults().end_watches_after(300).rechunk(13);
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    factory.start(&cancel);
    synced(&pod_informer, Duration::from_secs(30)).await?;
    synced(&cm_informer, Duration::from_secs(30)).await?;
    let churns = vec![
        churn(&sim, "pods", "tp-0", 200, 200.0, 5.0, 200),
        churn(&sim, "configmaps", "tp-1", 100, 100.0, 5.0, 200),
    ];
    let ops = finish_all(churns).await;
    let pods_detail = converge(
        &sim,
        "pods",
        pod_informer.indexer(),
        &[("pods", &pod_seq)],
        Duration::from_secs(30),
    )
    .await?;
    let cms_detail = converge(
        &sim,
        "configmaps",
        cm_informer.indexer(),
        &[("configmaps", &cm_seq)],
        Duration::from_secs(30),
    )
    .await?;
    let c = sim.counters();
    cancel.cancel();
    factory.shutdown().await;
    Ok(format!(
        "{version:?}, {ops} ops, {} watches; {pods_detail}; {cms_detail}",
        c.watches
    ))
}

/// Runs the three transports; the detail lists each.
pub async fn transports(_: Opts) -> Outcome {
    let mut details = Vec::new();
    for t in [
        Transport::HttpsToken,
        Transport::HttpsClientCert,
        Transport::H2c,
    ] {
        let detail = one(t).await.map_err(|f| Failure(format!("{t:?}: {f}")))?;
        details.push(format!("[{t:?}: {detail}]"));
    }
    Ok(details.join(" "))
}
