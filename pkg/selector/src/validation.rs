//! Label key and value rules of k8s.io/apimachinery/pkg/util/validation
//! (`IsQualifiedName`, `IsValidLabelValue`, `IsDNS1123Subdomain`), written
//! out by hand because the crate may not depend on a regex engine.

/// Longest label value and longest name part of a key.
const NAME_MAX: usize = 63;
/// Longest key prefix (`DNS1123SubdomainMaxLength`).
const PREFIX_MAX: usize = 253;

pub(crate) const NAME_RULE: &str = "must be 63 characters or less and consist of alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]` with the length limit.
fn is_name(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            b.len() <= NAME_MAX
                && first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`, at most
/// 253 bytes. Each dot-separated label has to start and end alphanumeric, so
/// `a..b` and `a-.b` are rejected like the apiserver does.
/// Object names of most kinds (Deployments, Pods) follow this rule.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    // Every GET checks its name so: the classes of its bytes, then the rules on dots only
    // when there is one (most names have none, and for them a dash may stand anywhere but at
    // the ends).
    let b = s.as_bytes();
    let (Some(&first), Some(&last)) = (b.first(), b.last()) else {
        return false;
    };
    if b.len() > PREFIX_MAX {
        return false;
    }
    let seen = classes_of(b);
    seen & NOT_ALLOWED == 0
        && is_alnum(first)
        && is_alnum(last)
        && (seen & DOT == 0
            || b.windows(2).all(|pair| match (pair[0], pair[1]) {
                (b'.', next) => is_alnum(next),
                (previous, b'.') => is_alnum(previous),
                _ => true,
            }))
}

const ALNUM: u8 = 1;
const DASH: u8 = 2;
const DOT: u8 = 4;
const NOT_ALLOWED: u8 = 8;

/// The class of each byte in a DNS-1123 subdomain.
const SUBDOMAIN_CLASS: [u8; 256] = {
    let mut table = [0; 256];
    let mut c = 0;
    while c < 256 {
        table[c] = match c as u8 {
            b'a'..=b'z' | b'0'..=b'9' => ALNUM,
            b'-' => DASH,
            b'.' => DOT,
            _ => NOT_ALLOWED,
        };
        c += 1;
    }
    table
};

/// The classes of the bytes of `b`, together: a fold without a branch per byte, which the
/// compiler can unroll (a loop that stops at the first byte not allowed cannot), for names
/// whose length was bounded first.
fn classes_of(b: &[u8]) -> u8 {
    b.iter()
        .fold(0, |seen, &c| seen | SUBDOMAIN_CLASS[usize::from(c)])
}

fn is_alnum(c: u8) -> bool {
    SUBDOMAIN_CLASS[usize::from(c)] == ALNUM
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 bytes: the rule for namespace names.
pub fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&first), Some(&last)) => {
            b.len() <= NAME_MAX
                && classes_of(b) & (DOT | NOT_ALLOWED) == 0
                && is_alnum(first)
                && is_alnum(last)
        }
        _ => false,
    }
}

/// `[a-z]([-a-z0-9]*[a-z0-9])?`, at most 63 bytes: the rule for Service names (they become
/// DNS names and environment variable prefixes, so they start with a letter).
pub fn is_dns1035_label(s: &str) -> bool {
    s.as_bytes().first().is_some_and(u8::is_ascii_lowercase) && is_dns1123_label(s)
}

/// apimachinery's `IsValidPortName` (IANA_SVC_NAME): at most 15 lowercase alphanumerics or
/// '-', at least one letter, no '-' at either end and no "--".
pub fn is_port_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 15
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b.iter().any(u8::is_ascii_lowercase)
        && !s.starts_with('-')
        && !s.ends_with('-')
        && !s.contains("--")
}

/// A label value: empty, or a name part.
pub(crate) fn is_label_value(s: &str) -> bool {
    s.is_empty() || is_name(s)
}

/// Checks a label key (`IsQualifiedName`): `[prefix/]name`. Returns why it
/// is invalid. The prefix is checked before the name, as apimachinery lists
/// its errors in that order.
pub(crate) fn check_label_key(key: &str) -> Result<(), String> {
    let mut parts = key.split('/');
    let (prefix, name) = match (parts.next(), parts.next(), parts.next()) {
        (Some(name), None, _) => (None, name),
        (Some(prefix), Some(name), None) => (Some(prefix), name),
        _ => {
            return Err(
                "must be a name with an optional DNS subdomain prefix and '/' (e.g. \"example.com/my-name\"), so it can contain at most one '/'"
                    .to_owned(),
            );
        }
    };
    match prefix {
        Some("") => return Err("prefix part must not be empty".to_owned()),
        Some(p) if !is_dns1123_subdomain(p) => {
            return Err("prefix part must be a DNS-1123 subdomain: 253 characters or less, lowercase alphanumerics, '-' or '.', each '.'-separated part starting and ending with an alphanumeric".to_owned());
        }
        _ => {}
    }
    if name.is_empty() {
        return Err("name part must not be empty".to_owned());
    }
    if !is_name(name) {
        return Err(format!("name part {NAME_RULE}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_keys() {
        let name63 = "a".repeat(63);
        let name64 = "a".repeat(64);
        // 4 labels of 63 + 3 dots = 255 > 253; build exact lengths instead.
        let prefix253 = format!(
            "{}.{}.{}.{}",
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(61)
        );
        assert_eq!(prefix253.len(), 253);
        let prefix254 = format!("{prefix253}e");
        let cases: Vec<(String, bool)> = vec![
            ("a".into(), true),
            ("1".into(), true),
            ("A".into(), true),
            ("MyName".into(), true),
            ("my.name".into(), true),
            ("123-abc".into(), true),
            ("a_b".into(), true),
            ("a-b.c_d".into(), true),
            (name63.clone(), true),
            (name64.clone(), false),
            ("".into(), false),
            ("-a".into(), false),
            ("a-".into(), false),
            ("_a".into(), false),
            ("a_".into(), false),
            (".a".into(), false),
            ("a.".into(), false),
            ("a b".into(), false),
            ("a*b".into(), false),
            ("ä".into(), false),
            ("aä".into(), false),
            ("example.com/MyName".into(), true),
            ("kubernetes.io/name".into(), true),
            ("app.kubernetes.io/part-of".into(), true),
            ("0.1.2.domain/99".into(), true),
            ("a-b/c".into(), true),
            (format!("example.com/{name63}"), true),
            (format!("example.com/{name64}"), false),
            (format!("{prefix253}/a"), true),
            (format!("{prefix254}/a"), false),
            ("Example.com/a".into(), false),
            ("EXAMPLE/a".into(), false),
            ("exa_mple.com/a".into(), false),
            ("a..b/c".into(), false),
            ("a-.b/c".into(), false),
            ("a.-b/c".into(), false),
            (".a/c".into(), false),
            ("a./c".into(), false),
            ("-a/c".into(), false),
            ("/a".into(), false),
            ("a/".into(), false),
            ("/".into(), false),
            ("a/b/c".into(), false),
            ("a//b".into(), false),
            ("example.com/-a".into(), false),
            ("é.com/a".into(), false),
        ];
        for (key, ok) in cases {
            assert_eq!(
                check_label_key(&key).is_ok(),
                ok,
                "key {key:?}: {:?}",
                check_label_key(&key)
            );
        }
    }

    #[test]
    fn label_key_reasons() {
        assert_eq!(
            check_label_key("/a").unwrap_err(),
            "prefix part must not be empty"
        );
        assert_eq!(
            check_label_key("a/").unwrap_err(),
            "name part must not be empty"
        );
        assert!(
            check_label_key("A/a")
                .unwrap_err()
                .starts_with("prefix part must be a DNS-1123 subdomain")
        );
        assert!(
            check_label_key("a/-")
                .unwrap_err()
                .starts_with("name part must be 63 characters or less")
        );
        assert!(
            check_label_key("a/b/c")
                .unwrap_err()
                .contains("at most one '/'")
        );
        // Both parts bad: the prefix is reported, like apimachinery's first error.
        assert!(
            check_label_key("A/-")
                .unwrap_err()
                .starts_with("prefix part")
        );
    }

    #[test]
    fn label_values() {
        let cases: Vec<(String, bool)> = vec![
            ("".into(), true),
            ("a".into(), true),
            ("MyValue".into(), true),
            ("my_value".into(), true),
            ("12345".into(), true),
            ("1.2.3".into(), true),
            ("a".repeat(63), true),
            ("a".repeat(64), false),
            ("-a".into(), false),
            ("a-".into(), false),
            ("_".into(), false),
            (".".into(), false),
            ("a/b".into(), false),
            ("a b".into(), false),
            ("a\0".into(), false),
            ("é".into(), false),
            (" ".into(), false),
        ];
        for (value, ok) in cases {
            assert_eq!(is_label_value(&value), ok, "value {value:?}");
        }
    }
}

#[cfg(test)]
mod name_tests {
    use super::*;

    #[test]
    fn dns1123_label_and_subdomain() {
        for ok in ["a", "kube-system", "a1", &"a".repeat(63)] {
            assert!(is_dns1123_label(ok), "{ok}");
        }
        for bad in ["", "A", "-a", "a-", "a.b", "a_b", &"a".repeat(64), "ä"] {
            assert!(!is_dns1123_label(bad), "{bad}");
        }
        for ok in [
            "a.b",
            "web-5974c5bb9c-q4hqr",
            "a-b.c--d.e",
            "0.9",
            &"a".repeat(253),
        ] {
            assert!(is_dns1123_subdomain(ok), "{ok}");
        }
        for bad in [
            "",
            "a..b",
            "a.",
            ".a",
            "A.b",
            "-a",
            "a-",
            "a-.b",
            "a.-b",
            "a.b-",
            "a_b",
            "ä",
            &"a".repeat(254),
        ] {
            assert!(!is_dns1123_subdomain(bad), "{bad}");
        }
    }

    /// `[a-z0-9]([-a-z0-9]*[a-z0-9])?` read as written, without a length limit.
    fn is_label_part(label: &str) -> bool {
        let lower_alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        let b = label.as_bytes();
        match (b.first(), b.last()) {
            (Some(first), Some(last)) => {
                lower_alnum(first)
                    && lower_alnum(last)
                    && b.iter().all(|c| lower_alnum(c) || *c == b'-')
            }
            _ => false,
        }
    }

    #[test]
    fn labels_and_subdomains_are_the_rules_read_as_written() {
        // Every string of up to 5 bytes over these, and each character up to U+00FF between
        // two letters (every ASCII byte, and beyond it two-byte UTF-8), against the rules read
        // as written.
        let alphabet = [b'a', b'9', b'-', b'.', b'A', b'_'];
        let mut strings = vec![String::new()];
        for _ in 0..5 {
            let longer: Vec<String> = strings
                .iter()
                .filter(|s| s.len() == strings.last().map_or(0, String::len))
                .flat_map(|s| alphabet.iter().map(move |&c| format!("{s}{}", c as char)))
                .collect();
            strings.extend(longer);
        }
        strings.extend((0..=u8::MAX).map(|b| format!("a{}a", char::from(b))));
        for s in &strings {
            let subdomain = !s.is_empty() && s.split('.').all(is_label_part);
            assert_eq!(is_dns1123_subdomain(s), subdomain, "{s:?}");
            assert_eq!(is_dns1123_label(s), is_label_part(s), "{s:?}");
        }
    }

    #[test]
    fn dns1035_labels_and_port_names() {
        for ok in ["a", "web", "a1-b", &"a".repeat(63)] {
            assert!(is_dns1035_label(ok), "{ok}");
        }
        for bad in ["", "1a", "-a", "a-", "A", "a.b", &"a".repeat(64)] {
            assert!(!is_dns1035_label(bad), "{bad}");
        }
        for ok in ["http", "h2c", "80-http", "a-b-c", "x23456789012345"] {
            assert!(is_port_name(ok), "{ok}");
        }
        for bad in [
            "",
            "80",
            "-http",
            "http-",
            "a--b",
            "HTTP",
            "x234567890123456",
            "a_b",
        ] {
            assert!(!is_port_name(bad), "{bad}");
        }
    }
}
