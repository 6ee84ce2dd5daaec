//! A list answer read as it arrives: each item handed on as its own JSON text once its last
//! byte is in, and the list's other members (its `metadata`) kept apart, so a list of any
//! size is decoded while it is still being sent and never held whole.
//!
//! The apiserver writes `{"kind":…,"apiVersion":…,"metadata":{…},"items":[{…},{…}]}`; the
//! splitter follows the text byte by byte (strings, escapes, nesting), knows the top-level
//! member it is in, and cuts the objects of the top-level `items` array.

/// Where the splitter stands in the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// Outside the items: the bytes go to the head.
    Head,
    /// Inside the `items` array, between two items.
    Between,
    /// Inside one item.
    Item,
    /// After the items array closed.
    Tail,
}

/// Splits a list's JSON text into its items and the rest. Feed it the text in chunks of any
/// size with [`Splitter::feed`]; [`Splitter::finish`] gives the rest (the list without its
/// items) once the text is complete.
#[derive(Debug)]
pub(crate) struct Splitter {
    place: Place,
    /// The nesting depth at the current byte: 1 inside the list object.
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// At depth 1, whether the next string is a member's name (after `{` or `,`).
    expect_name: bool,
    /// The name of the top-level member being read (its bytes as sent, unescaped or not).
    name: Vec<u8>,
    /// The top-level string being read is a member's name.
    reading_name: bool,
    /// The list's text without its items.
    head: Vec<u8>,
    /// The item being read.
    item: Vec<u8>,
    /// The largest item a list may hold; beyond it the text is refused.
    max_item: usize,
}

/// A list text the splitter refuses.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum SplitError {
    /// Not a JSON object where the list should be.
    #[error("a list answer is not a JSON object")]
    NotAnObject,
    /// An item beyond the bound.
    #[error("a list item is larger than {0} bytes")]
    ItemTooLarge(usize),
    /// The text ended inside the list.
    #[error("the list answer ended before its end")]
    Truncated,
    /// An item of the array is not an object.
    #[error("a list item is not a JSON object")]
    ItemNotAnObject,
}

impl Splitter {
    /// A splitter refusing any item over `max_item` bytes.
    pub(crate) fn new(max_item: usize) -> Self {
        Splitter {
            place: Place::Head,
            depth: 0,
            in_string: false,
            escaped: false,
            expect_name: false,
            name: Vec::new(),
            reading_name: false,
            head: Vec::new(),
            item: Vec::new(),
            max_item,
        }
    }

    /// Reads `chunk`, calling `item` with each item completed in it.
    pub(crate) fn feed(
        &mut self,
        chunk: &[u8],
        mut item: impl FnMut(Vec<u8>),
    ) -> Result<(), SplitError> {
        // Where the current item's bytes begin in this chunk.
        let mut item_start = (self.place == Place::Item).then_some(0);
        let mut i = 0;
        while i < chunk.len() {
            if self.escaped {
                self.escaped = false;
                self.keep(&chunk[i..=i]);
                i += 1;
                continue;
            }
            if self.in_string {
                // Strings are most of the text: skipped to their end or next escape at once.
                let Some(k) = memchr::memchr2(b'"', b'\\', &chunk[i..]) else {
                    self.keep(&chunk[i..]);
                    break;
                };
                let end = i + k;
                self.keep(&chunk[i..=end]);
                if chunk[end] == b'\\' {
                    self.escaped = true;
                } else {
                    self.in_string = false;
                    self.reading_name = false;
                }
                i = end + 1;
                continue;
            }
            if self.place == Place::Item {
                // Inside an item only its braces and strings matter: its arrays are balanced.
                let Some(k) = memchr::memchr3(b'"', b'{', b'}', &chunk[i..]) else {
                    break;
                };
                let at = i + k;
                i = at + 1;
                match chunk[at] {
                    b'"' => self.in_string = true,
                    b'{' => self.depth += 1,
                    _ => {
                        self.depth -= 1;
                        if self.depth == 2 {
                            let start = item_start.take().unwrap_or(0);
                            let mut text = std::mem::take(&mut self.item);
                            text.extend_from_slice(&chunk[start..=at]);
                            if text.len() > self.max_item {
                                return Err(SplitError::ItemTooLarge(self.max_item));
                            }
                            item(text);
                            self.place = Place::Between;
                        }
                    }
                }
                continue;
            }
            let b = chunk[i];
            i += 1;
            match b {
                // Between two items only an object, a comma, the array's end or a space.
                _ if self.place == Place::Between
                    && !matches!(b, b'{' | b',' | b']' | b' ' | b'\t' | b'\n' | b'\r') =>
                {
                    return Err(SplitError::ItemNotAnObject);
                }
                b'"' => {
                    if self.depth == 0 {
                        return Err(SplitError::NotAnObject);
                    }
                    self.in_string = true;
                    if self.depth == 1 && self.expect_name {
                        self.reading_name = true;
                        self.expect_name = false;
                        self.name.clear();
                    }
                }
                b'{' | b'[' => {
                    if self.depth == 0 && b != b'{' {
                        return Err(SplitError::NotAnObject);
                    }
                    self.depth += 1;
                    if self.place == Place::Between {
                        self.place = Place::Item;
                        item_start = Some(i - 1);
                        continue;
                    }
                    if self.place == Place::Head
                        && self.depth == 2
                        && b == b'['
                        && self.name == b"items"
                    {
                        self.place = Place::Between;
                    }
                    if self.depth == 1 {
                        self.expect_name = true;
                    }
                }
                b'}' | b']' => {
                    if self.depth == 0 {
                        return Err(SplitError::NotAnObject);
                    }
                    self.depth -= 1;
                    if self.place == Place::Between && self.depth == 1 {
                        self.place = Place::Tail;
                    }
                }
                b',' if self.place == Place::Between => continue,
                b',' if self.depth == 1 => self.expect_name = true,
                _ => {}
            }
            self.head.push(b);
        }
        if let Some(start) = item_start {
            self.item.extend_from_slice(&chunk[start..]);
            if self.item.len() > self.max_item {
                return Err(SplitError::ItemTooLarge(self.max_item));
            }
        }
        // The list's own members are bounded as an item is.
        if self.head.len() > self.max_item {
            return Err(SplitError::ItemTooLarge(self.max_item));
        }
        Ok(())
    }

    /// Keeps string bytes read outside the items: in the head, and in the member's name
    /// when they are one (its closing quote aside).
    fn keep(&mut self, bytes: &[u8]) {
        if self.place == Place::Item {
            return;
        }
        self.head.extend_from_slice(bytes);
        if self.reading_name {
            let name = bytes.strip_suffix(b"\"").unwrap_or(bytes);
            self.name.extend_from_slice(name);
        }
    }

    /// The list's text without its items (`"items":[]`), once the text is complete.
    pub(crate) fn finish(&mut self) -> Result<Vec<u8>, SplitError> {
        if self.depth != 0 || self.in_string || self.head.is_empty() {
            return Err(SplitError::Truncated);
        }
        Ok(std::mem::take(&mut self.head))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// The items and the rest of `text` fed in chunks of `size` bytes, as texts.
    fn split_texts(text: &str, size: usize) -> Result<(Vec<Vec<u8>>, Vec<u8>), SplitError> {
        let mut splitter = Splitter::new(1 << 20);
        let mut items = Vec::new();
        for chunk in text.as_bytes().chunks(size) {
            splitter.feed(chunk, |item| items.push(item))?;
        }
        Ok((items, splitter.finish()?))
    }

    /// The same, parsed.
    fn split(text: &str, size: usize) -> Result<(Vec<Value>, Value), SplitError> {
        let (items, rest) = split_texts(text, size)?;
        let json = |text: &[u8]| -> Value { serde_json::from_slice(text).unwrap() };
        Ok((items.iter().map(|i| json(i)).collect(), json(&rest)))
    }

    fn list() -> Value {
        json!({
            "kind": "PodList", "apiVersion": "v1",
            "metadata": {"resourceVersion": "42", "continue": "x\"items\":[{"},
            "items": [
                {"metadata": {"name": "a", "annotations": {"items": "[{\"}]\\"}}, "spec": {"x": [1, {"y": []}]}},
                {"metadata": {"name": "b\\\"}"}, "status": null},
                {}
            ]
        })
    }

    #[test]
    fn items_are_cut_whatever_the_chunks() {
        let text = list().to_string();
        for size in [1, 2, 3, 7, 64, text.len()] {
            let (items, rest) = split(&text, size).unwrap();
            assert_eq!(
                items,
                list()["items"].as_array().unwrap().clone(),
                "chunks of {size}"
            );
            let mut expected = list();
            expected["items"] = json!([]);
            assert_eq!(rest, expected, "chunks of {size}");
        }
    }

    #[test]
    fn members_after_the_items_and_spaces_are_kept() {
        let text =
            r#" { "items" : [ {"a":1} , {"b":"]"} ] , "metadata" : {"resourceVersion":"7"} } "#;
        let (items, rest) = split(text, 5).unwrap();
        assert_eq!(items, [json!({"a": 1}), json!({"b": "]"})]);
        assert_eq!(
            rest,
            json!({"items": [], "metadata": {"resourceVersion": "7"}})
        );
    }

    #[test]
    fn a_nested_member_named_items_is_not_the_list() {
        let text = r#"{"metadata":{"items":[{"a":1}]},"items":null}"#;
        let (items, rest) = split(text, 4).unwrap();
        assert!(items.is_empty());
        assert_eq!(
            rest,
            json!({"metadata": {"items": [{"a": 1}]}, "items": null})
        );
    }

    #[test]
    fn bad_texts_are_refused() {
        assert_eq!(split("[1]", 1).unwrap_err(), SplitError::NotAnObject);
        assert_eq!(
            split(r#"{"items":[1]}"#, 1).unwrap_err(),
            SplitError::ItemNotAnObject
        );
        assert_eq!(
            split(r#"{"items":[{"a":1}"#, 3).unwrap_err(),
            SplitError::Truncated
        );
        assert_eq!(split("", 3).unwrap_err(), SplitError::Truncated);
        let mut small = Splitter::new(8);
        assert_eq!(
            small.feed(br#"{"items":[{"a":"0123456789"}]}"#, |_| {}),
            Err(SplitError::ItemTooLarge(8))
        );
        // The list's own members too.
        let mut small = Splitter::new(8);
        assert_eq!(
            small.feed(
                br#"{"metadata":{"continue":"0123456789"},"items":[]}"#,
                |_| {}
            ),
            Err(SplitError::ItemTooLarge(8))
        );
    }
}
