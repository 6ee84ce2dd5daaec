//! kubectl's JSONPath dialect (`k8s.io/client-go/util/jsonpath`) as CRD printer columns use
//! it: the apiserver wraps a column's path as `{<path>}`, allows missing keys, and prints the
//! first value found.
//!
//! Written here rather than taken from a JSONPath crate: the crates implement RFC 9535 or
//! Goessner's dialect, which differ from client-go where cells show it (missing keys are no
//! error, an index out of range is an error, `[?(@.a==1)]` compares Go kinds strictly and
//! fails on a mismatch, values print with Go's `fmt` and `encoding/json`). Supported: `.a`,
//! `['a']`, `.*`, `..a`, `[n]`, `[a:b:c]`, `[*]`, `[a,b]`, `[?(@.a op literal)]` and
//! `[?(@.a)]`, the parts CRDs use; `range`/`end` templates are refused when parsed.

use std::borrow::Cow;

use serde_json::Value;

/// A path that does not parse, or does not evaluate on an object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonPathError {
    /// The path does not parse (client-go's parser error, in its words where it has them).
    #[error("{0}")]
    Parse(String),
    /// The path fails on an object (client-go's evaluation error).
    #[error("{0}")]
    Eval(String),
}

fn parse_error(message: impl Into<String>) -> JsonPathError {
    JsonPathError::Parse(message.into())
}

fn eval_error(message: impl Into<String>) -> JsonPathError {
    JsonPathError::Eval(message.into())
}

/// One slice bound of `[a:b:c]` (client-go's `ParamsEntry`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Param {
    value: i64,
    known: bool,
    derived: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Field(String),
    Wildcard,
    Recursive,
    Array([Param; 3]),
    Union(Vec<Vec<Node>>),
    Filter {
        left: Vec<Node>,
        operator: String,
        right: Vec<Node>,
    },
    Text(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

/// A parsed path, as `jsonpath.New(..).Parse("{" + path + "}")` with `AllowMissingKeys(true)`.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    nodes: Vec<Node>,
}

impl JsonPath {
    /// Parses a CRD column's `jsonPath` (without the braces the apiserver adds).
    pub fn parse(path: &str) -> Result<JsonPath, JsonPathError> {
        Ok(JsonPath {
            nodes: Parser {
                input: path,
                pos: 0,
            }
            .action()?,
        })
    }

    /// The first value the path finds in `object` (the apiserver's `results[0][0]`): `None`
    /// when it finds nothing, an error when it fails.
    pub fn first<'a>(&self, object: &'a Value) -> Result<Option<Cow<'a, Value>>, JsonPathError> {
        Ok(eval_list(vec![Cow::Borrowed(object)], &self.nodes)?
            .into_iter()
            .next())
    }
}

struct Parser<'a> {
    input: &'a str,
    pos: usize,
}

fn is_terminator(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t' | '\r' | '\n' | '.' | ',' | '[' | ']' | '$' | '@' | '{' | '}'
    )
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.input[self.pos..]
    }

    fn next(&mut self) -> Option<char> {
        let c = self.rest().chars().next()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    /// `parseInsideAction` until the input ends.
    fn action(&mut self) -> Result<Vec<Node>, JsonPathError> {
        let mut nodes = Vec::new();
        loop {
            if self.rest().starts_with("[?(") {
                nodes.push(self.filter()?);
                continue;
            }
            if self.rest().starts_with("..") {
                if nodes.last() == Some(&Node::Recursive) {
                    return Err(parse_error("invalid multiple recursive descent"));
                }
                self.pos += 2;
                nodes.push(Node::Recursive);
                if self
                    .rest()
                    .chars()
                    .next()
                    .is_some_and(|c| c == '_' || c.is_alphanumeric())
                {
                    nodes.push(self.field());
                }
                continue;
            }
            let Some(c) = self.next() else {
                return Ok(nodes);
            };
            match c {
                ' ' | '@' | '$' => {}
                '[' => nodes.push(self.array()?),
                '"' | '\'' => nodes.push(self.quote(c)?),
                '.' => nodes.push(self.field()),
                '+' | '-' | '0'..='9' => {
                    self.pos -= 1;
                    nodes.push(self.number()?);
                }
                c if c == '_' || c.is_alphanumeric() => {
                    self.pos -= c.len_utf8();
                    nodes.push(self.identifier()?);
                }
                c => {
                    return Err(parse_error(format!(
                        "unrecognized character in action: {c:?}"
                    )));
                }
            }
        }
    }

    /// `parseField`: up to a terminator, `\x` keeping `x`.
    fn field(&mut self) -> Node {
        let mut name = String::new();
        while let Some(c) = self.rest().chars().next() {
            if c == '\\' {
                self.pos += 1;
                if let Some(escaped) = self.next() {
                    name.push(escaped);
                }
                continue;
            }
            if is_terminator(c) {
                break;
            }
            self.pos += c.len_utf8();
            name.push(c);
        }
        if name == "*" {
            Node::Wildcard
        } else {
            Node::Field(name)
        }
    }

    fn identifier(&mut self) -> Result<Node, JsonPathError> {
        let start = self.pos;
        while let Some(c) = self.rest().chars().next() {
            if is_terminator(c) {
                break;
            }
            self.pos += c.len_utf8();
        }
        match &self.input[start..self.pos] {
            "true" => Ok(Node::Bool(true)),
            "false" => Ok(Node::Bool(false)),
            other => Err(parse_error(format!(
                "unsupported identifier {other:?} (range/end templates are not printer columns)"
            ))),
        }
    }

    fn number(&mut self) -> Result<Node, JsonPathError> {
        let start = self.pos;
        if self.rest().starts_with(['+', '-']) {
            self.pos += 1;
        }
        while self
            .rest()
            .starts_with(|c: char| c == '.' || c.is_ascii_digit())
        {
            self.pos += 1;
        }
        let text = &self.input[start..self.pos];
        if let Ok(int) = text.parse::<i64>() {
            return Ok(Node::Int(int));
        }
        text.parse::<f64>()
            .map(Node::Float)
            .map_err(|_| parse_error(format!("cannot parse number {text}")))
    }

    fn quote(&mut self, end: char) -> Result<Node, JsonPathError> {
        let mut text = String::new();
        loop {
            match self.next() {
                None | Some('\n') => return Err(parse_error("unterminated quoted string")),
                Some('\\') => match self.next() {
                    Some('n') => text.push('\n'),
                    Some('t') => text.push('\t'),
                    Some(c) => text.push(c),
                    None => return Err(parse_error("unterminated quoted string")),
                },
                Some(c) if c == end => break,
                Some(c) => text.push(c),
            }
        }
        Ok(Node::Text(text))
    }

    /// `parseArray`: `[...]` as a union, a `'key'`, or a slice.
    fn array(&mut self) -> Result<Node, JsonPathError> {
        let Some(close) = self.rest().find(']') else {
            return Err(parse_error("unterminated array"));
        };
        let input = self.input;
        let mut text = &input[self.pos..self.pos + close];
        if text.contains('\n') {
            return Err(parse_error("unterminated array"));
        }
        self.pos += close + 1;
        if text == "*" {
            text = ":";
        }
        if text.contains(',') {
            let union = text
                .split(',')
                .map(|part| {
                    Parser {
                        input: &format!("[{}]", part.trim_matches(' ')),
                        pos: 0,
                    }
                    .action()
                })
                .collect::<Result<_, _>>()?;
            return Ok(Node::Union(union));
        }
        if let Some(key) = text
            .strip_prefix('\'')
            .and_then(|t| t.strip_suffix('\''))
            .filter(|key| !key.contains('\''))
        {
            let mut nodes = Parser {
                input: &format!(".{key}"),
                pos: 0,
            }
            .action()?;
            return match (nodes.pop(), nodes.is_empty()) {
                (Some(node), true) => Ok(node),
                _ => Err(parse_error(format!("invalid array key {text}"))),
            };
        }
        slice(text)
    }

    /// `parseFilter`: `[?(left op right)]` or `[?(path)]`.
    fn filter(&mut self) -> Result<Node, JsonPathError> {
        self.pos += 3;
        let start = self.pos;
        let (mut begin, mut end, mut pair) = (false, false, '\0');
        let mut previous = '\0';
        loop {
            let Some(c) = self.next() else {
                return Err(parse_error("unterminated filter"));
            };
            match c {
                '\n' => return Err(parse_error("unterminated filter")),
                '"' | '\'' if !begin => {
                    begin = true;
                    pair = c;
                }
                '"' | '\'' if previous != '\\' && c == pair => end = true,
                ')' if begin == end => break,
                _ => {}
            }
            previous = c;
        }
        let text = &self.input[start..self.pos - 1];
        if self.next() != Some(']') {
            return Err(parse_error("unclosed array expect ]"));
        }
        let parse = |part: &str| {
            Parser {
                input: part,
                pos: 0,
            }
            .action()
        };
        // client-go's `^([^!<>=]+)([!<>=]+)(.+?)$`.
        let is_operator = |c: char| matches!(c, '!' | '<' | '>' | '=');
        match text.find(is_operator) {
            Some(at) if at > 0 => {
                let after = &text[at..];
                let operator_len = after.find(|c| !is_operator(c)).unwrap_or(after.len());
                let right = &after[operator_len..];
                if right.is_empty() {
                    return Ok(Node::Filter {
                        left: parse(text)?,
                        operator: "exists".to_owned(),
                        right: Vec::new(),
                    });
                }
                Ok(Node::Filter {
                    left: parse(&text[..at])?,
                    operator: after[..operator_len].to_owned(),
                    right: parse(right)?,
                })
            }
            _ => Ok(Node::Filter {
                left: parse(text)?,
                operator: "exists".to_owned(),
                right: Vec::new(),
            }),
        }
    }
}

/// A slice `a:b:c` (client-go's `sliceOperatorRex` and its defaults).
fn slice(text: &str) -> Result<Node, JsonPathError> {
    let parts: Vec<&str> = text.split(':').collect();
    if parts.len() > 3
        || parts.iter().any(|p| {
            !p.strip_prefix('-')
                .unwrap_or(p)
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
    {
        return Err(parse_error(format!("invalid array index {text}")));
    }
    let mut params = [Param::default(); 3];
    for (i, param) in params.iter_mut().enumerate() {
        match parts.get(i) {
            Some(part) if !part.is_empty() => {
                param.known = true;
                param.value = part
                    .parse()
                    .map_err(|_| parse_error(format!("array index {part} is not a number")))?;
            }
            // `[a:]` or `[::c]`: an empty bound after a colon is unknown.
            Some(_) => {}
            None if i == 1 => {
                param.known = true;
                param.value = params_first(&parts) + 1;
                param.derived = true;
            }
            None => {}
        }
    }
    Ok(Node::Array(params))
}

fn params_first(parts: &[&str]) -> i64 {
    parts.first().and_then(|p| p.parse().ok()).unwrap_or(0)
}

type Values<'a> = Vec<Cow<'a, Value>>;

fn eval_list<'a>(mut values: Values<'a>, nodes: &[Node]) -> Result<Values<'a>, JsonPathError> {
    for node in nodes {
        values = eval(values, node)?;
    }
    Ok(values)
}

/// The children of a value as client-go's wildcard sees them (a string's bytes included).
fn children<'a>(value: &Cow<'a, Value>) -> Values<'a> {
    match value {
        Cow::Borrowed(Value::Object(map)) => map.values().map(Cow::Borrowed).collect(),
        Cow::Borrowed(Value::Array(items)) => items.iter().map(Cow::Borrowed).collect(),
        Cow::Owned(Value::Object(map)) => map.values().cloned().map(Cow::Owned).collect(),
        Cow::Owned(Value::Array(items)) => items.iter().cloned().map(Cow::Owned).collect(),
        other => match other.as_ref() {
            Value::String(s) => s.bytes().map(|b| Cow::Owned(Value::from(b))).collect(),
            _ => Vec::new(),
        },
    }
}

fn field<'a>(value: Cow<'a, Value>, name: &str) -> Option<Cow<'a, Value>> {
    match value {
        Cow::Borrowed(v) => v.as_object()?.get(name).map(Cow::Borrowed),
        Cow::Owned(v) => v.as_object()?.get(name).cloned().map(Cow::Owned),
    }
}

fn eval<'a>(input: Values<'a>, node: &Node) -> Result<Values<'a>, JsonPathError> {
    match node {
        Node::Text(text) => Ok(vec![Cow::Owned(Value::String(text.clone()))]),
        Node::Int(n) => Ok(vec![Cow::Owned(Value::from(*n))]),
        Node::Float(f) => Ok(vec![Cow::Owned(
            serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
        )]),
        Node::Bool(b) => Ok(vec![Cow::Owned(Value::Bool(*b))]),
        // Missing keys are allowed: a field nothing has is no result, not an error.
        Node::Field(name) => Ok(input
            .into_iter()
            .filter(|v| !v.is_null())
            .filter_map(|v| field(v, name))
            .collect()),
        Node::Wildcard => Ok(input
            .iter()
            .filter(|v| !v.is_null())
            .flat_map(children)
            .collect()),
        Node::Recursive => {
            let mut found = Vec::new();
            recursive(input, &mut found);
            Ok(found)
        }
        Node::Array(params) => {
            let mut found = Vec::new();
            for value in input {
                if value.is_null() {
                    continue;
                }
                let Some(len) = value.as_array().map(Vec::len) else {
                    return Err(eval_error(format!(
                        "{} is not array or slice",
                        kind(&value)
                    )));
                };
                let Some((from, to, step)) = bounds(*params, len)? else {
                    continue;
                };
                let items = children(&value);
                found.extend(items.into_iter().skip(from).take(to - from).step_by(step));
            }
            Ok(found)
        }
        Node::Union(lists) => {
            let mut found = Vec::new();
            for list in lists {
                found.extend(eval_list(input.clone(), list)?);
            }
            Ok(found)
        }
        Node::Filter {
            left,
            operator,
            right,
        } => filter(input, left, operator, right),
    }
}

/// client-go's `evalArray` bounds: `None` when zero elements are asked for.
fn bounds(
    mut params: [Param; 3],
    len: usize,
) -> Result<Option<(usize, usize, usize)>, JsonPathError> {
    let length = i64::try_from(len).unwrap_or(i64::MAX);
    if !params[0].known {
        params[0].value = 0;
    }
    if params[0].value < 0 {
        params[0].value += length;
    }
    if !params[1].known {
        params[1].value = length;
    }
    if params[1].value < 0 || (params[1].value == 0 && params[1].derived) {
        params[1].value += length;
    }
    let (from, to) = (params[0].value, params[1].value);
    if from == to {
        return Ok(None);
    }
    if from >= length || from < 0 {
        return Err(eval_error(format!(
            "array index out of bounds: index {from}, length {length}"
        )));
    }
    if to > length || to < 0 {
        return Err(eval_error(format!(
            "array index out of bounds: index {}, length {length}",
            to - 1
        )));
    }
    if from > to {
        return Err(eval_error(format!(
            "starting index {from} is greater than ending index {to}"
        )));
    }
    let step = if params[2].known {
        if params[2].value <= 0 {
            return Err(eval_error("step must be > 0"));
        }
        params[2].value
    } else {
        1
    };
    let as_usize = |n: i64| usize::try_from(n).unwrap_or(0);
    Ok(Some((as_usize(from), as_usize(to), as_usize(step))))
}

/// `evalRecursive`: every value with children, then its descendants, depth first.
fn recursive<'a>(input: Values<'a>, found: &mut Values<'a>) {
    for value in input {
        if value.is_null() {
            continue;
        }
        let inner = children(&value);
        if !inner.is_empty() {
            found.push(value);
            recursive(inner, found);
        }
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "nil",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// A comparable scalar, as the template package's `basicKind` sorts Go values.
#[derive(PartialEq, PartialOrd)]
enum Scalar<'a> {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'a str),
}

fn scalar(value: &Value) -> Result<Scalar<'_>, JsonPathError> {
    match value {
        Value::Bool(b) => Ok(Scalar::Bool(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Ok(Scalar::Int(i)),
            None => Ok(Scalar::Float(n.as_f64().unwrap_or(f64::NAN))),
        },
        Value::String(s) => Ok(Scalar::Str(s)),
        _ => Err(eval_error("invalid type for comparison")),
    }
}

/// The template package's `Less` and `Equal`: same kinds only, bools only for equality.
fn compare(left: &Value, right: &Value, operator: &str) -> Result<bool, JsonPathError> {
    let (l, r) = (scalar(left)?, scalar(right)?);
    if std::mem::discriminant(&l) != std::mem::discriminant(&r) {
        return Err(eval_error("incompatible types for comparison"));
    }
    let less = || match (&l, &r) {
        (Scalar::Bool(_), _) => Err(eval_error("invalid type for comparison")),
        _ => Ok(l < r),
    };
    Ok(match operator {
        "==" => l == r,
        "!=" => l != r,
        "<" => less()?,
        "<=" => less()? || l == r,
        ">" => !(less()? || l == r),
        ">=" => !less()?,
        other => {
            return Err(eval_error(format!("unrecognized filter operator {other}")));
        }
    })
}

fn filter<'a>(
    input: Values<'a>,
    left: &[Node],
    operator: &str,
    right: &[Node],
) -> Result<Values<'a>, JsonPathError> {
    let mut found = Vec::new();
    for value in input {
        if !value.is_array() {
            return Err(eval_error(format!(
                "{} is not array or slice and cannot be filtered",
                kind(&value)
            )));
        }
        for item in children(&value) {
            let lefts = eval_list(vec![item.clone()], left);
            if operator == "exists" {
                if lefts.is_ok_and(|l| !l.is_empty()) {
                    found.push(item);
                }
                continue;
            }
            let lefts = lefts?;
            let left = match lefts.as_slice() {
                [] => continue,
                [one] => one,
                _ => return Err(eval_error("can only compare one element at a time")),
            };
            let rights = eval_list(vec![item.clone()], right)?;
            let right = match rights.as_slice() {
                [] => continue,
                [one] => one,
                _ => return Err(eval_error("can only compare one element at a time")),
            };
            if compare(left, right, operator)? {
                found.push(item);
            }
        }
    }
    Ok(found)
}

/// A value as `PrintResults` writes it for a `string` column: a map or array as Go's
/// `encoding/json` marshals it, a scalar as `fmt.Fprint` prints it, null as `<no value>`.
pub(crate) fn print(value: &Value) -> String {
    match value {
        Value::Null => "<no value>".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => go_float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::Array(_) | Value::Object(_) => go_json(value),
    }
}

/// Go's `encoding/json`: sorted keys (serde_json's map is ordered) and HTML-safe escapes.
fn go_json(value: &Value) -> String {
    let mut json = String::new();
    for c in value.to_string().chars() {
        match c {
            '<' => json.push_str("\\u003c"),
            '>' => json.push_str("\\u003e"),
            '&' => json.push_str("\\u0026"),
            '\u{2028}' => json.push_str("\\u2028"),
            '\u{2029}' => json.push_str("\\u2029"),
            c => json.push(c),
        }
    }
    json
}

/// `fmt.Fprint` of a float64 (`%v`, i.e. `%g` with the shortest digits): the exponent form
/// when the decimal exponent is below -4 or at least 6 (`strconv`'s rule for the shortest
/// precision), e.g. `1e+06`, `1.234567e+06`, `123456`, `1e-05`.
pub(crate) fn go_float(f: f64) -> String {
    // Shortest round-trip digits and the decimal exponent, e.g. "1.5e6".
    let scientific = format!("{f:e}");
    let (mantissa, exponent) = scientific
        .split_once('e')
        .unwrap_or((scientific.as_str(), "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if !(-4..6).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exponent.abs());
    }
    format!("{f}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn first(path: &str, object: &Value) -> Result<Option<Value>, JsonPathError> {
        Ok(JsonPath::parse(path)?.first(object)?.map(Cow::into_owned))
    }

    fn object() -> Value {
        json!({
            "spec": {"replicas": 3, "name": "web", "tags": ["a", "b", "c"],
                     "labels": {"app.kubernetes.io/name": "x"}},
            "status": {"conditions": [
                {"type": "Progressing", "status": "True", "n": 1},
                {"type": "Ready", "status": "False", "n": 2}]},
        })
    }

    #[test]
    fn fields_indexes_and_wildcards() {
        let o = object();
        assert_eq!(first(".spec.replicas", &o), Ok(Some(json!(3))));
        assert_eq!(first(".spec.tags[1]", &o), Ok(Some(json!("b"))));
        assert_eq!(first(".spec.tags[-1]", &o), Ok(Some(json!("c"))));
        assert_eq!(first(".spec.tags[1:]", &o), Ok(Some(json!("b"))));
        assert_eq!(first(".spec.tags[*]", &o), Ok(Some(json!("a"))));
        assert_eq!(
            first(".status.conditions[*].type", &o),
            Ok(Some(json!("Progressing")))
        );
        assert_eq!(first(".spec['name']", &o), Ok(Some(json!("web"))));
        assert_eq!(
            first(".spec.labels.app\\.kubernetes\\.io/name", &o),
            Ok(Some(json!("x")))
        );
        assert_eq!(first("..status", &o), Ok(Some(o["status"].clone())));
        assert_eq!(first(".spec.tags[2,0]", &o), Ok(Some(json!("c"))));
    }

    #[test]
    fn missing_keys_find_nothing() {
        let o = object();
        assert_eq!(first(".spec.nope", &o), Ok(None));
        assert_eq!(first(".nope.deeper[0]", &o), Ok(None));
        assert_eq!(first(".spec.replicas.x", &o), Ok(None));
    }

    #[test]
    fn filters_select_by_a_field() {
        let o = object();
        assert_eq!(
            first(".status.conditions[?(@.type==\"Ready\")].status", &o),
            Ok(Some(json!("False")))
        );
        assert_eq!(
            first(".status.conditions[?(@.type=='Ready')].status", &o),
            Ok(Some(json!("False")))
        );
        assert_eq!(
            first(".status.conditions[?(@.n>1)].type", &o),
            Ok(Some(json!("Ready")))
        );
        assert_eq!(
            first(".status.conditions[?(@.n)].type", &o),
            Ok(Some(json!("Progressing")))
        );
        assert_eq!(
            first(".status.conditions[?(@.type==\"Gone\")].status", &o),
            Ok(None)
        );
    }

    #[test]
    fn failures_are_errors() {
        let o = object();
        assert!(matches!(
            first(".spec.tags[5]", &o),
            Err(JsonPathError::Eval(_))
        ));
        assert!(matches!(first(".spec[0]", &o), Err(JsonPathError::Eval(_))));
        // client-go compares kinds strictly: an int against a string fails.
        assert!(matches!(
            first(".status.conditions[?(@.n==\"1\")].type", &o),
            Err(JsonPathError::Eval(_))
        ));
        assert!(matches!(
            first(".spec.name[?(@.a)]", &o),
            Err(JsonPathError::Eval(_))
        ));
        assert!(matches!(
            JsonPath::parse(".spec.tags[x]"),
            Err(JsonPathError::Parse(_))
        ));
        assert!(matches!(
            JsonPath::parse(".a[0"),
            Err(JsonPathError::Parse(_))
        ));
        assert!(matches!(
            JsonPath::parse("range .items"),
            Err(JsonPathError::Parse(_))
        ));
    }

    #[test]
    fn odd_paths_never_panic() {
        let o = object();
        for path in [
            "",
            ".",
            "..",
            "...",
            "[",
            "]",
            "[]",
            "[?(",
            "[?()]",
            "[?(@.a==)]",
            "[?(@.a=='x)]",
            "[1:2:3:4]",
            "[-]",
            "[::0]",
            "['a",
            "[' ']",
            ".é.ü[0]",
            "{.a}",
            ".a\\",
            "+",
            "-1.5.3",
            ".spec.tags[-9]",
            ".spec.tags[2:1]",
            ".spec.tags[::-1]",
            ".spec..tags",
            "[*][*][*]",
            ".status.conditions[?(@.n<=2)].type",
            ".status.conditions[?(@.on>true)]",
        ] {
            if let Ok(parsed) = JsonPath::parse(path) {
                let _ = parsed.first(&o);
            }
        }
    }

    #[test]
    fn printing_follows_go() {
        assert_eq!(print(&json!("x")), "x");
        assert_eq!(print(&json!(true)), "true");
        assert_eq!(print(&json!(12)), "12");
        assert_eq!(print(&json!(1.5)), "1.5");
        assert_eq!(print(&json!(1.0e21)), "1e+21");
        assert_eq!(print(&json!(1_234_567.0)), "1.234567e+06");
        assert_eq!(print(&json!(123_456.0)), "123456");
        assert_eq!(print(&json!(0.00001)), "1e-05");
        assert_eq!(print(&Value::Null), "<no value>");
        assert_eq!(
            print(&json!({"b": 1, "a": "<&>"})),
            r#"{"a":"\u003c\u0026\u003e","b":1}"#
        );
        assert_eq!(print(&json!([1, "x"])), r#"[1,"x"]"#);
    }
}
