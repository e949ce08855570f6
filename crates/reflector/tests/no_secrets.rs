//! No secret shows in the `Debug` (or `Display`) of any configuration, client or error type:
//! every secret below is a marker, and every text the types produce is searched for all of them.

use std::path::PathBuf;

use bytes::Bytes;
use reflector::store_index::DynamicObject;
use reflector::{
    Client, ClientError, ClusterConfig, ConfigError, Credentials, DecodeError, ExecConfig,
    HttpListerWatcher, Impersonate, ListPageError, ObjectList, OidcConfig, PaginationError,
    ReflectorError, Resource, Status, WatchDecoder,
};

const MARKERS: &[&str] = &[
    "TOKEN-MARKER",
    "PASSWORD-MARKER",
    "KEY-MARKER",
    "ENV-MARKER",
    "CLIENT-SECRET-MARKER",
    "ID-TOKEN-MARKER",
    "REFRESH-MARKER",
    "URL-PASSWORD-MARKER",
    "ARG-MARKER",
];

fn assert_clean(what: &str, text: &str) {
    for marker in MARKERS {
        assert!(
            !text.contains(marker),
            "{marker} shows in the {what}: {text}"
        );
    }
}

fn oidc() -> OidcConfig {
    OidcConfig::new(
        url::Url::parse("https://issuer.example").unwrap(),
        "kubectl",
    )
    .client_secret("CLIENT-SECRET-MARKER".into())
    .id_token("ID-TOKEN-MARKER".into())
    .refresh_token("REFRESH-MARKER".into())
}

fn exec() -> ExecConfig {
    ExecConfig {
        command: "get-token".into(),
        args: vec!["get-token".into(), "--token=ARG-MARKER".into()],
        env: vec![("API_KEY".into(), "ENV-MARKER".into())],
        ..ExecConfig::default()
    }
}

fn every_credential() -> Vec<Credentials> {
    vec![
        Credentials::Token("TOKEN-MARKER".into()),
        Credentials::Basic {
            username: "bob".into(),
            password: "PASSWORD-MARKER".into(),
        },
        Credentials::Exec(exec()),
        Credentials::Oidc(oidc()),
        Credentials::TokenFile(PathBuf::from("/var/run/token")),
    ]
}

fn config(credentials: Credentials) -> ClusterConfig {
    let mut config = ClusterConfig::new("https://api.example:6443").unwrap();
    config.credentials = credentials;
    config.client_key = Some(b"-----BEGIN PRIVATE KEY-----KEY-MARKER".to_vec().into());
    // Requests go through a proxy whose URL holds a password (and which is not there).
    config.proxy = reflector::Proxy::Url(
        url::Url::parse("http://user:URL-PASSWORD-MARKER@127.0.0.1:9").unwrap(),
    );
    config.impersonate = Some(Impersonate {
        user: "jane".into(),
        ..Impersonate::default()
    });
    config
}

#[test]
fn configurations_and_clients_never_show_a_secret() {
    assert_clean("OidcConfig", &format!("{:?}", oidc()));
    assert_clean("ExecConfig", &format!("{:?}", exec()));
    for credentials in every_credential() {
        assert_clean("Credentials", &format!("{credentials:?}"));
        let mut config = config(credentials);
        assert_clean("ClusterConfig", &format!("{config:?} {config:#?}"));
        // A client needs a usable key; the marker key is not one.
        config.client_key = None;
        let client = Client::new(&config).unwrap();
        assert_clean("Client", &format!("{client:?}"));
        let lw = HttpListerWatcher::<reflector::store_index::DynamicObject>::new(
            &config,
            Resource::namespaced("", "v1", "pods"),
        )
        .unwrap();
        assert_clean("HttpListerWatcher", &format!("{lw:?}"));
        let api = reflector::Api::<reflector::store_index::DynamicObject>::namespaced_with(
            client,
            Resource::namespaced("", "v1", "secrets"),
            "default",
        );
        assert_clean("Api", &format!("{api:?} {api:#?}"));
    }
}

#[test]
fn configuration_errors_never_show_a_secret() {
    let mut errors: Vec<ConfigError> = Vec::new();
    // A key that is not PEM.
    errors.push(Client::new(&config(Credentials::None)).unwrap_err());
    // A server URL with a password.
    errors.push(ClusterConfig::new("https://u:URL-PASSWORD-MARKER@api.example").unwrap_err());
    errors.push(ClusterConfig::new("https://u:URL-PASSWORD-MARKER@bad host").unwrap_err());
    // A proxy the client cannot use.
    let mut socks = config(Credentials::None);
    socks.client_key = None;
    socks.proxy =
        reflector::Proxy::Url(url::Url::parse("socks5://u:URL-PASSWORD-MARKER@h:1080").unwrap());
    errors.push(Client::new(&socks).unwrap_err());
    // Kubeconfigs: invalid YAML around a token, a wrong type holding one, token plus password,
    // an unsupported auth provider holding a token.
    let kubeconfigs = [
        "users:\n- name: u\n  user:\n    token: \"TOKEN-MARKER\n",
        "users:\n- name: u\n  user:\n    token: [TOKEN-MARKER]\ncurrent-context: c\n",
        "current-context: c\ncontexts: [{name: c, context: {cluster: c, user: u}}]\nclusters: [{name: c, cluster: {server: 'https://h'}}]\nusers: [{name: u, user: {token: TOKEN-MARKER, username: u, password: PASSWORD-MARKER}}]\n",
        "current-context: c\ncontexts: [{name: c, context: {cluster: c, user: u}}]\nclusters: [{name: c, cluster: {server: 'https://h'}}]\nusers: [{name: u, user: {auth-provider: {name: gcp, config: {access-token: TOKEN-MARKER}}}}]\n",
        "current-context: c\ncontexts: [{name: c, context: {cluster: c, user: u}}]\nclusters: [{name: c, cluster: {server: 'https://u:URL-PASSWORD-MARKER@h'}}]\nusers: [{name: u, user: {}}]\n",
        "current-context: c\ncontexts: [{name: c, context: {cluster: c, user: u}}]\nclusters: [{name: c, cluster: {server: 'https://h', proxy-url: 'http://u:URL-PASSWORD-MARKER@bad host'}}]\nusers: [{name: u, user: {}}]\n",
    ];
    let dir = std::env::temp_dir().join(format!("no-secrets-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (i, yaml) in kubeconfigs.iter().enumerate() {
        let path = dir.join(format!("config-{i}"));
        std::fs::write(&path, yaml).unwrap();
        errors.push(ClusterConfig::from_kubeconfig_files(&[path], None).unwrap_err());
    }
    std::fs::remove_dir_all(&dir).unwrap();
    for err in errors {
        assert_clean("ConfigError", &format!("{err} {err:?}"));
        let err = ClientError::from(err);
        assert_clean("ClientError", &format!("{err} {err:?}"));
        let err = ReflectorError::from(err);
        assert_clean("ReflectorError", &format!("{err} {err:?}"));
    }
}

#[test]
fn kubeconfig_warnings_name_fields_never_their_values() {
    let dir = std::env::temp_dir().join(format!("no-secrets-warn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("config");
    std::fs::write(
        &path,
        "current-context: c\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n\
         clusters: [{name: c, cluster: {server: 'https://h'}}]\n\
         users: [{name: u, user: {token: TOKEN-MARKER, tokne: PASSWORD-MARKER, \
         exec: {command: x, apiVersion: client.authentication.k8s.io/v1, env: [{name: K, value: ENV-MARKER}]}}}]\n",
    )
    .unwrap();
    let load = ClusterConfig::load_kubeconfig_files(std::slice::from_ref(&path), None).unwrap();
    assert_eq!(load.warnings.len(), 2, "{:?}", load.warnings);
    let shown: Vec<String> = load.warnings.iter().map(|w| w.to_string()).collect();
    assert_clean("KubeconfigLoad", &format!("{load:?} {shown:?}"));
    // The plugin in use: its arguments and environment values are held, never shown.
    std::fs::write(
        &path,
        "current-context: c\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n\
         clusters: [{name: c, cluster: {server: 'https://h'}}]\n\
         users: [{name: u, user: {exec: {command: x, apiVersion: client.authentication.k8s.io/v1, \
         args: [login, --token=ARG-MARKER, --client-secret, ARG-MARKER-2], \
         env: [{name: K, value: ENV-MARKER}]}}}]\n",
    )
    .unwrap();
    let load = ClusterConfig::load_kubeconfig_files(&[path], None).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let Credentials::Exec(exec) = &load.config.credentials else {
        panic!("not an exec plugin: {:?}", load.config.credentials);
    };
    assert_eq!(
        exec.args.len(),
        4,
        "the arguments are kept to run the plugin"
    );
    assert_clean(
        "KubeconfigLoad",
        &format!("{load:?} {load:#?} {:?}", load.config),
    );
}

#[tokio::test]
async fn request_errors_never_show_a_secret() {
    // Credentials that fail: an exec plugin that prints its environment (holding a key) and a
    // token to stderr and fails, an OIDC refresh that cannot reach its issuer.
    let failing_exec = ExecConfig {
        command: "sh".into(),
        args: vec![
            "-c".into(),
            "env >&2; echo \"API_KEY=$API_KEY\" >&2; \
             echo 'token: eyJhbGciOiJSUzI1NiJ9.TOKEN-MARKER.sig' >&2; exit 1"
                .into(),
        ],
        env: vec![("API_KEY".into(), "ENV-MARKER".into())],
        ..ExecConfig::default()
    };
    let mut unreachable_issuer = oidc();
    unreachable_issuer.issuer_url = url::Url::parse("http://127.0.0.1:9/realm").unwrap();
    unreachable_issuer.id_token = Some("expired-ID-TOKEN-MARKER.not.jwt".into());
    for credentials in [
        Credentials::Exec(failing_exec),
        Credentials::Oidc(unreachable_issuer),
        Credentials::Token("TOKEN-MARKER".into()),
    ] {
        let mut config = config(credentials);
        config.client_key = None;
        config.server = url::Url::parse("http://127.0.0.1:9").unwrap();
        let err = Client::new(&config)
            .unwrap()
            .get_bytes("/api/v1/pods")
            .await
            .unwrap_err();
        assert_clean("ClientError", &format!("{err} {err:?}"));
        if let ClientError::Auth(message) = &err {
            if message.contains("exec plugin") {
                // The plugin did print them: the error tells where to look, not what it said.
                assert!(message.contains("exit status: 1"), "{message}");
                assert!(message.contains("stderr ("), "{message}");
            }
        }
    }
}

#[tokio::test]
async fn an_exec_plugins_malformed_client_key_is_an_error_that_does_not_show_it() {
    let cert = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    let keys = [
        // Base64 of "KEY-MARKER": PEM that decodes, but to no key.
        "-----BEGIN PRIVATE KEY-----\nS0VZLU1BUktFUg==\n-----END PRIVATE KEY-----\n",
        // Not base64 at all.
        "-----BEGIN PRIVATE KEY-----\nKEY-MARKER KEY-MARKER\n-----END PRIVATE KEY-----\n",
        // Not PEM at all.
        "KEY-MARKER",
    ];
    for key in keys {
        let credential = serde_json::json!({
            "apiVersion": "client.authentication.k8s.io/v1",
            "kind": "ExecCredential",
            "status": {"clientCertificateData": cert, "clientKeyData": key},
        });
        let exec = ExecConfig {
            command: "sh".into(),
            args: vec!["-c".into(), "printf '%s' \"$CREDENTIAL\"".into()],
            env: vec![("CREDENTIAL".into(), credential.to_string())],
            ..ExecConfig::default()
        };
        let config = ClusterConfig {
            credentials: Credentials::Exec(exec),
            ..ClusterConfig::new("http://127.0.0.1:9").unwrap()
        };
        let err = Client::new(&config)
            .unwrap()
            .get_bytes("/api/v1/pods")
            .await
            .unwrap_err();
        let text = format!("{err} {err:?}");
        assert!(text.contains("clientKeyData"), "the key is named: {text}");
        assert_clean("ClientError", &text);
        // Base64 of the marker would be as bad.
        assert!(!text.contains("S0VZLU1BUktFUg"), "{text}");
    }
}

/// A Secret as a server would send it, its data a marker.
const SECRET: &str = r#"{"kind":"Secret","apiVersion":"v1","metadata":{"name":"db"},"type":"Opaque","data":{"password":"PASSWORD-MARKER","token":"TOKEN-MARKER"}}"#;

fn assert_reflector_error_clean(err: ReflectorError) {
    let text = format!("{err} {err:?}");
    assert_clean("ReflectorError", &text);
    if let Some(source) = std::error::Error::source(&err) {
        assert_clean("its source", &format!("{source} {source:?}"));
    }
}

#[test]
fn list_errors_never_quote_the_values_of_the_body() {
    let bodies = [
        // An object where a list belongs.
        SECRET.to_string(),
        // A list whose items are a string: the parser's message would quote it.
        r#"{"kind":"SecretList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":"TOKEN-MARKER"}"#.to_string(),
        // A list without a resource version, holding a Secret.
        format!(r#"{{"kind":"SecretList","apiVersion":"v1","metadata":{{}},"items":[{SECRET}]}}"#),
        // A list without items, its other fields secrets.
        r#"{"kind":"SecretList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"data":{"k":"KEY-MARKER"}}"#.to_string(),
    ];
    for body in bodies {
        let err = ReflectorError::from(
            ObjectList::<DynamicObject>::from_json(&Bytes::from(body.clone())).expect_err(&body),
        );
        assert!(
            matches!(err, ReflectorError::InvalidList(_)),
            "{body}: {err:?}"
        );
        assert_reflector_error_clean(err);
    }
    // What the object is, and its shape, still show.
    let ListPageError::NotAList(err) =
        ObjectList::<DynamicObject>::from_json(&Bytes::from(SECRET)).unwrap_err()
    else {
        panic!("not an InvalidList")
    };
    assert!(err.snippet.starts_with(r#"{"kind":"Secret","#), "{err}");
    assert!(err.snippet.contains(r#""password":"…""#), "{err}");
}

#[test]
fn pagination_errors_name_the_continue_token_never_a_page() {
    // Continue tokens are the server's opaque positions, not credentials; the pages themselves
    // never reach the error.
    for err in [
        PaginationError::RepeatedContinue {
            token: "eyJydiI6MTB9".into(),
            pages: 3,
        },
        PaginationError::UnexpectedContinue {
            token: "eyJydiI6MTB9".into(),
        },
        PaginationError::TooManyPages { max: 10_000 },
    ] {
        assert_reflector_error_clean(ReflectorError::from(err));
    }
}

#[test]
fn watch_decode_errors_never_quote_an_events_values() {
    let frames = [
        // Malformed JSON after a Secret's data.
        format!(r#"{{"type":"ADDED","object":{SECRET}]}}"#),
        // A value of the wrong type: the parser's message would quote it.
        r#"{"type":"ADDED","object":"TOKEN-MARKER"}"#.to_string(),
        // An unknown event type, carrying a Secret.
        format!(r#"{{"type":"SURPRISE","object":{SECRET}}}"#),
    ];
    for frame in frames {
        let mut decoder = WatchDecoder::<DynamicObject>::default();
        let mut out = Vec::new();
        let err = decoder
            .decode(Bytes::from(format!("{frame}\n")), &mut out)
            .expect_err(&frame);
        assert_reflector_error_clean(ReflectorError::from(err));
    }
    // The body ends inside a Secret's event.
    let mut decoder = WatchDecoder::<DynamicObject>::default();
    let mut out = Vec::new();
    decoder
        .decode(
            Bytes::from(format!(r#"{{"type":"ADDED","object":{SECRET}"#)),
            &mut out,
        )
        .unwrap();
    let err = decoder.finish(&mut out).unwrap_err();
    assert!(matches!(err, DecodeError::Truncated(_)), "{err:?}");
    assert_reflector_error_clean(ReflectorError::from(err));
    // A typed Secret whose data is not what the type wants.
    #[cfg(feature = "k8s-openapi")]
    {
        use k8s_openapi::api::core::v1::Secret;
        let frame = r#"{"type":"ADDED","object":{"kind":"Secret","apiVersion":"v1","metadata":{"name":"db"},"data":"TOKEN-MARKER"}}"#;
        let mut decoder = WatchDecoder::<Secret>::default();
        let mut out = Vec::new();
        let err = decoder
            .decode(Bytes::from(format!("{frame}\n")), &mut out)
            .unwrap_err();
        assert_reflector_error_clean(ReflectorError::from(err));
    }
}

#[test]
fn errors_built_from_a_servers_answer_never_quote_an_object_it_sent_back() {
    // A proxy or a webhook that answers an error with the object (a Secret) instead of a Status:
    // the Status made of it says what it is, not what it holds.
    for code in [400, 403, 404, 409, 422, 429, 500, 503] {
        let status = Status::from_response(code, SECRET.as_bytes());
        assert_clean("Status", &format!("{status:?}"));
        let err = ClientError::api(status);
        assert_eq!(err.status().map(|s| s.code), Some(code));
        assert_clean("ClientError", &format!("{err} {err:?}"));
        assert_reflector_error_clean(ReflectorError::from(err));
    }
    // A Status is the server's own words, and stays whole.
    let status = Status::from_response(
        404,
        br#"{"kind":"Status","status":"Failure","reason":"NotFound","code":404,"message":"secrets \"db\" not found"}"#,
    );
    assert_eq!(status.message, r#"secrets "db" not found"#);
    // Plain text (a proxy's page) is kept as text.
    let status = Status::from_response(502, b"<html>502 Bad Gateway</html>");
    assert_eq!(status.message, "<html>502 Bad Gateway</html>");
}
