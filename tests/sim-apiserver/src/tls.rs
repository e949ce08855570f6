//! TLS material generated at start: a CA, a server certificate for 127.0.0.1/localhost, and a
//! client certificate (for optional client-certificate authentication).

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, SanType};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

/// Generated TLS material (PEM).
#[derive(Debug, Clone)]
pub struct TlsMaterial {
    /// The CA certificate.
    pub ca_pem: String,
    /// The server certificate.
    pub server_cert_pem: String,
    /// A client certificate signed by the CA (CN `sim-client`, O `system:masters`: with
    /// client-certificate authentication it may do anything).
    pub client_cert_pem: String,
    /// The client certificate's key (PKCS#8).
    pub client_key_pem: String,
    ca_der: Vec<u8>,
    server_der: Vec<u8>,
    server_key_der: Vec<u8>,
    /// Kept to mint client certificates for users later ([`TlsMaterial::client_cert`]).
    issuer: Arc<Issuer>,
}

/// The CA's certificate and key. Its `Debug` shows nothing: the key is a secret.
struct Issuer {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl std::fmt::Debug for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Issuer { .. }")
    }
}

/// Errors generating TLS material.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Certificate generation failed.
    #[error("certificate generation: {0}")]
    Rcgen(#[from] rcgen::Error),
    /// rustls rejected the configuration.
    #[error("rustls: {0}")]
    Rustls(#[from] rustls::Error),
    /// The client verifier could not be built.
    #[error("client verifier: {0}")]
    Verifier(String),
    /// [`TlsMaterial::client_cert`] was asked for more groups than a minted certificate
    /// carries (two: the certificate generator keeps one value per attribute type, and the
    /// second O is written under its numeric OID).
    #[error("a minted client certificate carries at most 2 groups, not {0}")]
    TooManyGroups(usize),
}

impl TlsMaterial {
    /// Generates a fresh CA, server and client certificate.
    pub fn generate() -> Result<Self, TlsError> {
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "sim-apiserver-ca");
        let ca = ca_params.self_signed(&ca_key)?;

        let server_key = KeyPair::generate()?;
        let mut sp = CertificateParams::new(vec!["localhost".to_string()])?;
        sp.subject_alt_names
            .push(SanType::IpAddress(std::net::IpAddr::V4(
                std::net::Ipv4Addr::LOCALHOST,
            )));
        sp.distinguished_name
            .push(DnType::CommonName, "sim-apiserver");
        let server = sp.signed_by(&server_key, &ca, &ca_key)?;

        let (client_cert_pem, client_key_pem) =
            sign_client(&ca, &ca_key, "sim-client", &["system:masters"])?;

        Ok(Self {
            ca_pem: ca.pem(),
            server_cert_pem: server.pem(),
            client_cert_pem,
            client_key_pem,
            ca_der: ca.der().to_vec(),
            server_der: server.der().to_vec(),
            server_key_der: server_key.serialize_der(),
            issuer: Arc::new(Issuer {
                cert: ca,
                key: ca_key,
            }),
        })
    }

    /// A fresh client certificate and its key (PEM, PKCS#8) signed by the CA, for user `user`
    /// (the subject's CN) in `groups` (one O each), as kube-apiserver reads a client
    /// certificate's identity.
    pub fn client_cert(&self, user: &str, groups: &[&str]) -> Result<(String, String), TlsError> {
        sign_client(&self.issuer.cert, &self.issuer.key, user, groups)
    }

    /// A rustls server configuration (ALPN `h2` only when `http2`), optionally verifying (but
    /// not requiring) client certificates signed by the CA.
    pub fn server_config(&self, http2: bool, client_auth: bool) -> Result<ServerConfig, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?;
        let builder = if client_auth {
            let mut roots = RootCertStore::empty();
            roots.add(CertificateDer::from(self.ca_der.clone()))?;
            let v = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()
                .map_err(|e| TlsError::Verifier(e.to_string()))?;
            builder.with_client_cert_verifier(v)
        } else {
            builder.with_no_client_auth()
        };
        let mut cfg = builder.with_single_cert(
            vec![CertificateDer::from(self.server_der.clone())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.server_key_der.clone())),
        )?;
        cfg.alpn_protocols = if http2 {
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        } else {
            vec![b"http/1.1".to_vec()]
        };
        Ok(cfg)
    }
}

fn sign_client(
    ca: &rcgen::Certificate,
    ca_key: &KeyPair,
    user: &str,
    groups: &[&str],
) -> Result<(String, String), TlsError> {
    if groups.len() > 2 {
        return Err(TlsError::TooManyGroups(groups.len()));
    }
    let key = KeyPair::generate()?;
    let mut p = CertificateParams::new(Vec::<String>::new())?;
    p.distinguished_name.push(DnType::CommonName, user);
    // One O per group, each its own RDN, as kube-apiserver reads them.
    let o_types = [
        DnType::OrganizationName,
        DnType::CustomDnType(vec![2, 5, 4, 10]),
    ];
    for (g, ty) in groups.iter().zip(o_types) {
        p.distinguished_name.push(ty, *g);
    }
    let cert = p.signed_by(&key, ca, ca_key)?;
    Ok((cert.pem(), key.serialize_pem()))
}
