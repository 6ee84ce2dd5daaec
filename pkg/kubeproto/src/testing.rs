//! Protobuf written by hand, for tests of code that reads the apiserver's protobuf (this
//! crate's, confk8s', apis'): a varint, a message of length-delimited fields, an envelope;
//! and a whole list read at once, for tests that compare it with the apiserver's JSON.

use crate::{Error, ListKind, ListReader, MAGIC};

/// Appends `value` as a varint.
pub fn push_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A message of length-delimited fields, as a protobuf encoder writes it.
pub fn message(fields: &[(u64, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (number, value) in fields {
        push_varint(&mut out, (number << 3) | 2);
        push_varint(&mut out, value.len() as u64);
        out.extend_from_slice(value);
    }
    out
}

/// `raw` in the apiserver's envelope: `k8s\0`, then a `runtime.Unknown` of TypeMeta
/// (`api_version` 1, `kind` 2) at 1 and `raw` at 2.
pub fn enveloped(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let type_meta = message(&[(1, api_version.as_bytes()), (2, kind.as_bytes())]);
    let mut out = MAGIC.to_vec();
    out.extend(message(&[(1, &type_meta), (2, raw)]));
    out
}

/// A whole list answer of `kind`, envelope included, as the JSON list the apiserver would
/// send, without its `kind` and `apiVersion` (a list read by [`ListReader`] gives the same
/// items and metadata).
pub fn list_json(kind: ListKind, answer: &[u8]) -> Result<Vec<u8>, Error> {
    let mut items = Vec::new();
    let mut reader = ListReader::new(kind, usize::MAX);
    reader.feed(answer, |item| items.push(item))?;
    let meta = reader.finish()?;
    let mut out = Vec::with_capacity(answer.len() * 2);
    out.extend_from_slice(b"{\"metadata\":");
    out.extend_from_slice(&meta);
    out.extend_from_slice(b",\"items\":[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item);
    }
    out.extend_from_slice(b"]}");
    Ok(out)
}
