//! Field selectors: parsing never panics, errors point into the input, whatever parses
//! renders (re-escaping values) to a string that parses back to an equal selector with the
//! same rendering, and matching agrees with each term's meaning.

#![no_main]

use std::borrow::Cow;
use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use selector::{FieldOperator, FieldSelector, ParseError};

fuzz_target!(|data: &[u8]| {
    let input = String::from_utf8_lossy(data);
    match FieldSelector::parse(&input) {
        Ok(sel) => check_valid(&input, &sel),
        Err(e) => check_error(&input, &e),
    }
});

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

/// An object's value for a field path.
type Lookup<'a> = dyn Fn(&str) -> Option<Cow<'static, str>> + 'a;

fn check_valid(input: &str, sel: &FieldSelector) {
    let rendered = sel.to_string();
    let reparsed = FieldSelector::parse(&rendered)
        .unwrap_or_else(|e| panic!("{rendered:?} (from {input:?}) does not reparse: {e}"));
    assert_eq!(&reparsed, sel, "{input:?} rendered as {rendered:?}");
    assert_eq!(
        reparsed.to_string(),
        rendered,
        "unstable rendering of {input:?}"
    );
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
