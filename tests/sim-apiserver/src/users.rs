//! Users: who a request comes from, by bearer token or client certificate.
//!
//! A [`User`] has a name, groups and optionally a bearer token; a client certificate signed by
//! the server's CA authenticates the user named by its subject's CN, in the groups named by
//! its O entries, as kube-apiserver reads them. Every authenticated user is also in
//! `system:authenticated`; `system:masters` may do anything (see [`crate::authz`]).
//!
//! Tokens are secrets: no `Debug`, error or log line shows one.

use std::sync::Arc;

/// The group every authenticated user is in.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";

/// The group whose members may do anything.
pub const MASTERS_GROUP: &str = "system:masters";

/// A user the server knows: name, groups, and the bearer token that authenticates it.
#[derive(Clone, PartialEq, Eq)]
pub struct User {
    name: String,
    uid: Option<String>,
    token: Option<String>,
    groups: Vec<String>,
}

impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User")
            .field("name", &self.name)
            .field("uid", &self.uid)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("groups", &self.groups)
            .finish()
    }
}

impl User {
    /// A user named `name`, in no group yet and without a token (it can still come with a
    /// client certificate whose CN is `name`).
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            uid: None,
            token: None,
            groups: Vec::new(),
        }
    }

    /// Gives the user a uid, which `kubectl auth whoami` (a SelfSubjectReview) shows, as a
    /// `--token-auth-file` line's third field does.
    pub fn uid(mut self, uid: impl Into<String>) -> Self {
        self.uid = Some(uid.into());
        self
    }

    /// Authenticates this user by `Authorization: Bearer <token>`.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Adds the user to `group` (`system:masters` may do anything).
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.groups.push(group.into());
        self
    }

    /// Adds the user to each of `groups`.
    pub fn groups<I, S>(mut self, groups: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.groups.extend(groups.into_iter().map(Into::into));
        self
    }

    /// The user name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The groups given (without `system:authenticated`, which every user is in).
    pub fn group_names(&self) -> &[String] {
        &self.groups
    }

    /// Whether the user has a token.
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    pub(crate) fn token_str(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// Parses a command-line user, `NAME:TOKEN[:GROUP,...]` (an empty TOKEN: a user that only
    /// comes with a client certificate). A name or token containing `:` cannot be written
    /// this way; use a users file ([`parse_users_file`]).
    pub fn parse_flag(spec: &str) -> Result<Self, String> {
        let mut parts = spec.splitn(3, ':');
        let name = parts.next().unwrap_or("");
        let Some(token) = parts.next() else {
            return Err("a user is NAME:TOKEN[:GROUP,...]".to_string());
        };
        if name.is_empty() {
            return Err("a user needs a NAME (NAME:TOKEN[:GROUP,...])".to_string());
        }
        let mut u = User::new(name);
        if !token.is_empty() {
            u = u.token(token);
        }
        if let Some(groups) = parts.next() {
            u = u.groups(groups.split(',').filter(|g| !g.is_empty()));
        }
        Ok(u)
    }
}

/// Parses a users file in the CSV format of kube-apiserver's `--token-auth-file`: one user a
/// line, `token,user,uid[,"group1,group2"]` (blank lines and lines starting with `#` are
/// skipped). Errors name the line, never the token.
pub fn parse_users_file(text: &str) -> Result<Vec<User>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields = split_csv(line).ok_or_else(|| format!("line {}: unbalanced quote", n + 1))?;
        if fields.len() < 3 {
            return Err(format!(
                "line {}: want token,user,uid[,\"group1,group2\"], got {} fields",
                n + 1,
                fields.len()
            ));
        }
        if fields[0].is_empty() || fields[1].is_empty() {
            return Err(format!("line {}: empty token or user name", n + 1));
        }
        let mut u = User::new(fields[1].clone()).token(fields[0].clone());
        if !fields[2].is_empty() {
            u = u.uid(fields[2].clone());
        }
        if let Some(g) = fields.get(3) {
            u = u.groups(g.split(',').map(str::trim).filter(|g| !g.is_empty()));
        }
        out.push(u);
    }
    Ok(out)
}

/// Splits one CSV line (fields may be double-quoted, `""` is a quote inside one).
fn split_csv(line: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                cur.push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut cur).trim().to_string()),
            (c, _) => cur.push(c),
        }
    }
    if quoted {
        return None;
    }
    out.push(cur.trim().to_string());
    Some(out)
}

/// Who a request comes from, once authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    /// The user name (`admin` for the main token).
    pub name: String,
    /// Its groups, `system:authenticated` included.
    pub groups: Vec<String>,
    /// Its uid, if it was given one ([`User::uid`]).
    pub uid: Option<String>,
}

impl UserInfo {
    /// An authenticated user in `groups` (plus `system:authenticated`).
    pub fn new(name: impl Into<String>, groups: &[String]) -> Self {
        let mut g: Vec<String> = groups.to_vec();
        if !g.iter().any(|x| x == AUTHENTICATED_GROUP) {
            g.push(AUTHENTICATED_GROUP.to_string());
        }
        Self {
            name: name.into(),
            groups: g,
            uid: None,
        }
    }

    /// Whether the user may do anything (`system:masters`).
    pub fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == MASTERS_GROUP)
    }
}

/// The known users by token, built once at start.
#[derive(Debug, Default)]
pub(crate) struct Directory {
    by_token: Vec<(String, Arc<UserInfo>)>,
}

impl Directory {
    pub(crate) fn new(users: &[User]) -> Self {
        let by_token = users
            .iter()
            .filter_map(|u| {
                u.token_str().map(|t| {
                    let mut info = UserInfo::new(&u.name, &u.groups);
                    info.uid = u.uid.clone();
                    (t.to_string(), Arc::new(info))
                })
            })
            .collect();
        Self { by_token }
    }

    pub(crate) fn by_token(&self, token: &str) -> Option<Arc<UserInfo>> {
        self.by_token
            .iter()
            .find(|(t, _)| t == token)
            .map(|(_, u)| u.clone())
    }
}

/// The identity in a client certificate (DER): the subject's CN and its O entries, or `None`
/// when the certificate cannot be read or has no CN.
pub(crate) fn identity_of_certificate(der: &[u8]) -> Option<UserInfo> {
    let (cn, orgs) = cert_subject(der)?;
    Some(UserInfo::new(cn, &orgs))
}

/// One DER tag-length-value: (tag, contents, the bytes after it).
fn tlv(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = b.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().fold(0usize, |a, &x| (a << 8) | x as usize);
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

const OID_CN: &[u8] = &[0x55, 0x04, 0x03];
const OID_O: &[u8] = &[0x55, 0x04, 0x0a];

/// The subject's CN and O values of an X.509 certificate.
fn cert_subject(der: &[u8]) -> Option<(String, Vec<String>)> {
    const SEQUENCE: u8 = 0x30;
    let (SEQUENCE, cert, _) = tlv(der)? else {
        return None;
    };
    let (SEQUENCE, tbs, _) = tlv(cert)? else {
        return None;
    };
    let mut rest = tbs;
    let (tag, _, r) = tlv(rest)?;
    if tag == 0xa0 {
        rest = r; // explicit version
    }
    // serial, signature algorithm, issuer, validity, then the subject.
    for _ in 0..4 {
        rest = tlv(rest)?.2;
    }
    let (SEQUENCE, mut rdns, _) = tlv(rest)? else {
        return None;
    };
    let mut cn = None;
    let mut orgs = Vec::new();
    while !rdns.is_empty() {
        let (_, mut set, r) = tlv(rdns)?;
        rdns = r;
        while !set.is_empty() {
            let (_, atv, r) = tlv(set)?;
            set = r;
            let (0x06, oid, r) = tlv(atv)? else {
                return None;
            };
            let (_, value, _) = tlv(r)?;
            let value = String::from_utf8_lossy(value).into_owned();
            if oid == OID_CN {
                cn = Some(value);
            } else if oid == OID_O {
                orgs.push(value);
            }
        }
    }
    Some((cn?, orgs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minted_certificate_names_its_user_and_groups() {
        let tls = crate::tls::TlsMaterial::generate().unwrap();
        let (pem, _) = tls.client_cert("bob", &["dev", "ops"]).unwrap();
        let der = rustls_pemfile::certs(&mut pem.as_bytes())
            .next()
            .unwrap()
            .unwrap();
        let id = identity_of_certificate(&der).unwrap();
        assert_eq!(id.name, "bob");
        assert_eq!(id.groups, ["dev", "ops", AUTHENTICATED_GROUP]);
        assert!(identity_of_certificate(&der[..der.len() / 2]).is_none());
        assert!(identity_of_certificate(b"").is_none());
    }

    #[test]
    fn users_file_and_flag_parse_and_debug_hides_tokens() {
        let users =
            parse_users_file("# comment\nt1,alice,1\n\"t,2\",bob,2,\"dev, ops\"\n").unwrap();
        assert_eq!(users[0], User::new("alice").uid("1").token("t1"));
        assert_eq!(
            users[1],
            User::new("bob")
                .uid("2")
                .token("t,2")
                .groups(["dev", "ops"])
        );
        assert!(parse_users_file("t1,alice").unwrap_err().contains("line 1"));
        assert!(parse_users_file("\"t1,alice,1").is_err());
        let u = User::parse_flag("carol:s3cret:a,b").unwrap();
        assert_eq!(u, User::new("carol").token("s3cret").groups(["a", "b"]));
        assert!(!format!("{u:?}").contains("s3cret"));
        assert!(User::parse_flag("carol").is_err());
        assert!(!User::parse_flag("dave:").unwrap().has_token());
    }
}
