//! The control plane's certificates, keys and tokens, made fresh for every start.
//!
//! One CA signs the apiserver's serving certificate (for `127.0.0.1`, `localhost` and the first
//! address of the service range, as kube-apiserver's own in-cluster clients dial it) and the
//! client certificates; kube-apiserver reads a client certificate's CN as the user and each O as
//! a group. The service-account key is ECDSA P-256, which kube-apiserver signs tokens with as
//! ES256.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};

use crate::Error;

/// The CA, able to sign more client certificates after the start.
pub(crate) struct Pki {
    ca: rcgen::Certificate,
    ca_key: KeyPair,
    /// The CA's certificate (PEM).
    pub ca_pem: String,
    /// The serving certificate and its key (PEM).
    pub serving: (String, String),
    /// The service-account signing key (PEM, PKCS#8).
    pub service_account_key: String,
    /// Its public half (PEM), which the apiserver verifies tokens with.
    pub service_account_public_key: String,
}

impl std::fmt::Debug for Pki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pki").finish_non_exhaustive()
    }
}

fn pki_error(e: rcgen::Error) -> Error {
    Error::Pki(e.to_string())
}

impl Pki {
    /// A fresh CA, serving certificate and service-account key.
    pub fn generate() -> Result<Pki, Error> {
        let ca_key = KeyPair::generate().map_err(pki_error)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(pki_error)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params
            .distinguished_name
            .push(DnType::CommonName, "real-apiserver-ca");
        let ca = params.self_signed(&ca_key).map_err(pki_error)?;

        let key = KeyPair::generate().map_err(pki_error)?;
        let mut params = CertificateParams::new(vec![
            "localhost".to_string(),
            "kubernetes".to_string(),
            "kubernetes.default".to_string(),
            "kubernetes.default.svc".to_string(),
        ])
        .map_err(pki_error)?;
        for ip in [[127, 0, 0, 1], [10, 0, 0, 1]] {
            params
                .subject_alt_names
                .push(SanType::IpAddress(std::net::IpAddr::from(ip)));
        }
        params
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving = params.signed_by(&key, &ca, &ca_key).map_err(pki_error)?;

        let service_account = KeyPair::generate().map_err(pki_error)?;
        Ok(Pki {
            ca_pem: ca.pem(),
            serving: (serving.pem(), key.serialize_pem()),
            service_account_key: service_account.serialize_pem(),
            service_account_public_key: service_account.public_key_pem(),
            ca,
            ca_key,
        })
    }

    /// A client certificate and its key (PEM) for `user` in `groups`.
    pub fn client_cert(&self, user: &str, groups: &[&str]) -> Result<(String, String), Error> {
        let key = KeyPair::generate().map_err(pki_error)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(pki_error)?;
        params.distinguished_name.push(DnType::CommonName, user);
        // Each group its own O attribute: rcgen keeps one value per DnType, so the second one
        // goes in under the attribute's OID spelled out, and there is no third.
        if groups.len() > 2 {
            return Err(Error::Pki(format!(
                "a client certificate carries at most two groups here ({} asked)",
                groups.len()
            )));
        }
        let types = [
            DnType::OrganizationName,
            DnType::CustomDnType(vec![2, 5, 4, 10]),
        ];
        for (group, ty) in groups.iter().zip(types) {
            params.distinguished_name.push(ty, *group);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params
            .signed_by(&key, &self.ca, &self.ca_key)
            .map_err(pki_error)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

/// A random bearer token: 32 characters of base64url from 24 random bytes.
pub(crate) fn token() -> String {
    use base64::Engine;
    let bytes: [u8; 24] = rand::random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}
