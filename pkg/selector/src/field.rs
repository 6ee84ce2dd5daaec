//! Field selectors: a port of k8s.io/apimachinery/pkg/fields/selector.go
//! (`ParseSelector`, `EscapeValue`, `UnescapeValue`).

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use crate::error::{ParseError, quote};

/// How a [`FieldTerm`] compares a field with its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldOperator {
    /// `field=value`
    Equals,
    /// `field==value` (same meaning as `=`, kept apart to render it back)
    DoubleEquals,
    /// `field!=value`
    NotEquals,
}

impl FieldOperator {
    fn as_str(self) -> &'static str {
        match self {
            FieldOperator::Equals => "=",
            FieldOperator::DoubleEquals => "==",
            FieldOperator::NotEquals => "!=",
        }
    }
}

/// One `field<op>value` condition of a [`FieldSelector`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FieldTerm {
    field: String,
    operator: FieldOperator,
    value: String,
}

impl FieldTerm {
    /// The field path exactly as written: apimachinery neither trims nor
    /// unescapes it, and does not check it against the fields a kind
    /// supports (the caller does).
    pub fn field(&self) -> &str {
        &self.field
    }

    /// How [`value`](Self::value) is compared with the object's.
    pub fn operator(&self) -> FieldOperator {
        self.operator
    }

    /// The unescaped value; may be empty.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// Whether an object whose value for [`field`](Self::field) is `value`
    /// matches; `None` (no such field) counts as the empty string, see
    /// [`FieldSelector::matches`].
    pub fn matches(&self, value: Option<&str>) -> bool {
        let value = value.unwrap_or_default();
        match self.operator {
            FieldOperator::Equals | FieldOperator::DoubleEquals => value == self.value,
            FieldOperator::NotEquals => value != self.value,
        }
    }
}

impl fmt::Display for FieldTerm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{}{}",
            self.field,
            self.operator.as_str(),
            escape_value(&self.value)
        )
    }
}

/// A parsed field selector: terms that must all match.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

impl FieldSelector {
    /// Parses a selector like apimachinery's `fields.ParseSelector`:
    ///
    /// * terms are split on unescaped `,`; empty terms are skipped, so `""`,
    ///   `","` and `"a=b,"` are valid;
    /// * terms are sorted by their raw text before parsing, so
    ///   [`terms`](Self::terms) and the rendered form are in that order;
    /// * each term splits at the first `!=`, `==` or `=` scanning from the
    ///   left, with no escaping in the field part and nothing trimmed;
    /// * the value may be empty and uses the escapes `\\`, `\,` and `\=`; any
    ///   other escape (`\!` too), a trailing `\` or an unescaped `=` is an
    ///   error;
    /// * a term whose field and value are both empty (`=`, `==`, `!=`) is
    ///   dropped, as apimachinery's `Transform` does while parsing, so the
    ///   apiserver accepts `!=` and selects everything with it.
    ///
    /// Only syntax is checked, not whether the field is supported.
    pub fn parse(s: &str) -> Result<FieldSelector, ParseError> {
        let mut parts = split_terms(s);
        parts.sort_by(|a, b| a.1.cmp(b.1));
        let mut terms = Vec::with_capacity(parts.len());
        for (start, part) in parts {
            if part.is_empty() {
                continue;
            }
            let Some((field, operator, raw_value)) = split_term(part) else {
                return Err(ParseError::new(
                    format!(
                        "invalid field selector {}: at {start}: term {} has no operator ('=', '==' or '!=')",
                        quote(s),
                        quote(part)
                    ),
                    start,
                    part,
                ));
            };
            let value_start = start + field.len() + operator.as_str().len();
            let value = unescape_value(raw_value).map_err(|e| {
                let position = value_start + e.offset;
                let what = match e.kind {
                    UnescapeErrorKind::InvalidEscape if e.fragment == "\\" => format!(
                        "the value of field {} ends with an unfinished escape '\\'",
                        quote(field)
                    ),
                    UnescapeErrorKind::InvalidEscape => format!(
                        "invalid escape sequence '\\{}' in the value of field {} (only '\\\\', '\\,' and '\\=' are allowed)",
                        e.fragment.get(1..).unwrap_or_default().escape_debug(),
                        quote(field)
                    ),
                    UnescapeErrorKind::Unescaped => format!(
                        "unescaped '{}' in the value of field {}: write it as '\\{}'",
                        e.fragment,
                        quote(field),
                        e.fragment
                    ),
                };
                ParseError::new(
                    format!("invalid field selector {}: at {position}: {what}", quote(s)),
                    position,
                    e.fragment,
                )
            })?;
            if field.is_empty() && value.is_empty() {
                continue;
            }
            terms.push(FieldTerm {
                field: field.to_owned(),
                operator,
                value,
            });
        }
        Ok(FieldSelector { terms })
    }

    /// The selector that matches every object.
    pub fn everything() -> FieldSelector {
        FieldSelector::default()
    }

    /// Whether this selector selects everything (has no terms).
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The terms in the order [`parse`](Self::parse) sorted them (by their raw text), all of
    /// which must match; empty for a selector that selects everything.
    pub fn terms(&self) -> &[FieldTerm] {
        &self.terms
    }

    /// Whether every term matches. `field` returns the object's value for a
    /// field path, or `None` if the object has no such field.
    ///
    /// `None` is treated exactly like the empty string, because the
    /// apiserver's field sets map an unset field to `""`: `f=x` does not
    /// match and `f!=x` does, while `f=` matches and `f!=` does not (this is
    /// what makes `spec.nodeName=` select unscheduled pods).
    pub fn matches<'a, F: Fn(&str) -> Option<Cow<'a, str>>>(&self, field: F) -> bool {
        self.terms
            .iter()
            .all(|t| t.matches(field(&t.field).as_deref()))
    }
}

/// Terms in order joined by `,`, values re-escaped. Unlike apimachinery,
/// which prints `==` as `=`, the operator is kept as written so that parsing
/// the output gives back an equal selector.
impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{t}")?;
        }
        Ok(())
    }
}

impl FromStr for FieldSelector {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<FieldSelector, ParseError> {
        FieldSelector::parse(s)
    }
}

/// `splitTerms`: the `,`-separated terms with their byte offsets. A
/// backslash protects the next character from splitting and stays in the
/// term.
fn split_terms(s: &str) -> Vec<(usize, &str)> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push((start, s.get(start..i).unwrap_or_default()));
            start = i + 1;
        }
    }
    terms.push((start, s.get(start..).unwrap_or_default()));
    terms
}

/// `splitTerm`: splits at the leftmost operator, `!=` and `==` winning over
/// `=` at the same position. Returns the field, operator and raw value.
fn split_term(term: &str) -> Option<(&str, FieldOperator, &str)> {
    let bytes = term.as_bytes();
    let (i, operator) = bytes.iter().enumerate().find_map(|(i, &b)| {
        let next_is_eq = bytes.get(i + 1) == Some(&b'=');
        match b {
            b'!' if next_is_eq => Some((i, FieldOperator::NotEquals)),
            b'=' if next_is_eq => Some((i, FieldOperator::DoubleEquals)),
            b'=' => Some((i, FieldOperator::Equals)),
            _ => None,
        }
    })?;
    let field = term.get(..i)?;
    let value = term.get(i + operator.as_str().len()..)?;
    Some((field, operator, value))
}

enum UnescapeErrorKind {
    /// `\` followed by anything but `\`, `,` or `=`, or a trailing `\`.
    InvalidEscape,
    /// A bare `=` or `,`.
    Unescaped,
}

struct UnescapeError<'a> {
    kind: UnescapeErrorKind,
    /// Byte offset of `fragment` in the value.
    offset: usize,
    fragment: &'a str,
}

/// `UnescapeValue`.
fn unescape_value(s: &str) -> Result<String, UnescapeError<'_>> {
    let mut out = String::with_capacity(s.len());
    let mut slash_at: Option<usize> = None;
    for (i, c) in s.char_indices() {
        if let Some(start) = slash_at.take() {
            if matches!(c, '\\' | ',' | '=') {
                out.push(c);
                continue;
            }
            return Err(UnescapeError {
                kind: UnescapeErrorKind::InvalidEscape,
                offset: start,
                fragment: s.get(start..i + c.len_utf8()).unwrap_or_default(),
            });
        }
        match c {
            '\\' => slash_at = Some(i),
            ',' | '=' => {
                return Err(UnescapeError {
                    kind: UnescapeErrorKind::Unescaped,
                    offset: i,
                    fragment: s.get(i..i + 1).unwrap_or_default(),
                });
            }
            _ => out.push(c),
        }
    }
    if let Some(start) = slash_at {
        return Err(UnescapeError {
            kind: UnescapeErrorKind::InvalidEscape,
            offset: start,
            fragment: s.get(start..).unwrap_or_default(),
        });
    }
    Ok(out)
}

/// `EscapeValue`: the inverse of [`unescape_value`].
fn escape_value(s: &str) -> Cow<'_, str> {
    if !s.contains(['\\', ',', '=']) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 4);
    for c in s.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// (input, canonical form, terms as (field, operator, value))
    type Case = (
        &'static str,
        &'static str,
        &'static [(&'static str, FieldOperator, &'static str)],
    );

    const VALID: &[Case] = {
        use FieldOperator::*;
        &[
            ("", "", &[]),
            (",", "", &[]),
            (",,", "", &[]),
            ("a=b", "a=b", &[("a", Equals, "b")]),
            ("a==b", "a==b", &[("a", DoubleEquals, "b")]),
            ("a!=b", "a!=b", &[("a", NotEquals, "b")]),
            ("a=", "a=", &[("a", Equals, "")]),
            ("a==", "a==", &[("a", DoubleEquals, "")]),
            ("a!=", "a!=", &[("a", NotEquals, "")]),
            ("=b", "=b", &[("", Equals, "b")]),
            ("!=b", "!=b", &[("", NotEquals, "b")]),
            ("a=b,=", "a=b", &[("a", Equals, "b")]),
            // Empty field and value: dropped, as apimachinery's parser does.
            ("=", "", &[]),
            ("==", "", &[]),
            ("!=", "", &[]),
            ("!=,=,==", "", &[]),
            ("a!=,!=", "a!=", &[("a", NotEquals, "")]),
            (
                "=,,=x,\\=",
                "=x,\\=",
                &[("", Equals, "x"), ("\\", Equals, "")],
            ),
            ("a=b,", "a=b", &[("a", Equals, "b")]),
            (",a=b", "a=b", &[("a", Equals, "b")]),
            (
                "a=b,,c=d",
                "a=b,c=d",
                &[("a", Equals, "b"), ("c", Equals, "d")],
            ),
            // Sorted by raw term text, as apimachinery does.
            (
                "b=1,a=2",
                "a=2,b=1",
                &[("a", Equals, "2"), ("b", Equals, "1")],
            ),
            (
                "a=2,a!=1",
                "a!=1,a=2",
                &[("a", NotEquals, "1"), ("a", Equals, "2")],
            ),
            (
                "status.phase!=Failed,spec.nodeName=",
                "spec.nodeName=,status.phase!=Failed",
                &[
                    ("spec.nodeName", Equals, ""),
                    ("status.phase", NotEquals, "Failed"),
                ],
            ),
            (
                "metadata.name=my-pod,metadata.namespace=default",
                "metadata.name=my-pod,metadata.namespace=default",
                &[
                    ("metadata.name", Equals, "my-pod"),
                    ("metadata.namespace", Equals, "default"),
                ],
            ),
            (r"a=x\,y", r"a=x\,y", &[("a", Equals, "x,y")]),
            (r"a=x\=y", r"a=x\=y", &[("a", Equals, "x=y")]),
            (r"a=x\\y", r"a=x\\y", &[("a", Equals, r"x\y")]),
            (r"a=\\", r"a=\\", &[("a", Equals, r"\")]),
            (r"a=\,\=\\", r"a=\,\=\\", &[("a", Equals, r",=\")]),
            (
                r"a=\\,b=c",
                r"a=\\,b=c",
                &[("a", Equals, r"\"), ("b", Equals, "c")],
            ),
            ("a=!b", "a=!b", &[("a", Equals, "!b")]),
            ("a=b!", "a=b!", &[("a", Equals, "b!")]),
            ("a!b=c", "a!b=c", &[("a!b", Equals, "c")]),
            ("a==!b", "a==!b", &[("a", DoubleEquals, "!b")]),
            (" a = b ", " a = b ", &[(" a ", Equals, " b ")]),
            ("a=b c", "a=b c", &[("a", Equals, "b c")]),
            // No escaping in the field part: the first `=` splits.
            (r"a\=b", r"a\=b", &[(r"a\", Equals, "b")]),
            (r"a\==b", r"a\==b", &[(r"a\", DoubleEquals, "b")]),
            (r"a\,b=c", r"a\,b=c", &[(r"a\,b", Equals, "c")]),
            (r"a\=\,x", r"a\=\,x", &[(r"a\", Equals, ",x")]),
            ("é=ü\\,ö", "é=ü\\,ö", &[("é", Equals, "ü,ö")]),
            ("a=\0", "a=\0", &[("a", Equals, "\0")]),
        ]
    };

    #[test]
    fn valid_selectors() {
        for (input, canonical, terms) in VALID {
            let sel = FieldSelector::parse(input)
                .unwrap_or_else(|e| panic!("{input:?} should parse: {e}"));
            assert_eq!(sel.to_string(), *canonical, "canonical form of {input:?}");
            let got: Vec<(&str, FieldOperator, &str)> = sel
                .terms()
                .iter()
                .map(|t| (t.field(), t.operator(), t.value()))
                .collect();
            assert_eq!(got, terms.to_vec(), "terms of {input:?}");
            assert_eq!(sel.is_empty(), terms.is_empty(), "is_empty of {input:?}");
            assert_eq!(input.parse::<FieldSelector>().unwrap(), sel);
            assert_roundtrip(input);
        }
        assert!(FieldSelector::everything().is_empty());
        assert_eq!(
            FieldSelector::everything(),
            FieldSelector::parse("").unwrap()
        );
    }

    #[test]
    fn invalid_selectors() {
        // (input, message, position, fragment)
        let cases: &[(&str, &str, usize, &str)] = &[
            (
                "abc",
                r#"invalid field selector "abc": at 0: term "abc" has no operator ('=', '==' or '!=')"#,
                0,
                "abc",
            ),
            (
                "a=b,c",
                r#"invalid field selector "a=b,c": at 4: term "c" has no operator ('=', '==' or '!=')"#,
                4,
                "c",
            ),
            (
                "a!b",
                r#"invalid field selector "a!b": at 0: term "a!b" has no operator ('=', '==' or '!=')"#,
                0,
                "a!b",
            ),
            (
                r"a=x\yz",
                r#"invalid field selector "a=x\\yz": at 3: invalid escape sequence '\y' in the value of field "a" (only '\\', '\,' and '\=' are allowed)"#,
                3,
                r"\y",
            ),
            (
                r"a=x\!",
                r#"invalid field selector "a=x\\!": at 3: invalid escape sequence '\!' in the value of field "a" (only '\\', '\,' and '\=' are allowed)"#,
                3,
                r"\!",
            ),
            (
                "a=\\é",
                r#"invalid field selector "a=\\é": at 2: invalid escape sequence '\é' in the value of field "a" (only '\\', '\,' and '\=' are allowed)"#,
                2,
                "\\é",
            ),
            (
                r"a=b\",
                r#"invalid field selector "a=b\\": at 3: the value of field "a" ends with an unfinished escape '\'"#,
                3,
                r"\",
            ),
            (
                "a=b=c",
                r#"invalid field selector "a=b=c": at 3: unescaped '=' in the value of field "a": write it as '\='"#,
                3,
                "=",
            ),
            (
                "x=1,a===b",
                r#"invalid field selector "x=1,a===b": at 7: unescaped '=' in the value of field "a": write it as '\='"#,
                7,
                "=",
            ),
            (
                "a!==b",
                r#"invalid field selector "a!==b": at 3: unescaped '=' in the value of field "a": write it as '\='"#,
                3,
                "=",
            ),
        ];
        for (input, message, position, fragment) in cases {
            let e = FieldSelector::parse(input).expect_err(input);
            assert_eq!(e.to_string(), *message, "message for {input:?}");
            assert_eq!(e.position(), *position, "position for {input:?}");
            assert_eq!(e.fragment(), *fragment, "fragment for {input:?}");
            assert_eq!(
                input.get(*position..).map(|r| r.starts_with(fragment)),
                Some(true)
            );
        }
    }

    #[test]
    fn escaping() {
        for (raw, escaped) in [
            ("", ""),
            ("plain", "plain"),
            ("a,b", r"a\,b"),
            ("a=b", r"a\=b"),
            (r"a\b", r"a\\b"),
            ("a!b", "a!b"),
            (r",=\", r"\,\=\\"),
            ("é,ü", "é\\,ü"),
        ] {
            assert_eq!(escape_value(raw), escaped, "escape {raw:?}");
            assert_eq!(
                unescape_value(escaped).ok().as_deref(),
                Some(raw),
                "unescape {escaped:?}"
            );
        }
    }

    #[test]
    fn matching() {
        let pod: BTreeMap<&str, &str> = BTreeMap::from([
            ("metadata.name", "web-1"),
            ("spec.nodeName", ""),
            ("status.phase", "Running"),
            ("weird", "a,b=c"),
        ]);
        let lookup = |f: &str| pod.get(f).map(|v| Cow::Borrowed(*v));
        // (selector, expected); `missing` is a field the object lacks.
        let cases = [
            ("", true),
            ("metadata.name=web-1", true),
            ("metadata.name==web-1", true),
            ("metadata.name=web-2", false),
            ("metadata.name!=web-1", false),
            ("metadata.name!=web-2", true),
            ("spec.nodeName=", true),
            ("spec.nodeName!=", false),
            ("spec.nodeName=node-1", false),
            ("missing=x", false),
            ("missing==x", false),
            ("missing!=x", true),
            ("missing=", true),
            ("missing!=", false),
            ("!=", true),
            ("=,!=", true),
            ("metadata.name=web-1,!=", true),
            ("metadata.name=web-2,!=", false),
            ("status.phase=Running,metadata.name=web-1", true),
            ("status.phase=Running,metadata.name=web-2", false),
            ("status.phase!=Failed,status.phase!=Succeeded", true),
            (r"weird=a\,b\=c", true),
            ("Metadata.name=web-1", false),
        ];
        for (sel, expected) in cases {
            let selector = FieldSelector::parse(sel).unwrap();
            assert_eq!(selector.matches(lookup), expected, "{sel:?}");
        }
        let owned =
            |f: &str| (f == "status.phase").then(|| Cow::<str>::Owned("Running".to_owned()));
        assert!(
            FieldSelector::parse("status.phase=Running")
                .unwrap()
                .matches(owned)
        );
    }

    fn assert_roundtrip(input: &str) {
        if let Ok(sel) = FieldSelector::parse(input) {
            let rendered = sel.to_string();
            let reparsed = FieldSelector::parse(&rendered)
                .unwrap_or_else(|e| panic!("{rendered:?} (from {input:?}) does not reparse: {e}"));
            assert_eq!(reparsed, sel, "roundtrip of {input:?} via {rendered:?}");
            assert_eq!(
                reparsed.to_string(),
                rendered,
                "rendering of {input:?} is not stable"
            );
        }
    }

    /// Exhaustive over short strings of the characters that matter, plus
    /// multi-byte UTF-8: nothing panics and whatever parses roundtrips.
    #[test]
    fn roundtrip_short_strings() {
        const ALPHABET: &[char] = &['a', 'b', '=', '!', ',', '\\', ' ', 'é'];
        let mut current = vec![String::new()];
        let mut accepted = 0;
        for _ in 0..=6 {
            let mut next = Vec::new();
            for s in &current {
                if FieldSelector::parse(s).is_ok() {
                    accepted += 1;
                }
                assert_roundtrip(s);
                for c in ALPHABET {
                    let mut t = s.clone();
                    t.push(*c);
                    next.push(t);
                }
            }
            current = next;
        }
        assert!(accepted > 1000, "only {accepted} accepted");
    }
}
