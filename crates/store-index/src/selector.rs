//! Label selectors: the full Kubernetes syntax, parsed, matched and printed back.
//!
//! Grammar (whitespace allowed between tokens; an empty selector matches everything):
//!
//! ```text
//! selector    := requirement ( "," requirement )*
//! requirement := "!" KEY                      -- the label is absent
//!              | KEY                          -- the label is present
//!              | KEY ( "=" | "==" | "!=" ) VALUE
//!              | KEY ( "in" | "notin" ) "(" VALUE ( "," VALUE )* ")"
//!              | KEY ( ">" | "<" ) INTEGER
//! ```
//!
//! Keys are qualified names (`[prefix/]name`, name ≤ 63 characters of `[A-Za-z0-9_.-]` starting and
//! ending alphanumeric, prefix a DNS subdomain ≤ 253); values are empty or ≤ 63 such characters.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use thiserror::Error;

use crate::object::Object;

/// A malformed label selector.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid label selector {selector:?}: {message} (at byte {position})")]
pub struct SelectorError {
    /// The selector text.
    pub selector: String,
    /// What is wrong.
    pub message: String,
    /// Byte offset of the problem.
    pub position: usize,
}

/// The operator of one requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operator {
    /// `key=value`
    Equals,
    /// `key==value`
    DoubleEquals,
    /// `key!=value`
    NotEquals,
    /// `key in (a,b)`
    In,
    /// `key notin (a,b)`
    NotIn,
    /// `key`
    Exists,
    /// `!key`
    DoesNotExist,
    /// `key>n`
    GreaterThan,
    /// `key<n`
    LessThan,
}

/// One requirement of a selector: a key, an operator and its values (sorted, deduplicated).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

impl Requirement {
    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }
    /// The operator.
    pub fn operator(&self) -> Operator {
        self.operator
    }
    /// The values (sorted; one for `=`, `==`, `!=`, `>`, `<`; none for exists checks).
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether a label set satisfies this requirement.
    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        self.matches_value(labels.and_then(|l| l.get(&self.key)).map(String::as_str))
    }

    /// Whether an object's labels satisfy this requirement, read through [`Object::label`] (which
    /// for a [`CompactObject`](crate::CompactObject) needs no map).
    pub fn matches_object<O: Object + ?Sized>(&self, object: &O) -> bool {
        self.matches_value(object.label(&self.key))
    }

    /// Whether the value of this requirement's key (`None`: the label is absent) satisfies it.
    fn matches_value(&self, value: Option<&str>) -> bool {
        match self.operator {
            Operator::Equals | Operator::DoubleEquals | Operator::In => {
                value.is_some_and(|v| self.values.iter().any(|x| x == v))
            }
            Operator::NotEquals | Operator::NotIn => {
                value.is_none_or(|v| !self.values.iter().any(|x| x == v))
            }
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(v), Some(bound)) = (value, self.values.first()) else {
                    return false;
                };
                match (v.parse::<i64>(), bound.parse::<i64>()) {
                    (Ok(v), Ok(b)) if self.operator == Operator::GreaterThan => v > b,
                    (Ok(v), Ok(b)) => v < b,
                    _ => false,
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let first = self.values.first().map(String::as_str).unwrap_or("");
        match self.operator {
            Operator::Equals => write!(f, "{}={}", self.key, first),
            Operator::DoubleEquals => write!(f, "{}=={}", self.key, first),
            Operator::NotEquals => write!(f, "{}!={}", self.key, first),
            Operator::In => write!(f, "{} in ({})", self.key, self.values.join(",")),
            Operator::NotIn => write!(f, "{} notin ({})", self.key, self.values.join(",")),
            Operator::Exists => write!(f, "{}", self.key),
            Operator::DoesNotExist => write!(f, "!{}", self.key),
            Operator::GreaterThan => write!(f, "{}>{}", self.key, first),
            Operator::LessThan => write!(f, "{}<{}", self.key, first),
        }
    }
}

/// A parsed label selector: all requirements must hold (logical AND).
///
/// ```
/// use std::collections::BTreeMap;
/// use store_index::Selector;
///
/// let sel: Selector = "app in (web, api), tier!=db, !legacy".parse().unwrap();
/// let labels: BTreeMap<String, String> =
///     [("app".to_string(), "web".to_string())].into_iter().collect();
/// assert!(sel.matches(Some(&labels)));
/// // Printed back in canonical form, usable as a `labelSelector` query parameter.
/// assert_eq!(sel.to_string(), "app in (api,web),!legacy,tier!=db");
/// assert!("app in (web".parse::<Selector>().is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

impl Selector {
    /// The selector that matches everything.
    pub fn everything() -> Self {
        Selector::default()
    }

    /// Parses the selector syntax.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        Parser::new(text).parse()
    }

    /// A selector requiring each `key=value` of the map.
    pub fn from_labels<'a>(
        labels: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, SelectorError> {
        let text: Vec<String> = labels
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        Self::parse(&text.join(","))
    }

    /// True for the match-everything selector.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements, sorted by key.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether a label set satisfies every requirement.
    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether an object's labels satisfy every requirement; the same answer as
    /// `matches(object.labels())`, each label read through [`Object::label`].
    pub fn matches_object<O: Object + ?Sized>(&self, object: &O) -> bool {
        self.requirements.iter().all(|r| r.matches_object(object))
    }
}

impl FromStr for Selector {
    type Err = SelectorError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Selector::parse(s)
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token<'a> {
    Ident(&'a str),
    Not,
    NotEquals,
    Equals,
    DoubleEquals,
    Gt,
    Lt,
    Open,
    Close,
    Comma,
    End,
}

fn is_special(c: char) -> bool {
    matches!(c, '!' | '=' | '(' | ')' | ',' | '>' | '<')
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Self {
        Parser { text, pos: 0 }
    }

    fn error(&self, position: usize, message: impl Into<String>) -> SelectorError {
        SelectorError {
            selector: self.text.to_string(),
            message: message.into(),
            position,
        }
    }

    /// Returns the next token and its start offset, advancing past it.
    fn next(&mut self) -> (Token<'a>, usize) {
        let rest = &self.text[self.pos..];
        let trimmed = rest.trim_start();
        self.pos += rest.len() - trimmed.len();
        let start = self.pos;
        let mut chars = trimmed.chars();
        let Some(c) = chars.next() else {
            return (Token::End, start);
        };
        let second = chars.next();
        let (token, len) = match (c, second) {
            ('!', Some('=')) => (Token::NotEquals, 2),
            ('!', _) => (Token::Not, 1),
            ('=', Some('=')) => (Token::DoubleEquals, 2),
            ('=', _) => (Token::Equals, 1),
            ('>', _) => (Token::Gt, 1),
            ('<', _) => (Token::Lt, 1),
            ('(', _) => (Token::Open, 1),
            (')', _) => (Token::Close, 1),
            (',', _) => (Token::Comma, 1),
            _ => {
                let len = trimmed
                    .find(|c: char| c.is_whitespace() || is_special(c))
                    .unwrap_or(trimmed.len());
                (Token::Ident(&trimmed[..len]), len)
            }
        };
        self.pos += len;
        (token, start)
    }

    fn peek(&mut self) -> (Token<'a>, usize) {
        let saved = self.pos;
        let t = self.next();
        self.pos = saved;
        t
    }

    fn parse(mut self) -> Result<Selector, SelectorError> {
        let mut requirements = Vec::new();
        if self.peek().0 == Token::End {
            return Ok(Selector::default());
        }
        loop {
            requirements.push(self.requirement()?);
            match self.next() {
                (Token::End, _) => break,
                (Token::Comma, _) => continue,
                (t, at) => return Err(self.error(at, format!("expected ',' or end, found {t:?}"))),
            }
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Selector { requirements })
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        let (first, at) = self.next();
        if first == Token::Not {
            let (token, at) = self.next();
            let Token::Ident(key) = token else {
                return Err(self.error(at, "expected a label key after '!'"));
            };
            validate_key(key).map_err(|m| self.error(at, m))?;
            return Ok(Requirement {
                key: key.to_string(),
                operator: Operator::DoesNotExist,
                values: Vec::new(),
            });
        }
        let Token::Ident(key) = first else {
            return Err(self.error(at, format!("expected a label key, found {first:?}")));
        };
        validate_key(key).map_err(|m| self.error(at, m))?;
        let key = key.to_string();
        let (op_token, op_at) = self.peek();
        let operator = match op_token {
            Token::End | Token::Comma => {
                return Ok(Requirement {
                    key,
                    operator: Operator::Exists,
                    values: Vec::new(),
                })
            }
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::NotEquals => Operator::NotEquals,
            Token::Gt => Operator::GreaterThan,
            Token::Lt => Operator::LessThan,
            Token::Ident("in") => Operator::In,
            Token::Ident("notin") => Operator::NotIn,
            other => {
                return Err(self.error(
                    op_at,
                    format!("expected an operator after {key:?}, found {other:?}"),
                ))
            }
        };
        self.next();
        let values = match operator {
            Operator::In | Operator::NotIn => self.value_set()?,
            _ => {
                let value = self.single_value()?;
                if matches!(operator, Operator::GreaterThan | Operator::LessThan)
                    && value.parse::<i64>().is_err()
                {
                    return Err(self.error(op_at, format!("{value:?} is not an integer")));
                }
                vec![value]
            }
        };
        Ok(Requirement {
            key,
            operator,
            values,
        })
    }

    /// A value after `=`, `==`, `!=`, `>`, `<`; may be empty (`a=` matches the empty value).
    fn single_value(&mut self) -> Result<String, SelectorError> {
        match self.peek() {
            (Token::Ident(v), at) => {
                self.next();
                validate_value(v).map_err(|m| self.error(at, m))?;
                Ok(v.to_string())
            }
            (Token::End | Token::Comma, _) => Ok(String::new()),
            (t, at) => Err(self.error(at, format!("expected a value, found {t:?}"))),
        }
    }

    fn value_set(&mut self) -> Result<Vec<String>, SelectorError> {
        let (open, at) = self.next();
        if open != Token::Open {
            return Err(self.error(at, "expected '(' after 'in' or 'notin'"));
        }
        let mut values = Vec::new();
        loop {
            match self.next() {
                (Token::Ident(v), at) => {
                    validate_value(v).map_err(|m| self.error(at, m))?;
                    values.push(v.to_string());
                    match self.next() {
                        (Token::Comma, _) => continue,
                        (Token::Close, _) => break,
                        (t, at) => {
                            return Err(self.error(at, format!("expected ',' or ')', found {t:?}")))
                        }
                    }
                }
                (Token::Close, at) if values.is_empty() => {
                    return Err(self.error(at, "the value set of 'in' and 'notin' can't be empty"))
                }
                (t, at) => return Err(self.error(at, format!("expected a value, found {t:?}"))),
            }
        }
        values.sort();
        values.dedup();
        Ok(values)
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// A label name or value part: ≤ 63 chars, `[A-Za-z0-9_.-]`, alphanumeric at both ends.
fn validate_name_part(s: &str, what: &str) -> Result<(), String> {
    if s.len() > 63 {
        return Err(format!("{what} {s:?} is longer than 63 characters"));
    }
    let ends_ok = s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !ends_ok || !s.chars().all(is_name_char) {
        return Err(format!(
            "{what} {s:?} must consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric"
        ));
    }
    Ok(())
}

fn validate_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        let valid = !prefix.is_empty()
            && prefix.len() <= 253
            && prefix.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            });
        if !valid {
            return Err(format!(
                "label key prefix {prefix:?} is not a DNS subdomain"
            ));
        }
    }
    if name.is_empty() {
        return Err(format!("label key {key:?} has an empty name"));
    }
    validate_name_part(name, "label key name")
}

fn validate_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    validate_name_part(value, "label value")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_operator_parses_and_matches() {
        let l = labels(&[("a", "b"), ("n", "5")]);
        let cases = [
            ("a=b", true),
            ("a==b", true),
            ("a!=b", false),
            ("a!=c", true),
            ("missing!=c", true),
            ("a in (x,b)", true),
            ("a in (x,y)", false),
            ("a notin (x)", true),
            ("a notin (b)", false),
            ("missing notin (b)", true),
            ("a", true),
            ("!a", false),
            ("!missing", true),
            ("n>4", true),
            ("n<5", false),
            ("a>1", false),
            ("a=b,n=5", true),
            ("a=b,n=6", false),
            ("", true),
            ("   ", true),
        ];
        let compact = crate::CompactObject::from_json(bytes::Bytes::from_static(
            br#"{"metadata":{"name":"o","labels":{"n":"5","a":"b"}}}"#,
        ))
        .unwrap();
        let dynamic = crate::DynamicObject::new("v1", "Pod")
            .named("o")
            .with_label("a", "b")
            .with_label("n", "5");
        for (text, want) in cases {
            let sel = Selector::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(sel.matches(Some(&l)), want, "{text}");
            // The same answers through `Object::label`, with and without a map behind it.
            assert_eq!(sel.matches_object(&compact), want, "{text} (CompactObject)");
            assert_eq!(sel.matches_object(&dynamic), want, "{text} (DynamicObject)");
        }
    }

    #[test]
    fn empty_value_matches_empty_label() {
        let sel = Selector::parse("a=").unwrap();
        assert!(sel.matches(Some(&labels(&[("a", "")]))));
        assert!(!sel.matches(None));
    }

    #[test]
    fn malformed_selectors_are_errors_with_positions() {
        for bad in [
            "a in (b",
            "a in ()",
            "a in b",
            "a=b=c",
            "=b",
            "!",
            "a,",
            ",a",
            "a b",
            "a=-b",
            "a>x",
            "-a=b",
            "Example.com/a=b",
            "x/",
            &format!("a={}", "v".repeat(64)),
        ] {
            let err = Selector::parse(bad).expect_err(bad);
            assert!(err.to_string().contains("invalid label selector"), "{err}");
        }
    }

    #[test]
    fn selector_prints_back_in_canonical_form_and_reparses() {
        let sel =
            Selector::parse(" z notin ( b , a ) , example.com/app == web,!x, y , n > 3").unwrap();
        let text = sel.to_string();
        assert_eq!(text, "example.com/app==web,n>3,!x,y,z notin (a,b)");
        assert_eq!(Selector::parse(&text).unwrap(), sel);
    }

    #[test]
    fn from_labels_requires_each_pair() {
        let sel = Selector::from_labels([("app", "web"), ("tier", "fe")]).unwrap();
        assert!(sel.matches(Some(&labels(&[("app", "web"), ("tier", "fe"), ("x", "y")]))));
        assert!(!sel.matches(Some(&labels(&[("app", "web")]))));
    }
}
