//! One message's protobuf, written as encoding/json writes the Go struct protobuf decodes it
//! into: the apiserver's JSON of an object it read from etcd.

use std::collections::BTreeMap;
use std::io::Write as _;

use base64::Engine as _;

use crate::Error;
use crate::schema::{Field, Schema, Shape, Value, ValueKind};
use crate::wire::{Fields, Wire, varint};

/// The schema a message is written with, and the one field left out, if any.
#[derive(Clone, Copy)]
pub(crate) struct Writing<'a> {
    pub(crate) schema: &'a Schema,
    /// A field (message index, field index) written as if it had not been sent.
    pub(crate) omitted: Option<(usize, usize)>,
}

impl<'a> Writing<'a> {
    /// Every field as sent.
    pub(crate) fn whole(schema: &'a Schema) -> Self {
        Self {
            schema,
            omitted: None,
        }
    }

    /// Every field but ObjectMeta's `managedFields` (an informer drops them from every
    /// object): about half of a Pod's bytes, not written only to be read past and dropped.
    pub(crate) fn without_managed_fields(schema: &'a Schema) -> Self {
        Self {
            schema,
            omitted: schema.managed_fields,
        }
    }
}

/// Writes message `index` of the schema, sent as `bytes`, as a JSON object.
pub(crate) fn message(
    writing: Writing<'_>,
    index: usize,
    bytes: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), Error> {
    out.push(b'{');
    let mut first = true;
    members(writing, index, bytes, out, &mut first)?;
    out.push(b'}');
    Ok(())
}

/// Writes the members of message `index` into the object under way (an inline struct's go
/// into its parent's).
fn members(
    writing: Writing<'_>,
    index: usize,
    bytes: &[u8],
    out: &mut Vec<u8>,
    first: &mut bool,
) -> Result<(), Error> {
    let message = writing.schema.messages.get(index).ok_or(Error::Schema)?;
    let mut sent = Vec::new();
    for field in Fields::new(bytes) {
        let (number, wire) = field?;
        // A field this schema does not know comes from a newer apiserver, whose JSON would
        // carry it: refused, so that the caller asks for JSON instead.
        let at = message.field(number).ok_or_else(|| Error::UnknownField {
            message: message.name.clone(),
            number,
        })?;
        sent.push((at, wire));
    }
    // encoding/json writes a struct's fields in their order; protobuf sends them by number.
    sent.sort_by_key(|(at, _)| *at);
    let mut from = 0;
    for (at, field) in message.fields.iter().enumerate() {
        let to = from + sent[from..].iter().take_while(|(i, _)| *i == at).count();
        // managedFields is a nil-able, omitempty slice: left out, it is as if never sent.
        let kept = if writing.omitted == Some((index, at)) {
            &[][..]
        } else {
            &sent[from..to]
        };
        member(writing, field, kept, out, first)?;
        from = to;
    }
    Ok(())
}

fn key(out: &mut Vec<u8>, first: &mut bool, name: &str) {
    if !std::mem::take(first) {
        out.push(b',');
    }
    out.push(b'"');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
}

fn member(
    writing: Writing<'_>,
    field: &Field,
    sent: &[(usize, Wire<'_>)],
    out: &mut Vec<u8>,
    first: &mut bool,
) -> Result<(), Error> {
    match field.shape {
        Shape::List => {
            if sent.is_empty() {
                // A nil slice.
                if !field.omitempty {
                    key(out, first, &field.json);
                    out.extend_from_slice(b"null");
                }
                return Ok(());
            }
            key(out, first, &field.json);
            out.push(b'[');
            let mut n = 0;
            for (_, wire) in sent {
                match (field.value.kind, wire) {
                    // Packed numbers: many in one.
                    (ValueKind::Int | ValueKind::Bool, Wire::Bytes(packed)) => {
                        let mut rest = *packed;
                        while !rest.is_empty() {
                            let (number, used) = varint(rest)?
                                .ok_or(Error::Malformed("packed field ends inside a varint"))?;
                            rest = rest.get(used..).unwrap_or_default();
                            comma(out, &mut n);
                            value(writing, field.value, Wire::Varint(number), out)?;
                        }
                    }
                    _ => {
                        comma(out, &mut n);
                        value(writing, field.value, *wire, out)?;
                    }
                }
            }
            out.push(b']');
        }
        Shape::Map => {
            if sent.is_empty() {
                // A nil map.
                if !field.omitempty {
                    key(out, first, &field.json);
                    out.extend_from_slice(b"null");
                }
                return Ok(());
            }
            if field.key.map(|k| k.kind) != Some(ValueKind::String) {
                return Err(Error::Unsupported("a map whose keys are not strings"));
            }
            // Sorted as encoding/json sorts them; a key sent twice keeps its last value, as
            // protobuf's decoding does.
            let mut entries = BTreeMap::new();
            for (_, wire) in sent {
                let Wire::Bytes(entry) = wire else {
                    return Err(Error::Malformed("map entry not length-delimited"));
                };
                let mut name: &[u8] = &[];
                let mut val = None;
                for part in Fields::new(entry) {
                    match part? {
                        (1, Wire::Bytes(k)) => name = k,
                        (2, v) => val = Some(v),
                        _ => return Err(Error::Malformed("map entry field")),
                    }
                }
                entries.insert(name, val);
            }
            key(out, first, &field.json);
            out.push(b'{');
            let mut n = 0;
            for (name, val) in entries {
                comma(out, &mut n);
                string(out, name);
                out.push(b':');
                match val {
                    Some(wire) => value(writing, field.value, wire, out)?,
                    None => zero(writing, field.value, out)?,
                }
            }
            out.push(b'}');
        }
        Shape::Single => {
            // Protobuf keeps the last of a field sent twice.
            let last = sent.last().map(|(_, wire)| *wire);
            if field.inline {
                let bytes = match last {
                    Some(Wire::Bytes(bytes)) => bytes,
                    None => &[],
                    Some(_) => return Err(Error::Malformed("message not length-delimited")),
                };
                return members(writing, field.value.message, bytes, out, first);
            }
            match last {
                None if field.pointer => {
                    if !field.omitempty {
                        key(out, first, &field.json);
                        out.extend_from_slice(b"null");
                    }
                }
                None => {
                    if !(field.omitzero || field.omitempty && scalar(field.value.kind)) {
                        key(out, first, &field.json);
                        zero(writing, field.value, out)?;
                    }
                }
                Some(wire) => {
                    let omitted =
                        !field.pointer && field.omitempty && empty(field.value.kind, wire)
                            || field.omitzero && zero_time(field.value.kind, wire)?;
                    if !omitted {
                        key(out, first, &field.json);
                        value(writing, field.value, wire, out)?;
                    }
                }
            }
        }
    }
    Ok(())
}

fn comma(out: &mut Vec<u8>, n: &mut usize) {
    if *n > 0 {
        out.push(b',');
    }
    *n += 1;
}

/// Kinds encoding/json's omitempty can omit: structs (time, quantity, messages) never are.
fn scalar(kind: ValueKind) -> bool {
    matches!(
        kind,
        ValueKind::String | ValueKind::Bool | ValueKind::Int | ValueKind::Bytes
    )
}

fn empty(kind: ValueKind, wire: Wire<'_>) -> bool {
    match (kind, wire) {
        (ValueKind::String | ValueKind::Bytes, Wire::Bytes(b)) => b.is_empty(),
        (ValueKind::Int | ValueKind::Bool, Wire::Varint(v)) => v == 0,
        _ => false,
    }
}

fn zero_time(kind: ValueKind, wire: Wire<'_>) -> Result<bool, Error> {
    match (kind, wire) {
        (ValueKind::Time | ValueKind::Microtime, Wire::Bytes(b)) => Ok(timestamp(b)?.is_none()),
        _ => Ok(false),
    }
}

/// The value Go holds for a field protobuf did not send.
fn zero(writing: Writing<'_>, value: Value, out: &mut Vec<u8>) -> Result<(), Error> {
    match value.kind {
        ValueKind::String => out.extend_from_slice(b"\"\""),
        ValueKind::Bool => out.extend_from_slice(b"false"),
        ValueKind::Int => out.push(b'0'),
        ValueKind::Quantity => out.extend_from_slice(b"\"0\""),
        ValueKind::Intorstring => out.push(b'0'),
        ValueKind::Bytes
        | ValueKind::Time
        | ValueKind::Microtime
        | ValueKind::Raw
        | ValueKind::Strings => out.extend_from_slice(b"null"),
        ValueKind::Message => message(writing, value.message, &[], out)?,
        ValueKind::Unsupported => return Err(Error::Unsupported("a field of an unsupported type")),
    }
    Ok(())
}

fn bytes_of(wire: Wire<'_>) -> Result<&[u8], Error> {
    match wire {
        Wire::Bytes(bytes) => Ok(bytes),
        _ => Err(Error::Malformed("length-delimited field sent as a number")),
    }
}

fn number_of(wire: Wire<'_>) -> Result<u64, Error> {
    match wire {
        Wire::Varint(v) => Ok(v),
        _ => Err(Error::Malformed("varint field sent otherwise")),
    }
}

fn value(
    writing: Writing<'_>,
    value: Value,
    wire: Wire<'_>,
    out: &mut Vec<u8>,
) -> Result<(), Error> {
    match value.kind {
        ValueKind::String => string(out, bytes_of(wire)?),
        ValueKind::Bool => out.extend_from_slice(if number_of(wire)? != 0 {
            b"true"
        } else {
            b"false"
        }),
        // Go's ints are sent as varints of their two's complement.
        ValueKind::Int => {
            out.extend_from_slice(
                itoa::Buffer::new()
                    .format(number_of(wire)? as i64)
                    .as_bytes(),
            );
        }
        ValueKind::Bytes => {
            let bytes = bytes_of(wire)?;
            let start = out.len() + 1;
            let len =
                base64::encoded_len(bytes.len(), true).ok_or(Error::Malformed("bytes too long"))?;
            out.resize(start + len + 1, b'"');
            let written = base64::engine::general_purpose::STANDARD
                .encode_slice(bytes, &mut out[start..start + len])
                .map_err(|_| Error::Malformed("bytes too long"))?;
            out.truncate(start + written);
            out.push(b'"');
        }
        ValueKind::Time | ValueKind::Microtime => match timestamp(bytes_of(wire)?)? {
            None => out.extend_from_slice(b"null"),
            Some(at) => rfc3339(out, at, value.kind == ValueKind::Microtime),
        },
        ValueKind::Quantity => {
            let mut text: &[u8] = b"0";
            for part in Fields::new(bytes_of(wire)?) {
                if let (1, Wire::Bytes(s)) = part? {
                    text = s;
                }
            }
            string(out, text);
        }
        ValueKind::Intorstring => {
            let (mut kind, mut int, mut text) = (0, 0u64, &[][..]);
            for part in Fields::new(bytes_of(wire)?) {
                match part? {
                    (1, Wire::Varint(v)) => kind = v,
                    (2, Wire::Varint(v)) => int = v,
                    (3, Wire::Bytes(s)) => text = s,
                    _ => return Err(Error::Malformed("IntOrString field")),
                }
            }
            if kind == 1 {
                string(out, text);
            } else {
                out.extend_from_slice(itoa::Buffer::new().format(int as i64 as i32).as_bytes());
            }
        }
        ValueKind::Raw => {
            let mut raw = None;
            for part in Fields::new(bytes_of(wire)?) {
                if let (1, Wire::Bytes(r)) = part? {
                    raw = Some(r);
                }
            }
            match raw {
                None => out.extend_from_slice(b"null"),
                // Kept as the apiserver got it: JSON, unless a client sent protobuf.
                Some(r) if r.starts_with(crate::MAGIC) => {
                    return Err(Error::Unsupported("an embedded object in protobuf"));
                }
                Some([]) => out.extend_from_slice(b"null"),
                Some(r) => out.extend_from_slice(r),
            }
        }
        ValueKind::Strings => {
            out.push(b'[');
            let mut n = 0;
            for part in Fields::new(bytes_of(wire)?) {
                if let (1, Wire::Bytes(s)) = part? {
                    comma(out, &mut n);
                    string(out, s);
                }
            }
            out.push(b']');
        }
        ValueKind::Message => message(writing, value.message, bytes_of(wire)?, out)?,
        ValueKind::Unsupported => return Err(Error::Unsupported("a field of an unsupported type")),
    }
    Ok(())
}

/// `at` in UTC as metav1.Time writes it (RFC 3339 to the second), or as metav1.MicroTime
/// (to the microsecond), quoted. The digits are written here: formatting through a zoned
/// time and strftime took a tenth of a Pod's writing.
pub(crate) fn rfc3339(out: &mut Vec<u8>, at: jiff::Timestamp, micro: bool) {
    let civil = jiff::tz::Offset::UTC.to_datetime(at);
    let Ok(year) = u16::try_from(civil.year()) else {
        // Before year 0: Go's `-0001`, as strftime writes it.
        let utc = at.to_zoned(jiff::tz::TimeZone::UTC);
        let _ = write!(out, "\"{}", utc.strftime("%Y-%m-%dT%H:%M:%S"));
        if micro {
            let _ = write!(out, ".{:06}", civil.subsec_nanosecond() / 1000);
        }
        out.extend_from_slice(b"Z\"");
        return;
    };
    let two = |out: &mut Vec<u8>, n: i8| {
        out.extend_from_slice(&[b'0' + n as u8 / 10, b'0' + n as u8 % 10])
    };
    out.push(b'"');
    out.extend_from_slice(&[
        b'0' + (year / 1000) as u8,
        b'0' + (year / 100 % 10) as u8,
        b'0' + (year / 10 % 10) as u8,
        b'0' + (year % 10) as u8,
        b'-',
    ]);
    two(out, civil.month());
    out.push(b'-');
    two(out, civil.day());
    out.push(b'T');
    two(out, civil.hour());
    out.push(b':');
    two(out, civil.minute());
    out.push(b':');
    two(out, civil.second());
    if micro {
        // The civil time's fraction: a timestamp's own is negative before 1970.
        let micros = civil.subsec_nanosecond() / 1000;
        out.push(b'.');
        for divisor in [100_000, 10_000, 1_000, 100, 10, 1] {
            out.push(b'0' + (micros / divisor % 10) as u8);
        }
    }
    out.extend_from_slice(b"Z\"");
}

/// A metav1.Time's protobuf (seconds at 1, nanoseconds at 2); None for Go's zero time, which
/// is sent empty.
fn timestamp(bytes: &[u8]) -> Result<Option<jiff::Timestamp>, Error> {
    if bytes.is_empty() {
        return Ok(None);
    }
    let (mut seconds, mut nanos) = (0i64, 0i32);
    for part in Fields::new(bytes) {
        match part? {
            (1, Wire::Varint(v)) => seconds = v as i64,
            (2, Wire::Varint(v)) => nanos = v as i64 as i32,
            _ => return Err(Error::Malformed("Timestamp field")),
        }
    }
    jiff::Timestamp::new(seconds, nanos)
        .map(Some)
        .map_err(|_| Error::Malformed("time out of range"))
}

/// A JSON string of Go's string `bytes`, escaped as encoding/json escapes it (HTML's `<`, `>`
/// and `&`, U+2028 and U+2029, control characters; invalid UTF-8 becomes U+FFFD), so an
/// object's text is the apiserver's byte for byte.
pub(crate) fn string(out: &mut Vec<u8>, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    // Most strings (names, images, versions) are ASCII needing no escape: one scan (which
    // is also their UTF-8 check), one copy.
    let plain = bytes
        .iter()
        .all(|&b| (0x20..0x80).contains(&b) && !matches!(b, b'"' | b'\\' | b'<' | b'>' | b'&'));
    if plain {
        out.extend_from_slice(bytes);
        out.push(b'"');
        return;
    }
    // Valid UTF-8 is checked a word at a time; the lossy walk goes byte by byte.
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    };
    let text_bytes = text.as_bytes();
    let chars = text.char_indices();
    let mut start = 0;
    for (at, c) in chars {
        let escape: Option<&[u8]> = match c {
            '"' => Some(b"\\\""),
            '\\' => Some(b"\\\\"),
            '\n' => Some(b"\\n"),
            '\r' => Some(b"\\r"),
            '\t' => Some(b"\\t"),
            '\u{8}' => Some(b"\\b"),
            '\u{c}' => Some(b"\\f"),
            _ => None,
        };
        let unicode = matches!(
            c,
            '\u{0}'..='\u{1f}' | '<' | '>' | '&' | '\u{2028}' | '\u{2029}'
        );
        if escape.is_none() && !unicode {
            continue;
        }
        out.extend_from_slice(&text_bytes[start..at]);
        start = at + c.len_utf8();
        match escape {
            Some(e) => out.extend_from_slice(e),
            None => {
                let code = c as u32;
                out.extend_from_slice(b"\\u");
                for shift in [12, 8, 4, 0] {
                    out.push(HEX[((code >> shift) & 0xf) as usize]);
                }
            }
        }
    }
    out.extend_from_slice(&text_bytes[start..]);
    out.push(b'"');
}
