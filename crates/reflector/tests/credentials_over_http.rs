//! A credential configured for a plain `http://` server travels in clear text: the client says
//! so once, when it is built, naming the server and the kind of credential, never its value.

use std::io::Write;
use std::sync::Arc;

use parking_lot::Mutex;
use reflector::{Client, ClusterConfig, Credentials, ExecConfig};

/// Log lines written while the closure runs on this thread.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn warnings_while(f: impl FnOnce()) -> Vec<String> {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    let text = String::from_utf8(captured.0.lock().clone()).unwrap();
    text.lines().map(str::to_string).collect()
}

fn config(server: &str, credentials: Credentials) -> ClusterConfig {
    let mut config = ClusterConfig::new(server).unwrap();
    config.credentials = credentials;
    config.proxy = reflector::Proxy::None;
    config
}

#[test]
fn a_token_or_password_for_a_plain_http_server_is_warned_about_once_per_client() {
    let server = "http://api.example:8080";
    let cases = [
        (Credentials::Token("TOKEN-MARKER".into()), "bearer token"),
        (
            Credentials::Basic {
                username: "alice".into(),
                password: "PASSWORD-MARKER".into(),
            },
            "password",
        ),
        (
            Credentials::TokenFile("/var/run/token".into()),
            "bearer token",
        ),
        (
            Credentials::Exec(ExecConfig {
                command: "get-token".into(),
                api_version: "client.authentication.k8s.io/v1".into(),
                ..ExecConfig::default()
            }),
            "bearer token",
        ),
    ];
    for (credentials, what) in cases {
        let config = config(server, credentials);
        let lines = warnings_while(|| {
            let client = Client::new(&config).unwrap();
            // Clones share the client: they say nothing more.
            let _clones = (client.clone(), client.clone());
        });
        assert_eq!(lines.len(), 1, "{lines:?}");
        let line = &lines[0];
        assert!(line.contains("WARN"), "{line}");
        assert!(line.contains(server), "{line}");
        assert!(line.contains(what), "{line}");
        assert!(line.contains("clear text"), "{line}");
        assert!(
            !line.contains("MARKER") && !line.contains("alice"),
            "{line}"
        );
    }
}

#[test]
fn credentials_over_https_and_plain_http_without_credentials_are_not_warned_about() {
    for config in [
        config(
            "https://api.example:6443",
            Credentials::Token("TOKEN-MARKER".into()),
        ),
        config("http://api.example:8080", Credentials::None),
    ] {
        let lines = warnings_while(|| {
            Client::new(&config).unwrap();
        });
        assert!(lines.is_empty(), "{lines:?}");
    }
}
