//! Kubeconfig and in-cluster loading from fixture files, including the error cases.

use std::path::PathBuf;

use reflector::{ClusterConfig, ConfigError, Credentials, ExposeSecret as _};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn load(files: &[&str], context: Option<&str>) -> Result<ClusterConfig, ConfigError> {
    let paths: Vec<PathBuf> = files
        .iter()
        .map(|f| fixture(&format!("kubeconfig/{f}")))
        .collect();
    ClusterConfig::from_kubeconfig_files(&paths, context)
}

fn field_of(err: ConfigError) -> String {
    match err {
        ConfigError::Field { field, .. } => field,
        other => panic!("expected a field error, got {other}"),
    }
}

#[test]
fn current_context_gives_server_ca_namespace_server_name_and_token() {
    let c = load(&["main.yaml"], None).unwrap();
    assert_eq!(c.server.as_str(), "https://main.example:6443/");
    assert_eq!(c.default_namespace, "dev-ns");
    assert_eq!(c.tls_server_name.as_deref(), Some("kubernetes.default"));
    assert!(c
        .certificate_authority
        .unwrap()
        .starts_with(b"-----BEGIN CERTIFICATE-----"));
    assert!(
        matches!(c.credentials, Credentials::Token(ref t) if t.expose_secret() == "alice-token")
    );
}

#[test]
fn a_named_context_is_used_and_token_file_paths_resolve_against_the_kubeconfig() {
    let c = load(&["main.yaml"], Some("files")).unwrap();
    assert_eq!(c.default_namespace, "default");
    match c.credentials {
        Credentials::TokenFile(p) => assert_eq!(p, fixture("kubeconfig/token.txt")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn merged_files_first_definition_and_first_current_context_win() {
    let c = load(&["main.yaml", "second.yaml"], None).unwrap();
    assert_eq!(c.server.host_str(), Some("main.example"));
    assert!(
        matches!(c.credentials, Credentials::Token(ref t) if t.expose_secret() == "alice-token")
    );
    let c = load(&["second.yaml", "main.yaml"], None).unwrap();
    assert_eq!(c.server.host_str(), Some("ops.example"));
    assert!(c.insecure_skip_tls_verify);
    assert!(matches!(c.credentials, Credentials::Basic { ref username, .. } if username == "bob"));
    let c = load(&["missing.yaml", "main.yaml", "second.yaml"], Some("certs")).unwrap();
    assert!(c
        .client_certificate
        .unwrap()
        .starts_with(b"-----BEGIN CERTIFICATE"));
    assert!(c
        .client_key
        .unwrap()
        .expose_secret()
        .starts_with(b"-----BEGIN PRIVATE KEY"));
}

#[test]
fn exec_plugin_users_are_read_with_args_env_and_a_resolved_command() {
    let c = load(&["second.yaml"], Some("exec")).unwrap();
    match c.credentials {
        Credentials::Exec(e) => {
            assert_eq!(e.command, fixture("kubeconfig/./bin/get-token"));
            assert_eq!(e.args, ["--cluster", "ops"]);
            assert_eq!(e.env, [("MODE".to_string(), "fast".to_string())]);
            assert_eq!(e.api_version, "client.authentication.k8s.io/v1");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn broken_kubeconfigs_name_the_broken_field() {
    let cases = [
        (None, "clusters[empty].cluster.server"),
        (
            Some("bad-ca"),
            "clusters[bad-ca].cluster.certificate-authority-data",
        ),
        (Some("bad-url"), "clusters[bad-url].cluster.server"),
        (
            Some("dangling-cluster"),
            "contexts[dangling-cluster].context.cluster",
        ),
        (
            Some("dangling-user"),
            "contexts[dangling-user].context.user",
        ),
        (Some("half-cert"), "users[half].user.client-key"),
        (
            Some("exec-no-command"),
            "users[exec-no-command].user.exec.command",
        ),
        (Some("absent"), "contexts[absent]"),
    ];
    for (context, expected) in cases {
        let err = load(&["broken.yaml"], context).unwrap_err();
        assert!(err.to_string().contains(expected), "{err}");
        assert_eq!(field_of(err), expected);
    }
}

#[test]
fn unreadable_and_invalid_files_are_errors() {
    assert!(matches!(
        load(&["syntax-error.yaml"], None),
        Err(ConfigError::Yaml { .. })
    ));
    assert!(matches!(
        load(&["missing.yaml"], None),
        Err(ConfigError::Io { .. })
    ));
    assert!(matches!(
        load(&["missing.yaml", "also-missing.yaml"], None),
        Err(ConfigError::Field { .. })
    ));
}

#[test]
fn in_cluster_config_reads_token_ca_namespace_and_service_address() {
    let c = ClusterConfig::incluster_from(
        &fixture("incluster"),
        Some("10.96.0.1".into()),
        Some("443".into()),
    )
    .unwrap();
    assert_eq!(c.server.as_str(), "https://10.96.0.1/");
    assert_eq!(c.default_namespace, "team-a");
    assert!(c.certificate_authority.is_some());
    assert!(matches!(c.credentials, Credentials::TokenFile(ref p) if p.ends_with("token")));
    let c = ClusterConfig::incluster_from(
        &fixture("incluster"),
        Some("fd00::1".into()),
        Some("6443".into()),
    )
    .unwrap();
    assert_eq!(c.server.as_str(), "https://[fd00::1]:6443/");
}

#[test]
fn in_cluster_config_errors_outside_a_pod() {
    let err = |dir: &str, host: Option<&str>, port: Option<&str>| {
        ClusterConfig::incluster_from(&fixture(dir), host.map(Into::into), port.map(Into::into))
            .unwrap_err()
    };
    assert!(err("incluster", None, Some("443"))
        .to_string()
        .contains("KUBERNETES_SERVICE_HOST"));
    assert!(err("incluster", Some("h"), None)
        .to_string()
        .contains("KUBERNETES_SERVICE_PORT"));
    assert!(err("incluster", Some("h"), Some("http"))
        .to_string()
        .contains("not a port"));
    assert!(err("incluster-no-token", Some("h"), Some("443"))
        .to_string()
        .contains("token"));
}

/// Writes `yaml` as a kubeconfig in a directory of its own and loads `context` from it.
fn load_text(name: &str, yaml: &str, context: Option<&str>) -> Result<ClusterConfig, ConfigError> {
    let dir = std::env::temp_dir().join(format!("kubeconfig-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("config");
    std::fs::write(&path, yaml).unwrap();
    let result = ClusterConfig::from_kubeconfig_files(&[path], context);
    std::fs::remove_dir_all(&dir).unwrap();
    result
}

// Nothing secret reaches Debug or an error: tokens, passwords, client keys, exec plugin
// environments, and values a YAML parser would quote back.
#[test]
fn no_secret_shows_in_the_debug_of_a_config_or_in_a_configuration_error() {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let yaml = format!(
        r#"apiVersion: v1
kind: Config
current-context: token
clusters:
- name: c
  cluster: {{server: "https://c.example:6443"}}
contexts:
- {{name: token, context: {{cluster: c, user: token}}}}
- {{name: basic, context: {{cluster: c, user: basic}}}}
- {{name: cert, context: {{cluster: c, user: cert}}}}
- {{name: exec, context: {{cluster: c, user: exec}}}}
users:
- {{name: token, user: {{token: TOKEN-SECRET-1}}}}
- {{name: basic, user: {{username: bob, password: PASSWORD-SECRET-2}}}}
- name: cert
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
- name: exec
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: get-token
      env: [{{name: API_KEY, value: ENV-SECRET-3}}]
"#,
        cert = b64("-----BEGIN CERTIFICATE-----\nPUBLIC\n-----END CERTIFICATE-----\n"),
        key = b64("-----BEGIN PRIVATE KEY-----\nKEY-SECRET-4\n-----END PRIVATE KEY-----\n"),
    );
    let secrets = ["SECRET-1", "SECRET-2", "SECRET-3", "SECRET-4"];
    for context in ["token", "basic", "cert", "exec"] {
        let config = load_text("secrets", &yaml, Some(context)).unwrap();
        let debug = format!("{config:?} {:?}", config.credentials);
        for secret in secrets {
            assert!(!debug.contains(secret), "{context}: {debug}");
        }
    }
    // The secrets are still there for the requests that need them.
    let token = load_text("secrets", &yaml, Some("token")).unwrap();
    assert!(
        matches!(token.credentials, Credentials::Token(ref t) if t.expose_secret() == "TOKEN-SECRET-1")
    );
    let cert = load_text("secrets", &yaml, Some("cert")).unwrap();
    let key = cert.client_key.as_ref().unwrap().expose_secret();
    assert!(String::from_utf8_lossy(key).contains("KEY-SECRET-4"));

    // A token where a map belongs: the parser quotes the value it found; the error does not.
    let wrong = "apiVersion: v1\nkind: Config\nusers: \"TOKEN-SECRET-5\"\n";
    let err = load_text("wrong", wrong, None).unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(matches!(err, ConfigError::Yaml { .. }), "{text}");
    assert!(!text.contains("SECRET-5"), "{text}");
    assert!(text.contains("line"), "the position is kept: {text}");
}

#[test]
fn insecure_skip_tls_verify_together_with_a_certificate_authority_is_refused() {
    let yaml = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\nclusters:\n- name: c\n  cluster:\n    server: https://c.example:6443\n    insecure-skip-tls-verify: true\n    certificate-authority: {}\ncontexts:\n- {{name: x, context: {{cluster: c}}}}\n",
        fixture("kubeconfig/ca.pem").display()
    );
    let err = load_text("insecure", &yaml, None).unwrap_err();
    assert!(
        field_of(err).ends_with("insecure-skip-tls-verify"),
        "names the field"
    );
    // Built by hand, the same combination is refused when the client is made.
    let mut config = ClusterConfig::new("https://c.example:6443").unwrap();
    config.insecure_skip_tls_verify = true;
    config.certificate_authority = Some(std::fs::read(fixture("kubeconfig/ca.pem")).unwrap());
    assert!(matches!(
        reflector::Client::new(&config),
        Err(ConfigError::Tls(m)) if m.contains("insecure")
    ));
}

fn load_fields(context: &str) -> Result<reflector::KubeconfigLoad, ConfigError> {
    ClusterConfig::load_kubeconfig_files(&[fixture("kubeconfig/fields.yaml")], Some(context))
}

fn warned(load: &reflector::KubeconfigLoad) -> Vec<String> {
    load.warnings.iter().map(|w| w.field.clone()).collect()
}

#[test]
fn impersonation_fields_become_an_impersonate_setting() {
    let load = load_fields("impersonate").unwrap();
    let imp = load.config.impersonate.clone().expect("impersonation");
    assert_eq!(imp.user, "jane");
    assert_eq!(imp.uid.as_deref(), Some("1234"));
    assert_eq!(imp.groups, ["developers", "system:authenticated"]);
    assert_eq!(imp.extra["example.com/scopes"], ["view", "edit"]);
    match &load.config.proxy {
        reflector::Proxy::Url(u) => assert_eq!(u.host_str(), Some("proxy.example")),
        other => panic!("{other:?}"),
    }
    assert!(!format!("{:?}", load.config).contains("proxy-password"));
    assert!(!load.config.compression, "disable-compression: true");
    assert!(
        load_fields("oidc-no-token").is_err()
            && load_fields("token-and-exec").unwrap().config.compression
    );
    // `extensions` and `preferences` are known and ignored without a warning.
    assert!(load.warnings.is_empty(), "{:?}", load.warnings);
}

#[test]
fn impersonating_groups_without_a_user_is_refused() {
    let err = load_fields("groups-alone").unwrap_err();
    assert_eq!(field_of(err), "users[groups-alone].user.as");
}

#[test]
fn an_oidc_auth_provider_is_read_with_its_tokens_kept_secret() {
    let load = load_fields("oidc").unwrap();
    let Credentials::Oidc(oidc) = &load.config.credentials else {
        panic!("{:?}", load.config.credentials)
    };
    assert_eq!(
        oidc.issuer_url.as_str(),
        "https://issuer.example/realms/k8s"
    );
    assert_eq!(oidc.client_id, "kubectl");
    assert_eq!(
        oidc.id_token.as_ref().unwrap().expose_secret(),
        "oidc-id-token"
    );
    assert_eq!(
        oidc.refresh_token.as_ref().unwrap().expose_secret(),
        "oidc-refresh-token"
    );
    assert!(oidc.issuer_certificate_authority.is_some());
    assert_eq!(
        warned(&load),
        [
            "users[oidc].user.auth-provider.config.flavour",
            "users[oidc].user.auth-provider.config.extra-scopes",
        ]
    );
    let debug = format!("{:?} {:?}", load.config, load.warnings);
    for secret in ["oidc-id-token", "oidc-refresh-token", "oidc-client-secret"] {
        assert!(!debug.contains(secret), "{secret} in {debug}");
    }
    let err = load_fields("oidc-no-token").unwrap_err();
    assert_eq!(
        field_of(err),
        "users[oidc-no-token].user.auth-provider.config.id-token"
    );
}

#[test]
fn other_auth_providers_are_an_error_naming_them_and_what_to_use() {
    let err = load_fields("gcp").unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("\"gcp\"") && text.contains("gke-gcloud-auth-plugin"),
        "{text}"
    );
    assert!(!text.contains("gcp-access-token"), "{text}");
    assert_eq!(field_of(err), "users[gcp].user.auth-provider.name");
}

#[test]
fn exec_install_hint_cluster_info_and_interactive_mode_are_read() {
    let load = load_fields("exec-full").unwrap();
    let Credentials::Exec(exec) = &load.config.credentials else {
        panic!("{:?}", load.config.credentials)
    };
    assert_eq!(
        exec.install_hint.as_deref(),
        Some("install get-token with: apt install get-token")
    );
    assert!(exec.provide_cluster_info);
    assert_eq!(exec.timeout, reflector::ExecConfig::DEFAULT_TIMEOUT);
    assert_eq!(warned(&load), ["users[exec-full].user.exec.color"]);
    let err = load_fields("exec-always").unwrap_err();
    assert_eq!(
        field_of(err),
        "users[exec-always].user.exec.interactiveMode"
    );
}

#[test]
fn unknown_and_superseded_fields_are_warnings_naming_them() {
    let load = load_fields("token-and-exec").unwrap();
    assert!(matches!(load.config.credentials, Credentials::Token(_)));
    assert_eq!(
        warned(&load),
        [
            "contexts[token-and-exec].context.colour",
            "clusters[typo].cluster.certificate-authority-dta",
            "users[token-and-exec].user.nickname",
            "users[token-and-exec].user.exec",
        ]
    );
    let text = load.warnings[3].to_string();
    assert!(text.contains("token is set"), "{text}");
    let err = load_fields("token-and-basic").unwrap_err();
    assert!(!err.to_string().contains("basic-password"));
    assert_eq!(field_of(err), "users[token-and-basic].user.username");
}

fn load_ignored(context: &str) -> Result<reflector::KubeconfigLoad, ConfigError> {
    ClusterConfig::load_kubeconfig_files(&[fixture("kubeconfig/ignored.yaml")], Some(context))
}

#[test]
fn unknown_keys_of_list_entries_are_warnings_and_a_misspelt_user_is_not_silently_empty() {
    let load = load_ignored("entry-typos").unwrap();
    assert_eq!(
        warned(&load),
        [
            "contexts[entry-typos].namespace",
            "clusters[entry-typo].server",
            "users[usr-typo].usr",
        ]
    );
    assert_eq!(load.config.server.host_str(), Some("entry.example"));
    assert_eq!(load.config.default_namespace, "default");
    assert!(matches!(load.config.credentials, Credentials::None));
    let shown = format!("{:?} {:?}", load.warnings, load.config);
    assert!(
        !shown.contains("never-read") && !shown.contains("wrong-level"),
        "{shown}"
    );
}

#[test]
fn a_file_and_data_for_the_same_pem_are_refused_as_client_go_validation_refuses_them() {
    for (context, expected) in [
        (
            "ca-both",
            "clusters[ca-both].cluster.certificate-authority-data",
        ),
        ("cert-both", "users[cert-both].user.client-certificate-data"),
        ("key-both", "users[key-both].user.client-key-data"),
    ] {
        let err = load_ignored(context).unwrap_err();
        let text = err.to_string();
        assert_eq!(field_of(err), expected, "{context}");
        assert!(text.contains("cannot be set together with"), "{text}");
    }
}

#[test]
fn basic_auth_halves_follow_client_go_with_a_warning_and_a_password_beside_a_token_is_refused() {
    // A password alone: client-go's transport sends no basic auth without a user name.
    let load = load_ignored("password-alone").unwrap();
    assert!(matches!(load.config.credentials, Credentials::None));
    assert_eq!(warned(&load), ["users[password-alone].user.password"]);
    assert!(load.warnings[0].reason.contains("username is not set"));
    assert!(!format!("{:?}", load.warnings).contains("lonely-password"));
    // A user name alone: sent with an empty password, as client-go sends it, and said so.
    let load = load_ignored("username-alone").unwrap();
    match &load.config.credentials {
        Credentials::Basic { username, password } => {
            assert_eq!(username, "bob");
            assert_eq!(password.expose_secret(), "");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(warned(&load), ["users[username-alone].user.password"]);
    // A password beside a token: two authentication methods, an error as in client-go.
    let err = load_ignored("token-and-password").unwrap_err();
    assert!(!err.to_string().contains("basic-password"), "{err}");
    assert_eq!(field_of(err), "users[token-and-password].user.password");
}

#[test]
fn unknown_keys_of_exec_env_entries_are_warnings_and_a_nameless_variable_is_an_error() {
    let load = load_ignored("exec-env").unwrap();
    let Credentials::Exec(exec) = &load.config.credentials else {
        panic!("{:?}", load.config.credentials)
    };
    assert_eq!(exec.env.len(), 2);
    assert_eq!(
        warned(&load),
        ["users[exec-env].user.exec.env[API_KEY].valueFrom"]
    );
    assert!(!format!("{:?}", load.warnings).contains("env-secret-value"));
    let err = load_ignored("exec-env-no-name").unwrap_err();
    assert_eq!(
        field_of(err),
        "users[exec-env-no-name].user.exec.env[0].name"
    );
}

#[test]
fn oidc_keys_beside_name_and_config_extra_scopes_and_a_shadowed_ca_file_are_warnings() {
    let load = load_ignored("oidc-extras").unwrap();
    let Credentials::Oidc(oidc) = &load.config.credentials else {
        panic!("{:?}", load.config.credentials)
    };
    // The data wins, as in client-go's transport: the file is not read.
    assert_eq!(
        oidc.issuer_certificate_authority.as_deref(),
        Some(&b"-----BEGIN CERTIFICATE-----\n"[..])
    );
    assert_eq!(
        warned(&load),
        [
            "users[oidc-extras].user.auth-provider.cmd-path",
            "users[oidc-extras].user.auth-provider.config.extra-scopes",
            "users[oidc-extras].user.auth-provider.config.idp-certificate-authority",
        ]
    );
    assert!(load.warnings[1].reason.contains("no scopes"));
}

#[test]
fn a_yaml_alias_bomb_is_an_error_not_an_exhausted_machine() {
    // Nine levels of nine aliases: a billion strings if expanded.
    let mut yaml = String::from("a0: &a0 [\"lol\"]\n");
    for i in 1..10 {
        let prev = format!("*a{}", i - 1);
        let refs = [prev.as_str(); 9].join(", ");
        yaml.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    // Under a field the loader ignores, so that nothing but a budget stops the expansion.
    yaml.push_str("preferences: *a9\n");
    let err = load_text("bomb", &yaml, None).unwrap_err();
    assert!(matches!(err, ConfigError::Yaml { .. }), "{err}");
    assert!(err.to_string().contains("budget"), "{err}");
}

#[test]
fn an_entry_missing_a_field_is_named_by_its_section_and_position_or_name() {
    let head = "current-context: c\ncontexts: [{name: c, context: {cluster: c, user: alice}}]\n\
                clusters: [{name: c, cluster: {server: 'https://h'}}]\n";
    // The third user has no name: it cannot be found, so it is named by its position.
    let yaml = format!(
        "{head}users:\n- {{name: alice, user: {{token: t}}}}\n- {{name: bob, user: {{}}}}\n\
         - user: {{token: t}}\n"
    );
    let err = load_text("nameless-user", &yaml, None).unwrap_err();
    assert!(matches!(err, ConfigError::Field { .. }), "{err:?}");
    assert_eq!(field_of(err), "users[2].name");
    let yaml = "clusters: [{cluster: {server: 'https://h'}}]\ncurrent-context: c\n";
    let err = load_text("nameless-cluster", yaml, None).unwrap_err();
    assert_eq!(field_of(err), "clusters[0].name");
    let yaml = format!("{head}users:\n- name: alice\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: get-token\n      env: [{{name: API_KEY}}]\n");
    let err = load_text("valueless-env", &yaml, None).unwrap_err();
    let text = err.to_string();
    assert_eq!(field_of(err), "users[alice].user.exec.env[API_KEY].value");
    assert!(text.contains("missing"), "{text}");
}

/// `n` clusters, contexts and users, each as kubectl writes them; the last context is current.
fn many_entries(n: usize) -> String {
    let mut yaml = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
    for i in 0..n {
        yaml.push_str(&format!(
            "- name: cluster-{i}\n  cluster:\n    server: https://10.{}.{}.1:6443\n    insecure-skip-tls-verify: true\n",
            i / 256 % 256,
            i % 256
        ));
    }
    yaml.push_str("contexts:\n");
    for i in 0..n {
        yaml.push_str(&format!(
            "- name: context-{i}\n  context:\n    cluster: cluster-{i}\n    user: user-{i}\n    namespace: ns-{i}\n"
        ));
    }
    yaml.push_str("users:\n");
    for i in 0..n {
        yaml.push_str(&format!(
            "- name: user-{i}\n  user:\n    token: token-{i}\n"
        ));
    }
    yaml.push_str(&format!("current-context: context-{}\n", n - 1));
    yaml
}

#[test]
fn a_kubeconfig_of_twenty_thousand_entries_per_section_loads() {
    let config = load_text("twenty-thousand", &many_entries(20_000), None).unwrap();
    assert_eq!(config.server.as_str(), "https://10.78.31.1:6443/");
    assert_eq!(config.default_namespace, "ns-19999");
    let Credentials::Token(token) = &config.credentials else {
        panic!("{:?}", config.credentials)
    };
    assert_eq!(token.expose_secret(), "token-19999");
}

#[test]
fn a_kubeconfig_larger_than_the_bound_is_refused_before_it_is_read_whole() {
    // Valid YAML all the way, so that only the size can refuse it.
    let mut yaml = many_entries(1);
    let line = format!("# {}\n", "x".repeat(1022));
    let lines = (reflector::MAX_KUBECONFIG_BYTES as usize).div_ceil(line.len());
    yaml.reserve(lines * line.len());
    for _ in 0..lines {
        yaml.push_str(&line);
    }
    let err = load_text("too-large", &yaml, None).unwrap_err();
    match &err {
        ConfigError::Io { source, .. } => {
            assert_eq!(source.kind(), std::io::ErrorKind::FileTooLarge, "{err}")
        }
        other => panic!("expected a file-too-large error, got {other}"),
    }
    assert!(err.to_string().contains("64 MiB"), "{err}");
}

#[test]
fn aliases_of_a_long_scalar_into_many_entries_breach_the_budget() {
    // One 1 MiB token in a file of 1 MiB, aliased into 98 users: 99 MiB of strings if expanded,
    // too few aliases for the alias-to-anchor ratio to apply; what stops it is that the scalar
    // bytes an alias replays count against the budget's 64 MiB as if they had been written out.
    let mut yaml = format!(
        "current-context: c\ncontexts: [{{name: c, context: {{cluster: c, user: u0}}}}]\n\
         clusters: [{{name: c, cluster: {{server: 'https://h'}}}}]\n\
         users:\n- {{name: u0, user: {{token: &t {}}}}}\n",
        "t".repeat(1 << 20)
    );
    for i in 1..99 {
        yaml.push_str(&format!("- {{name: u{i}, user: {{token: *t}}}}\n"));
    }
    let err = load_text("scalar-aliases", &yaml, None).unwrap_err();
    assert!(matches!(err, ConfigError::Yaml { .. }), "{err}");
    assert!(err.to_string().contains("budget"), "{err}");
}
