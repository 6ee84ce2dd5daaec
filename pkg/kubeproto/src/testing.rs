//! Protobuf written by hand, for tests of code that reads the apiserver's protobuf (this
//! crate's, confk8s', apis'): a varint, a message of length-delimited fields, an envelope.

use crate::MAGIC;

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
