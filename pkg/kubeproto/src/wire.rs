//! Protobuf's wire format, as much as Kubernetes' messages use: varints, 64- and 32-bit words
//! and length-delimited bytes.

use crate::Error;

/// One field's value as sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Bytes(&'a [u8]),
}

/// Reads a varint at the start of `bytes`: its value and length, or None when `bytes` ends
/// before it does.
pub(crate) fn varint(bytes: &[u8]) -> Result<Option<(u64, usize)>, Error> {
    let mut value = 0u64;
    for (i, byte) in bytes.iter().enumerate() {
        if i == 10 {
            return Err(Error::Malformed("varint longer than 10 bytes"));
        }
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(Some((value, i + 1)));
        }
    }
    if bytes.len() >= 10 {
        return Err(Error::Malformed("varint longer than 10 bytes"));
    }
    Ok(None)
}

/// The fields of one message, in the order sent.
pub(crate) struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    pub(crate) fn new(message: &'a [u8]) -> Self {
        Self { rest: message }
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u64, Wire<'a>), Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let field = next_field(self.rest);
        match field {
            Ok((number, wire, used)) => {
                self.rest = self.rest.get(used..).unwrap_or_default();
                Some(Ok((number, wire)))
            }
            Err(error) => {
                self.rest = &[];
                Some(Err(error))
            }
        }
    }
}

fn truncated() -> Error {
    Error::Malformed("message ends inside a field")
}

fn next_field(bytes: &[u8]) -> Result<(u64, Wire<'_>, usize), Error> {
    let (tag, mut used) = varint(bytes)?.ok_or_else(truncated)?;
    let number = tag >> 3;
    let rest = bytes.get(used..).ok_or_else(truncated)?;
    let wire = match tag & 7 {
        0 => {
            let (value, n) = varint(rest)?.ok_or_else(truncated)?;
            used += n;
            Wire::Varint(value)
        }
        1 => {
            let word: [u8; 8] = rest
                .get(..8)
                .ok_or_else(truncated)?
                .try_into()
                .map_err(|_| truncated())?;
            used += 8;
            Wire::Fixed64(u64::from_le_bytes(word))
        }
        2 => {
            let (len, n) = varint(rest)?.ok_or_else(truncated)?;
            let len = usize::try_from(len).map_err(|_| truncated())?;
            let value = rest
                .get(n..)
                .and_then(|r| r.get(..len))
                .ok_or_else(truncated)?;
            used += n + len;
            Wire::Bytes(value)
        }
        5 => {
            let word: [u8; 4] = rest
                .get(..4)
                .ok_or_else(truncated)?
                .try_into()
                .map_err(|_| truncated())?;
            used += 4;
            Wire::Fixed32(u32::from_le_bytes(word))
        }
        _ => return Err(Error::Malformed("unknown wire type")),
    };
    Ok((number, wire, used))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::push_varint;

    #[test]
    fn varints_read_as_written() {
        for value in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut bytes = Vec::new();
            push_varint(&mut bytes, value);
            assert_eq!(varint(&bytes).unwrap(), Some((value, bytes.len())));
            assert_eq!(
                varint(&bytes[..bytes.len() - 1]).unwrap(),
                None,
                "{value} cut"
            );
        }
        assert!(varint(&[0xff; 11]).is_err());
    }

    #[test]
    fn a_field_cut_short_is_malformed() {
        // Field 1, length-delimited, 5 bytes said, 2 sent.
        let fields: Vec<_> = Fields::new(&[0x0a, 5, b'a', b'b']).collect();
        assert_eq!(fields, vec![Err(truncated())]);
    }
}
