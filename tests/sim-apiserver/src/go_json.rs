//! The words Go's `encoding/json` uses for a body that is not JSON, which kube-apiserver passes
//! on to the client (`error decoding patch: unexpected end of JSON input`, `invalid character
//! 's' looking for beginning of object key string`): a client or a test that shows or matches
//! the message sees the same text from the simulator.
//!
//! [`syntax_error`] runs Go's JSON scanner state machine far enough to find the first error
//! and word it as Go does; serde_json only decides *whether* a body parses.

/// Go's message for the first syntax error in `data`, or `None` when it is valid JSON.
pub fn syntax_error(data: &[u8]) -> Option<String> {
    let mut scanner = Scanner::default();
    for (i, &c) in data.iter().enumerate() {
        if let Err(context) = scanner.step(c) {
            // Go reports the character as it is, even a byte of a UTF-8 sequence.
            let shown = std::str::from_utf8(&data[i..])
                .ok()
                .and_then(|s| s.chars().next())
                .unwrap_or(c as char);
            return Some(format!("invalid character {} {context}", quote_char(shown)));
        }
    }
    if scanner.complete() {
        None
    } else {
        Some("unexpected end of JSON input".into())
    }
}

/// Go's name of the JSON type of `value`, as in `json: cannot unmarshal array into Go value of
/// type map[string]interface {}`.
pub fn type_name(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "bool",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

/// `value` as Go's `%v` prints a decoded JSON value: `map[k:v k2:v2]` (keys sorted), `[a b]`,
/// strings unquoted, `<nil>`, as kube-apiserver quotes a patch fragment in its messages.
pub fn go_format(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(go_format).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{k}:{}", go_format(&m[k])))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

/// Go's `quoteChar`: `'x'`, with `'` and `"` escaped as Go escapes them.
fn quote_char(c: char) -> String {
    match c {
        '\'' => "'\\''".into(),
        '"' => "'\"'".into(),
        c if c.is_control() => format!("'\\x{:02x}'", c as u32),
        c => format!("'{c}'"),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Container {
    Object,
    Array,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before a value.
    BeginValue,
    /// After `{`: a key or `}`.
    BeginKeyOrEmpty,
    /// After `,` in an object: a key.
    BeginKey,
    /// After `[`: a value or `]`.
    BeginValueOrEmpty,
    /// After a key: `:`.
    AfterKey,
    /// After a value inside an object or array, or at the top.
    EndValue,
    InString {
        key: bool,
    },
    InStringEscape {
        key: bool,
    },
    InStringHex {
        key: bool,
        left: u8,
    },
    /// The rest of `true`, `false` or `null`.
    Literal {
        word: &'static str,
        at: usize,
    },
    NumberSign,
    NumberZero,
    NumberInt,
    NumberDotStart,
    NumberFraction,
    NumberExponentStart,
    NumberExponentSign,
    NumberExponent,
}

struct Scanner {
    state: State,
    /// The objects and arrays the scanner is inside, innermost last.
    stack: Vec<Container>,
}

impl Default for Scanner {
    fn default() -> Self {
        Scanner {
            state: State::BeginValue,
            stack: Vec::new(),
        }
    }
}

impl Scanner {
    /// Whether the input so far is one whole value (what an end of input may follow).
    fn complete(&self) -> bool {
        self.stack.is_empty()
            && matches!(
                self.state,
                State::EndValue
                    | State::NumberZero
                    | State::NumberInt
                    | State::NumberFraction
                    | State::NumberExponent
            )
    }

    fn step(&mut self, c: u8) -> Result<(), &'static str> {
        use State::*;
        let space = matches!(c, b' ' | b'\t' | b'\n' | b'\r');
        match self.state {
            BeginValue | BeginValueOrEmpty => {
                if space {
                    return Ok(());
                }
                if c == b']' && self.state == BeginValueOrEmpty {
                    return self.end_container(Container::Array);
                }
                self.begin_value(c)
            }
            BeginKeyOrEmpty | BeginKey => {
                if space {
                    return Ok(());
                }
                if c == b'}' && self.state == BeginKeyOrEmpty {
                    return self.end_container(Container::Object);
                }
                if c == b'"' {
                    self.state = InString { key: true };
                    return Ok(());
                }
                Err("looking for beginning of object key string")
            }
            AfterKey => {
                if space {
                    return Ok(());
                }
                if c == b':' {
                    self.state = BeginValue;
                    return Ok(());
                }
                Err("after object key")
            }
            EndValue => self.end_value(c, space),
            InString { .. } | InStringEscape { .. } | InStringHex { .. } => self.step_string(c),
            Literal { word, at } => self.step_literal(word, at, c),
            NumberSign | NumberZero | NumberInt | NumberDotStart | NumberFraction
            | NumberExponentStart | NumberExponentSign | NumberExponent => {
                self.step_number(c, space)
            }
        }
    }

    /// One byte inside a string: its end, an escape, or the hex digits of a `\u` escape.
    fn step_string(&mut self, c: u8) -> Result<(), &'static str> {
        use State::*;
        match self.state {
            InString { key } => {
                match c {
                    b'"' => {
                        if key {
                            self.state = AfterKey;
                        } else {
                            self.value_done();
                        }
                    }
                    b'\\' => self.state = InStringEscape { key },
                    c if c < 0x20 => return Err("in string literal"),
                    _ => {}
                }
                Ok(())
            }
            InStringEscape { key } => match c {
                b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => {
                    self.state = InString { key };
                    Ok(())
                }
                b'u' => {
                    self.state = InStringHex { key, left: 4 };
                    Ok(())
                }
                _ => Err("in string escape code"),
            },
            InStringHex { key, left } => {
                if !c.is_ascii_hexdigit() {
                    return Err("in \\u hexadecimal character escape");
                }
                self.state = if left == 1 {
                    InString { key }
                } else {
                    InStringHex {
                        key,
                        left: left - 1,
                    }
                };
                Ok(())
            }
            _ => unreachable!("step_string is called in a string"),
        }
    }

    /// One more byte of the literal `word` (`true`, `false` or `null`), `at` bytes of it read.
    fn step_literal(&mut self, word: &'static str, at: usize, c: u8) -> Result<(), &'static str> {
        if c != word.as_bytes()[at] {
            return Err(match word {
                "true" => literal_context("true", at),
                "false" => literal_context("false", at),
                _ => literal_context("null", at),
            });
        }
        if at + 1 == word.len() {
            self.value_done();
        } else {
            self.state = State::Literal { word, at: at + 1 };
        }
        Ok(())
    }

    /// One byte of a number: its sign, digits, fraction or exponent, or what ends it.
    fn step_number(&mut self, c: u8, space: bool) -> Result<(), &'static str> {
        use State::*;
        match self.state {
            NumberSign => match c {
                b'0' => {
                    self.state = NumberZero;
                    Ok(())
                }
                b'1'..=b'9' => {
                    self.state = NumberInt;
                    Ok(())
                }
                _ => Err("in numeric literal"),
            },
            NumberZero => self.after_integer(c, space),
            NumberInt => {
                if c.is_ascii_digit() {
                    return Ok(());
                }
                self.after_integer(c, space)
            }
            NumberDotStart => {
                if c.is_ascii_digit() {
                    self.state = NumberFraction;
                    return Ok(());
                }
                Err("after decimal point in numeric literal")
            }
            NumberFraction => {
                if c.is_ascii_digit() {
                    return Ok(());
                }
                if c == b'e' || c == b'E' {
                    self.state = NumberExponentStart;
                    return Ok(());
                }
                self.number_done(c, space)
            }
            NumberExponentStart => match c {
                b'+' | b'-' => {
                    self.state = NumberExponentSign;
                    Ok(())
                }
                b'0'..=b'9' => {
                    self.state = NumberExponent;
                    Ok(())
                }
                _ => Err("in exponent of numeric literal"),
            },
            NumberExponentSign => {
                if c.is_ascii_digit() {
                    self.state = NumberExponent;
                    return Ok(());
                }
                Err("in exponent of numeric literal")
            }
            NumberExponent => {
                if c.is_ascii_digit() {
                    return Ok(());
                }
                self.number_done(c, space)
            }
            _ => unreachable!("step_number is called in a number"),
        }
    }

    fn begin_value(&mut self, c: u8) -> Result<(), &'static str> {
        use State::*;
        self.state = match c {
            b'{' => {
                self.stack.push(Container::Object);
                BeginKeyOrEmpty
            }
            b'[' => {
                self.stack.push(Container::Array);
                BeginValueOrEmpty
            }
            b'"' => InString { key: false },
            b'-' => NumberSign,
            b'0' => NumberZero,
            b'1'..=b'9' => NumberInt,
            b't' => Literal {
                word: "true",
                at: 1,
            },
            b'f' => Literal {
                word: "false",
                at: 1,
            },
            b'n' => Literal {
                word: "null",
                at: 1,
            },
            _ => return Err("looking for beginning of value"),
        };
        Ok(())
    }

    fn after_integer(&mut self, c: u8, space: bool) -> Result<(), &'static str> {
        match c {
            b'.' => {
                self.state = State::NumberDotStart;
                Ok(())
            }
            b'e' | b'E' => {
                self.state = State::NumberExponentStart;
                Ok(())
            }
            _ => self.number_done(c, space),
        }
    }

    /// A number ended at `c`, which belongs to what follows it.
    fn number_done(&mut self, c: u8, space: bool) -> Result<(), &'static str> {
        self.value_done();
        self.end_value(c, space)
    }

    fn value_done(&mut self) {
        self.state = State::EndValue;
    }

    fn end_value(&mut self, c: u8, space: bool) -> Result<(), &'static str> {
        if space {
            return Ok(());
        }
        match self.stack.last() {
            None => Err("after top-level value"),
            Some(Container::Object) => match c {
                b',' => {
                    self.state = State::BeginKey;
                    Ok(())
                }
                b'}' => self.end_container(Container::Object),
                _ => Err("after object key:value pair"),
            },
            Some(Container::Array) => match c {
                b',' => {
                    self.state = State::BeginValue;
                    Ok(())
                }
                b']' => self.end_container(Container::Array),
                _ => Err("after array element"),
            },
        }
    }

    fn end_container(&mut self, which: Container) -> Result<(), &'static str> {
        debug_assert_eq!(self.stack.last(), Some(&which));
        self.stack.pop();
        self.value_done();
        Ok(())
    }
}

/// Go's context for a literal that went wrong at position `at`: `in literal true (expecting
/// 'r')`.
fn literal_context(word: &'static str, at: usize) -> &'static str {
    match (word, at) {
        ("true", 1) => "in literal true (expecting 'r')",
        ("true", 2) => "in literal true (expecting 'u')",
        ("true", _) => "in literal true (expecting 'e')",
        ("false", 1) => "in literal false (expecting 'a')",
        ("false", 2) => "in literal false (expecting 'l')",
        ("false", 3) => "in literal false (expecting 's')",
        ("false", _) => "in literal false (expecting 'e')",
        (_, 1) => "in literal null (expecting 'u')",
        (_, _) => "in literal null (expecting 'l')",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_print_as_go_prints_them() {
        let v = serde_json::json!({"name": "only", "$patch": "x", "l": [1, "a"], "n": null});
        assert_eq!(go_format(&v), "map[$patch:x l:[1 a] n:<nil> name:only]");
    }

    #[test]
    fn messages_are_gos() {
        let cases: &[(&str, Option<&str>)] = &[
            (r#"{"a": [1, 2.5e3, true, null, "x\u0041"]}"#, None),
            ("", Some("unexpected end of JSON input")),
            (
                r#"{"apiVersion": "v1", "kind": "#,
                Some("unexpected end of JSON input"),
            ),
            (
                "{spec",
                Some("invalid character 's' looking for beginning of object key string"),
            ),
            (
                "not-a-token",
                Some("invalid character 'o' in literal null (expecting 'u')"),
            ),
            ("[1 2]", Some("invalid character '2' after array element")),
            (r#"{"a" 1}"#, Some("invalid character '1' after object key")),
            (
                r#"{"a": 1 "b"}"#,
                Some("invalid character '\"' after object key:value pair"),
            ),
            ("{} x", Some("invalid character 'x' after top-level value")),
            ("01", Some("invalid character '1' after top-level value")),
            (
                "1.x",
                Some("invalid character 'x' after decimal point in numeric literal"),
            ),
            (
                "<ConfigMap/>",
                Some("invalid character '<' looking for beginning of value"),
            ),
            (
                "'a'",
                Some("invalid character '\\'' looking for beginning of value"),
            ),
        ];
        for (input, want) in cases {
            assert_eq!(
                syntax_error(input.as_bytes()).as_deref(),
                *want,
                "input {input:?}"
            );
        }
    }
}
