//! TLS for the client: rustls (ring) with the kubeconfig's certificate authority, client
//! certificate and key, or no verification at all when `insecure-skip-tls-verify` says so.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use secrecy::ExposeSecret as _;

use super::config::ClusterConfig;
use super::error::ConfigError;

/// A TLS configuration error naming what was being configured.
pub(crate) fn tls_err(what: &str, e: impl std::fmt::Display) -> ConfigError {
    ConfigError::Tls(format!("{what}: {e}"))
}

/// The rustls client configuration for `config`: its CA alone when one is given (an empty store
/// otherwise), its client certificate and key, or no verification with `insecure_skip_tls_verify`.
pub(crate) fn tls_config(config: &ClusterConfig) -> Result<rustls::ClientConfig, ConfigError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_err("protocol versions", e))?;
    if config.insecure_skip_tls_verify && config.certificate_authority.is_some() {
        return Err(ConfigError::Tls(
            "insecure_skip_tls_verify cannot be set together with a certificate authority".into(),
        ));
    }
    let builder = if config.insecure_skip_tls_verify {
        tracing::warn!(
            server = %config.server,
            "insecure-skip-tls-verify is set: the server's certificate is NOT verified"
        );
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
    } else {
        let mut roots = rustls::RootCertStore::empty();
        if let Some(ca) = &config.certificate_authority {
            for cert in rustls_pemfile::certs(&mut ca.as_slice()) {
                let cert = cert.map_err(|e| tls_err("certificate-authority", e))?;
                roots
                    .add(cert)
                    .map_err(|e| tls_err("certificate-authority", e))?;
            }
            if roots.is_empty() {
                return Err(ConfigError::Tls(
                    "certificate-authority: no certificate in the PEM data".into(),
                ));
            }
        }
        builder.with_root_certificates(roots)
    };
    match (&config.client_certificate, &config.client_key) {
        (Some(cert), Some(key)) => {
            let certs: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut cert.as_slice())
                .collect::<Result<_, _>>()
                .map_err(|e| tls_err("client-certificate", e))?;
            if certs.is_empty() {
                return Err(ConfigError::Tls(
                    "client-certificate: no certificate in the PEM data".into(),
                ));
            }
            let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut key.expose_secret())
                .map_err(|e| tls_err("client-key", e))?
                .ok_or_else(|| {
                    ConfigError::Tls("client-key: no private key in the PEM data".into())
                })?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| tls_err("client certificate and key", e))
        }
        (None, None) => Ok(builder.with_no_client_auth()),
        _ => Err(ConfigError::Tls(
            "client-certificate and client-key must be given together".into(),
        )),
    }
}

/// Accepts any server certificate (`insecure-skip-tls-verify`), still checking handshake
/// signatures.
#[derive(Debug)]
struct NoVerify(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
