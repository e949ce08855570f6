//! The start of a body, quoted in an error so that a reader can tell what the server sent (an
//! HTML page from a proxy, a `Status`, an object where a list belongs), without what the body
//! held: it may be a Secret's data or a token. The JSON keys and the shape stay, numbers and
//! literals too, and the values of the few keys that name what an object is (`kind`,
//! `apiVersion`, `type`, `reason`); every other string becomes `"…"`.

/// Keys whose string values say what an object is, never what it holds.
const KEPT: &[&str] = &["kind", "apiVersion", "type", "reason"];

/// The first `max_chars` characters of `text`, with every JSON string value but those of
/// [`KEPT`] keys replaced by `"…"` (a string is a key when a `:` follows it). Text that is not JSON keeps its words outside
/// double quotes; a string cut by the limit is redacted.
pub(crate) fn body_snippet(text: &str, max_chars: usize) -> String {
    let mut out = String::new();
    let mut chars = text.char_indices().peekable();
    let mut taken = 0;
    // The key the next value belongs to.
    let mut key: Option<&str> = None;
    while let Some((start, c)) = chars.next() {
        if taken >= max_chars {
            break;
        }
        taken += 1;
        if c != '"' {
            out.push(c);
            continue;
        }
        // A string: find its end (escapes skipped), within the limit.
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            taken += 1;
            if taken > max_chars {
                break;
            }
            match c {
                '\\' => {
                    chars.next();
                    taken += 1;
                }
                '"' => {
                    end = Some(i);
                    break;
                }
                _ => {}
            }
        }
        let Some(end) = end else {
            out.push_str("\"…");
            break;
        };
        let quoted = &text[start..=end];
        if text[end + 1..].trim_start().starts_with(':') {
            out.push_str(quoted);
            key = Some(&text[start + 1..end]);
        } else {
            if key.is_some_and(|k| KEPT.contains(&k)) {
                out.push_str(quoted);
            } else {
                out.push_str("\"…\"");
            }
            key = None;
        }
    }
    out
}

/// `message` with every quoted or backquoted stretch replaced by `…`: parser messages quote the
/// values they found, and a configuration's values may be secrets.
pub(crate) fn redact_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut open: Option<char> = None;
    for c in message.chars() {
        match open {
            Some(q) if c == q => {
                out.push('…');
                out.push(c);
                open = None;
            }
            Some(_) => {}
            None => {
                out.push(c);
                if c == '"' || c == '`' {
                    open = Some(c);
                }
            }
        }
    }
    if open.is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn quoted_values_are_redacted_and_the_rest_kept() {
        assert_eq!(
            redact_quoted(r#"invalid type: string "s3cr3t", expected a map at line 4 column 7"#),
            r#"invalid type: string "…", expected a map at line 4 column 7"#
        );
        assert_eq!(
            redact_quoted("found `tok` and \"unterminated"),
            "found `…` and \"…"
        );
    }

    use super::*;

    #[test]
    fn string_values_are_redacted_and_keys_numbers_and_plain_text_kept() {
        let secret = r#"{"kind":"Secret","data":{"password":"aHVudGVyMg=="},"n":3,"ok":true}"#;
        assert_eq!(
            body_snippet(secret, 200),
            r#"{"kind":"Secret","data":{"password":"…"},"n":3,"ok":true}"#
        );
        assert_eq!(body_snippet(r#"{"a" : "b\"c"}"#, 200), r#"{"a" : "…"}"#);
        // A kept key's value is kept, not the next one's; an array's strings are values.
        assert_eq!(
            body_snippet(r#"{"type":"WEIRD","tags":["x"],"k":"v"}"#, 200),
            r#"{"type":"WEIRD","tags":["…"],"k":"…"}"#
        );
        assert_eq!(
            body_snippet("<html>502 Bad Gateway</html>", 200),
            "<html>502 Bad Gateway</html>"
        );
        assert_eq!(body_snippet("abcdef", 3), "abc");
    }

    #[test]
    fn a_string_cut_by_the_limit_is_redacted_even_if_it_would_have_been_a_key() {
        assert_eq!(
            body_snippet(r#"{"token":"abcdefgh"}"#, 12),
            r#"{"token":"…"#
        );
        assert_eq!(body_snippet(r#"{"password":1}"#, 5), r#"{"…"#);
    }
}
