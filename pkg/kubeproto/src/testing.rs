//! Protobuf written by hand, for tests of code that reads the apiserver's protobuf (this
//! crate's, confk8s', apis'): a varint, a message of length-delimited fields, an envelope.

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
