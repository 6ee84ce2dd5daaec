//! A list in protobuf, read as it arrives: the apiserver's envelope (`k8s\0`, then a
//! `runtime.Unknown` whose `raw` (2) is the list), the list's metadata (1) and its items (2),
//! each item written as JSON once its last byte is in, so a list is never held whole.

use crate::wire::varint;
use crate::{Error, ListKind, MAGIC};

/// What is being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The four bytes of `k8s\0`; how many are in.
    Magic(usize),
    /// Between the envelope's fields.
    Envelope,
    /// Inside the list, `left` bytes of it still to come.
    List { left: usize },
}

/// What the bytes being collected are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Meta,
    Item,
    /// A field of the envelope or the list this reader does not need.
    Skipped,
}

/// Reads one list answer of a kind, fed as it arrives.
#[derive(Debug)]
pub struct ListReader {
    kind: ListKind,
    max_item: usize,
    place: Place,
    /// Bytes of a field's header not yet complete.
    head: Vec<u8>,
    /// The field being collected: its part, its bytes so far, how many it has.
    collecting: Option<(Part, Vec<u8>, usize)>,
    meta: Option<Vec<u8>>,
    listed: bool,
    /// Items written without `metadata.managedFields`.
    without_managed_fields: bool,
}

impl ListReader {
    /// A reader of `kind`'s list; an item longer than `max_item` bytes is refused.
    pub fn new(kind: ListKind, max_item: usize) -> Self {
        Self {
            kind,
            max_item,
            place: Place::Magic(0),
            head: Vec::new(),
            collecting: None,
            meta: None,
            listed: false,
            without_managed_fields: false,
        }
    }

    /// Items are written without `metadata.managedFields`, for a reader that drops them
    /// (an informer): a Pod's are about half its bytes.
    pub fn without_managed_fields(self) -> Self {
        Self {
            without_managed_fields: true,
            ..self
        }
    }

    /// Reads `chunk`, handing each item completed in it to `item` as JSON.
    pub fn feed(&mut self, mut chunk: &[u8], mut item: impl FnMut(Vec<u8>)) -> Result<(), Error> {
        while !chunk.is_empty() {
            if let Place::Magic(seen) = self.place {
                let take = (MAGIC.len() - seen).min(chunk.len());
                if chunk[..take] != MAGIC[seen..seen + take] {
                    return Err(Error::NotProtobuf);
                }
                chunk = &chunk[take..];
                self.place = if seen + take == MAGIC.len() {
                    Place::Envelope
                } else {
                    Place::Magic(seen + take)
                };
                continue;
            }
            if let Some((part, mut bytes, len)) = self.collecting.take() {
                let take = (len - bytes.len()).min(chunk.len());
                if part == Part::Skipped {
                    // Only counted: `bytes` stays empty, its length is carried in `len`.
                    self.collecting = Some((part, bytes, len - take));
                    if len == take {
                        self.collecting = None;
                    }
                } else {
                    bytes.extend_from_slice(&chunk[..take]);
                    if bytes.len() < len {
                        self.collecting = Some((part, bytes, len));
                    } else {
                        self.complete(part, bytes, &mut item)?;
                    }
                }
                chunk = &chunk[take..];
                self.spend(take)?;
                continue;
            }
            // A field's header: its tag, and its length when length-delimited.
            let was = self.head.len();
            let take = chunk.len().min(20 - was);
            self.head.extend_from_slice(&chunk[..take]);
            let Some((number, used, len)) = header(&self.head)? else {
                if self.head.len() >= 20 {
                    return Err(Error::Malformed("field header too long"));
                }
                chunk = &chunk[take..];
                continue;
            };
            // Of the bytes just taken, only those of the header are spent.
            let spent = used - was;
            chunk = &chunk[spent..];
            self.head.clear();
            let place = self.place;
            let part = match (place, number) {
                (Place::Envelope, 2) => {
                    if self.listed {
                        return Err(Error::Malformed("two lists in one answer"));
                    }
                    self.listed = true;
                    self.place = if len == 0 {
                        Place::Envelope
                    } else {
                        Place::List { left: len }
                    };
                    continue;
                }
                (Place::List { left }, _) if left < used + len => {
                    return Err(Error::Malformed("a field runs past its list"));
                }
                (Place::List { .. }, 1) => Part::Meta,
                (Place::List { .. }, 2) => Part::Item,
                _ => Part::Skipped,
            };
            if let Place::List { left } = &mut self.place {
                // The header's bytes; the value's are counted as they come.
                *left -= used;
            }
            if part == Part::Item && len > self.max_item {
                return Err(Error::TooLarge(len));
            }
            if len == 0 {
                self.complete(part, Vec::new(), &mut item)?;
                self.spend(0)?;
            } else if part == Part::Skipped {
                self.collecting = Some((part, Vec::new(), len));
            } else {
                self.collecting = Some((part, Vec::with_capacity(len), len));
            }
        }
        Ok(())
    }

    fn complete(
        &mut self,
        part: Part,
        bytes: Vec<u8>,
        item: &mut impl FnMut(Vec<u8>),
    ) -> Result<(), Error> {
        match part {
            Part::Item if self.without_managed_fields => {
                item(self.kind.object_json_without_managed_fields(&bytes)?)
            }
            Part::Item => item(self.kind.object_json(&bytes)?),
            Part::Meta => self.meta = Some(bytes),
            Part::Skipped => {}
        }
        Ok(())
    }

    /// Counts `n` bytes of the list read; the list ends with its last field's last byte.
    fn spend(&mut self, n: usize) -> Result<(), Error> {
        if let Place::List { left } = &mut self.place {
            *left = left
                .checked_sub(n)
                .ok_or(Error::Malformed("a field runs past its list"))?;
            if *left == 0 {
                if self.collecting.is_some() || !self.head.is_empty() {
                    return Err(Error::Malformed("a field runs past its list"));
                }
                self.place = Place::Envelope;
            }
        }
        Ok(())
    }

    /// The list's metadata as JSON, once the whole answer has been fed.
    pub fn finish(self) -> Result<Vec<u8>, Error> {
        if !matches!(self.place, Place::Envelope)
            || self.collecting.is_some()
            || !self.head.is_empty()
            || !self.listed
        {
            return Err(Error::Malformed("the answer ends inside the list"));
        }
        self.kind
            .meta_json(self.meta.as_deref().unwrap_or_default())
    }
}

/// A complete field header at the start of `bytes`: number, bytes used, length of its value
/// (0 for numbers, which are skipped as bytes of their own... only length-delimited fields
/// are expected here).
fn header(bytes: &[u8]) -> Result<Option<(u64, usize, usize)>, Error> {
    let Some((tag, used)) = varint(bytes)? else {
        return Ok(None);
    };
    match tag & 7 {
        2 => {
            let Some((len, n)) = varint(&bytes[used..])? else {
                return Ok(None);
            };
            let len = usize::try_from(len).map_err(|_| Error::Malformed("length too large"))?;
            Ok(Some((tag >> 3, used + n, len)))
        }
        _ => Err(Error::Malformed(
            "a list or envelope field that is not length-delimited",
        )),
    }
}
