use std::fmt::Write as _;

/// Why a selector string was rejected.
///
/// The apiserver answers these with 400 Bad Request, so the message is meant
/// to be shown to the client as is: it is a single line (control characters in
/// the input are escaped) and names the offending part of the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ParseError {
    message: String,
    position: usize,
    fragment: String,
}

impl ParseError {
    pub(crate) fn new(message: String, position: usize, fragment: &str) -> ParseError {
        ParseError {
            message,
            position,
            fragment: fragment.to_owned(),
        }
    }

    /// Byte offset in the parsed string where the offending fragment starts
    /// (the length of the input when the input ended too early).
    pub fn position(&self) -> usize {
        self.position
    }

    /// The offending part of the input: a token, a label key or value, a
    /// field selector term or escape sequence. Empty when the input ended too
    /// early.
    pub fn fragment(&self) -> &str {
        &self.fragment
    }
}

/// Longest piece of user input copied into a message; selectors arrive in
/// URLs and an error echoing a huge one back helps nobody.
const MAX_QUOTED: usize = 200;

/// Quotes user input for an error message, escaping anything that would
/// break the message over several lines and shortening very long input.
pub(crate) fn quote(s: &str) -> String {
    if s.len() <= MAX_QUOTED {
        return format!("{s:?}");
    }
    let mut end = MAX_QUOTED;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = format!("{:?}", s.get(..end).unwrap_or_default());
    let _ = write!(out, "... ({} bytes)", s.len());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_escapes_and_truncates() {
        assert_eq!(quote("a\nb"), r#""a\nb""#);
        assert_eq!(quote(""), r#""""#);
        let long = "é".repeat(150); // 300 bytes, 2-byte chars: the cut must land on a boundary
        let q = quote(&long);
        assert!(q.starts_with(&format!("\"{}\"...", "é".repeat(100))), "{q}");
        assert!(q.ends_with("(300 bytes)"), "{q}");
    }
}
