//! [`ResourceVersion`]: the version the API server gives a list, an event or the store's state.
//!
//! A resource version is an opaque string: compared for equality only, never ordered or parsed
//! (the server may change its form). It travels beside other strings — continue tokens, keys,
//! selectors — so it has a type of its own, and a list's version cannot be passed where a token is
//! expected.

use std::fmt;

use serde::{Deserialize, Serialize};

/// An opaque resource version (`""` when there is none yet).
///
/// ```
/// use store_index::ResourceVersion;
/// let rv = ResourceVersion::from("12345");
/// assert_eq!(rv, "12345");
/// assert_eq!(rv.as_str(), "12345");
/// assert!(ResourceVersion::default().is_empty());
/// ```
#[derive(Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ResourceVersion(String);

impl Clone for ResourceVersion {
    fn clone(&self) -> Self {
        ResourceVersion(self.0.clone())
    }

    /// Reuses this version's buffer when it is big enough: a reflector records every watch
    /// event's version this way, with no allocation once the buffer has grown.
    fn clone_from(&mut self, source: &Self) {
        self.0.clone_from(&source.0);
    }
}

impl ResourceVersion {
    /// The version as the server wrote it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether there is no version (`""`).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The version as a `String`.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl From<String> for ResourceVersion {
    fn from(s: String) -> Self {
        ResourceVersion(s)
    }
}

impl From<&str> for ResourceVersion {
    fn from(s: &str) -> Self {
        ResourceVersion(s.to_string())
    }
}

impl From<&ResourceVersion> for ResourceVersion {
    fn from(rv: &ResourceVersion) -> Self {
        rv.clone()
    }
}

impl std::ops::Deref for ResourceVersion {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<ResourceVersion> for String {
    fn from(rv: ResourceVersion) -> Self {
        rv.0
    }
}

impl From<&ResourceVersion> for String {
    fn from(rv: &ResourceVersion) -> Self {
        rv.0.clone()
    }
}

impl AsRef<str> for ResourceVersion {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ResourceVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for ResourceVersion {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for ResourceVersion {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for ResourceVersion {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

#[cfg(test)]
mod tests {
    use super::ResourceVersion;

    /// A reflector records every watch event's version with `clone_from`: it keeps the buffer it
    /// has when the new version fits, rather than allocating another.
    #[test]
    fn clone_from_keeps_the_buffer_it_holds() {
        let mut recorded = ResourceVersion::from("100000");
        let buffer = recorded.as_str().as_ptr();
        for v in ["100001", "99", "100002"] {
            recorded.clone_from(&ResourceVersion::from(v));
            assert_eq!(recorded, v);
            assert_eq!(recorded.as_str().as_ptr(), buffer, "after {v}");
        }
    }
}
