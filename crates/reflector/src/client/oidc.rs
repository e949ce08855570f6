//! OpenID Connect credentials (kubeconfig `auth-provider: oidc`), as client-go's oidc plugin
//! uses them: the id token is the bearer token while its `exp` claim is in the future; once it
//! has expired (or the server rejected it), the refresh token buys a new one at the token endpoint
//! the issuer's discovery document names. The issuer's answer may rotate the refresh token.
//!
//! The id token is read, not verified: the API server verifies it; the client only needs its
//! expiry. Refreshed tokens are used from memory and, as kubectl does, written back to the
//! kubeconfig user they came from (`kubeconfig_write_back.rs`).
//!
//! The issuer is reached as the API server is: through the proxy the client's [`Proxy`]
//! setting chooses for the issuer's URL (a kubeconfig's `proxy-url`, or `HTTPS_PROXY` and
//! `NO_PROXY`), with the client's `User-Agent`, as client-go's oidc plugin does with the
//! cluster's transport.
//!
//! [`Proxy`]: crate::Proxy

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, PROXY_AUTHORIZATION, USER_AGENT};
use http::{HeaderValue, Method, Request};
use http_body_util::{BodyExt as _, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use secrecy::{ExposeSecret as _, SecretString};
use serde::Deserialize;

use super::config::OidcConfig;
use super::error::{ClientError, ConfigError};
use super::proxy::{forward_authorization, ProxyConnector, ProxySettings};
use super::tls::{root_store, tls_err};

/// Bound on the issuer's answers (a discovery document or a token response is a few KiB).
const MAX_ANSWER_BYTES: usize = 256 << 10;
/// Bound on one refresh, discovery included.
const REFRESH_TIMEOUT: Duration = Duration::from_secs(30);

type HttpClient = hyper_util::client::legacy::Client<HttpsConnector<ProxyConnector>, Full<Bytes>>;

/// Talks to the issuer: discovery, then the token endpoint.
pub(crate) struct OidcIssuer {
    config: OidcConfig,
    http: HttpClient,
    /// The client's proxy settings, for the `Proxy-Authorization` of forwarded requests.
    proxies: Arc<ProxySettings>,
    user_agent: HeaderValue,
}

/// New tokens from a refresh.
pub(crate) struct Refreshed {
    pub(crate) id_token: SecretString,
    /// A rotated refresh token, if the issuer sent one.
    pub(crate) refresh_token: Option<SecretString>,
}

#[derive(Deserialize)]
struct Discovery {
    token_endpoint: String,
}

#[derive(Deserialize)]
struct TokenResponse {
    #[serde(default)]
    id_token: Option<String>,
    #[serde(default)]
    refresh_token: Option<String>,
}

/// The standard OAuth2 error answer: codes and descriptions, not secrets.
#[derive(Deserialize)]
struct OAuthError {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

fn auth_err(message: impl Into<String>) -> ClientError {
    ClientError::Auth(message.into())
}

impl OidcIssuer {
    /// An issuer client reaching `config`'s issuer through `proxies`, sending `user_agent`.
    pub(crate) fn new(
        config: OidcConfig,
        proxies: Arc<ProxySettings>,
        user_agent: HeaderValue,
    ) -> Result<Self, ConfigError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = root_store(
            config.issuer_certificate_authority.as_deref(),
            "idp-certificate-authority",
        )?;
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| tls_err("protocol versions", e))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(REFRESH_TIMEOUT));
        let http = ProxyConnector::new(http, proxies.clone(), false, Some(REFRESH_TIMEOUT));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let http =
            hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(connector);
        Ok(OidcIssuer {
            config,
            http,
            proxies,
            user_agent,
        })
    }

    pub(crate) fn config(&self) -> &OidcConfig {
        &self.config
    }

    /// Exchanges `refresh_token` for a new id token, within 30 s.
    pub(crate) async fn refresh(
        &self,
        refresh_token: &SecretString,
    ) -> Result<Refreshed, ClientError> {
        tokio::time::timeout(REFRESH_TIMEOUT, self.refresh_now(refresh_token))
            .await
            .map_err(|_| {
                auth_err(format!(
                    "OIDC refresh at {} took longer than {REFRESH_TIMEOUT:?}",
                    self.config.issuer_url
                ))
            })?
    }

    async fn refresh_now(&self, refresh_token: &SecretString) -> Result<Refreshed, ClientError> {
        let issuer = self.config.issuer_url.as_str().trim_end_matches('/');
        let discovery_url = format!("{issuer}/.well-known/openid-configuration");
        let req = Request::get(&discovery_url)
            .header(ACCEPT, "application/json")
            .body(Full::new(Bytes::new()))
            .map_err(|e| auth_err(format!("OIDC discovery {discovery_url}: {e}")))?;
        let (code, body) = self.exchange(req, &discovery_url).await?;
        if !(200..300).contains(&code) {
            return Err(auth_err(format!(
                "OIDC discovery {discovery_url}: HTTP {code}"
            )));
        }
        let discovery: Discovery = serde_json::from_slice(&body).map_err(|e| {
            auth_err(format!(
                "OIDC discovery {discovery_url}: not a discovery document ({e})"
            ))
        })?;
        let endpoint = discovery.token_endpoint;

        let mut req = Request::builder()
            .method(Method::POST)
            .uri(&endpoint)
            .header(ACCEPT, "application/json")
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded");
        if let Some(secret) = &self.config.client_secret {
            // RFC 6749 §2.3.1: both parts form-encoded, then HTTP basic.
            let enc =
                |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            let pair = format!(
                "{}:{}",
                enc(&self.config.client_id),
                enc(secret.expose_secret())
            );
            let mut value = http::HeaderValue::from_str(&format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            ))
            .map_err(|_| auth_err("OIDC client-id or client-secret is not a valid header"))?;
            value.set_sensitive(true);
            req = req.header(AUTHORIZATION, value);
        }
        let form = {
            let mut form = url::form_urlencoded::Serializer::new(String::new());
            form.append_pair("grant_type", "refresh_token");
            form.append_pair("refresh_token", refresh_token.expose_secret());
            if self.config.client_secret.is_none() {
                form.append_pair("client_id", &self.config.client_id);
            }
            form.finish()
        };
        let req = req
            .body(Full::new(Bytes::from(form)))
            .map_err(|e| auth_err(format!("OIDC token endpoint {endpoint}: {e}")))?;
        let (code, body) = self.exchange(req, &endpoint).await?;
        if !(200..300).contains(&code) {
            // The OAuth2 error code and description say why; the rest of the body is not shown.
            let why = serde_json::from_slice::<OAuthError>(&body)
                .map(|e| match e.error_description {
                    Some(d) => format!(": {} ({d})", e.error),
                    None => format!(": {}", e.error),
                })
                .unwrap_or_default();
            return Err(auth_err(format!(
                "OIDC refresh at {endpoint}: HTTP {code}{why}"
            )));
        }
        // Errors name where the answer went wrong, never what it held: it holds tokens.
        let answer: TokenResponse = serde_json::from_slice(&body).map_err(|e| {
            auth_err(format!(
                "OIDC refresh at {endpoint}: the answer is not a token response ({:?} error at line {} column {})",
                e.classify(),
                e.line(),
                e.column()
            ))
        })?;
        let id_token = answer.id_token.filter(|t| !t.is_empty()).ok_or_else(|| {
            auth_err(format!(
                "OIDC refresh at {endpoint}: no id_token in the answer"
            ))
        })?;
        Ok(Refreshed {
            id_token: id_token.into(),
            refresh_token: answer
                .refresh_token
                .filter(|t| !t.is_empty())
                .map(SecretString::from),
        })
    }

    /// Sends `req` and reads the answer (at most [`MAX_ANSWER_BYTES`]).
    async fn exchange(
        &self,
        mut req: Request<Full<Bytes>>,
        what: &str,
    ) -> Result<(u16, Bytes), ClientError> {
        // A plain-http issuer behind a forwarding proxy that wants credentials (a tunnel carries
        // them in its CONNECT instead).
        let proxy_authorization = forward_authorization(&self.proxies, req.uri(), false);
        let headers = req.headers_mut();
        headers.insert(USER_AGENT, self.user_agent.clone());
        if let Some(auth) = proxy_authorization {
            headers.insert(PROXY_AUTHORIZATION, auth);
        }
        let resp = self
            .http
            .request(req)
            .await
            .map_err(|e| ClientError::transport(format!("OIDC {what}"), Box::new(e)))?;
        let code = resp.status().as_u16();
        let body = Limited::new(resp.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|e| auth_err(format!("OIDC {what}: reading the answer: {e}")))?
            .to_bytes();
        Ok((code, body))
    }
}

/// The expiry (`exp` claim) of a JWT, read without verifying it. `None`: not a JWT, or no `exp`.
pub(crate) fn jwt_expiry(token: &str) -> Option<SystemTime> {
    #[derive(Deserialize)]
    struct Claims {
        exp: Option<f64>,
    }
    let mut parts = token.split('.');
    let (_header, payload, _signature) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let exp = serde_json::from_slice::<Claims>(&json).ok()?.exp?;
    if !exp.is_finite() || exp < 0.0 {
        return None;
    }
    Some(UNIX_EPOCH + Duration::from_secs(exp as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(claims: &str) -> String {
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        format!("{}.{}.sig", b64(r#"{"alg":"RS256"}"#), b64(claims))
    }

    #[test]
    fn jwt_expiry_reads_the_exp_claim_and_refuses_what_is_not_a_jwt() {
        let at = |t: Option<SystemTime>| t.map(|t| t.duration_since(UNIX_EPOCH).unwrap().as_secs());
        assert_eq!(
            at(jwt_expiry(&jwt(r#"{"exp":1700000000}"#))),
            Some(1_700_000_000)
        );
        assert_eq!(
            at(jwt_expiry(&jwt(r#"{"exp":1.5e9}"#))),
            Some(1_500_000_000)
        );
        assert_eq!(jwt_expiry(&jwt(r#"{"sub":"x"}"#)), None);
        assert_eq!(jwt_expiry(&jwt(r#"{"exp":-1}"#)), None);
        assert_eq!(jwt_expiry("not-a-jwt"), None);
        assert_eq!(jwt_expiry("a.!!!.c"), None);
        assert_eq!(jwt_expiry("a.b.c.d"), None);
    }
}
