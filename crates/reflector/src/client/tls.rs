//! TLS for the client: rustls (ring) with the kubeconfig's certificate authority alone when it
//! names one, else the system's trust roots; a client certificate and key from the kubeconfig or
//! from an exec plugin; or no verification at all when `insecure-skip-tls-verify` says so.

use std::sync::Arc;

use parking_lot::RwLock;
use rustls::client::ResolvesClientCert;
use rustls::sign::CertifiedKey;

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

/// The roots that verify a server: the PEM bundle `ca` alone when given (`what` names it in
/// errors), else the system's trust store as `rustls-native-certs` finds it (on Linux, the
/// `SSL_CERT_FILE` and `SSL_CERT_DIR` variables, then the distribution's bundle).
pub(crate) fn root_store(
    ca: Option<&[u8]>,
    what: &str,
) -> Result<rustls::RootCertStore, ConfigError> {
    let mut roots = rustls::RootCertStore::empty();
    match ca {
        Some(mut ca) => {
            for cert in rustls_pemfile::certs(&mut ca) {
                let cert = cert.map_err(|e| tls_err(what, e))?;
                roots.add(cert).map_err(|e| tls_err(what, e))?;
            }
            if roots.is_empty() {
                return Err(ConfigError::Tls(format!(
                    "{what}: no certificate in the PEM data"
                )));
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for e in &found.errors {
                tracing::debug!(error = %e, "reading the system trust store");
            }
            let (added, ignored) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                tracing::warn!(
                    errors = found.errors.len(),
                    ignored,
                    "no trust root found in the system store: no server certificate can be \
                     verified without a certificate authority in the configuration"
                );
            }
        }
    }
    Ok(roots)
}

/// The client certificate of an exec plugin: empty until the plugin returned one, replaced when
/// it returns another. Shared by the TLS configuration, which presents what it holds at each
/// handshake, and the authenticator, which fills it.
#[derive(Debug, Default)]
pub(crate) struct ClientCertSlot {
    current: RwLock<Option<Arc<CertifiedKey>>>,
    /// Counts replacements: connections made before the last one present an older certificate.
    version: std::sync::atomic::AtomicU64,
}

impl ClientCertSlot {
    /// Parses and stores a PEM certificate chain and key; `false` if it was already the one held.
    pub(crate) fn set(&self, cert_pem: &[u8], key_pem: &[u8]) -> Result<bool, ConfigError> {
        let certs = pem_certs(cert_pem, "exec plugin clientCertificateData")?;
        let key = pem_key(key_pem, "exec plugin clientKeyData")?;
        let provider = rustls::crypto::ring::default_provider();
        let key = provider
            .key_provider
            .load_private_key(key)
            .map_err(|e| tls_err("exec plugin clientKeyData", e))?;
        let mut current = self.current.write();
        if current.as_ref().is_some_and(|c| c.cert == certs) {
            return Ok(false);
        }
        *current = Some(Arc::new(CertifiedKey::new(certs, key)));
        self.version
            .fetch_add(1, std::sync::atomic::Ordering::Release);
        Ok(true)
    }

    /// How many certificates the slot has held.
    pub(crate) fn version(&self) -> u64 {
        self.version.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// Presents the slot's certificate, when it holds one.
#[derive(Debug)]
struct SlotResolver(Arc<ClientCertSlot>);

impl ResolvesClientCert for SlotResolver {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        self.0.current.read().clone()
    }

    fn has_certs(&self) -> bool {
        self.0.current.read().is_some()
    }
}

fn pem_certs(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    let certs: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut &pem[..])
        .collect::<Result<_, _>>()
        .map_err(|e| tls_err(what, e))?;
    if certs.is_empty() {
        return Err(ConfigError::Tls(format!(
            "{what}: no certificate in the PEM data"
        )));
    }
    Ok(certs)
}

fn pem_key(pem: &[u8], what: &str) -> Result<PrivateKeyDer<'static>, ConfigError> {
    rustls_pemfile::private_key(&mut &pem[..])
        .map_err(|e| tls_err(what, e))?
        .ok_or_else(|| ConfigError::Tls(format!("{what}: no private key in the PEM data")))
}

/// The rustls client configuration for `config`: its CA alone when one is given (the system's
/// roots otherwise), its client certificate and key, or no verification with
/// `insecure_skip_tls_verify`. With `exec_certs`, the client certificate is the one an exec
/// plugin put there (the configuration's own, if any, then takes precedence as in client-go).
pub(crate) fn tls_config(
    config: &ClusterConfig,
    exec_certs: Option<Arc<ClientCertSlot>>,
) -> Result<rustls::ClientConfig, ConfigError> {
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
        let roots = root_store(
            config.certificate_authority.as_deref(),
            "certificate-authority",
        )?;
        builder.with_root_certificates(roots)
    };
    match (&config.client_certificate, &config.client_key) {
        (Some(cert), Some(key)) => {
            let certs = pem_certs(cert, "client-certificate")?;
            let key = pem_key(key.expose_secret(), "client-key")?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| tls_err("client certificate and key", e))
        }
        (None, None) => Ok(match exec_certs {
            Some(slot) => builder.with_client_cert_resolver(Arc::new(SlotResolver(slot))),
            None => builder.with_no_client_auth(),
        }),
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
