//! A simple RBAC: rules granted to users or groups, checked on every resource request.
//!
//! A [`Rule`] is an RBAC `PolicyRule` with the binding's scope folded in: verbs, API groups,
//! resources (`pods`, `pods/status`, `*/scale`, `*`), optionally resource names, and optionally
//! the namespaces it applies in (a RoleBinding in each; none means everywhere, a
//! ClusterRoleBinding). It is granted to a [`Subject`] with
//! [`SimServerBuilder::allow`](crate::SimServerBuilder::allow). Members of `system:masters`
//! may do anything; every authenticated user may read discovery and create the self reviews
//! (`selfsubjectaccessreviews`, `selfsubjectrulesreviews`, `selfsubjectreviews`), as
//! kube-apiserver's default `system:basic-user` and `system:discovery` roles allow.
//!
//! A denied request is 403 `Forbidden` with kube-apiserver's words:
//! `pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace
//! "default"`, `pods "p" is forbidden: User "bob" cannot update resource "pods/status" ...`,
//! `namespaces is forbidden: ... at the cluster scope`.
//!
//! On the command line a rule is `--rule SPEC` (or a line of `--rules-file`), SPEC being
//! `;`-separated `key=value` pairs ([`parse_rule`]):
//! `user=bob;verbs=get,list,watch;resources=pods;namespaces=default`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use sim_apiserver::{Rule, SimServer, Subject, User};
//! let sim = SimServer::builder()
//!     .tls(true)
//!     .client_cert_auth(true)
//!     .user(User::new("alice").token("alice-token"))
//!     .user(User::new("ops-bot").group("ops"))
//!     .allow(
//!         Subject::user("alice"),
//!         Rule::new(&["get", "list", "watch"], &[""], &["pods"]).in_namespaces(&["default"]),
//!     )
//!     .allow(Subject::group("ops"), Rule::new(&["*"], &["apps"], &["deployments"]))
//!     .start()
//!     .await?;
//! // kubectl as alice (`kubectl auth can-i list pods` says yes), and as ops-bot by certificate.
//! std::fs::write("alice.kubeconfig", sim.kubeconfig_for_token("alice-token"))?;
//! std::fs::write("ops.kubeconfig", sim.kubeconfig_with_cert("ops-bot", &["ops"])?)?;
//! # Ok(()) }
//! ```

pub(crate) mod reviews;

use http::Method;
use serde_json::json;

use crate::resources::ResourceDef;
use crate::status::ApiError;
use crate::users::UserInfo;

/// Who a rule is granted to.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Subject {
    /// A user, by name.
    User(String),
    /// Every member of a group.
    Group(String),
}

impl Subject {
    /// The user `name`.
    pub fn user(name: impl Into<String>) -> Self {
        Subject::User(name.into())
    }

    /// The members of `group`.
    pub fn group(group: impl Into<String>) -> Self {
        Subject::Group(group.into())
    }

    fn covers(&self, u: &UserInfo) -> bool {
        match self {
            Subject::User(n) => *n == u.name,
            Subject::Group(g) => u.groups.iter().any(|x| x == g),
        }
    }
}

/// What a grant allows (an RBAC `PolicyRule` plus where it applies).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Verbs (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`, or `*`).
    pub verbs: Vec<String>,
    /// API groups (`""` for core, `apps`, or `*`).
    pub api_groups: Vec<String>,
    /// Resources (`pods`, `pods/status`, `*/scale`, or `*`).
    pub resources: Vec<String>,
    /// Object names it is limited to (empty: all objects).
    pub resource_names: Vec<String>,
    /// Namespaces it applies in (`None`: everywhere, cluster-scoped resources included).
    pub namespaces: Option<Vec<String>>,
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

impl Rule {
    /// Allows `verbs` on `resources` of `api_groups`, everywhere.
    pub fn new(verbs: &[&str], api_groups: &[&str], resources: &[&str]) -> Self {
        Self {
            verbs: strings(verbs),
            api_groups: strings(api_groups),
            resources: strings(resources),
            resource_names: Vec::new(),
            namespaces: None,
        }
    }

    /// `get`, `list` and `watch` on every resource, everywhere (kube's `view`, roughly).
    pub fn read_only() -> Self {
        Self::new(&["get", "list", "watch"], &["*"], &["*"])
    }

    /// Limits the rule to these namespaces.
    pub fn in_namespaces(mut self, namespaces: &[&str]) -> Self {
        self.namespaces = Some(strings(namespaces));
        self
    }

    /// Limits the rule to objects with these names.
    pub fn names(mut self, names: &[&str]) -> Self {
        self.resource_names = strings(names);
        self
    }

    fn applies_in(&self, ns: &str) -> bool {
        match &self.namespaces {
            None => true,
            Some(list) => !ns.is_empty() && list.iter().any(|n| n == ns),
        }
    }

    fn matches(&self, a: &Attributes) -> bool {
        let any = |list: &[String], x: &str| list.iter().any(|v| v == "*" || v == x);
        any(&self.verbs, &a.verb)
            && any(&self.api_groups, &a.group)
            && self.matches_resource(a)
            && (self.resource_names.is_empty()
                || (!a.name.is_empty() && self.resource_names.contains(&a.name)))
            && self.applies_in(&a.namespace)
    }

    fn matches_resource(&self, a: &Attributes) -> bool {
        let combined = if a.subresource.is_empty() {
            a.resource.clone()
        } else {
            format!("{}/{}", a.resource, a.subresource)
        };
        self.resources.iter().any(|r| {
            r == "*"
                || *r == combined
                || (!a.subresource.is_empty()
                    && r.strip_prefix("*/") == Some(a.subresource.as_str()))
        })
    }
}

/// Parses a rule spec: `;`-separated `key=value` pairs, values `,`-separated.
///
/// | key | meaning |
/// |---|---|
/// | `user=NAME` or `group=NAME` | who it is granted to (exactly one) |
/// | `verbs=get,list` | verbs (`*`: all) |
/// | `apiGroups=core,apps` | API groups (`core` or an empty value is the core group; default `*`) |
/// | `resources=pods,pods/status` | resources (required; `*`: all) |
/// | `namespaces=a,b` | only in these namespaces (default: everywhere) |
/// | `names=x,y` | only these objects |
pub fn parse_rule(spec: &str) -> Result<(Subject, Rule), String> {
    let mut subject = None;
    let mut rule = Rule::new(&[], &["*"], &[]);
    for part in spec.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| format!("rule {spec:?}: {part:?} is not key=value"))?;
        let list = || -> Vec<String> {
            v.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        };
        match k.trim() {
            "user" | "group" if subject.is_some() => {
                return Err(format!("rule {spec:?}: more than one user= or group="))
            }
            "user" => subject = Some(Subject::user(v.trim())),
            "group" => subject = Some(Subject::group(v.trim())),
            "verbs" => rule.verbs = list(),
            "apiGroups" => {
                let mut groups: Vec<String> = v
                    .split(',')
                    .map(|g| match g.trim() {
                        "core" => String::new(),
                        g => g.to_string(),
                    })
                    .collect();
                groups.dedup();
                rule.api_groups = groups;
            }
            "resources" => rule.resources = list(),
            "namespaces" => rule.namespaces = Some(list()),
            "names" => rule.resource_names = list(),
            other => {
                return Err(format!(
                    "rule {spec:?}: unknown key {other:?} (user, group, verbs, apiGroups, resources, namespaces, names)"
                ))
            }
        }
    }
    let subject = subject.ok_or_else(|| format!("rule {spec:?}: needs user= or group="))?;
    if matches!(&subject, Subject::User(n) | Subject::Group(n) if n.is_empty()) {
        return Err(format!("rule {spec:?}: empty user or group name"));
    }
    if rule.verbs.is_empty() || rule.resources.is_empty() {
        return Err(format!("rule {spec:?}: needs verbs= and resources="));
    }
    Ok((subject, rule))
}

/// Parses a rules file: one [`parse_rule`] spec a line; blank lines and `#` comments skipped.
pub fn parse_rules_file(text: &str) -> Result<Vec<(Subject, Rule)>, String> {
    text.lines()
        .enumerate()
        .map(|(n, l)| (n, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
        .map(|(n, l)| parse_rule(l).map_err(|e| format!("line {}: {e}", n + 1)))
        .collect()
}

/// What a request asks to do (kube-apiserver's authorizer attributes of a resource request).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Attributes {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
}

impl Attributes {
    /// The attributes of a request on a resource path.
    pub(crate) fn of_request(
        method: &Method,
        query: Option<&str>,
        def: &ResourceDef,
        ns: Option<&str>,
        name: Option<&str>,
        sub: Option<&str>,
    ) -> Self {
        let watch = query.is_some_and(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .any(|(k, v)| k == "watch" && (v == "true" || v == "1"))
        });
        // A list or watch of one object by `fieldSelector=metadata.name=X` names it, as
        // kube-apiserver's request info does (so rules with resource names cover it).
        let selected = match (name, method) {
            (None, &Method::GET | &Method::HEAD) => query.and_then(|q| {
                url::form_urlencoded::parse(q.as_bytes())
                    .find(|(k, _)| k == "fieldSelector")
                    .and_then(|(_, v)| {
                        v.strip_prefix("metadata.name=")
                            .filter(|n| !n.contains(','))
                            .map(str::to_string)
                    })
            }),
            _ => None,
        };
        let verb = match (method, name) {
            (&Method::GET | &Method::HEAD, Some(_)) => "get",
            (&Method::GET | &Method::HEAD, None) if watch => "watch",
            (&Method::GET | &Method::HEAD, None) => "list",
            (&Method::POST, _) => "create",
            (&Method::PUT, _) => "update",
            (&Method::PATCH, _) => "patch",
            (&Method::DELETE, Some(_)) => "delete",
            (&Method::DELETE, None) => "deletecollection",
            (m, _) => m.as_str(),
        };
        // A namespace is its own namespace, as kube-apiserver's request info says.
        let namespace = match (ns, def.group.is_empty() && def.plural == "namespaces") {
            (Some(ns), _) => ns,
            (None, true) => name.unwrap_or(""),
            (None, false) => "",
        };
        Self {
            verb: verb.to_lowercase(),
            group: def.group.clone(),
            resource: def.plural.clone(),
            subresource: sub.unwrap_or("").to_string(),
            namespace: namespace.to_string(),
            name: name.map(str::to_string).or(selected).unwrap_or_default(),
        }
    }
}

/// The rules of a server.
#[derive(Debug, Clone, Default)]
pub(crate) struct Policy {
    grants: Vec<(Subject, Rule)>,
}

impl Policy {
    pub(crate) fn new(grants: Vec<(Subject, Rule)>) -> Self {
        Self { grants }
    }

    /// Whether `u` may do `a`.
    pub(crate) fn allows(&self, u: &UserInfo, a: &Attributes) -> bool {
        u.is_master() || self.grants.iter().any(|(s, r)| s.covers(u) && r.matches(a))
    }

    /// The rules of `u` that apply in namespace `ns` (for a SelfSubjectRulesReview).
    pub(crate) fn rules_in<'a>(
        &'a self,
        u: &'a UserInfo,
        ns: &'a str,
    ) -> impl Iterator<Item = &'a Rule> + 'a {
        self.grants
            .iter()
            .filter(move |(s, r)| s.covers(u) && r.applies_in(ns))
            .map(|(_, r)| r)
    }
}

/// 403 Forbidden for `u` doing `a`, worded as kube-apiserver's authorization filter words it.
pub(crate) fn forbidden(u: &UserInfo, a: &Attributes) -> ApiError {
    let resource = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let scope = if a.namespace.is_empty() {
        " at the cluster scope".to_string()
    } else {
        format!(" in the namespace {:?}", a.namespace)
    };
    let why = format!(
        "User {:?} cannot {} resource {resource:?} in API group {:?}{scope}",
        u.name, a.verb, a.group
    );
    let qualified = if a.group.is_empty() {
        a.resource.clone()
    } else {
        format!("{}.{}", a.resource, a.group)
    };
    let message = if a.name.is_empty() {
        format!("{qualified} is forbidden: {why}")
    } else {
        format!("{qualified} {:?} is forbidden: {why}", a.name)
    };
    let mut details = serde_json::Map::new();
    if !a.name.is_empty() {
        details.insert("name".into(), json!(a.name));
    }
    if !a.group.is_empty() {
        details.insert("group".into(), json!(a.group));
    }
    details.insert("kind".into(), json!(a.resource));
    ApiError {
        code: 403,
        reason: "Forbidden",
        message,
        details: Some(serde_json::Value::Object(details)),
        retry_after: None,
        continue_token: None,
    }
}

/// The verbs discovery lists for a resource that is not a stored one (the reviews only take
/// `create`), or `None` for an ordinary resource.
pub(crate) fn discovery_verbs(def: &ResourceDef) -> Option<&'static [&'static str]> {
    reviews::is_review(def).then_some(&["create"])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(verb: &str, group: &str, res: &str, sub: &str, ns: &str, name: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            group: group.into(),
            resource: res.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
        }
    }

    #[test]
    fn rules_match_like_rbac() {
        let bob = UserInfo::new("bob", &["dev".to_string()]);
        let p = Policy::new(vec![
            (
                Subject::user("bob"),
                Rule::new(&["get", "list"], &[""], &["pods"]).in_namespaces(&["default"]),
            ),
            (
                Subject::group("dev"),
                Rule::new(&["update"], &["apps"], &["*/scale"]).names(&["web"]),
            ),
        ]);
        assert!(p.allows(&bob, &attrs("list", "", "pods", "", "default", "")));
        assert!(!p.allows(&bob, &attrs("list", "", "pods", "", "other", "")));
        assert!(!p.allows(&bob, &attrs("list", "", "pods", "", "", "")));
        assert!(!p.allows(&bob, &attrs("get", "", "pods", "status", "default", "p")));
        assert!(!p.allows(&bob, &attrs("watch", "", "pods", "", "default", "")));
        assert!(p.allows(
            &bob,
            &attrs("update", "apps", "deployments", "scale", "x", "web")
        ));
        assert!(!p.allows(
            &bob,
            &attrs("update", "apps", "deployments", "scale", "x", "db")
        ));
        assert!(!p.allows(
            &bob,
            &attrs("update", "apps", "deployments", "", "x", "web")
        ));
        let root = UserInfo::new("root", &["system:masters".to_string()]);
        assert!(p.allows(&root, &attrs("delete", "x", "y", "", "", "z")));
    }

    #[test]
    fn forbidden_words_it_as_kube_apiserver() {
        let bob = UserInfo::new("bob", &[]);
        let e = forbidden(&bob, &attrs("list", "", "pods", "", "default", ""));
        assert_eq!(e.message, "pods is forbidden: User \"bob\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\"");
        let e = forbidden(&bob, &attrs("update", "", "pods", "status", "ns", "p"));
        assert_eq!(e.message, "pods \"p\" is forbidden: User \"bob\" cannot update resource \"pods/status\" in API group \"\" in the namespace \"ns\"");
        assert_eq!(e.details.unwrap(), json!({"name": "p", "kind": "pods"}));
        let e = forbidden(&bob, &attrs("list", "apps", "deployments", "", "", ""));
        assert_eq!(e.message, "deployments.apps is forbidden: User \"bob\" cannot list resource \"deployments\" in API group \"apps\" at the cluster scope");
    }

    #[test]
    fn rule_specs_parse_or_say_why_not() {
        let (s, r) = parse_rule(
            "user=bob; verbs=get,list; apiGroups=core,apps; resources=pods; namespaces=default",
        )
        .unwrap();
        assert_eq!(s, Subject::user("bob"));
        assert_eq!(r.api_groups, ["", "apps"]);
        assert_eq!(r.namespaces, Some(vec!["default".to_string()]));
        let (s, r) = parse_rule("group=dev;verbs=*;resources=*").unwrap();
        assert_eq!(s, Subject::group("dev"));
        assert_eq!(r.api_groups, ["*"]);
        for bad in [
            "verbs=get;resources=pods",
            "user=bob;resources=pods",
            "user=bob;verbs=get;resources=pods;colour=red",
            "user=bob;group=x;verbs=get;resources=pods",
            "user=bob;verbs",
        ] {
            assert!(parse_rule(bad).is_err(), "{bad}");
        }
        let rules = parse_rules_file("# c\n\nuser=a;verbs=get;resources=pods\n").unwrap();
        assert_eq!(rules.len(), 1);
        assert!(parse_rules_file("user=a\n")
            .unwrap_err()
            .starts_with("line 1"));
    }
}
