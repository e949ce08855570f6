//! Writing refreshed OIDC tokens back into the kubeconfig file a user came from, as kubectl's
//! oidc plugin does through its config persister: the next process (kubectl, or this one
//! restarted) starts from the new tokens instead of a refresh token the issuer may have rotated
//! away.
//!
//! Only that user's `auth-provider.config` keys change. The file is read as a generic YAML
//! document ([`Node`], which keeps the order of every mapping and fields this library does not
//! know), edited, and written to a temporary file in the same directory with the original's
//! permissions, then renamed over it: a reader sees the old file or the new one, never half of
//! one. Comments and anchors do not survive (kubectl rewrites the file from its own types, which
//! loses them too).

use std::fmt;
use std::path::{Path, PathBuf};

use secrecy::{ExposeSecret as _, SecretString};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

use super::config::KubeconfigUser;
use super::kubeconfig::{read_bounded, yaml_options};

/// A YAML node, mappings in their order.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

impl Node {
    fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(entries) => entries
                .iter()
                .find(|(k, _)| matches!(k, Node::Str(s) if s == key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    fn get_mut(&mut self, key: &str) -> Option<&mut Node> {
        match self {
            Node::Map(entries) => entries
                .iter_mut()
                .find(|(k, _)| matches!(k, Node::Str(s) if s == key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// Sets `key` in a mapping, in place if present, else at the end.
    fn set(&mut self, key: &str, value: Node) -> bool {
        let Node::Map(entries) = self else {
            return false;
        };
        match entries
            .iter_mut()
            .find(|(k, _)| matches!(k, Node::Str(s) if s == key))
        {
            Some((_, v)) => *v = value,
            None => entries.push((Node::Str(key.into()), value)),
        }
        true
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Node;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a YAML node")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
                Ok(Node::Null)
            }
            fn visit_none<E: de::Error>(self) -> Result<Node, E> {
                Ok(Node::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
                Node::deserialize(d)
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Node, E> {
                Ok(Node::Bool(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Node, E> {
                Ok(Node::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Node, E> {
                Ok(Node::UInt(v))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
                Ok(Node::Float(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Node, E> {
                Ok(Node::Str(v.into()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Node, E> {
                Ok(Node::Str(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Node::Seq(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Node::Map(entries))
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for Node {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Node::Null => s.serialize_unit(),
            Node::Bool(b) => s.serialize_bool(*b),
            Node::Int(i) => s.serialize_i64(*i),
            Node::UInt(u) => s.serialize_u64(*u),
            Node::Float(f) => s.serialize_f64(*f),
            Node::Str(v) => s.serialize_str(v),
            Node::Seq(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Node::Map(entries) => {
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

/// Why the tokens could not be written back; never holds a token (parser messages have their
/// quoted values removed).
#[derive(Debug)]
pub(crate) struct WriteBackError(String);

impl fmt::Display for WriteBackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn fail(what: impl Into<String>) -> WriteBackError {
    WriteBackError(what.into())
}

/// Serialises writers of this process: two clients refreshing at once would otherwise each
/// write the file as they read it, and the second would drop the first's tokens.
static WRITING: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// Writes `id_token` (and `refresh_token`, when the issuer rotated it) into `user`'s
/// `auth-provider.config`, keeping the rest of the file, replacing it atomically.
pub(crate) fn write_back(
    user: &KubeconfigUser,
    id_token: &SecretString,
    refresh_token: Option<&SecretString>,
) -> Result<(), WriteBackError> {
    let _writing = WRITING.lock();
    // The file a symbolic link names is the one to replace, in its own directory.
    let path = std::fs::canonicalize(&user.path).map_err(|e| fail(format!("resolving: {e}")))?;
    let text = read_bounded(&path).map_err(|e| fail(format!("reading: {e}")))?;
    let mut doc: Node = serde_saphyr::from_slice_with_options(&text, yaml_options())
        .map_err(|e| fail(crate::wire::snippet::redact_quoted(&e.to_string())))?;
    let config = user_auth_config(&mut doc, &user.name)?;
    config.set("id-token", Node::Str(id_token.expose_secret().into()));
    if let Some(refresh) = refresh_token {
        config.set("refresh-token", Node::Str(refresh.expose_secret().into()));
    }
    let out = serde_saphyr::to_string(&doc).map_err(|e| fail(format!("writing YAML: {e}")))?;
    replace_file(&path, out.as_bytes())
}

/// `users[name == user].user.auth-provider.config`, created if the provider has none.
fn user_auth_config<'a>(doc: &'a mut Node, user: &str) -> Result<&'a mut Node, WriteBackError> {
    let Some(Node::Seq(users)) = doc.get_mut("users") else {
        return Err(fail("the file has no users list any more"));
    };
    let entry = users
        .iter_mut()
        .find(|u| matches!(u.get("name"), Some(Node::Str(n)) if n == user))
        .ok_or_else(|| fail(format!("the file no longer has a user named {user:?}")))?;
    let provider = entry
        .get_mut("user")
        .and_then(|u| u.get_mut("auth-provider"))
        .ok_or_else(|| fail(format!("user {user:?} no longer has an auth-provider")))?;
    if provider
        .get_mut("config")
        .is_none_or(|c| !matches!(c, Node::Map(_)))
    {
        provider.set("config", Node::Map(Vec::new()));
    }
    provider
        .get_mut("config")
        .ok_or_else(|| fail(format!("user {user:?}'s auth-provider is not a mapping")))
}

/// Writes `contents` to a new file beside `path`, with `path`'s permissions, flushed to disk,
/// then renames it over `path`.
fn replace_file(path: &Path, contents: &[u8]) -> Result<(), WriteBackError> {
    use std::io::Write as _;
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let permissions = std::fs::metadata(path)
        .map_err(|e| fail(format!("reading its permissions: {e}")))?
        .permissions();
    let temp: PathBuf = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        rand::random::<u32>()
    ));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        // Before any token is written: the file may hold secrets only under the original's mode.
        file.set_permissions(permissions)?;
        file.write_all(contents)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        fail(format!("replacing it: {e}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_keep_the_order_and_the_fields_of_a_mapping() {
        let yaml = "b: 1\na: [x, {z: true, y: null}]\nc: -2.5\nd: ['true', '0123', 'null', '', 'a: b', \"x\\ny\"]\n";
        let node: Node = serde_saphyr::from_str(yaml).unwrap();
        let out = serde_saphyr::to_string(&node).unwrap();
        let again: Node = serde_saphyr::from_str(&out).unwrap();
        assert_eq!(node, again);
        let Node::Map(entries) = &node else { panic!() };
        let keys: Vec<_> = entries.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(keys, ["b", "a", "c", "d"].map(|k| Node::Str(k.into())));
    }
}
