//! No secret shows in the `Debug` (or `Display`) of any configuration, client or error type:
//! every secret below is a marker, and every text the types produce is searched for all of them.

use std::path::PathBuf;

use reflector::{
    Client, ClientError, ClusterConfig, ConfigError, Credentials, ExecConfig, HttpListerWatcher,
    Impersonate, OidcConfig, ReflectorError, Resource,
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
    OidcConfig {
        issuer_url: url::Url::parse("https://issuer.example").unwrap(),
        client_id: "kubectl".into(),
        client_secret: Some("CLIENT-SECRET-MARKER".into()),
        id_token: Some("ID-TOKEN-MARKER".into()),
        refresh_token: Some("REFRESH-MARKER".into()),
        issuer_certificate_authority: None,
    }
}

fn exec() -> ExecConfig {
    ExecConfig {
        command: "get-token".into(),
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
    let load = ClusterConfig::load_kubeconfig_files(&[path], None).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(load.warnings.len(), 2, "{:?}", load.warnings);
    let shown: Vec<String> = load.warnings.iter().map(|w| w.to_string()).collect();
    assert_clean("KubeconfigLoad", &format!("{load:?} {shown:?}"));
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
