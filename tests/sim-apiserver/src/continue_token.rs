//! Continue tokens in kube-apiserver's format: base64url (no padding) of
//! `{"v":"meta.k8s.io/v1","rv":<list revision>,"start":"<next key>"}`.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};

/// A decoded continue token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContinueToken {
    /// The revision the list is pinned at; `-1` means "latest" (after an expired token).
    pub rv: i64,
    /// The key (`namespace/name`) to resume from, inclusive.
    pub start: String,
}

impl ContinueToken {
    /// Encodes the token.
    pub fn encode(&self) -> String {
        let j = json!({"v": "meta.k8s.io/v1", "rv": self.rv, "start": self.start});
        URL_SAFE_NO_PAD.encode(j.to_string())
    }

    /// Decodes a token; the error text follows kube-apiserver's `continue key is not valid`
    /// (Go's words for a token that is not base64 or not JSON).
    pub fn decode(s: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("continue key is not valid: {why}");
        let trimmed = s.trim_end_matches('=');
        let raw = URL_SAFE_NO_PAD.decode(trimmed).map_err(|e| {
            // Go's words, with the offset of the first byte it could not read.
            let at = match e {
                base64::DecodeError::InvalidByte(at, _)
                | base64::DecodeError::InvalidLastSymbol(at, _) => at,
                _ => trimmed.len(),
            };
            bad(&format!("illegal base64 data at input byte {at}"))
        })?;
        let v: Value =
            serde_json::from_slice(&raw).map_err(|_| match crate::go_json::syntax_error(&raw) {
                Some(go) => bad(&go),
                None => bad("incorrect encoded start resourceVersion (version meta.k8s.io/v1)"),
            })?;
        if v.get("v").and_then(Value::as_str) != Some("meta.k8s.io/v1") {
            return Err(bad("server does not recognize this encoded version"));
        }
        let rv = v.get("rv").and_then(Value::as_i64).ok_or_else(|| {
            bad("incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
        })?;
        let start = v
            .get("start")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("encoded start key is missing"))?;
        if rv == 0 || rv < -1 || start.is_empty() || start.contains("..") || start.starts_with('/')
        {
            return Err(bad(
                "incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
            ));
        }
        Ok(Self {
            rv,
            start: start.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_reject_garbage() {
        let t = ContinueToken {
            rv: 42,
            start: "default/p1\u{0}".into(),
        };
        assert_eq!(ContinueToken::decode(&t.encode()).unwrap(), t);
        assert!(ContinueToken::decode("!!!").is_err());
        assert!(ContinueToken::decode(&URL_SAFE_NO_PAD.encode("{\"v\":\"x\"}")).is_err());
    }
}
