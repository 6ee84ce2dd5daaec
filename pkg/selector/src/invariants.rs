//! What every input must satisfy, whatever it is: parsing never panics, an error is one line
//! whose position and fragment point into the input, whatever parses renders to a string that
//! parses back to an equal selector with the same rendering, and matching agrees with each
//! requirement's own meaning. The fuzz targets (`fuzz/`) call these on arbitrary bytes; a test
//! here runs them over the committed fuzz corpus, so every stable build checks it too.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::{FieldOperator, FieldSelector, LabelSelector, Operator, ParseError, Requirement};

/// Panics, saying why, if a label selector input breaks an invariant.
pub fn check_label_selector(input: &str) {
    match LabelSelector::parse(input) {
        Ok(sel) => check_valid_label(input, &sel),
        Err(e) => check_error(input, &e),
    }
}

/// Panics, saying why, if a field selector input breaks an invariant.
pub fn check_field_selector(input: &str) {
    match FieldSelector::parse(input) {
        Ok(sel) => check_valid_field(input, &sel),
        Err(e) => check_error(input, &e),
    }
}

fn check_error(input: &str, e: &ParseError) {
    let message = e.to_string();
    assert!(
        !message.contains('\n'),
        "multi-line message for {input:?}: {message}"
    );
    let at = input.get(e.position()..);
    assert!(
        at.is_some_and(|rest| rest.starts_with(e.fragment())),
        "fragment {:?} not at position {} of {input:?}",
        e.fragment(),
        e.position()
    );
}

/// A selector's canonical rendering parses back to an equal selector that renders the same;
/// the rendering.
fn check_rendering<S>(input: &str, sel: &S, parse: fn(&str) -> Result<S, ParseError>) -> String
where
    S: std::fmt::Display + std::fmt::Debug + PartialEq,
{
    let rendered = sel.to_string();
    let reparsed = parse(&rendered)
        .unwrap_or_else(|e| panic!("{rendered:?} (from {input:?}) does not reparse: {e}"));
    assert_eq!(&reparsed, sel, "{input:?} rendered as {rendered:?}");
    assert_eq!(
        reparsed.to_string(),
        rendered,
        "unstable rendering of {input:?}"
    );
    rendered
}

fn check_valid_label(input: &str, sel: &LabelSelector) {
    let rendered = check_rendering(input, sel, LabelSelector::parse);
    assert_eq!(sel.is_empty(), rendered.is_empty());
    assert_eq!(sel.is_empty(), sel.requirements().is_empty());

    for r in sel.requirements() {
        check_requirement(r);
    }

    // Label maps built from the selector itself, so matching sees present, absent, empty,
    // numeric and non-numeric values for exactly the keys the selector asks about.
    let keys: Vec<&str> = sel.requirements().iter().map(Requirement::key).collect();
    let mut maps: Vec<BTreeMap<String, String>> = vec![BTreeMap::new()];
    for value in [
        "",
        "1",
        "-1",
        "+7",
        "x",
        "9223372036854775807",
        "99999999999999999999",
    ] {
        maps.push(
            keys.iter()
                .map(|k| (k.to_string(), value.to_owned()))
                .collect(),
        );
    }
    let mut own = BTreeMap::new();
    for r in sel.requirements() {
        if let Some(v) = r.values().first() {
            own.insert(r.key().to_owned(), v.clone());
        }
    }
    maps.push(own);
    for m in &maps {
        let all = sel.requirements().iter().all(|r| r.matches(m));
        assert_eq!(sel.matches(m), all, "{rendered:?} on {m:?}");
        let none: Option<&BTreeMap<String, String>> = Some(m);
        assert_eq!(sel.matches(&none), all);
    }
    let none: Option<&BTreeMap<String, String>> = None;
    assert_eq!(sel.matches(&none), sel.matches(&BTreeMap::new()));
}

/// What each operator means, checked on one-label maps.
fn check_requirement(r: &Requirement) {
    let with = |v: &str| BTreeMap::from([(r.key().to_owned(), v.to_owned())]);
    let absent = BTreeMap::from([(format!("{}x", r.key()), "1".to_owned())]);
    let values = r.values();
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "values not sorted and unique: {r:?}"
    );
    match r.operator() {
        Operator::Equals | Operator::DoubleEquals | Operator::NotEquals => {
            assert_eq!(values.len(), 1, "{r:?}");
            let positive = r.operator() != Operator::NotEquals;
            assert_eq!(r.matches(&with(&values[0])), positive, "{r:?}");
            assert_eq!(r.matches(&absent), !positive, "{r:?}");
        }
        Operator::In | Operator::NotIn => {
            assert!(!values.is_empty(), "{r:?}");
            let positive = r.operator() == Operator::In;
            for v in values {
                assert_eq!(r.matches(&with(v)), positive, "{r:?} on {v:?}");
            }
            assert_eq!(r.matches(&absent), !positive, "{r:?}");
        }
        Operator::Exists | Operator::DoesNotExist => {
            assert!(values.is_empty(), "{r:?}");
            let positive = r.operator() == Operator::Exists;
            assert_eq!(r.matches(&with("")), positive, "{r:?}");
            assert_eq!(r.matches(&absent), !positive, "{r:?}");
        }
        Operator::GreaterThan | Operator::LessThan => {
            assert_eq!(values.len(), 1, "{r:?}");
            let bound: i64 = values[0]
                .parse()
                .unwrap_or_else(|e| panic!("accepted a non-integer bound {r:?}: {e}"));
            let greater = r.operator() == Operator::GreaterThan;
            assert!(!r.matches(&with(&values[0])), "{r:?} matches its own bound");
            assert!(!r.matches(&absent), "{r:?} matches an absent label");
            assert!(!r.matches(&with("x")), "{r:?} matches a non-integer");
            if let Some(above) = bound.checked_add(1) {
                assert_eq!(r.matches(&with(&above.to_string())), greater, "{r:?}");
            }
            if let Some(below) = bound.checked_sub(1) {
                assert_eq!(r.matches(&with(&below.to_string())), !greater, "{r:?}");
            }
        }
    }
    assert!(!r.to_string().is_empty(), "{r:?}");
}

/// An object's value for a field path.
type Lookup<'a> = dyn Fn(&str) -> Option<Cow<'static, str>> + 'a;

fn check_valid_field(input: &str, sel: &FieldSelector) {
    let rendered = check_rendering(input, sel, FieldSelector::parse);
    assert_eq!(sel.is_empty(), sel.terms().is_empty());

    for t in sel.terms() {
        // apimachinery drops terms with an empty field and value while parsing.
        assert!(
            !(t.field().is_empty() && t.value().is_empty()),
            "{t:?} kept"
        );
        let positive = t.operator() != FieldOperator::NotEquals;
        assert_eq!(t.matches(Some(t.value())), positive, "{t:?}");
        assert_eq!(t.matches(None), t.matches(Some("")), "{t:?}");
        let other = format!("{}x", t.value());
        assert_eq!(t.matches(Some(&other)), !positive, "{t:?}");
    }

    // Objects: no fields at all, every field empty, every field "x", and one holding each
    // term's own value.
    let own: BTreeMap<&str, &str> = sel.terms().iter().map(|t| (t.field(), t.value())).collect();
    let lookups: [&Lookup<'_>; 4] = [
        &|_| None,
        &|_| Some(Cow::Borrowed("")),
        &|_| Some(Cow::Borrowed("x")),
        &|f| own.get(f).map(|v| Cow::Owned((*v).to_owned())),
    ];
    for lookup in lookups {
        let all = sel
            .terms()
            .iter()
            .all(|t| t.matches(lookup(t.field()).as_deref()));
        assert_eq!(sel.matches(lookup), all, "{rendered:?}");
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// Runs `check` over every input of a fuzz target's committed corpus.
    fn check_corpus(target: &str, check: fn(&str)) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/corpus")
            .join(target);
        let inputs: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        assert!(inputs.len() >= 50, "{target}: {} inputs", inputs.len());
        for path in inputs {
            check(&String::from_utf8_lossy(&std::fs::read(&path).unwrap()));
        }
    }

    #[test]
    fn the_label_selector_fuzz_corpus_holds_the_invariants() {
        check_corpus("label_selector", check_label_selector);
    }

    #[test]
    fn the_field_selector_fuzz_corpus_holds_the_invariants() {
        check_corpus("field_selector", check_field_selector);
    }
}
