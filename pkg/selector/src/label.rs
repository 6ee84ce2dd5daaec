//! Label selectors: a port of the lexer and recursive-descent parser of
//! k8s.io/apimachinery/pkg/labels/selector.go, kept structurally close to the
//! original so its quirks (which inputs are accepted, which empty values are
//! produced) carry over unchanged.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::BuildHasher;
use std::str::FromStr;

use crate::error::{ParseError, quote};
use crate::validation::{NAME_RULE, check_label_key, is_label_value};

/// Anything that can look up a label value by key.
pub trait Labels {
    /// The value of label `key`, or `None` if the object has no such label.
    fn get_label(&self, key: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn get_label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl<S: BuildHasher> Labels for HashMap<String, String, S> {
    fn get_label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

/// `None` is an object without labels (Kubernetes omits an empty
/// `metadata.labels`).
impl Labels for Option<&BTreeMap<String, String>> {
    fn get_label(&self, key: &str) -> Option<&str> {
        self.and_then(|m| m.get(key)).map(String::as_str)
    }
}

impl<T: Labels + ?Sized> Labels for &T {
    fn get_label(&self, key: &str) -> Option<&str> {
        (**self).get_label(key)
    }
}

/// How a [`Requirement`] relates its key to its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operator {
    /// `key=value`
    Equals,
    /// `key==value` (same meaning as `=`, kept apart to render it back)
    DoubleEquals,
    /// `key!=value`; also matches objects without the label
    NotEquals,
    /// `key in (v1,v2)`
    In,
    /// `key notin (v1,v2)`; also matches objects without the label
    NotIn,
    /// `key`
    Exists,
    /// `!key`
    DoesNotExist,
    /// `key>N`: the label exists and its value, read as a 64-bit decimal
    /// integer, is greater than `N`
    GreaterThan,
    /// `key<N`: the label exists and its value, read as a 64-bit decimal
    /// integer, is less than `N`
    LessThan,
}

impl Operator {
    /// How the operator is written between key and value (`>` and `<` for
    /// the comparisons); empty for the unary `key` and `!key`.
    fn symbol(self) -> &'static str {
        match self {
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::In => "in",
            Operator::NotIn => "notin",
            Operator::GreaterThan => ">",
            Operator::LessThan => "<",
            Operator::Exists | Operator::DoesNotExist => "",
        }
    }
}

/// Go's `strconv.ParseInt(s, 10, 64)`: an optional `+` or `-`, then ASCII
/// digits only, within the range of `i64`. Rust's `i64::from_str` accepts
/// exactly the same strings.
fn parse_int(s: &str) -> Option<i64> {
    s.parse().ok()
}

/// One condition of a [`LabelSelector`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

impl Requirement {
    /// The label key, a valid qualified name.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// How [`values`](Self::values) are compared with the label's value.
    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// Sorted and deduplicated: exactly one value for `=`, `==` and `!=`, at
    /// least one for `in` and `notin` (possibly the empty string), none for
    /// `key` and `!key`, and for `>` and `<` exactly one, a 64-bit decimal
    /// integer kept as written (`k>007` stays `007`).
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Same rules as apimachinery's `Requirement.Matches`: the negative
    /// operators (`!=`, `notin`, `!key`) match objects without the label;
    /// `>` and `<` match only a label whose value is an integer (as Go's
    /// `strconv.ParseInt` reads it, so `+5` and `-5` count) that compares
    /// accordingly.
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        let value = labels.get_label(&self.key);
        match self.operator {
            Operator::Equals | Operator::DoubleEquals | Operator::In => {
                value.is_some_and(|v| self.has_value(v))
            }
            Operator::NotEquals | Operator::NotIn => !value.is_some_and(|v| self.has_value(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(have), Some(bound)) = (
                    value.and_then(parse_int),
                    self.values.first().and_then(|v| parse_int(v)),
                ) else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    have > bound
                } else {
                    have < bound
                }
            }
        }
    }

    fn has_value(&self, value: &str) -> bool {
        self.values
            .binary_search_by(|v| v.as_str().cmp(value))
            .is_ok()
    }
}

/// apimachinery's `Requirement.String()`: `k=v`, `k==v`, `k!=v`,
/// `k in (a,b)`, `k notin (a)`, `k`, `!k`, `k>1`, `k<1`.
impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = &self.key;
        let first = self.values.first().map_or("", String::as_str);
        match self.operator {
            Operator::Equals => write!(f, "{key}={first}"),
            Operator::DoubleEquals => write!(f, "{key}=={first}"),
            Operator::NotEquals => write!(f, "{key}!={first}"),
            Operator::In => write!(f, "{key} in ({})", self.values.join(",")),
            Operator::NotIn => write!(f, "{key} notin ({})", self.values.join(",")),
            Operator::Exists => write!(f, "{key}"),
            Operator::DoesNotExist => write!(f, "!{key}"),
            Operator::GreaterThan => write!(f, "{key}>{first}"),
            Operator::LessThan => write!(f, "{key}<{first}"),
        }
    }
}

/// A parsed label selector: a list of requirements that must all match.
///
/// Requirements are kept sorted by key (stable for equal keys), as
/// apimachinery sorts them after parsing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses a selector with the grammar and validation of apimachinery's
    /// `labels.Parse`; an empty (or all-blank) string selects everything.
    /// `k>N` and `k<N` need `N` to be a 64-bit decimal integer that is also
    /// a valid label value (so no sign: `k>-1` is rejected, as by the
    /// apiserver).
    pub fn parse(s: &str) -> Result<LabelSelector, ParseError> {
        let mut requirements = Parser::new(s).parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements })
    }

    /// The selector that matches every object.
    pub fn everything() -> LabelSelector {
        LabelSelector::default()
    }

    /// Whether this selector selects everything (has no requirements).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements sorted by key, all of which must match; empty for a selector that
    /// selects everything.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether every requirement matches `labels`.
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }
}

/// The canonical form: requirements in key order joined by `,` without
/// spaces, set values sorted, as apimachinery's `Selector.String()`.
/// Parsing it gives back an equal selector.
impl fmt::Display for LabelSelector {
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

impl FromStr for LabelSelector {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<LabelSelector, ParseError> {
        LabelSelector::parse(s)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok {
    End,
    Identifier,
    OpenPar,
    ClosedPar,
    Comma,
    Bang,
    Equals,
    DoubleEquals,
    NotEquals,
    Less,
    Greater,
    In,
    NotIn,
}

#[derive(Clone, Copy, Debug)]
struct Token<'a> {
    tok: Tok,
    lit: &'a str,
    pos: usize,
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'<' | b'>')
}

/// Splits the whole input into tokens, always ending with `Tok::End`.
///
/// Go's lexer reads byte 0 as its end-of-input sentinel, which leaks into
/// what it accepts: a NUL byte right after a token is silently dropped, and a
/// NUL where a token would start ends the input (`"a=b \0junk"` is `a=b`).
/// That is reproduced so the cache accepts exactly what the apiserver does.
/// All bytes that end a token are ASCII, so every literal boundary is a char
/// boundary.
fn lex(input: &str) -> Vec<Token<'_>> {
    let bytes = input.as_bytes();
    let mut tokens = Vec::new();
    let mut pos = 0;
    loop {
        while bytes.get(pos).is_some_and(|&b| is_whitespace(b)) {
            pos += 1;
        }
        let start = pos;
        let first = match bytes.get(pos) {
            None | Some(0) => {
                tokens.push(Token {
                    tok: Tok::End,
                    lit: "",
                    pos: start,
                });
                return tokens;
            }
            Some(&b) => b,
        };
        let tok = if is_special(first) {
            // Only "==" and "!=" are longer than one byte.
            let double = matches!(bytes.get(pos + 1), Some(b'=')) && matches!(first, b'=' | b'!');
            pos += if double { 2 } else { 1 };
            match (first, double) {
                (b'=', true) => Tok::DoubleEquals,
                (b'!', true) => Tok::NotEquals,
                (b'=', false) => Tok::Equals,
                (b'!', false) => Tok::Bang,
                (b'(', _) => Tok::OpenPar,
                (b')', _) => Tok::ClosedPar,
                (b',', _) => Tok::Comma,
                (b'<', _) => Tok::Less,
                _ => Tok::Greater,
            }
        } else {
            while bytes
                .get(pos)
                .is_some_and(|&b| b != 0 && !is_special(b) && !is_whitespace(b))
            {
                pos += 1;
            }
            match input.get(start..pos) {
                Some("in") => Tok::In,
                Some("notin") => Tok::NotIn,
                _ => Tok::Identifier,
            }
        };
        tokens.push(Token {
            tok,
            lit: input.get(start..pos).unwrap_or_default(),
            pos: start,
        });
        if bytes.get(pos) == Some(&0) {
            pos += 1;
        }
    }
}

/// Where `in` and `notin` are keywords: only in operator position. Anywhere
/// else apimachinery reads them as identifiers, so `in=a`, `a in (in)` and
/// `a=notin` are valid.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    KeyAndOperator,
    Values,
}

/// A value with the byte position it came from, for error reporting.
type Positioned<'a> = (&'a str, usize);

struct Parser<'a> {
    input: &'a str,
    tokens: Vec<Token<'a>>,
    next: usize,
}

impl<'a> Parser<'a> {
    fn new(input: &'a str) -> Parser<'a> {
        Parser {
            input,
            tokens: lex(input),
            next: 0,
        }
    }

    fn lookahead(&self, ctx: Ctx) -> Token<'a> {
        let end = Token {
            tok: Tok::End,
            lit: "",
            pos: self.input.len(),
        };
        let mut t = self
            .tokens
            .get(self.next)
            .or(self.tokens.last())
            .copied()
            .unwrap_or(end);
        if ctx == Ctx::Values && matches!(t.tok, Tok::In | Tok::NotIn) {
            t.tok = Tok::Identifier;
        }
        t
    }

    /// Never moves past the final `End`, so a grammar slip cannot index out
    /// of bounds (Go would panic there).
    fn consume(&mut self, ctx: Ctx) -> Token<'a> {
        let t = self.lookahead(ctx);
        if self.next + 1 < self.tokens.len() {
            self.next += 1;
        }
        t
    }

    fn syntax_error(&self, found: Token<'a>, expected: &str) -> ParseError {
        let found_part = if found.tok == Tok::End {
            String::new()
        } else {
            format!(", found {}", quote(found.lit))
        };
        ParseError::new(
            format!(
                "invalid label selector {}: at {}: {expected}{found_part}",
                quote(self.input),
                found.pos
            ),
            found.pos,
            found.lit,
        )
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, ParseError> {
        let mut requirements = Vec::new();
        loop {
            let t = self.lookahead(Ctx::Values);
            match t.tok {
                Tok::Identifier | Tok::Bang => {
                    let r = self.parse_requirement()?;
                    let t = self.consume(Ctx::Values);
                    match t.tok {
                        Tok::End => {
                            requirements.push(r);
                            return Ok(requirements);
                        }
                        Tok::Comma => {
                            let next = self.lookahead(Ctx::Values);
                            if !matches!(next.tok, Tok::Identifier | Tok::Bang) {
                                return Err(self
                                    .syntax_error(next, "expected a label key or '!' after ','"));
                            }
                        }
                        _ => {
                            let expected = format!(
                                "expected ',' or end of string after requirement {}",
                                quote(&r.to_string())
                            );
                            return Err(self.syntax_error(t, &expected));
                        }
                    }
                    requirements.push(r);
                }
                Tok::End => return Ok(requirements),
                _ => return Err(self.syntax_error(t, "expected a label key or '!'")),
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, ParseError> {
        let (key, operator) = self.parse_key_and_infer_operator()?;
        if let Some(operator) = operator {
            return Ok(Requirement {
                key: key.lit.to_owned(),
                operator,
                values: Vec::new(),
            });
        }
        let operator = self.parse_operator(key.lit)?;
        let values = match operator {
            Operator::In | Operator::NotIn => self.parse_values(operator)?,
            _ => self.parse_exact_value(operator)?,
        };
        new_requirement(key.lit, operator, values)
    }

    /// Returns the key token and, when the operator is already known
    /// (`!key`, or a bare `key` before `,` or the end), that operator.
    fn parse_key_and_infer_operator(
        &mut self,
    ) -> Result<(Token<'a>, Option<Operator>), ParseError> {
        let mut t = self.consume(Ctx::Values);
        let bang = t.tok == Tok::Bang;
        if bang {
            t = self.consume(Ctx::Values);
        }
        if t.tok != Tok::Identifier {
            let expected = if bang {
                "expected a label key after '!'"
            } else {
                "expected a label key"
            };
            return Err(self.syntax_error(t, expected));
        }
        if let Err(reason) = check_label_key(t.lit) {
            return Err(ParseError::new(
                format!("invalid label key {}: {reason}", quote(t.lit)),
                t.pos,
                t.lit,
            ));
        }
        // `!key` stays DoesNotExist whatever follows; a stray operator after
        // it is then reported by the caller.
        let operator = if bang {
            Some(Operator::DoesNotExist)
        } else if matches!(self.lookahead(Ctx::Values).tok, Tok::End | Tok::Comma) {
            Some(Operator::Exists)
        } else {
            None
        };
        Ok((t, operator))
    }

    fn parse_operator(&mut self, key: &str) -> Result<Operator, ParseError> {
        let t = self.consume(Ctx::KeyAndOperator);
        match t.tok {
            Tok::In => Ok(Operator::In),
            Tok::NotIn => Ok(Operator::NotIn),
            Tok::Equals => Ok(Operator::Equals),
            Tok::DoubleEquals => Ok(Operator::DoubleEquals),
            Tok::NotEquals => Ok(Operator::NotEquals),
            Tok::Greater => Ok(Operator::GreaterThan),
            Tok::Less => Ok(Operator::LessThan),
            _ => {
                let expected = format!(
                    "expected ',', '=', '==', '!=', 'in', 'notin', '>' or '<' after key {}",
                    quote(key)
                );
                Err(self.syntax_error(t, &expected))
            }
        }
    }

    /// `( values )` after `in` / `notin`. `()` is the set holding only the
    /// empty string, not an error, exactly as in apimachinery.
    fn parse_values(&mut self, operator: Operator) -> Result<Vec<Positioned<'a>>, ParseError> {
        let t = self.consume(Ctx::Values);
        if t.tok != Tok::OpenPar {
            let name = operator.symbol();
            return Err(self.syntax_error(t, &format!("expected '(' after '{name}'")));
        }
        let t = self.lookahead(Ctx::Values);
        match t.tok {
            Tok::Identifier | Tok::Comma => {
                let values = self.parse_identifiers_list()?;
                let close = self.consume(Ctx::Values);
                if close.tok != Tok::ClosedPar {
                    return Err(self.syntax_error(close, "expected ')'"));
                }
                Ok(values)
            }
            Tok::ClosedPar => {
                self.consume(Ctx::Values);
                Ok(vec![("", t.pos)])
            }
            _ => Err(self.syntax_error(t, "expected a value, ',' or ')' after '('")),
        }
    }

    /// Port of `parseIdentifiersList` (apimachinery v0.35), including how it
    /// turns runs of commas into empty values: `(,a)`, `(a,)`, `(a,,b)`,
    /// `(a,,)` and `(,,)` all hold "" (older apimachinery rejected the last
    /// two; the apiserver of today accepts them).
    fn parse_identifiers_list(&mut self) -> Result<Vec<Positioned<'a>>, ParseError> {
        let mut values = Vec::new();
        loop {
            let t = self.consume(Ctx::Values);
            match t.tok {
                Tok::Identifier => {
                    values.push((t.lit, t.pos));
                    let next = self.lookahead(Ctx::Values);
                    match next.tok {
                        Tok::Comma => {}
                        Tok::ClosedPar => return Ok(values),
                        _ => {
                            let expected =
                                format!("expected ')' or ',' after value {}", quote(t.lit));
                            return Err(self.syntax_error(next, &expected));
                        }
                    }
                }
                Tok::Comma => {
                    if values.is_empty() {
                        values.push(("", t.pos));
                    }
                    let next = self.lookahead(Ctx::Values);
                    if next.tok == Tok::ClosedPar {
                        values.push(("", next.pos));
                        return Ok(values);
                    }
                    // `,,`: an empty value between the two; the second comma
                    // is read by the next round, not skipped.
                    if next.tok == Tok::Comma {
                        values.push(("", next.pos));
                    }
                }
                _ => {
                    return Err(self.syntax_error(t, "expected a value, ',' or ')' after ','"));
                }
            }
        }
    }

    /// The value after `=`, `==` or `!=`; nothing before `,` or the end
    /// means the empty string.
    fn parse_exact_value(&mut self, operator: Operator) -> Result<Vec<Positioned<'a>>, ParseError> {
        let t = self.lookahead(Ctx::Values);
        if matches!(t.tok, Tok::End | Tok::Comma) {
            return Ok(vec![("", t.pos)]);
        }
        let t = self.consume(Ctx::Values);
        if t.tok == Tok::Identifier {
            return Ok(vec![(t.lit, t.pos)]);
        }
        let name = operator.symbol();
        Err(self.syntax_error(t, &format!("expected a value after '{name}'")))
    }
}

/// Sorts and deduplicates the values and validates them, like
/// `NewRequirement(key, op, values.List())`: the first invalid value in sorted
/// order is the one reported. For `>` and `<` (always one value) that the
/// value is an integer is checked first, as apimachinery lists that error
/// first.
fn new_requirement(
    key: &str,
    operator: Operator,
    mut values: Vec<Positioned<'_>>,
) -> Result<Requirement, ParseError> {
    // Stable, so after dedup each value keeps its first position.
    values.sort_by(|a, b| a.0.cmp(b.0));
    values.dedup_by(|a, b| a.0 == b.0);
    if matches!(operator, Operator::GreaterThan | Operator::LessThan)
        && let Some(&(bad, pos)) = values.iter().find(|(v, _)| parse_int(v).is_none())
    {
        return Err(ParseError::new(
            format!(
                "invalid label value {} for key {} with operator '{}': must be a 64-bit decimal integer",
                quote(bad),
                quote(key),
                operator.symbol()
            ),
            pos,
            bad,
        ));
    }
    if let Some(&(bad, pos)) = values.iter().find(|(v, _)| !is_label_value(v)) {
        return Err(ParseError::new(
            format!(
                "invalid label value {} for key {}: {NAME_RULE}",
                quote(bad),
                quote(key)
            ),
            pos,
            bad,
        ));
    }
    Ok(Requirement {
        key: key.to_owned(),
        operator,
        values: values.into_iter().map(|(v, _)| v.to_owned()).collect(),
    })
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

    /// Valid selectors and their canonical form. Many rows are the
    /// `TestSetSelectorParser` / `TestSelectorParse` cases of apimachinery.
    const VALID: &[(&str, &str)] = &[
        ("", ""),
        ("   ", ""),
        ("\t\r\n", ""),
        ("x", "x"),
        ("\rx", "x"),
        ("a ", "a"),
        (" a , b ", "a,b"),
        ("!x", "!x"),
        ("! x", "!x"),
        ("!x,y", "!x,y"),
        ("x=a", "x=a"),
        ("x = a", "x=a"),
        ("x==a", "x==a"),
        ("x == a", "x==a"),
        ("x!=a", "x!=a"),
        ("x != a", "x!=a"),
        ("x=", "x="),
        ("x= ", "x="),
        ("x==", "x=="),
        ("x!=", "x!="),
        ("x=,z= ", "x=,z="),
        ("x= ,z= ", "x=,z="),
        ("x!=a,y=b", "x!=a,y=b"),
        ("x=a,y=b,z=c", "x=a,y=b,z=c"),
        ("z=c,y=b,x=a", "x=a,y=b,z=c"),
        ("x=a,y!=b,z in (h,i,j)", "x=a,y!=b,z in (h,i,j)"),
        ("x in (abc,def)", "x in (abc,def)"),
        ("x in (def,abc,def)", "x in (abc,def)"),
        ("x in(a)", "x in (a)"),
        ("x notin(a)", "x notin (a)"),
        ("x in ( a , b )", "x in (a,b)"),
        ("x in (abc,)", "x in (,abc)"),
        ("x in ()", "x in ()"),
        ("x in ( )", "x in ()"),
        ("x in (,)", "x in ()"),
        ("x in (,a)", "x in (,a)"),
        ("x in (a,,b)", "x in (,a,b)"),
        ("x in (a,,,)", "x in (,a)"),
        // apimachinery v0.35's TestSetSelectorParser; older versions rejected these.
        ("x in (a,,)", "x in (,a)"),
        ("x in (a,,,,,,)", "x in (,a)"),
        ("x in (a,,a,,a,,a,,)", "x in (,a)"),
        ("x in (,,)", "x in ()"),
        ("x notin (,,,)", "x notin ()"),
        ("x notin ( )", "x notin ()"),
        ("x notin (, a)", "x notin (,a)"),
        (
            "x notin (abc,,def),bar,z in (),w",
            "bar,w,x notin (,abc,def),z in ()",
        ),
        ("x,y in (a)", "x,y in (a)"),
        ("foo  in\t (abc)", "foo in (abc)"),
        ("x notin\n (abc)", "x notin (abc)"),
        ("x  notin\t\t(abc,def)", "x notin (abc,def)"),
        ("a in (x,y,notin, z,in)", "a in (in,notin,x,y,z)"),
        ("in", "in"),
        ("!in", "!in"),
        ("notin", "notin"),
        ("in=a", "in=a"),
        ("a=in", "a=in"),
        ("a=notin", "a=notin"),
        ("in in (in)", "in in (in)"),
        ("notin notin (notin)", "notin notin (notin)"),
        ("a,in", "a,in"),
        (
            "this-is-a-dns.domain.com/key-with-dash",
            "this-is-a-dns.domain.com/key-with-dash",
        ),
        (
            "this-is-another-dns.domain.com/key-with-dash in (so,what)",
            "this-is-another-dns.domain.com/key-with-dash in (so,what)",
        ),
        (
            "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
            "0.1.2.domain/99 notin (10.10.100.1,tick.tack.clock)",
        ),
        (
            "tier in (frontend, backend),app.kubernetes.io/name=web,!canary",
            "app.kubernetes.io/name=web,!canary,tier in (backend,frontend)",
        ),
        ("A_b.C-d=Value_1.x", "A_b.C-d=Value_1.x"),
        ("x=a,x!=b", "x=a,x!=b"),
        ("x!=b,x=a", "x!=b,x=a"),
        ("b,!b,b=1", "b,!b,b=1"),
        ("a=b\n,c", "a=b,c"),
        ("a=1.2.3", "a=1.2.3"),
        // Go's NUL-as-end-of-input quirk, see `lex`.
        ("a\0", "a"),
        ("a=b \0garbage", "a=b"),
        ("a=b\0,c", "a=b,c"),
        ("a=\0", "a="),
        ("\0a", ""),
        // Gt / Lt: the value is kept as written.
        ("x>1", "x>1"),
        ("x<1", "x<1"),
        ("x > 1", "x>1"),
        ("x\t<\n10", "x<10"),
        ("x>0", "x>0"),
        ("x>007", "x>007"),
        ("x>1,z<5", "x>1,z<5"),
        ("z<5,x>1", "x>1,z<5"),
        ("x>1,x<5", "x>1,x<5"),
        ("x<5,x>1", "x<5,x>1"),
        ("x>9223372036854775807", "x>9223372036854775807"),
        ("example.com/replicas>3,!y", "example.com/replicas>3,!y"),
        ("in>1", "in>1"),
        ("notin<2", "notin<2"),
        ("x>1 \0junk", "x>1"),
        ("x>1\0,y", "x>1,y"),
    ];

    /// Inputs apimachinery rejects.
    const INVALID: &[&str] = &[
        ",",
        "a,",
        "a=b,",
        ",a=b",
        "x,,y",
        ",x,y",
        "a b",
        "a=b c",
        "a in (x",
        "a in (x,",
        "a in (x y)",
        "a in (xyz abc)",
        "a in (a,,=)",
        "a in (,,",
        "a in (a,,b",
        "a in (=)",
        "a in (x))",
        "a in ((x))",
        "a in (xyz),",
        "a in (xyz)b notin ()",
        "a in",
        "a in x",
        "a notin",
        "a notin(",
        "x nott in (y)",
        "x in in",
        "in in in",
        "a (",
        "(",
        ")",
        "!",
        "!!a",
        "!=a",
        "=a",
        "==a",
        "a=(",
        "a=)",
        "a===b",
        "a!==b",
        "x==a==b",
        "a=b=c",
        "a=b,,c",
        "!x=a",
        "!a in (x)",
        "x=a||y=b",
        // Gt / Lt: one 64-bit decimal integer that is also a label value.
        "x<a",
        "x>a1",
        "x>1a",
        "x>",
        "x<",
        "x>,y",
        "x> ,y",
        "x>-1",
        "x<+1",
        "x>1.5",
        "x>1e3",
        "x>0x10",
        "x>1_000",
        "x>9223372036854775808",
        "x<-9223372036854775809",
        "x>99999999999999999999999999999999999999999999999999999999999999999",
        "x>=1",
        "x<=1",
        "x>>1",
        "x<>1",
        "x><1",
        "x>(1)",
        "x> in (1)",
        "x>1 2",
        "x>1,",
        "!x>1",
        "x>1>2",
        "x in (1)>2",
        ">1",
        "<1",
        "X/a>1",
        "a\0b",
        // Key validation.
        "A/b",
        "Example.com/b",
        "a/b/c",
        "/a",
        "a/",
        "-a",
        "a-",
        "_a",
        ".a",
        "a..b/c",
        "a-.b/c",
        "ä",
        "a*",
        // Value validation.
        "a=ä",
        "a=-b",
        "a=b-",
        "a=_b",
        "a=b_",
        "a=b/c",
        "a=b*",
        "x in (ok,-bad)",
        "x notin (ok,bad.)",
    ];

    #[test]
    fn valid_selectors_and_canonical_form() {
        for (input, canonical) in VALID {
            let sel = LabelSelector::parse(input)
                .unwrap_or_else(|e| panic!("{input:?} should parse: {e}"));
            assert_eq!(sel.to_string(), *canonical, "canonical form of {input:?}");
            assert_eq!(
                sel.is_empty(),
                canonical.is_empty(),
                "is_empty of {input:?}"
            );
            let from_str: LabelSelector = input.parse().unwrap();
            assert_eq!(from_str, sel);
        }
    }

    #[test]
    fn invalid_selectors() {
        for input in INVALID {
            match LabelSelector::parse(input) {
                Ok(sel) => panic!("{input:?} should be rejected, parsed as {sel:?}"),
                Err(e) => {
                    let msg = e.to_string();
                    assert!(!msg.contains('\n'), "one-line message for {input:?}: {msg}");
                    assert!(e.position() <= input.len(), "position of {input:?}: {e:?}");
                    let frag_in_input = input
                        .get(e.position()..)
                        .is_some_and(|rest| rest.starts_with(e.fragment()));
                    assert!(frag_in_input, "fragment at position for {input:?}: {e:?}");
                }
            }
        }
    }

    #[test]
    fn key_and_value_lengths() {
        let name63 = "a".repeat(63);
        let name64 = "a".repeat(64);
        let prefix = "example.com";
        let ok = [
            name63.clone(),
            format!("{prefix}/{name63}"),
            format!("k={name63}"),
            format!("k in ({name63},b)"),
            format!("{prefix}/{name63}!={name63}"),
        ];
        for s in &ok {
            assert!(LabelSelector::parse(s).is_ok(), "{s:?}");
        }
        let bad = [
            name64.clone(),
            format!("{prefix}/{name64}"),
            format!("k={name64}"),
            format!("k in (b,{name64})"),
            format!("{}/a", "a".repeat(254)),
        ];
        for s in &bad {
            assert!(LabelSelector::parse(s).is_err(), "{s:?}");
        }
    }

    #[test]
    fn error_messages() {
        let cases: &[(&str, &str, usize, &str)] = &[
            (
                "app in (a,b",
                r#"invalid label selector "app in (a,b": at 11: expected ')' or ',' after value "b""#,
                11,
                "",
            ),
            (
                "app in (a,b c)",
                r#"invalid label selector "app in (a,b c)": at 12: expected ')' or ',' after value "b", found "c""#,
                12,
                "c",
            ),
            (
                "a=b,",
                r#"invalid label selector "a=b,": at 4: expected a label key or '!' after ','"#,
                4,
                "",
            ),
            (
                ",a=b",
                r#"invalid label selector ",a=b": at 0: expected a label key or '!', found ",""#,
                0,
                ",",
            ),
            (
                "a b",
                r#"invalid label selector "a b": at 2: expected ',', '=', '==', '!=', 'in', 'notin', '>' or '<' after key "a", found "b""#,
                2,
                "b",
            ),
            (
                "a=b c",
                r#"invalid label selector "a=b c": at 4: expected ',' or end of string after requirement "a=b", found "c""#,
                4,
                "c",
            ),
            (
                "a in (a,,=)",
                r#"invalid label selector "a in (a,,=)": at 9: expected a value, ',' or ')' after ',', found "=""#,
                9,
                "=",
            ),
            (
                "a in x",
                r#"invalid label selector "a in x": at 5: expected '(' after 'in', found "x""#,
                5,
                "x",
            ),
            (
                "a===b",
                r#"invalid label selector "a===b": at 3: expected a value after '==', found "=""#,
                3,
                "=",
            ),
            (
                "x>1a",
                r#"invalid label value "1a" for key "x" with operator '>': must be a 64-bit decimal integer"#,
                2,
                "1a",
            ),
            (
                "a=b,x<",
                r#"invalid label value "" for key "x" with operator '<': must be a 64-bit decimal integer"#,
                6,
                "",
            ),
            (
                "x<-1",
                r#"invalid label value "-1" for key "x": must be 63 characters or less and consist of alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"#,
                2,
                "-1",
            ),
            (
                "x>=1",
                r#"invalid label selector "x>=1": at 2: expected a value after '>', found "=""#,
                2,
                "=",
            ),
            (
                "!",
                r#"invalid label selector "!": at 1: expected a label key after '!'"#,
                1,
                "",
            ),
            (
                "a=ok,app in (x,a_)",
                r#"invalid label value "a_" for key "app": must be 63 characters or less and consist of alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"#,
                15,
                "a_",
            ),
            (
                "x, Foo.com/a=b",
                r#"invalid label key "Foo.com/a": prefix part must be a DNS-1123 subdomain: 253 characters or less, lowercase alphanumerics, '-' or '.', each '.'-separated part starting and ending with an alphanumeric"#,
                3,
                "Foo.com/a",
            ),
            (
                "a\nb",
                r#"invalid label selector "a\nb": at 2: expected ',', '=', '==', '!=', 'in', 'notin', '>' or '<' after key "a", found "b""#,
                2,
                "b",
            ),
        ];
        for (input, message, position, fragment) in cases {
            let e = LabelSelector::parse(input).expect_err(input);
            assert_eq!(e.to_string(), *message, "message for {input:?}");
            assert_eq!(e.position(), *position, "position for {input:?}");
            assert_eq!(e.fragment(), *fragment, "fragment for {input:?}");
        }
    }

    #[test]
    fn first_invalid_value_in_sorted_order_is_reported() {
        let e = LabelSelector::parse("k in (z_, b_)").unwrap_err();
        assert_eq!(e.fragment(), "b_");
        assert_eq!(e.position(), 10);
    }

    #[test]
    fn requirements_accessors() {
        let sel = LabelSelector::parse("b in (y,x,y),a!=1,!c,d,e==").unwrap();
        let got: Vec<(&str, Operator, Vec<&str>)> = sel
            .requirements()
            .iter()
            .map(|r| {
                (
                    r.key(),
                    r.operator(),
                    r.values().iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("a", Operator::NotEquals, vec!["1"]),
                ("b", Operator::In, vec!["x", "y"]),
                ("c", Operator::DoesNotExist, vec![]),
                ("d", Operator::Exists, vec![]),
                ("e", Operator::DoubleEquals, vec![""]),
            ]
        );
        assert!(LabelSelector::everything().is_empty());
        assert_eq!(
            LabelSelector::everything(),
            LabelSelector::parse("").unwrap()
        );
        assert_eq!(LabelSelector::everything().to_string(), "");
    }

    #[test]
    fn matching() {
        // (selector, labels, expected)
        let present_a = &[("k", "a")][..];
        let present_other = &[("k", "b")][..];
        let present_empty = &[("k", "")][..];
        let absent = &[("other", "a")][..];
        let none: &[(&str, &str)] = &[];
        let cases: &[(&str, Pairs, bool)] = &[
            ("k=a", present_a, true),
            ("k=a", present_other, false),
            ("k=a", absent, false),
            ("k=", present_empty, true),
            ("k=", absent, false),
            ("k==a", present_a, true),
            ("k==a", present_other, false),
            ("k==a", absent, false),
            ("k!=a", present_a, false),
            ("k!=a", present_other, true),
            ("k!=a", absent, true),
            ("k!=", present_empty, false),
            ("k!=", absent, true),
            ("k in (a,c)", present_a, true),
            ("k in (a,c)", present_other, false),
            ("k in (a,c)", absent, false),
            ("k in ()", present_empty, true),
            ("k in ()", present_a, false),
            ("k notin (a,c)", present_a, false),
            ("k notin (a,c)", present_other, true),
            ("k notin (a,c)", absent, true),
            ("k", present_a, true),
            ("k", present_empty, true),
            ("k", absent, false),
            ("!k", present_a, false),
            ("!k", present_empty, false),
            ("!k", absent, true),
            ("", none, true),
            ("", present_a, true),
            ("k=a,other", &[("k", "a"), ("other", "")], true),
            ("k=a,other", present_a, false),
            ("k=a,!other", present_a, true),
            ("x,y in (a)", &[("y", "a")], false),
            ("K=a", present_a, false),
        ];
        for (sel, pairs, expected) in cases.iter().chain(GT_LT_MATCHING) {
            let selector = LabelSelector::parse(sel).unwrap();
            let btree = labels(pairs);
            let hash: HashMap<String, String> = btree.clone().into_iter().collect();
            assert_eq!(
                selector.matches(&btree),
                *expected,
                "{sel:?} on {pairs:?} (BTreeMap)"
            );
            assert_eq!(
                selector.matches(&hash),
                *expected,
                "{sel:?} on {pairs:?} (HashMap)"
            );
            assert_eq!(
                selector.matches(&Some(&btree)),
                *expected,
                "{sel:?} on {pairs:?} (Some)"
            );
            assert_eq!(
                selector.matches(&&btree),
                *expected,
                "{sel:?} on {pairs:?} (&&)"
            );
        }
    }

    type Pairs<'a> = &'a [(&'a str, &'a str)];

    /// `>` and `<`: the label must exist and read as an i64 like Go's
    /// `strconv.ParseInt(v, 10, 64)` (sign allowed, nothing else).
    const GT_LT_MATCHING: &[(&str, Pairs, bool)] = &[
        ("k>1", &[("k", "2")], true),
        ("k>1", &[("k", "1")], false),
        ("k>1", &[("k", "0")], false),
        ("k>1", &[("k", "10")], true), // numeric, not string, order
        ("k<10", &[("k", "9")], true),
        ("k<10", &[("k", "10")], false),
        ("k<10", &[("k", "100")], false),
        ("k>1", &[("other", "5")], false),
        ("k<1", &[("other", "0")], false), // absent never matches, unlike `!=`
        ("k>1", &[("k", "")], false),
        ("k<1", &[("k", "")], false),
        ("k>1", &[("k", "abc")], false),
        ("k<1", &[("k", "abc")], false),
        ("k>1", &[("k", "2.5")], false),
        ("k>1", &[("k", " 2")], false),
        ("k>1", &[("k", "0x10")], false),
        ("k>1", &[("k", "1_0")], false),
        ("k>1", &[("k", "+5")], true),
        ("k<1", &[("k", "-5")], true),
        ("k<0", &[("k", "-0")], false),
        ("k>007", &[("k", "8")], true),
        ("k>007", &[("k", "007")], false),
        ("k>8", &[("k", "0009")], true),
        (
            "k<9223372036854775807",
            &[("k", "9223372036854775806")],
            true,
        ),
        (
            "k<9223372036854775807",
            &[("k", "9223372036854775807")],
            false,
        ),
        (
            "k<9223372036854775807",
            &[("k", "9223372036854775808")],
            false,
        ), // overflow
        ("k>0", &[("k", "-9223372036854775808")], false),
        ("k<0", &[("k", "-9223372036854775808")], true),
        ("k<0", &[("k", "-9223372036854775809")], false), // overflow
        ("k>0", &[("k", "١")], false),                    // non-ASCII digit
        ("k>1,k<5", &[("k", "3")], true),
        ("k>1,k<5", &[("k", "5")], false),
        ("k>1,k!=3", &[("k", "3")], false),
        ("k>1,k!=3", &[("k", "4")], true),
        ("a>1,b<1", &[("a", "2"), ("b", "0")], true),
        ("a>1,b<1", &[("a", "2")], false),
    ];

    #[test]
    fn gt_lt_requirements() {
        let sel = LabelSelector::parse("z<5, a > 007").unwrap();
        let got: Vec<(&str, Operator, &[String])> = sel
            .requirements()
            .iter()
            .map(|r| (r.key(), r.operator(), r.values()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("a", Operator::GreaterThan, &["007".to_owned()][..]),
                ("z", Operator::LessThan, &["5".to_owned()][..]),
            ]
        );
        assert_eq!(sel.requirements()[0].to_string(), "a>007");
        assert_eq!(sel.requirements()[1].to_string(), "z<5");
        // Same number written differently: different selectors, as in apimachinery.
        assert_ne!(
            LabelSelector::parse("a>7").unwrap(),
            LabelSelector::parse("a>007").unwrap()
        );
        assert_ne!(
            LabelSelector::parse("a>7").unwrap(),
            LabelSelector::parse("a<7").unwrap()
        );
        let none: Option<&BTreeMap<String, String>> = None;
        assert!(!LabelSelector::parse("a>1").unwrap().matches(&none));
        assert!(!LabelSelector::parse("a<1").unwrap().matches(&none));
    }

    #[test]
    fn none_means_no_labels() {
        let none: Option<&BTreeMap<String, String>> = None;
        for (sel, expected) in [
            ("k", false),
            ("!k", true),
            ("k!=a", true),
            ("k=a", false),
            ("", true),
        ] {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(&none),
                expected,
                "{sel:?}"
            );
        }
    }

    /// Every accepted input must render to a string that parses back to the
    /// same selector and renders identically.
    fn assert_roundtrip(input: &str) {
        if let Ok(sel) = LabelSelector::parse(input) {
            let rendered = sel.to_string();
            let reparsed = LabelSelector::parse(&rendered)
                .unwrap_or_else(|e| panic!("{rendered:?} (from {input:?}) does not reparse: {e}"));
            assert_eq!(reparsed, sel, "roundtrip of {input:?} via {rendered:?}");
            assert_eq!(
                reparsed.to_string(),
                rendered,
                "rendering of {input:?} is not stable"
            );
        }
    }

    #[test]
    fn roundtrip_table() {
        for (input, _) in VALID {
            assert_roundtrip(input);
        }
    }

    /// Every sequence of up to `max` tokens from `pieces`, space-separated
    /// (whitespace between tokens is insignificant, so nothing is lost).
    fn token_sequences(pieces: &[&str], max: usize) -> Vec<String> {
        let mut all = vec![String::new()];
        let mut current = vec![String::new()];
        for _ in 0..max {
            current = current
                .iter()
                .flat_map(|s| pieces.iter().map(move |p| format!("{s} {p}")))
                .collect();
            all.extend(current.iter().cloned());
        }
        all
    }

    /// Exhaustive over short token sequences: exercises every grammar path,
    /// checks the parser never panics and that whatever it accepts
    /// roundtrips.
    #[test]
    fn roundtrip_token_sequences() {
        let wide = token_sequences(
            &["a", "b", "in", "notin", "=", "==", "!=", "!", "(", ")", ","],
            5,
        );
        let comparisons = token_sequences(&["a", "1", "-1", "<", ">", "=", "!", ","], 5);
        let deep = token_sequences(&["a", "in", "(", ")", ","], 8);
        let mut accepted = 0;
        for s in wide.iter().chain(&deep).chain(&comparisons) {
            if LabelSelector::parse(s).is_ok() {
                accepted += 1;
            }
            assert_roundtrip(s);
        }
        assert!(accepted > 1000, "only {accepted} accepted");
    }

    /// Exhaustive over short byte-level strings, including multi-byte UTF-8,
    /// NUL and characters that end identifiers.
    #[test]
    fn never_panics_on_short_strings() {
        const ALPHABET: &[char] = &[
            'a', 'i', 'n', '=', '!', '(', ')', ',', ' ', '/', 'é', '\0', '<', '>', '1',
        ];
        let mut current = vec![String::new()];
        for _ in 0..4 {
            let mut next = Vec::new();
            for s in &current {
                assert_roundtrip(s);
                for c in ALPHABET {
                    let mut t = s.clone();
                    t.push(*c);
                    next.push(t);
                }
            }
            current = next;
        }
        for s in &current {
            assert_roundtrip(s);
        }
    }
}
