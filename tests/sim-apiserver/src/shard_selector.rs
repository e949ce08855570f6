//! The `shardSelector` of lists and watches (server-side sharded list and watch, the
//! `ShardedListAndWatch` feature of kube-apiserver 1.36; the simulator's
//! [`sharded_list_and_watch`](crate::SimServerBuilder::sharded_list_and_watch) switch stands for
//! the gate).
//!
//! kube-apiserver reads the selector as a CEL expression and walks its syntax tree: the root must
//! be a `shardRange(field, 'start', 'end')` call or `||` of such calls; the field is
//! `object.metadata.uid` or `object.metadata.namespace` (the same in every call); each bound is a
//! string `'0x'` and 16 lower-case hex digits, or `'0x10000000000000000'` (2^64) for an end.
//! An object is selected when the 64-bit FNV-1a hash of its field (UTF-8 bytes; an absent field
//! is the empty string) lies in `[start, end)` of some call. A list echoes the selector it applied
//! in `metadata.shardInfo.selector`, each call written `shardRange(field, 'start', 'end')` and
//! joined with ` || `; a watch filters its events alike and echoes nothing.
//!
//! This is the simulator's own reading, written apart from the client's (`store_index`'s shard
//! selector), so that each checks the other. A selector that does not parse is answered as
//! kube-apiserver 1.36.3 answers it: a `500` with no reason, `invalid shard selector: ` and the
//! parser's message. The messages of the tree walk are kube-apiserver's word for word; those of
//! malformed CEL text are this parser's own after kube-apiserver's `CEL parse error: Syntax
//! error: ` (kube-apiserver quotes its ANTLR parser's expected-token sets, a deliberate
//! difference listed in docs/simulator.md).

use serde_json::Value;

use crate::status::ApiError;

/// A parsed shard selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardSelector {
    /// `object.metadata.uid` or `object.metadata.namespace`.
    field: &'static str,
    /// `(start, end)` as written (validated), in order.
    ranges: Vec<(String, String)>,
}

/// FNV-1a, 64 bits.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf29ce484222325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x100000001b3);
    }
    hash
}

/// `a < b` for bounds of 16 hex digits or the 17-digit 2^64, as kube-apiserver compares them.
fn hex_less(a: &str, b: &str) -> bool {
    if a.len() != b.len() {
        return a.len() < b.len();
    }
    a < b
}

impl ShardSelector {
    /// Parses the parameter; the error is the answer kube-apiserver gives.
    pub fn parse(text: &str) -> Result<Self, ApiError> {
        Self::parse_message(text)
            .map_err(|m| ApiError::unclassified(format!("invalid shard selector: {m}")))
    }

    fn parse_message(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err(
                "empty shard selector is not allowed; omit the parameter for unfiltered lists"
                    .into(),
            );
        }
        let expr = cel::parse(text).map_err(|m| format!("CEL parse error: Syntax error: {m}"))?;
        let mut calls = Vec::new();
        walk(&expr, &mut calls)?;
        let field = calls[0].0;
        if let Some((other, _, _)) = calls.iter().find(|(f, _, _)| *f != field) {
            return Err(format!(
                "all shard ranges must use the same field, got {field:?} and {other:?}"
            ));
        }
        Ok(ShardSelector {
            field,
            ranges: calls.into_iter().map(|(_, s, e)| (s, e)).collect(),
        })
    }

    /// Whether the object is selected.
    pub fn matches(&self, object: &Value) -> bool {
        let pointer = match self.field {
            "object.metadata.uid" => "/metadata/uid",
            _ => "/metadata/namespace",
        };
        let value = object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("");
        let hash = format!("0x{:016x}", fnv1a(value.as_bytes()));
        self.ranges
            .iter()
            .any(|(start, end)| !hex_less(&hash, start) && hex_less(&hash, end))
    }
}

impl std::fmt::Display for ShardSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (start, end)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(" || ")?;
            }
            write!(f, "shardRange({}, '{start}', '{end}')", self.field)?;
        }
        Ok(())
    }
}

/// The root walk: `||` of `shardRange` calls.
fn walk(e: &cel::Expr, out: &mut Vec<(&'static str, String, String)>) -> Result<(), String> {
    match e {
        cel::Expr::Call { function, args, .. } if function == "_||_" => {
            for arg in args {
                walk(arg, out)?;
            }
            Ok(())
        }
        cel::Expr::Call { function, args, .. } if function == "shardRange" => {
            out.push(shard_range(args)?);
            Ok(())
        }
        cel::Expr::Call { function, .. } => Err(format!(
            "unsupported function {function:?}; only shardRange() and || are allowed"
        )),
        other => Err(format!(
            "unexpected expression kind {}; expected shardRange() call or || operator",
            other.kind()
        )),
    }
}

fn shard_range(args: &[cel::Expr]) -> Result<(&'static str, String, String), String> {
    if args.len() != 3 {
        return Err(format!(
            "shardRange() requires exactly 3 arguments, got {}",
            args.len()
        ));
    }
    let path = field_path(&args[0]).map_err(|m| format!("shardRange() first argument: {m}"))?;
    let field = match path.as_str() {
        "object.metadata.uid" => "object.metadata.uid",
        "object.metadata.namespace" => "object.metadata.namespace",
        _ => {
            return Err(format!(
                "unsupported field path {path:?}; supported: object.metadata.uid, object.metadata.namespace"
            ))
        }
    };
    let start = hex_bound(&args[1], "hexStart")?;
    let end = hex_bound(&args[2], "hexEnd")?;
    if !hex_less(&start, &end) {
        return Err(format!(
            "shard range start {start} must be less than end {end}"
        ));
    }
    Ok((field, start, end))
}

fn field_path(e: &cel::Expr) -> Result<String, String> {
    match e {
        cel::Expr::Ident(name) => Ok(name.clone()),
        cel::Expr::Select(operand, name) => Ok(format!("{}.{name}", field_path(operand)?)),
        other => Err(format!(
            "expected field path (e.g. object.metadata.uid), got expression kind {}",
            other.kind()
        )),
    }
}

fn hex_bound(e: &cel::Expr, name: &str) -> Result<String, String> {
    let cel::Expr::Literal(literal) = e else {
        return Err(format!(
            "{name} must be a string literal (e.g. '0xff'), got expression kind {}",
            e.kind()
        ));
    };
    let cel::Literal::String(s) = literal else {
        return Err(format!(
            "{name} must be a string literal, got {}",
            literal.go_type()
        ));
    };
    let Some(hex) = s.strip_prefix("0x") else {
        return Err(format!("{name} must have '0x' prefix, got {s:?}"));
    };
    if hex.is_empty() {
        return Err(format!("{name}: hex value is required after '0x'"));
    }
    if hex.chars().count() > 17 {
        return Err(format!(
            "{name}: hex value too long ({} chars, max 17): {hex:?}",
            hex.len()
        ));
    }
    if let Some(c) = hex.chars().find(|c| !matches!(c, '0'..='9' | 'a'..='f')) {
        return Err(format!(
            "{name}: invalid hex character {:?} in {s:?}",
            c.to_string()
        ));
    }
    match hex.len() {
        17 if s != "0x10000000000000000" => Err(format!(
            "{name}: 17-digit hex value must be '0x10000000000000000' (2^64), got {s:?}"
        )),
        17 | 16 => Ok(s.clone()),
        n => Err(format!(
            "{name} must be a 0x-prefixed 16-digit hex value, got {s:?} (did you mean \"0x{}{hex}\"?)",
            "0".repeat(16 - n)
        )),
    }
}

/// A small reader of the CEL expressions a shard selector may be written in: identifiers,
/// selections, calls (global and receiver-style), indexing, `||`, `&&`, `!`, parentheses, lists
/// and literals. Enough to walk the tree as kube-apiserver does and to name what is wrong.
mod cel {
    /// A CEL expression; [`kind`](Expr::kind) numbers as CEL's `ast.ExprKind` does.
    #[derive(Debug, Clone, PartialEq)]
    pub enum Expr {
        /// A call, operators included (`_||_`, `_&&_`, `_[_]`, `!_`, `-_`).
        Call {
            function: String,
            args: Vec<Expr>,
        },
        Ident(String),
        List(Vec<Expr>),
        Literal(Literal),
        Select(Box<Expr>, String),
    }

    impl Expr {
        pub fn kind(&self) -> u8 {
            match self {
                Expr::Call { .. } => 1,
                Expr::Ident(_) => 3,
                Expr::List(_) => 4,
                Expr::Literal(_) => 5,
                Expr::Select(..) => 7,
            }
        }
    }

    #[derive(Debug, Clone, PartialEq)]
    pub enum Literal {
        String(String),
        Int(i64),
        Uint(u64),
        Double(f64),
        Bool(bool),
        Null,
    }

    impl Literal {
        /// What Go's `%T` prints for the literal's value.
        pub fn go_type(&self) -> &'static str {
            match self {
                Literal::String(_) => "string",
                Literal::Int(_) => "int64",
                Literal::Uint(_) => "uint64",
                Literal::Double(_) => "float64",
                Literal::Bool(_) => "bool",
                Literal::Null => "structpb.NullValue",
            }
        }
    }

    /// Bounds the nesting a hostile selector can ask for.
    const MAX_DEPTH: usize = 64;

    pub fn parse(text: &str) -> Result<Expr, String> {
        let mut p = Parser {
            text,
            at: 0,
            depth: 0,
        };
        let e = p.or()?;
        p.space();
        if p.at < text.len() {
            return Err(p.unexpected("the end of the expression"));
        }
        Ok(e)
    }

    struct Parser<'a> {
        text: &'a str,
        at: usize,
        depth: usize,
    }

    impl Parser<'_> {
        fn rest(&self) -> &str {
            &self.text[self.at..]
        }

        fn space(&mut self) {
            let rest = self.rest();
            self.at += rest.len() - rest.trim_start().len();
        }

        fn unexpected(&self, expecting: &str) -> String {
            match self.rest().chars().next() {
                None => format!("mismatched input '<EOF>' expecting {expecting}"),
                Some(c) => format!(
                    "mismatched input '{c}' at column {} expecting {expecting}",
                    self.at
                ),
            }
        }

        fn eat(&mut self, token: &str) -> bool {
            self.space();
            if self.rest().starts_with(token) {
                self.at += token.len();
                true
            } else {
                false
            }
        }

        fn binary(
            &mut self,
            op: &str,
            function: &str,
            next: fn(&mut Self) -> Result<Expr, String>,
        ) -> Result<Expr, String> {
            let mut left = next(self)?;
            while self.eat(op) {
                let right = next(self)?;
                left = Expr::Call {
                    function: function.into(),
                    args: vec![left, right],
                };
            }
            Ok(left)
        }

        fn or(&mut self) -> Result<Expr, String> {
            self.depth += 1;
            if self.depth > MAX_DEPTH {
                return Err("expression nested too deeply".into());
            }
            let e = self.binary("||", "_||_", Self::and);
            self.depth -= 1;
            e
        }

        fn and(&mut self) -> Result<Expr, String> {
            self.binary("&&", "_&&_", Self::unary)
        }

        fn unary(&mut self) -> Result<Expr, String> {
            if self.eat("!") {
                let operand = self.unary()?;
                return Ok(Expr::Call {
                    function: "!_".into(),
                    args: vec![operand],
                });
            }
            self.member()
        }

        fn member(&mut self) -> Result<Expr, String> {
            let mut e = self.primary()?;
            loop {
                if self.eat(".") {
                    let name = self
                        .identifier()
                        .ok_or_else(|| self.unexpected("IDENTIFIER"))?;
                    if self.eat("(") {
                        let mut args = vec![e];
                        args.extend(self.arguments(")")?);
                        e = Expr::Call {
                            function: name,
                            args,
                        };
                    } else {
                        e = Expr::Select(Box::new(e), name);
                    }
                } else if self.eat("[") {
                    let index = self.or()?;
                    if !self.eat("]") {
                        return Err(self.unexpected("']'"));
                    }
                    e = Expr::Call {
                        function: "_[_]".into(),
                        args: vec![e, index],
                    };
                } else {
                    return Ok(e);
                }
            }
        }

        /// Comma-separated expressions up to `close` (consumed).
        fn arguments(&mut self, close: &str) -> Result<Vec<Expr>, String> {
            let mut args = Vec::new();
            if self.eat(close) {
                return Ok(args);
            }
            loop {
                args.push(self.or()?);
                if self.eat(close) {
                    return Ok(args);
                }
                if !self.eat(",") {
                    return Err(self.unexpected(&format!("{{',', '{close}'}}")));
                }
            }
        }

        fn identifier(&mut self) -> Option<String> {
            self.space();
            let rest = self.rest();
            let len = rest
                .char_indices()
                .find(|&(i, c)| {
                    !(c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()))
                })
                .map_or(rest.len(), |(i, _)| i);
            let name = rest[..len].to_string();
            self.at += len;
            (len > 0).then_some(name)
        }

        fn primary(&mut self) -> Result<Expr, String> {
            self.space();
            let Some(c) = self.rest().chars().next() else {
                return Err(self.unexpected("an expression"));
            };
            match c {
                '(' => {
                    self.at += 1;
                    let e = self.or()?;
                    if !self.eat(")") {
                        return Err(self.unexpected("')'"));
                    }
                    Ok(e)
                }
                '[' => {
                    self.at += 1;
                    Ok(Expr::List(self.arguments("]")?))
                }
                '\'' | '"' => self.string(false),
                'r' | 'R' if self.rest()[1..].starts_with(['\'', '"']) => {
                    self.at += 1;
                    self.string(true)
                }
                '-' | '0'..='9' => self.number(),
                _ => match self.identifier() {
                    Some(name) if name == "true" || name == "false" => {
                        Ok(Expr::Literal(Literal::Bool(name == "true")))
                    }
                    Some(name) if name == "null" => Ok(Expr::Literal(Literal::Null)),
                    Some(name) => {
                        if self.eat("(") {
                            Ok(Expr::Call {
                                function: name,
                                args: self.arguments(")")?,
                            })
                        } else {
                            Ok(Expr::Ident(name))
                        }
                    }
                    None => Err(format!("token recognition error at: '{c}'")),
                },
            }
        }

        fn string(&mut self, raw: bool) -> Result<Expr, String> {
            let quote = self.rest().chars().next().unwrap_or('\'');
            let body = &self.text[self.at + 1..];
            let Some(len) = body.find(quote) else {
                return Err(format!(
                    "token recognition error at: '{}'",
                    &self.text[self.at..]
                ));
            };
            let value = &body[..len];
            if !raw && value.contains('\\') {
                return Err("escape sequences are not read by the simulator".into());
            }
            self.at += len + 2;
            Ok(Expr::Literal(Literal::String(value.to_string())))
        }

        fn number(&mut self) -> Result<Expr, String> {
            let rest = self.rest();
            let len = rest
                .char_indices()
                .find(|&(i, c)| !(c.is_ascii_alphanumeric() || c == '.' || (i == 0 && c == '-')))
                .map_or(rest.len(), |(i, _)| i);
            let token = rest[..len].to_string();
            self.at += len;
            let literal = if let Some(u) = token.strip_suffix(['u', 'U']) {
                u.parse().map(Literal::Uint).ok()
            } else if token.contains('.') {
                token.parse().map(Literal::Double).ok()
            } else {
                token.parse().map(Literal::Int).ok()
            };
            literal
                .map(Expr::Literal)
                .ok_or_else(|| format!("invalid number {token:?}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(text: &str) -> String {
        ShardSelector::parse_message(text).unwrap_err()
    }

    /// kube-apiserver 1.36.3's answers, as recorded from it.
    #[test]
    fn refuses_as_kube_apiserver_does() {
        let h = "'0x0000000000000000'";
        let cases = [
            (" ", "empty shard selector is not allowed; omit the parameter for unfiltered lists".to_string()),
            ("bogus", "unexpected expression kind 3; expected shardRange() call or || operator".into()),
            (&format!("foo(object.metadata.uid, {h}, '0x8000000000000000')"), "unsupported function \"foo\"; only shardRange() and || are allowed".into()),
            (&format!("shardRange(object.metadata.uid, {h})"), "shardRange() requires exactly 3 arguments, got 2".into()),
            (&format!("shardRange(object.metadata.name, {h}, '0x8000000000000000')"), "unsupported field path \"object.metadata.name\"; supported: object.metadata.uid, object.metadata.namespace".into()),
            ("shardRange(object.metadata.uid, '0x0', '0x8000000000000000')", "hexStart must be a 0x-prefixed 16-digit hex value, got \"0x0\" (did you mean \"0x0000000000000000\"?)".into()),
            ("shardRange(object.metadata.uid, '0X0000000000000000', '0x8000000000000000')", "hexStart must have '0x' prefix, got \"0X0000000000000000\"".into()),
            ("shardRange(object.metadata.uid, '0x000000000000000G', '0x8000000000000000')", "hexStart: invalid hex character \"G\" in \"0x000000000000000G\"".into()),
            ("shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')", "shard range start 0x8000000000000000 must be less than end 0x8000000000000000".into()),
            (&format!("shardRange(object.metadata.uid, {h}, '0x10000000000000001')"), "hexEnd: 17-digit hex value must be '0x10000000000000000' (2^64), got \"0x10000000000000001\"".into()),
            ("shardRange(object.metadata.uid, 0, '0x8000000000000000')", "hexStart must be a string literal, got int64".into()),
            (&format!("shardRange(object.metadata.uid, {h}, '0x4000000000000000') || shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')"), "all shard ranges must use the same field, got \"object.metadata.uid\" and \"object.metadata.namespace\"".into()),
            (&format!("shardRange(object.metadata.uid, {h}, '0x4000000000000000') && shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"), "unsupported function \"_&&_\"; only shardRange() and || are allowed".into()),
            (&format!("shardRange(metadata.uid, {h}, '0x8000000000000000')"), "unsupported field path \"metadata.uid\"; supported: object.metadata.uid, object.metadata.namespace".into()),
            (&format!("shardRange(object.metadata.uid, {h}, '0xFFFFFFFFFFFFFFFF')"), "hexEnd: invalid hex character \"F\" in \"0xFFFFFFFFFFFFFFFF\"".into()),
            (&format!("shardRange(object[\"metadata\"].uid, {h}, '0x8000000000000000')"), "shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind 1".into()),
            ("shardRange(object.metadata.uid, '0x8000000000000000', '0x0000000000000000')", "shard range start 0x8000000000000000 must be less than end 0x0000000000000000".into()),
        ];
        for (text, expected) in cases {
            assert_eq!(message(text), expected, "{text}");
        }
        assert!(message("shardRange(").starts_with("CEL parse error: Syntax error: "));
        assert!(message(&format!(
            "shardRange(object.metadata.uid, {h}, '0x8000000000000000',)"
        ))
        .starts_with("CEL parse error: Syntax error: "));
        let answer = ShardSelector::parse("bogus").unwrap_err();
        assert_eq!(answer.code, 500);
    }

    #[test]
    fn echoes_the_normal_form_and_selects_by_fnv1a() {
        let s = ShardSelector::parse(
            "  (shardRange  (  object . metadata . uid ,\"0x0000000000000000\",r'0x8000000000000000' ))  ",
        )
        .unwrap();
        assert_eq!(
            s.to_string(),
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
        );
        // Hashes computed apart: 0x229986c8b34b011c and 0x86ce133f3c33c1c1.
        let low = json!({"metadata": {"uid": "383d4e86-3295-4b65-b95d-bc4dd48c9fde"}});
        let high = json!({"metadata": {"uid": "6a401f32-7c09-4900-82e3-293f835f0157"}});
        assert!(s.matches(&low));
        assert!(!s.matches(&high));
        let everything = ShardSelector::parse(
            "shardRange(object.metadata.namespace, '0x0000000000000000', '0x10000000000000000')",
        )
        .unwrap();
        assert!(everything.matches(&json!({"metadata": {}})));
    }
}
