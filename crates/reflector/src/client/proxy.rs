//! HTTP proxies, as kubectl and client-go use them: which connections go through a proxy
//! ([`Proxy`] and the rules below), and the connector that reaches the API server through one.
//!
//! A controller often runs where the API server is reachable only through a corporate proxy, and
//! kubectl users expect a kubeconfig's `proxy-url` or their `HTTPS_PROXY` to work here as it does
//! there. The selection is therefore Go's, rule for rule (`golang.org/x/net/http/httpproxy`, which
//! client-go's default transport uses), and written as one pure function, [`proxy_for`], so that
//! every rule has a unit test. docs/semantics.md lists them as rules PX1–PX4.
//!
//! # Which connections go through a proxy
//!
//! - [`Proxy::Url`] (kubeconfig `proxy-url`): every connection, to a loopback address too, exactly
//!   as client-go's `http.ProxyURL`; `NO_PROXY` is not consulted.
//! - [`Proxy::FromEnvironment`] (the default): read once, when the [`Client`](crate::Client) is
//!   built. `HTTPS_PROXY` (or else `https_proxy`) for an `https` server, `HTTP_PROXY` (or else
//!   `http_proxy`) for an `http` one; an empty variable counts as unset, and a value without a
//!   scheme means `http://`. No connection to `localhost` or to a loopback address ever goes
//!   through it, and none whose host matches `NO_PROXY` (or else `no_proxy`):
//!   - a comma-separated list, each entry trimmed and compared case-insensitively;
//!   - `*` alone: no proxy for any host;
//!   - an IP address (`10.1.2.3`, `::1`) matches that address, a CIDR block (`10.0.0.0/8`,
//!     `fd00::/8`) every address in it; names are not resolved to compare them;
//!   - `example.com` matches `example.com` and its subdomains, `.example.com` (or
//!     `*.example.com`) its subdomains only;
//!   - an entry with a port (`example.com:6443`, `10.1.2.3:443`, `[::1]:443`) matches only
//!     connections to that port (the server URL's port, else 443 or 80);
//!   - malformed entries are ignored, as Go ignores them.
//! - [`Proxy::None`]: no proxy.
//!
//! Only `http://` proxies are supported. `https://` (TLS to the proxy itself) and `socks5://`
//! proxies are refused with a [`ConfigError`] when the client is built, as is a malformed URL or
//! environment value: a client that silently went direct would reach the wrong network, or
//! none. An `https` API server behind an `http://` proxy is still encrypted end to end.
//!
//! # How a proxied connection is made
//!
//! The connector ([`ProxyConnector`]) opens a TCP connection to the proxy, with the same connect
//! timeout and TCP settings as a direct one, then:
//!
//! - for an `https` server, and for an `http` server spoken to as HTTP/2 with prior knowledge
//!   (which a forwarding proxy cannot carry), asks for a tunnel: `CONNECT host:port HTTP/1.1`
//!   with `Proxy-Authorization: Basic …` when the proxy URL holds user info. The proxy's answer is
//!   read within the connect timeout and at most 64 KiB; anything but a 2xx is an error naming
//!   the proxy and its status line. TLS (with its ALPN choice of HTTP/2 or HTTP/1.1) then runs
//!   inside the tunnel, between the client and the API server;
//! - for an `http` server otherwise, forwards: the connection is marked as a proxy's, so requests
//!   go out in absolute form (`GET http://host:port/path HTTP/1.1`), each carrying the
//!   `Proxy-Authorization` header ([`forward_authorization`]).
//!
//! A proxy URL's password never appears in `Debug` output, errors or logs: it is shown as
//! `[REDACTED]`.
//!
//! # Why the tunnel is not hyper-util's `Tunnel`
//!
//! `hyper_util::client::legacy::connect::proxy::Tunnel` (0.1.21) would save the `CONNECT`
//! exchange below (about 60 lines), but it loses three things this connector keeps:
//!
//! - the bytes that arrive behind the proxy's answer in the same read are dropped, not handed
//!   on. Over TLS the client speaks first, so there are none; over an `h2c` tunnel the server's
//!   HTTP/2 preface (its `SETTINGS`, sent as soon as the proxy connects it) can ride in the same
//!   segment as the `200`, and losing it breaks the connection, now and then (`ProxyStream`'s
//!   `early`);
//! - the proxy's answer itself: every answer but 200 and 407 is the same
//!   `TunnelError::TunnelUnsuccessful` (its error type is reachable only as
//!   `<Tunnel<C> as Service<Uri>>::Error`), so a policy's `403 Forbidden`, an unreachable
//!   server's `502 Bad Gateway` and an answer that is not HTTP at all read alike, where this
//!   connector's [`ProxyError`] names the proxy and quotes its status line. Getting the early
//!   bytes and the status line back would take a wrapper recording every byte `Tunnel` reads,
//!   which is more code than the exchange it would replace;
//! - a target without a port is tunnelled to port 443, an `http` (h2c) one included.
//!
//! Which connections go through a proxy stays [`proxy_for`]'s in any case: hyper-util's own
//! matcher follows curl's `NO_PROXY` rules, not Go's.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use base64::Engine as _;
use bytes::{Buf as _, Bytes};
use http::{HeaderValue, Uri};
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::error::{BoxError, ConfigError};

/// Whether and how the client goes through an HTTP proxy, as client-go decides it (rules PX1–PX4
/// of docs/semantics.md). Only `http://` proxies are supported: `https://` and `socks5://`
/// proxy URLs, like malformed ones, make [`Client::new`](crate::Client::new) fail.
///
/// ```
/// use reflector::{ClusterConfig, Proxy};
/// let mut config = ClusterConfig::new("https://10.0.0.1:6443").unwrap();
/// assert_eq!(config.proxy, Proxy::FromEnvironment);
/// config.proxy = Proxy::Url("http://me:s3cret@proxy.corp:3128".parse().unwrap());
/// // The password never shows.
/// assert!(!format!("{config:?}").contains("s3cret"));
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub enum Proxy {
    /// Go's `httpproxy.FromEnvironment`: `HTTPS_PROXY` / `https_proxy` for an `https` server,
    /// `HTTP_PROXY` / `http_proxy` for an `http` one, except for hosts matching `NO_PROXY` /
    /// `no_proxy` and for `localhost` and loopback addresses. Read once, when the
    /// [`Client`](crate::Client) is built; a value without a scheme means `http://`.
    #[default]
    FromEnvironment,
    /// A kubeconfig's `proxy-url`: every connection goes through this proxy, to loopback
    /// addresses too, regardless of `NO_PROXY` (client-go's `http.ProxyURL`). It may carry
    /// `user:password@`, sent as `Proxy-Authorization: Basic …`.
    Url(url::Url),
    /// Direct connections only.
    None,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Proxy::FromEnvironment => f.write_str("FromEnvironment"),
            Proxy::Url(url) => f.debug_tuple("Url").field(&redacted(url)).finish(),
            Proxy::None => f.write_str("None"),
        }
    }
}

/// `url` as text with its password, if any, replaced by `[REDACTED]` (the user name is kept, as
/// Go's `URL.Redacted` keeps it).
pub(crate) fn redacted(url: &url::Url) -> String {
    if url.password().is_none() {
        return url.to_string();
    }
    let mut bare = url.clone();
    // Only fails for URLs that cannot have a password, and this one has one.
    let _ = bare.set_password(None);
    let text = bare.as_str();
    let after_scheme = url.scheme().len() + "://".len();
    let user = url.username();
    if user.is_empty() {
        format!(
            "{}:[REDACTED]@{}",
            &text[..after_scheme],
            &text[after_scheme..]
        )
    } else {
        let user_end = after_scheme + user.len();
        format!("{}:[REDACTED]{}", &text[..user_end], &text[user_end..])
    }
}

/// Which setting a proxy came from, for errors: kubeconfig's `proxy-url` or a variable's name.
const URL_SETTING: &str = "ClusterConfig.proxy (kubeconfig proxy-url)";

/// One usable proxy: where to connect, how to name it, how to authenticate to it.
pub(crate) struct ProxyEndpoint {
    /// `http://host:port` of the proxy, for the TCP connector (no user info).
    uri: Uri,
    /// The proxy's URL with its password redacted, for errors and logs.
    display: String,
    /// `Basic …` from the URL's user info, marked sensitive.
    authorization: Option<HeaderValue>,
}

impl std::fmt::Debug for ProxyEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyEndpoint")
            .field("url", &self.display)
            .field(
                "authorization",
                &self.authorization.as_ref().map(|_| "[REDACTED]"),
            )
            .finish()
    }
}

impl ProxyEndpoint {
    /// The proxy `url`, which came from `setting`: only `http://` with a host is usable.
    fn from_url(url: &url::Url, setting: &str) -> Result<Self, ConfigError> {
        let err = |reason: String| ConfigError::Proxy {
            setting: setting.to_string(),
            reason,
        };
        match url.scheme() {
            "http" => {}
            "https" => {
                return Err(err(
                    "https:// proxies (TLS to the proxy itself) are not supported; an http:// \
                     proxy still carries an https server's traffic encrypted end to end"
                        .into(),
                ))
            }
            "socks5" | "socks5h" | "socks4" | "socks4a" => {
                return Err(err(format!(
                    "{}:// proxies are not supported (SOCKS5 is not implemented); only http:// \
                     proxies are",
                    url.scheme()
                )))
            }
            other => {
                return Err(err(format!(
                    "unsupported proxy scheme {other}; only http:// proxies are supported"
                )))
            }
        }
        let host = match url.host_str() {
            Some(h) if !h.is_empty() => h,
            _ => return Err(err("the proxy URL has no host".into())),
        };
        let port = url.port_or_known_default().unwrap_or(80);
        let uri: Uri = format!("http://{host}:{port}")
            .parse()
            .map_err(|e: http::uri::InvalidUri| err(format!("not a usable address: {e}")))?;
        let authorization = if url.username().is_empty() && url.password().is_none() {
            None
        } else {
            let mut credentials = percent_decode(url.username());
            credentials.push(b':');
            credentials.extend(percent_decode(url.password().unwrap_or("")));
            let token = base64::engine::general_purpose::STANDARD.encode(&credentials);
            let mut value = HeaderValue::try_from(format!("Basic {token}"))
                .map_err(|_| err("the user info cannot be sent in a header".into()))?;
            value.set_sensitive(true);
            Some(value)
        };
        Ok(ProxyEndpoint {
            uri,
            display: redacted(url),
            authorization,
        })
    }

    /// The value of environment variable `name`: a URL, or a bare `host:port` meaning `http://`.
    fn from_env(name: &str, value: &str) -> Result<Self, ConfigError> {
        let value = value.trim();
        let with_scheme = if value.contains("://") {
            value.to_string()
        } else {
            format!("http://{value}")
        };
        // `url`'s parse errors name what is wrong, never the text: it may hold a password.
        let url = url::Url::parse(&with_scheme).map_err(|e| ConfigError::Proxy {
            setting: name.to_string(),
            reason: format!("not a valid proxy URL: {e}"),
        })?;
        Self::from_url(&url, name)
    }
}

/// `%XX` sequences of a URL's user info decoded to bytes (others kept as they are).
fn percent_decode(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |j: usize| bytes.get(j).and_then(|&b| (b as char).to_digit(16));
        if bytes[i] == b'%' {
            if let (Some(h), Some(l)) = (hex(i + 1), hex(i + 2)) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

/// The proxy settings a [`Client`](crate::Client) was built with: [`Proxy`] resolved once.
#[derive(Debug, Default)]
pub(crate) struct ProxySettings {
    /// The proxy for `http` servers.
    http: Option<Arc<ProxyEndpoint>>,
    /// The proxy for `https` servers.
    https: Option<Arc<ProxyEndpoint>>,
    /// Hosts reached directly.
    no_proxy: NoProxy,
    /// Go's environment rule: `localhost` and loopback addresses are never proxied.
    direct_loopback: bool,
}

impl ProxySettings {
    /// The settings `proxy` means, reading environment variables through `env` (only for
    /// [`Proxy::FromEnvironment`]).
    pub(crate) fn new(
        proxy: &Proxy,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        match proxy {
            Proxy::None => Ok(ProxySettings::default()),
            Proxy::Url(url) => {
                let endpoint = Arc::new(ProxyEndpoint::from_url(url, URL_SETTING)?);
                Ok(ProxySettings {
                    http: Some(endpoint.clone()),
                    https: Some(endpoint),
                    no_proxy: NoProxy::default(),
                    direct_loopback: false,
                })
            }
            Proxy::FromEnvironment => {
                // Upper case first, and an empty value counts as unset (Go's `getEnvAny`).
                let var = |names: [&'static str; 2]| {
                    names
                        .into_iter()
                        .find_map(|n| env(n).filter(|v| !v.is_empty()).map(|v| (n, v)))
                };
                let endpoint = |names| {
                    var(names)
                        .map(|(name, value)| ProxyEndpoint::from_env(name, &value).map(Arc::new))
                        .transpose()
                };
                Ok(ProxySettings {
                    http: endpoint(["HTTP_PROXY", "http_proxy"])?,
                    https: endpoint(["HTTPS_PROXY", "https_proxy"])?,
                    no_proxy: var(["NO_PROXY", "no_proxy"])
                        .map(|(_, v)| NoProxy::parse(&v))
                        .unwrap_or_default(),
                    direct_loopback: true,
                })
            }
        }
    }

    /// The settings of [`Proxy::FromEnvironment`], from the process environment.
    pub(crate) fn from_process(proxy: &Proxy) -> Result<Self, ConfigError> {
        Self::new(proxy, |name| {
            std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
        })
    }
}

/// `NO_PROXY`, parsed as Go's `httpproxy` parses it.
#[derive(Debug, Default, PartialEq)]
struct NoProxy {
    /// `*`: every host is reached directly.
    all: bool,
    /// Entries that are IP addresses or CIDR blocks; they match only IP hosts.
    ips: Vec<IpRule>,
    /// Entries that are names; they match by suffix.
    domains: Vec<DomainRule>,
}

#[derive(Debug, PartialEq)]
enum IpRule {
    /// A CIDR block (no port).
    Net { network: IpAddr, prefix: u8 },
    /// One address, on one port or all.
    Addr { ip: IpAddr, port: Option<u16> },
}

#[derive(Debug, PartialEq)]
struct DomainRule {
    /// Lower case, with a leading dot: `.example.com`.
    suffix: String,
    /// The entry had no leading dot, so the name itself matches too.
    exact_too: bool,
    port: Option<u16>,
}

impl NoProxy {
    fn parse(value: &str) -> Self {
        let mut rules = NoProxy::default();
        for entry in value.split(',') {
            let entry = entry.trim().to_ascii_lowercase();
            if entry.is_empty() {
                continue;
            }
            if entry == "*" {
                return NoProxy {
                    all: true,
                    ..NoProxy::default()
                };
            }
            if let Some((network, prefix)) = parse_cidr(&entry) {
                rules.ips.push(IpRule::Net { network, prefix });
                continue;
            }
            let Some((host, port)) = split_entry(&entry) else {
                continue;
            };
            if let Ok(ip) = host.parse::<IpAddr>() {
                rules.ips.push(IpRule::Addr {
                    ip: canonical_ip(ip),
                    port,
                });
                continue;
            }
            let host = host.strip_prefix('*').unwrap_or(host);
            if host.is_empty() || host == "." {
                continue;
            }
            let (suffix, exact_too) = match host.strip_prefix('.') {
                Some(_) => (host.to_string(), false),
                None => (format!(".{host}"), true),
            };
            rules.domains.push(DomainRule {
                suffix,
                exact_too,
                port,
            });
        }
        rules
    }

    /// Whether a connection to `host` (lower case, no brackets) on `port` goes direct.
    fn matches(&self, host: &str, ip: Option<IpAddr>, port: u16) -> bool {
        if self.all {
            return true;
        }
        let port_ok = |p: Option<u16>| p.is_none_or(|p| p == port);
        if let Some(ip) = ip {
            let hit = self.ips.iter().any(|rule| match rule {
                IpRule::Net { network, prefix } => in_network(ip, *network, *prefix),
                IpRule::Addr { ip: entry, port: p } => *entry == ip && port_ok(*p),
            });
            if hit {
                return true;
            }
        }
        // Go tries the name rules on IP hosts too.
        self.domains.iter().any(|rule| {
            (host.ends_with(&rule.suffix) || (rule.exact_too && host == &rule.suffix[1..]))
                && port_ok(rule.port)
        })
    }
}

/// A `NO_PROXY` entry split into host and port (`host`, `host:port`, `[v6]`, `[v6]:port`, or a
/// bare IPv6 address); `None` for an entry that is malformed (an empty host, a port that is not
/// a number). An empty port (`host:`) means any port, as in Go.
fn split_entry(entry: &str) -> Option<(&str, Option<u16>)> {
    let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        match after {
            "" => (host, None),
            _ => (host, Some(after.strip_prefix(':')?)),
        }
    } else {
        match entry.split_once(':') {
            // More than one colon without brackets: a bare IPv6 address, no port.
            Some((_, rest)) if rest.contains(':') => (entry, None),
            Some((host, port)) => (host, Some(port)),
            None => (entry, None),
        }
    };
    if host.is_empty() {
        return None;
    }
    let port = match port {
        None | Some("") => None,
        Some(p) => Some(p.parse::<u16>().ok()?),
    };
    Some((host, port))
}

/// `10.0.0.0/8` or `fd00::/8` (the address masked to its network, as Go's `ParseCIDR` does).
fn parse_cidr(entry: &str) -> Option<(IpAddr, u8)> {
    let (addr, prefix) = entry.split_once('/')?;
    let addr: IpAddr = addr.parse().ok()?;
    let prefix: u8 = prefix.parse().ok()?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    (prefix <= max).then_some((addr, prefix))
}

/// Whether `ip` lies in `network/prefix`; an IPv4-mapped IPv6 address counts as IPv4, as in Go.
fn in_network(ip: IpAddr, network: IpAddr, prefix: u8) -> bool {
    let bits = |a: IpAddr| -> (u128, u8) {
        match canonical_ip(a) {
            IpAddr::V4(v4) => (u128::from(u32::from(v4)) << 96, 32),
            IpAddr::V6(v6) => (u128::from(v6), 128),
        }
    };
    let (ip, ip_len) = bits(ip);
    let (net, net_len) = bits(network);
    if ip_len != net_len {
        return false;
    }
    let prefix = u32::from(prefix.min(net_len));
    let mask = if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - prefix)
    };
    ip & mask == net & mask
}

/// An IPv4-mapped IPv6 address as the IPv4 address it maps.
fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The proxy a connection to `target` goes through, or `None` to connect directly: the rules of
/// the [module documentation](self), in Go's order (scheme, then loopback, then `NO_PROXY`).
pub(crate) fn proxy_for<'s>(
    settings: &'s ProxySettings,
    target: &Uri,
) -> Option<&'s Arc<ProxyEndpoint>> {
    let proxy = match target.scheme_str() {
        Some("https") => settings.https.as_ref(),
        Some("http") => settings.http.as_ref(),
        _ => None,
    }?;
    let Some(host) = target.host() else {
        return Some(proxy);
    };
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
        .to_ascii_lowercase();
    let ip = host.parse::<IpAddr>().ok().map(canonical_ip);
    if settings.direct_loopback && (host == "localhost" || ip.is_some_and(|ip| ip.is_loopback())) {
        return None;
    }
    let port = target.port_u16().unwrap_or(match target.scheme_str() {
        Some("https") => 443,
        _ => 80,
    });
    if settings.no_proxy.matches(&host, ip, port) {
        return None;
    }
    Some(proxy)
}

/// The `Proxy-Authorization` value every request to `server` must carry: `Some` when the
/// server's connections forward through a proxy whose URL holds user info (a tunnel carries it
/// once, in its `CONNECT`).
pub(crate) fn forward_authorization(
    settings: &ProxySettings,
    server: &Uri,
    http2_prior_knowledge: bool,
) -> Option<HeaderValue> {
    let proxy = proxy_for(settings, server)?;
    if tunnels(server, http2_prior_knowledge) {
        return None;
    }
    proxy.authorization.clone()
}

/// Whether a proxied connection to `target` is a `CONNECT` tunnel rather than forwarding.
fn tunnels(target: &Uri, http2_prior_knowledge: bool) -> bool {
    target.scheme_str() != Some("http") || http2_prior_knowledge
}

/// The redacted URL of the proxy a connection to `server` goes through, for logs.
pub(crate) fn describe_route<'s>(settings: &'s ProxySettings, server: &Uri) -> Option<&'s str> {
    proxy_for(settings, server).map(|p| p.display.as_str())
}

/// The proxy's answer to `CONNECT` is read up to this size at most.
const MAX_CONNECT_RESPONSE_HEAD: usize = 64 << 10;

/// A failure to use a proxy: names it (password redacted) and says what went wrong.
#[derive(Debug, thiserror::Error)]
#[error("proxy {proxy}: {reason}")]
pub(crate) struct ProxyError {
    proxy: String,
    reason: String,
    #[source]
    source: Option<BoxError>,
}

impl ProxyError {
    fn new(proxy: &ProxyEndpoint, reason: impl Into<String>, source: Option<BoxError>) -> Self {
        ProxyError {
            proxy: proxy.display.clone(),
            reason: reason.into(),
            source,
        }
    }
}

/// The TCP connector of the client: direct connections, or through the proxy [`proxy_for`]
/// picks (see the [module documentation](self)). TLS, when the server is `https`, runs on top
/// (`hyper_rustls::HttpsConnector` wraps this one), inside the tunnel when there is one.
#[derive(Clone)]
pub(crate) struct ProxyConnector {
    tcp: HttpConnector,
    settings: Arc<ProxySettings>,
    /// HTTP/2 with prior knowledge: a forwarding proxy cannot carry it, so `http` is tunnelled.
    http2_prior_knowledge: bool,
    /// Bound on the `CONNECT` exchange (the TCP connect has its own, in `tcp`).
    handshake_timeout: Option<Duration>,
}

impl ProxyConnector {
    /// A connector that reaches proxies, and servers directly, with `tcp`'s settings.
    pub(crate) fn new(
        tcp: HttpConnector,
        settings: Arc<ProxySettings>,
        http2_prior_knowledge: bool,
        handshake_timeout: Option<Duration>,
    ) -> Self {
        ProxyConnector {
            tcp,
            settings,
            http2_prior_knowledge,
            handshake_timeout,
        }
    }
}

impl tower_service::Service<Uri> for ProxyConnector {
    type Response = ProxyStream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<ProxyStream, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.tcp.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, target: Uri) -> Self::Future {
        let Some(proxy) = proxy_for(&self.settings, &target).cloned() else {
            let connecting = self.tcp.call(target);
            return Box::pin(async move { Ok(ProxyStream::new(connecting.await?, false)) });
        };
        let connecting = self.tcp.call(proxy.uri.clone());
        let tunnel = tunnels(&target, self.http2_prior_knowledge);
        let timeout = self.handshake_timeout;
        Box::pin(async move {
            let io = connecting.await.map_err(|e| {
                ProxyError::new(&proxy, "cannot connect to the proxy", Some(Box::new(e)))
            })?;
            if !tunnel {
                return Ok(ProxyStream::new(io, true));
            }
            let authority = connect_authority(&target)
                .ok_or_else(|| ProxyError::new(&proxy, format!("no host in {target}"), None))?;
            let handshake = open_tunnel(io.into_inner(), &proxy, &authority);
            let (tcp, early) = match timeout {
                Some(t) => tokio::time::timeout(t, handshake).await.map_err(|_| {
                    ProxyError::new(
                        &proxy,
                        format!("no answer to CONNECT {authority} within {t:?}"),
                        None,
                    )
                })??,
                None => handshake.await?,
            };
            let mut stream = ProxyStream::new(TokioIo::new(tcp), false);
            stream.early = early;
            Ok(stream)
        })
    }
}

/// `host:port` of `target` for `CONNECT` (brackets kept around an IPv6 address; the scheme's
/// port when the URI has none).
fn connect_authority(target: &Uri) -> Option<String> {
    let host = target.host()?;
    let port = target.port_u16().unwrap_or(match target.scheme_str() {
        Some("http") => 80,
        _ => 443,
    });
    Some(format!("{host}:{port}"))
}

/// Sends `CONNECT authority` on `tcp` and reads the proxy's answer; on a 2xx, returns the
/// connection and any bytes that followed the answer's head (they belong to the server).
async fn open_tunnel(
    tcp: TcpStream,
    proxy: &ProxyEndpoint,
    authority: &str,
) -> Result<(TcpStream, Bytes), ProxyError> {
    let io_err = |what: &str, e: std::io::Error| {
        ProxyError::new(
            proxy,
            format!("{what} CONNECT {authority}"),
            Some(Box::new(e)),
        )
    };
    let mut request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n").into_bytes();
    if let Some(auth) = &proxy.authorization {
        request.extend_from_slice(b"Proxy-Authorization: ");
        request.extend_from_slice(auth.as_bytes());
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"\r\n");
    let mut written = 0;
    while written < request.len() {
        tcp.writable().await.map_err(|e| io_err("sending", e))?;
        match tcp.try_write(&request[written..]) {
            Ok(n) => written += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(io_err("sending", e)),
        }
    }
    // The request held the credentials: no copy of them outlives the exchange.
    request.fill(0);
    drop(request);

    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        tcp.readable()
            .await
            .map_err(|e| io_err("reading the answer to", e))?;
        let n = match tcp.try_read(&mut chunk) {
            Ok(0) => {
                return Err(ProxyError::new(
                    proxy,
                    format!("closed the connection without answering CONNECT {authority}"),
                    None,
                ))
            }
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(io_err("reading the answer to", e)),
        };
        head.extend_from_slice(&chunk[..n]);
        if let Some(end) = head_end(&head) {
            check_connect_status(&head[..end], proxy, authority)?;
            let early = Bytes::copy_from_slice(&head[end..]);
            return Ok((tcp, early));
        }
        if head.len() > MAX_CONNECT_RESPONSE_HEAD {
            return Err(ProxyError::new(
                proxy,
                format!(
                    "its answer to CONNECT {authority} exceeds {} KiB without ending its head",
                    MAX_CONNECT_RESPONSE_HEAD >> 10
                ),
                None,
            ));
        }
    }
}

/// Where a response head ends: after the first empty line (`\r\n\r\n`, or bare `\n\n`).
fn head_end(buf: &[u8]) -> Option<usize> {
    memchr::memchr_iter(b'\n', buf).find_map(|i| match &buf[i + 1..] {
        [b'\n', ..] => Some(i + 2),
        [b'\r', b'\n', ..] => Some(i + 3),
        _ => None,
    })
}

/// Accepts a `HTTP/1.x 2xx` status line; anything else is an error quoting the line (made
/// printable and short: it comes from the network).
fn check_connect_status(
    head: &[u8],
    proxy: &ProxyEndpoint,
    authority: &str,
) -> Result<(), ProxyError> {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let code = line
        .strip_prefix(b"HTTP/1.")
        .and_then(|rest| rest.get(1..))
        .and_then(|rest| rest.strip_prefix(b" "))
        .filter(|rest| rest.len() == 3 || rest.get(3) == Some(&b' '))
        .and_then(|rest| std::str::from_utf8(rest.get(..3)?).ok())
        .and_then(|code| code.parse::<u16>().ok())
        .filter(|code| (100..600).contains(code));
    let shown: String = String::from_utf8_lossy(&line[..line.len().min(200)])
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    match code {
        Some(200..=299) => Ok(()),
        Some(_) => Err(ProxyError::new(
            proxy,
            format!("refused CONNECT {authority}: {shown}"),
            None,
        )),
        None => Err(ProxyError::new(
            proxy,
            format!("answered CONNECT {authority} with something other than HTTP/1.x: {shown:?}"),
            None,
        )),
    }
}

/// A connection made by [`ProxyConnector`]: a TCP connection to the server, to a proxy that
/// forwards, or through a proxy's tunnel.
#[derive(Debug)]
pub(crate) struct ProxyStream {
    io: TokioIo<TcpStream>,
    /// Bytes that arrived right behind the proxy's answer to `CONNECT`: the server's, read first.
    early: Bytes,
    /// Connected to a forwarding proxy: requests must be in absolute form.
    forwarding: bool,
}

impl ProxyStream {
    fn new(io: TokioIo<TcpStream>, forwarding: bool) -> Self {
        ProxyStream {
            io,
            early: Bytes::new(),
            forwarding,
        }
    }
}

impl Connection for ProxyStream {
    fn connected(&self) -> Connected {
        self.io.connected().proxy(self.forwarding)
    }
}

impl Read for ProxyStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        if !self.early.is_empty() {
            let n = self.early.len().min(buf.remaining());
            buf.put_slice(&self.early[..n]);
            self.early.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl Write for ProxyStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_settings(vars: &[(&str, &str)]) -> Result<ProxySettings, ConfigError> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ProxySettings::new(&Proxy::FromEnvironment, move |name| {
            vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        })
    }

    /// The proxy (its redacted URL) a request to `target` goes through.
    fn route(settings: &ProxySettings, target: &str) -> Option<String> {
        proxy_for(settings, &target.parse().unwrap()).map(|p| p.display.clone())
    }

    const P: &str = "http://proxy.corp:3128/";

    fn with_no_proxy(no_proxy: &str) -> ProxySettings {
        env_settings(&[
            ("HTTPS_PROXY", P),
            ("HTTP_PROXY", P),
            ("NO_PROXY", no_proxy),
        ])
        .unwrap()
    }

    fn direct(settings: &ProxySettings, target: &str) -> bool {
        route(settings, target).is_none()
    }

    #[test]
    fn https_servers_use_https_proxy_and_http_servers_http_proxy() {
        let s = env_settings(&[
            ("HTTPS_PROXY", "http://secure.corp:1"),
            ("HTTP_PROXY", "http://plain.corp:2"),
        ])
        .unwrap();
        assert_eq!(
            route(&s, "https://api.example.com:6443").as_deref(),
            Some("http://secure.corp:1/")
        );
        assert_eq!(
            route(&s, "http://api.example.com").as_deref(),
            Some("http://plain.corp:2/")
        );
        let only_https = env_settings(&[("https_proxy", "http://secure.corp:1")]).unwrap();
        assert!(direct(&only_https, "http://api.example.com"));
        assert!(!direct(&only_https, "https://api.example.com"));
    }

    #[test]
    fn upper_case_variables_win_and_empty_ones_count_as_unset() {
        let s = env_settings(&[
            ("HTTPS_PROXY", "http://upper:1"),
            ("https_proxy", "http://lower:1"),
            ("HTTP_PROXY", ""),
            ("http_proxy", "http://lower:2"),
            ("NO_PROXY", ""),
            ("no_proxy", "skip.example.com"),
        ])
        .unwrap();
        assert_eq!(
            route(&s, "https://a.example.com").as_deref(),
            Some("http://upper:1/")
        );
        assert_eq!(
            route(&s, "http://a.example.com").as_deref(),
            Some("http://lower:2/")
        );
        assert!(direct(&s, "https://skip.example.com"));
    }

    #[test]
    fn a_value_without_a_scheme_means_http_and_the_port_defaults_to_80() {
        let s = env_settings(&[
            ("HTTPS_PROXY", "proxy.corp:3128"),
            ("HTTP_PROXY", "user:pw@plain.corp"),
        ])
        .unwrap();
        let https = proxy_for(&s, &"https://api:6443".parse().unwrap()).unwrap();
        assert_eq!(https.uri, "http://proxy.corp:3128/");
        assert!(https.authorization.is_none());
        let http = proxy_for(&s, &"http://api".parse().unwrap()).unwrap();
        assert_eq!(http.uri, "http://plain.corp:80/");
        assert_eq!(http.display, "http://user:[REDACTED]@plain.corp/");
        assert!(http.authorization.is_some());
    }

    #[test]
    fn no_environment_means_direct() {
        let s = env_settings(&[]).unwrap();
        assert!(direct(&s, "https://api.example.com"));
        assert!(direct(&s, "http://api.example.com"));
    }

    #[test]
    fn localhost_and_loopback_addresses_never_go_through_an_environment_proxy() {
        let s = with_no_proxy("");
        for target in [
            "https://localhost:6443",
            "https://LocalHost:6443",
            "http://localhost",
            "https://127.0.0.1:6443",
            "https://127.8.9.10",
            "https://[::1]:6443",
            "https://[::ffff:127.0.0.1]:6443",
        ] {
            assert!(direct(&s, target), "{target}");
        }
        for target in [
            "https://localhost.example.com",
            "https://128.0.0.1",
            "https://[::2]",
        ] {
            assert!(!direct(&s, target), "{target}");
        }
    }

    #[test]
    fn a_proxy_url_takes_every_connection_loopback_included_and_ignores_no_proxy() {
        let url = url::Url::parse("http://proxy.corp:3128").unwrap();
        let s = ProxySettings::new(&Proxy::Url(url), |name| {
            panic!("Proxy::Url must not read the environment ({name})")
        })
        .unwrap();
        for target in [
            "https://127.0.0.1:6443",
            "https://localhost",
            "http://[::1]:8080",
            "https://api.example.com",
        ] {
            assert_eq!(route(&s, target).as_deref(), Some(P), "{target}");
        }
    }

    #[test]
    fn proxy_none_is_always_direct() {
        let s = ProxySettings::new(&Proxy::None, |name| panic!("read {name}")).unwrap();
        assert!(direct(&s, "https://api.example.com"));
        assert!(direct(&s, "http://api.example.com"));
    }

    #[test]
    fn no_proxy_star_disables_the_proxy_for_every_host() {
        let s = with_no_proxy("example.com, *");
        assert!(direct(&s, "https://anything.org"));
        assert!(direct(&s, "http://10.1.2.3:8080"));
        // `*` only counts alone: as part of a name it is a wildcard prefix.
        let s = with_no_proxy("*.example.com");
        assert!(!direct(&s, "https://anything.org"));
        assert!(direct(&s, "https://a.example.com"));
        assert!(!direct(&s, "https://example.com"));
    }

    #[test]
    fn no_proxy_ip_addresses_and_cidr_blocks_match_addresses_only() {
        let s = with_no_proxy("10.0.0.0/8, 192.168.1.7, fd00::/8, 2001:db8::1, 172.16.0.9/16");
        for target in [
            "https://10.1.2.3:6443",
            "https://10.255.255.255",
            "https://192.168.1.7",
            "https://[fd12::1]:6443",
            "https://[2001:db8::1]",
            "https://[::ffff:10.0.0.1]",
            "https://172.16.200.1",
        ] {
            assert!(direct(&s, target), "{target}");
        }
        for target in [
            "https://11.0.0.1",
            "https://192.168.1.8",
            "https://[fe00::1]",
            "https://[2001:db8::2]",
            "https://172.17.0.1",
            // Names are not resolved to compare them with addresses.
            "https://ten.example.com",
        ] {
            assert!(!direct(&s, target), "{target}");
        }
    }

    #[test]
    fn no_proxy_names_match_themselves_and_their_subdomains() {
        let s = with_no_proxy("example.com");
        assert!(direct(&s, "https://example.com"));
        assert!(direct(&s, "https://api.example.com"));
        assert!(direct(&s, "https://a.b.example.com:6443"));
        assert!(!direct(&s, "https://notexample.com"));
        assert!(!direct(&s, "https://example.com.evil.org"));
    }

    #[test]
    fn no_proxy_names_with_a_leading_dot_match_subdomains_only() {
        let s = with_no_proxy(".example.com");
        assert!(!direct(&s, "https://example.com"));
        assert!(direct(&s, "https://api.example.com"));
    }

    #[test]
    fn no_proxy_entries_with_a_port_match_that_port_only() {
        let s = with_no_proxy("example.com:6443, 10.1.2.3:443, [fd00::1]:8443, other.org:");
        assert!(direct(&s, "https://api.example.com:6443"));
        assert!(!direct(&s, "https://api.example.com"));
        // The scheme's port counts when the URL has none.
        assert!(direct(&s, "https://10.1.2.3"));
        assert!(!direct(&s, "http://10.1.2.3"));
        assert!(!direct(&s, "https://10.1.2.3:6443"));
        assert!(direct(&s, "https://[fd00::1]:8443"));
        assert!(!direct(&s, "https://[fd00::1]"));
        // An empty port means any port.
        assert!(direct(&s, "https://other.org:1234"));
    }

    #[test]
    fn no_proxy_matching_ignores_case_and_spaces() {
        let s = with_no_proxy("  Example.COM ,FD00::/8 ");
        assert!(direct(&s, "https://API.example.com"));
        assert!(direct(&s, "https://[FD00::5]"));
    }

    #[test]
    fn malformed_no_proxy_entries_are_ignored() {
        let s = with_no_proxy(",, :443, example.com:notaport, [::1, ., 10.0.0.0/99, good.org");
        assert!(s.no_proxy.ips.is_empty(), "{:?}", s.no_proxy);
        assert!(direct(&s, "https://good.org"));
        assert!(!direct(&s, "https://example.com"));
        assert!(!direct(&s, "https://10.0.0.1"));
    }

    #[test]
    fn unsupported_proxy_schemes_are_configuration_errors_naming_the_setting() {
        for (value, words) in [
            ("https://u:s3cret@proxy.corp", "https:// proxies"),
            ("socks5://u:s3cret@proxy.corp:1080", "SOCKS5 is not"),
            ("socks5h://proxy.corp:1080", "SOCKS5 is not"),
            ("ftp://u:s3cret@proxy.corp", "unsupported proxy scheme ftp"),
        ] {
            let err = env_settings(&[("HTTPS_PROXY", value)]).unwrap_err();
            let text = err.to_string();
            assert!(text.contains("HTTPS_PROXY"), "{text}");
            assert!(text.contains(words), "{text}");
            assert!(!format!("{text}{err:?}").contains("s3cret"), "{text}");
            let url = url::Url::parse(value).unwrap();
            let err = ProxySettings::new(&Proxy::Url(url), |_| None).unwrap_err();
            assert!(err.to_string().contains("proxy-url"), "{err}");
            assert!(!format!("{err}{err:?}").contains("s3cret"), "{err}");
        }
    }

    #[test]
    fn malformed_proxy_values_are_errors_that_do_not_quote_them() {
        for value in [
            "http://u:s3cret@proxy.corp:99999",
            "u:s3cret@proxy.corp:port",
            "http://u:s3cret@[::1",
            "http://u:s3cret@/path",
        ] {
            let err = env_settings(&[("http_proxy", value)]).unwrap_err();
            let text = format!("{err} {err:?}");
            assert!(text.contains("http_proxy"), "{value}: {text}");
            assert!(!text.contains("s3cret"), "{value}: {text}");
        }
    }

    #[test]
    fn passwords_are_redacted_and_user_names_kept() {
        let r = |u: &str| redacted(&url::Url::parse(u).unwrap());
        assert_eq!(
            r("http://me:s3cret@proxy:3128"),
            "http://me:[REDACTED]@proxy:3128/"
        );
        assert_eq!(r("http://:s3cret@proxy"), "http://:[REDACTED]@proxy/");
        assert_eq!(r("http://me@proxy"), "http://me@proxy/");
        assert_eq!(r("http://proxy:1/"), "http://proxy:1/");
        let debug = format!(
            "{:?}",
            Proxy::Url(url::Url::parse("http://me:s3cret@proxy").unwrap())
        );
        assert_eq!(debug, r#"Url("http://me:[REDACTED]@proxy/")"#);
        let s = env_settings(&[("HTTPS_PROXY", "http://me:s3cret@proxy")]).unwrap();
        assert!(!format!("{s:?}").contains("s3cret"), "{s:?}");
    }

    #[test]
    fn user_info_becomes_basic_proxy_authorization_percent_decoded() {
        let url = url::Url::parse("http://us%40er:p%3Ass@proxy").unwrap();
        let s = ProxySettings::new(&Proxy::Url(url), |_| None).unwrap();
        let auth = s.http.as_ref().unwrap().authorization.clone().unwrap();
        assert!(auth.is_sensitive());
        let expected = base64::engine::general_purpose::STANDARD.encode("us@er:p:ss");
        assert_eq!(auth, format!("Basic {expected}").as_str());
        assert_eq!(percent_decode("a%zzb%4"), b"a%zzb%4");
    }

    #[test]
    fn only_forwarded_requests_carry_proxy_authorization() {
        let url = url::Url::parse("http://me:pw@proxy").unwrap();
        let s = ProxySettings::new(&Proxy::Url(url), |_| None).unwrap();
        let http: Uri = "http://api:8080".parse().unwrap();
        let https: Uri = "https://api:6443".parse().unwrap();
        assert!(forward_authorization(&s, &http, false).is_some());
        assert!(
            forward_authorization(&s, &http, true).is_none(),
            "h2c tunnels"
        );
        assert!(
            forward_authorization(&s, &https, false).is_none(),
            "https tunnels"
        );
        let anonymous = ProxySettings::new(
            &Proxy::Url(url::Url::parse("http://proxy").unwrap()),
            |_| None,
        )
        .unwrap();
        assert!(forward_authorization(&anonymous, &http, false).is_none());
    }

    #[test]
    fn connect_authority_has_an_explicit_port() {
        let a = |u: &str| connect_authority(&u.parse().unwrap()).unwrap();
        assert_eq!(a("https://api.example.com"), "api.example.com:443");
        assert_eq!(a("https://api.example.com:6443/x"), "api.example.com:6443");
        assert_eq!(a("http://10.0.0.1"), "10.0.0.1:80");
        assert_eq!(a("https://[fd00::1]:6443"), "[fd00::1]:6443");
    }

    #[test]
    fn a_response_head_ends_at_the_first_empty_line() {
        assert_eq!(head_end(b"HTTP/1.1 200 OK\r\n\r\nrest"), Some(19));
        assert_eq!(head_end(b"HTTP/1.1 200 OK\r\nA: b\r\n\r\n"), Some(25));
        assert_eq!(head_end(b"HTTP/1.0 200 OK\n\n"), Some(17));
        assert_eq!(head_end(b"HTTP/1.1 200 OK\r\nA: b\r\n"), None);
        assert_eq!(head_end(b""), None);
        assert_eq!(head_end(b"\n"), None);
    }

    #[test]
    fn only_a_2xx_answer_opens_a_tunnel_and_others_are_quoted_safely() {
        let url = url::Url::parse("http://me:s3cret@proxy:3128").unwrap();
        let proxy = ProxyEndpoint::from_url(&url, "test").unwrap();
        let check = |head: &[u8]| check_connect_status(head, &proxy, "api:443");
        for ok in [
            &b"HTTP/1.1 200 Connection established\r\n"[..],
            b"HTTP/1.0 200 OK\r\n",
            b"HTTP/1.1 204\r\n",
            b"HTTP/1.1 299 Whatever",
        ] {
            assert!(check(ok).is_ok(), "{}", String::from_utf8_lossy(ok));
        }
        let err = check(b"HTTP/1.1 403 Forbidden\r\nX: y\r\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "proxy http://me:[REDACTED]@proxy:3128/: refused CONNECT api:443: HTTP/1.1 403 Forbidden"
        );
        let err = check(b"HTTP/1.1 407 Proxy Authentication Required\r\n").unwrap_err();
        assert!(err.to_string().contains("407"), "{err}");
        for garbage in [
            &b"SSH-2.0-OpenSSH_9.6\r\n"[..],
            b"HTTP/1.1 2000 OK\r\n",
            b"HTTP/1.1 20\r\n",
            b"HTTP/2 200\r\n",
            b"\xff\xfe\x00\x1b[31m\r\n",
            b"",
        ] {
            let err = check(garbage).unwrap_err().to_string();
            assert!(err.contains("something other than HTTP/1.x"), "{err}");
            assert!(!err.contains('\x1b') && !err.contains('\0'), "{err:?}");
        }
        let long = [b'x'; 10_000];
        assert!(check(&long).unwrap_err().to_string().len() < 500);
    }
}
