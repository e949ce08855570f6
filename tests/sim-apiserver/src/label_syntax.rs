//! The grammar of label selectors, as kube-apiserver's parser reads them (apimachinery's
//! `labels.Parse`): its lexer, its recursive descent, its validation of keys and values, and
//! its error messages word for word (`unable to parse requirement: found 'web', expected: in,
//! notin, =, ==, !=, gt, lt`), so that a client shows the same error for the same typo.
//!
//! ```text
//! selector    := [requirement (',' requirement)*]
//! requirement := ['!'] KEY | KEY op value | KEY ('in' | 'notin') '(' values ')'
//! op          := '=' | '==' | '!=' | 'gt' | 'lt'   (gt and lt as '>' and '<')
//! ```

use crate::validation;

/// A requirement's operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Equals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

/// One parsed requirement: a key, an operator and its values (sorted and deduplicated, as
/// apimachinery keeps them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Requirement {
    pub(crate) key: String,
    pub(crate) op: Op,
    pub(crate) values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    End,
    Error,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

/// The lexer's context: in values, `in` and `notin` are identifiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

fn special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '>' | '<')
}

fn symbol(s: &str) -> Option<Token> {
    Some(match s {
        ")" => Token::ClosedPar,
        "," => Token::Comma,
        "!" => Token::DoesNotExist,
        "==" => Token::DoubleEquals,
        "=" => Token::Equals,
        ">" => Token::GreaterThan,
        "<" => Token::LessThan,
        "!=" => Token::NotEquals,
        "(" => Token::OpenPar,
        _ => return None,
    })
}

/// The whole input lexed (a token and its literal each), as the parser's lookahead sees it.
fn lex(input: &str) -> Vec<(Token, String)> {
    let chars: Vec<char> = input.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if i >= chars.len() {
            out.push((Token::End, String::new()));
            return out;
        }
        if special(chars[i]) {
            // The longest run of symbols that is still a token.
            let mut buffer = String::new();
            let mut last: Option<(Token, usize)> = None;
            let mut j = i;
            while j < chars.len() && special(chars[j]) {
                buffer.push(chars[j]);
                match symbol(&buffer) {
                    Some(t) => last = Some((t, j + 1)),
                    None if last.is_some() => break,
                    None => {}
                }
                j += 1;
            }
            match last {
                Some((t, end)) => {
                    out.push((t, chars[i..end].iter().collect()));
                    i = end;
                }
                None => {
                    out.push((
                        Token::Error,
                        format!("error expected: keyword found '{buffer}'"),
                    ));
                    i = j;
                }
            }
        } else {
            let start = i;
            while i < chars.len() && !chars[i].is_whitespace() && !special(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let token = match word.as_str() {
                "in" => Token::In,
                "notin" => Token::NotIn,
                _ => Token::Identifier,
            };
            out.push((token, word));
        }
    }
}

struct Parser {
    tokens: Vec<(Token, String)>,
    at: usize,
}

impl Parser {
    fn lookahead(&self, context: Context) -> (Token, String) {
        let (t, lit) = self.tokens[self.at.min(self.tokens.len() - 1)].clone();
        (in_context(t, context), lit)
    }

    fn consume(&mut self, context: Context) -> (Token, String) {
        let got = self.lookahead(context);
        if self.at < self.tokens.len() - 1 {
            self.at += 1;
        }
        got
    }
}

fn in_context(t: Token, context: Context) -> Token {
    if context == Context::Values && matches!(t, Token::In | Token::NotIn) {
        Token::Identifier
    } else {
        t
    }
}

/// Parses `input` as kube-apiserver does; the error is its message.
pub(crate) fn parse(input: &str) -> Result<Vec<Requirement>, String> {
    let mut p = Parser {
        tokens: lex(input),
        at: 0,
    };
    let mut out = Vec::new();
    loop {
        let (t, lit) = p.lookahead(Context::Values);
        match t {
            Token::Identifier | Token::DoesNotExist => {
                let r =
                    requirement(&mut p).map_err(|e| format!("unable to parse requirement: {e}"))?;
                out.push(r);
                let (t, lit) = p.consume(Context::Values);
                match t {
                    Token::End => return Ok(out),
                    Token::Comma => {
                        let (t2, lit2) = p.lookahead(Context::Values);
                        if !matches!(t2, Token::Identifier | Token::DoesNotExist) {
                            return Err(format!("found '{lit2}', expected: identifier after ','"));
                        }
                    }
                    _ => return Err(format!("found '{lit}', expected: ',' or 'end of string'")),
                }
            }
            Token::End => return Ok(out),
            _ => {
                return Err(format!(
                    "found '{lit}', expected: !, identifier, or 'end of string'"
                ))
            }
        }
    }
}

fn requirement(p: &mut Parser) -> Result<Requirement, String> {
    let (key, op) = key_and_inferred_operator(p)?;
    if let Some(op @ (Op::Exists | Op::DoesNotExist)) = op {
        return Ok(Requirement {
            key,
            op,
            values: Vec::new(),
        });
    }
    let op = operator(p)?;
    let values = match op {
        Op::In | Op::NotIn => set_values(p)?,
        _ => exact_value(p)?,
    };
    let mut values: Vec<String> = values;
    values.sort();
    values.dedup();
    check_values(&key, op, &values)?;
    Ok(Requirement { key, op, values })
}

fn key_and_inferred_operator(p: &mut Parser) -> Result<(String, Option<Op>), String> {
    let (mut t, mut lit) = p.consume(Context::Values);
    let mut op = None;
    if t == Token::DoesNotExist {
        op = Some(Op::DoesNotExist);
        (t, lit) = p.consume(Context::Values);
    }
    if t != Token::Identifier {
        return Err(format!("found '{lit}', expected: identifier"));
    }
    check_key(&lit)?;
    let (next, _) = p.lookahead(Context::Values);
    if matches!(next, Token::End | Token::Comma) && op.is_none() {
        op = Some(Op::Exists);
    }
    Ok((lit, op))
}

fn operator(p: &mut Parser) -> Result<Op, String> {
    let (t, lit) = p.consume(Context::KeyAndOperator);
    Ok(match t {
        Token::In => Op::In,
        Token::Equals | Token::DoubleEquals => Op::Equals,
        Token::GreaterThan => Op::GreaterThan,
        Token::LessThan => Op::LessThan,
        Token::NotIn => Op::NotIn,
        Token::NotEquals => Op::NotEquals,
        _ => {
            return Err(format!(
                "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
            ))
        }
    })
}

fn set_values(p: &mut Parser) -> Result<Vec<String>, String> {
    let (t, lit) = p.consume(Context::Values);
    if t != Token::OpenPar {
        return Err(format!("found '{lit}' expected: '('"));
    }
    let (t, lit) = p.lookahead(Context::Values);
    match t {
        Token::Identifier | Token::Comma => {
            let values = identifiers(p)?;
            let (t, _) = p.consume(Context::Values);
            if t != Token::ClosedPar {
                return Err(format!("found '{lit}', expected: ')'"));
            }
            Ok(values)
        }
        Token::ClosedPar => {
            p.consume(Context::Values);
            Ok(vec![String::new()])
        }
        _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
    }
}

fn identifiers(p: &mut Parser) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    loop {
        let (t, lit) = p.consume(Context::Values);
        match t {
            Token::Identifier => {
                out.push(lit);
                let (t2, lit2) = p.lookahead(Context::Values);
                match t2 {
                    Token::Comma => continue,
                    Token::ClosedPar => return Ok(out),
                    _ => return Err(format!("found '{lit2}', expected: ',' or ')'")),
                }
            }
            Token::Comma => {
                if out.is_empty() {
                    out.push(String::new());
                }
                let (t2, _) = p.lookahead(Context::Values);
                if t2 == Token::ClosedPar {
                    out.push(String::new());
                    return Ok(out);
                }
                if t2 == Token::Comma {
                    p.consume(Context::Values);
                    out.push(String::new());
                }
            }
            _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
        }
    }
}

fn exact_value(p: &mut Parser) -> Result<Vec<String>, String> {
    let (t, _) = p.lookahead(Context::Values);
    if matches!(t, Token::End | Token::Comma) {
        return Ok(vec![String::new()]);
    }
    let (t, lit) = p.consume(Context::Values);
    if t == Token::Identifier {
        return Ok(vec![lit]);
    }
    Err(format!("found '{lit}', expected: identifier"))
}

/// A key's errors as apimachinery words them (with the `<nil>` path of a parsed selector).
fn check_key(key: &str) -> Result<(), String> {
    let why = validation::label_key_errors(key);
    if why.is_empty() {
        Ok(())
    } else {
        Err(format!("<nil>: Invalid value: {key:?}: {}", why.join("; ")))
    }
}

fn check_values(key: &str, op: Op, values: &[String]) -> Result<(), String> {
    if matches!(op, Op::GreaterThan | Op::LessThan) {
        if values.len() != 1 || values[0].parse::<i64>().is_err() {
            return Err(format!(
                "values: Invalid value: {values:?}: for 'gt', 'lt' operators, the value must be an integer"
            ));
        }
        return Ok(());
    }
    for (i, v) in values.iter().enumerate() {
        let why = validation::label_value_errors(v);
        if !why.is_empty() {
            return Err(format!(
                "values[{i}][{key}]: Invalid value: {v:?}: {}",
                why.join("; ")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_kube_apiservers_words() {
        let cases = [
            (
                "app in web",
                "unable to parse requirement: found 'web' expected: '('",
            ),
            (
                "=web",
                "found '=', expected: !, identifier, or 'end of string'",
            ),
            (
                "app web",
                "unable to parse requirement: found 'web', expected: in, notin, =, ==, !=, gt, lt",
            ),
            (
                "app===web",
                "unable to parse requirement: found '=', expected: identifier",
            ),
            (
                "app in (web",
                "unable to parse requirement: found '', expected: ',' or ')'",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(parse(input).unwrap_err(), want, "{input}");
        }
        assert!(parse("app=-web-")
            .unwrap_err()
            .starts_with("unable to parse requirement: values[0][app]: Invalid value: \"-web-\": a valid label must"));
        assert!(parse("a/b/c=x").unwrap_err().starts_with(
            "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a valid label key must"
        ));
    }

    #[test]
    fn requirements_read_as_kube_apiserver_reads_them() {
        let r = parse("app in (web, db),!gone,tier,x==1,y!=2,app=").unwrap();
        assert_eq!(r[0].op, Op::In);
        assert_eq!(r[0].values, ["db", "web"]);
        assert_eq!(r[1].op, Op::DoesNotExist);
        assert_eq!(r[2].op, Op::Exists);
        assert_eq!(r[3].op, Op::Equals);
        assert_eq!(r[4].op, Op::NotEquals);
        assert_eq!(r[5].values, [""]);
        assert!(parse("").unwrap().is_empty());
        assert_eq!(parse("n>3").unwrap()[0].op, Op::GreaterThan);
    }
}
