//! The few protobuf messages a client sends k8sailor itself: client-go's typed clients send
//! built-in objects as `application/vnd.kubernetes.protobuf` (the `k8s\0` magic, then a
//! `runtime.Unknown` whose `raw` is the object), and k9s sends its SelfSubjectAccessReviews
//! so. Read by field number, as the schema's `generated.proto` numbers them, without a
//! protobuf library: nothing else here speaks protobuf.

use thiserror::Error;

/// The four bytes before every protobuf object of the apiserver's.
const MAGIC: &[u8] = b"k8s\0";

/// `runtime.Unknown`'s `raw`: the object's own bytes.
const UNKNOWN_RAW: u64 = 2;

#[derive(Debug, Error, PartialEq, Eq)]
pub(super) enum ProtoError {
    #[error("not a Kubernetes protobuf object (no k8s\\0 prefix)")]
    NoMagic,
    #[error("no object in the envelope")]
    NoObject,
    #[error("the message ends inside a field")]
    Truncated,
    #[error("a varint longer than 10 bytes")]
    LongVarint,
    #[error("field {field}: unsupported wire type {wire}")]
    WireType { field: u64, wire: u64 },
    #[error("field {field}: not UTF-8")]
    NotUtf8 { field: u64 },
}

/// One field's value as the wire has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Wire<'a> {
    Varint(u64),
    /// A string, bytes or an embedded message.
    Bytes(&'a [u8]),
    /// fixed32 and fixed64, which no message read here holds.
    Fixed,
}

fn varint(bytes: &mut &[u8]) -> Result<u64, ProtoError> {
    let mut value = 0u64;
    for shift in (0..70).step_by(7) {
        let (&byte, rest) = bytes.split_first().ok_or(ProtoError::Truncated)?;
        *bytes = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(ProtoError::LongVarint)
}

fn take<'a>(bytes: &mut &'a [u8], n: u64) -> Result<&'a [u8], ProtoError> {
    let n = usize::try_from(n).map_err(|_| ProtoError::Truncated)?;
    if bytes.len() < n {
        return Err(ProtoError::Truncated);
    }
    let (taken, rest) = bytes.split_at(n);
    *bytes = rest;
    Ok(taken)
}

/// The fields of a message, in wire order.
pub(super) fn fields(mut bytes: &[u8]) -> Result<Vec<(u64, Wire<'_>)>, ProtoError> {
    let mut fields = Vec::new();
    while !bytes.is_empty() {
        let key = varint(&mut bytes)?;
        let (field, wire) = (key >> 3, key & 7);
        let value = match wire {
            0 => Wire::Varint(varint(&mut bytes)?),
            1 => {
                take(&mut bytes, 8)?;
                Wire::Fixed
            }
            2 => {
                let len = varint(&mut bytes)?;
                Wire::Bytes(take(&mut bytes, len)?)
            }
            5 => {
                take(&mut bytes, 4)?;
                Wire::Fixed
            }
            _ => return Err(ProtoError::WireType { field, wire }),
        };
        fields.push((field, value));
    }
    Ok(fields)
}

/// The last value of field `number` that is bytes (protobuf's rule: the last one wins).
pub(super) fn bytes_of<'a>(fields: &[(u64, Wire<'a>)], number: u64) -> Option<&'a [u8]> {
    fields.iter().rev().find_map(|(field, wire)| match wire {
        Wire::Bytes(b) if *field == number => Some(*b),
        _ => None,
    })
}

/// Field `number` as a string; absent is empty, as proto2's optional strings read.
pub(super) fn string_of(fields: &[(u64, Wire<'_>)], number: u64) -> Result<String, ProtoError> {
    bytes_of(fields, number).map_or(Ok(String::new()), |b| {
        String::from_utf8(b.to_vec()).map_err(|_| ProtoError::NotUtf8 { field: number })
    })
}

/// The object's own bytes inside the `k8s\0` envelope.
pub(super) fn object(body: &[u8]) -> Result<&[u8], ProtoError> {
    let unknown = body.strip_prefix(MAGIC).ok_or(ProtoError::NoMagic)?;
    bytes_of(&fields(unknown)?, UNKNOWN_RAW).ok_or(ProtoError::NoObject)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A message of length-delimited fields, as a protobuf encoder writes it.
    pub(crate) fn message(fields: &[(u64, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (number, value) in fields {
            push_varint(&mut out, (number << 3) | 2);
            push_varint(&mut out, value.len() as u64);
            out.extend_from_slice(value);
        }
        out
    }

    fn push_varint(out: &mut Vec<u8>, mut value: u64) {
        while value >= 0x80 {
            out.push((value as u8) | 0x80);
            value >>= 7;
        }
        out.push(value as u8);
    }

    /// `object` in the apiserver's envelope.
    pub(crate) fn enveloped(object: &[u8]) -> Vec<u8> {
        let type_meta = message(&[
            (1, b"authorization.k8s.io/v1"),
            (2, b"SelfSubjectAccessReview"),
        ]);
        let mut body = MAGIC.to_vec();
        body.extend(message(&[(1, &type_meta), (UNKNOWN_RAW, object), (4, b"")]));
        body
    }

    #[test]
    fn fields_read_every_wire_type_and_refuse_what_is_cut_short() {
        // 150 as a varint in field 1, "hi" in field 2, a fixed32 in field 3, a fixed64 in 4.
        let bytes = [
            0x08, 0x96, 0x01, 0x12, 2, b'h', b'i', 0x1d, 1, 2, 3, 4, 0x21, 1, 2, 3, 4, 5, 6, 7, 8,
        ];
        assert_eq!(
            fields(&bytes).unwrap(),
            [
                (1, Wire::Varint(150)),
                (2, Wire::Bytes(b"hi")),
                (3, Wire::Fixed),
                (4, Wire::Fixed)
            ]
        );
        assert_eq!(string_of(&fields(&bytes).unwrap(), 2).unwrap(), "hi");
        assert_eq!(string_of(&fields(&bytes).unwrap(), 9).unwrap(), "");
        for cut in 1..bytes.len() {
            if ![3, 7, 12].contains(&cut) {
                assert!(fields(&bytes[..cut]).is_err(), "{cut}");
            }
        }
        assert_eq!(fields(&[0x12, 5, b'a']), Err(ProtoError::Truncated));
        assert_eq!(
            fields(&[0x0b]),
            Err(ProtoError::WireType { field: 1, wire: 3 })
        );
        assert_eq!(fields(&[0xff; 11]), Err(ProtoError::LongVarint));
        assert_eq!(
            string_of(&fields(&[0x12, 1, 0xff]).unwrap(), 2),
            Err(ProtoError::NotUtf8 { field: 2 })
        );
    }

    #[test]
    fn the_object_is_the_envelopes_raw() {
        assert_eq!(object(&enveloped(b"\x12\x00")).unwrap(), b"\x12\x00");
        assert_eq!(object(b"{\"kind\":1}"), Err(ProtoError::NoMagic));
        assert_eq!(object(b"k8s\0"), Err(ProtoError::NoObject));
    }
}
