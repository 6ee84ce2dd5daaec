//! Objects kept whole, for the Kubernetes API and `/output`: compact JSON, LZ4-compressed
//! against a dictionary of the kind. Objects of one kind resemble each other (keys, defaults,
//! conditions): against the first one this process saw, an object takes about a quarter of
//! what it takes compressed alone.

use std::cell::RefCell;
use std::sync::OnceLock;

use bytes::Bytes;

/// How many objects answered alone each thread keeps decompressed, and up to what size.
const RECENT_SLOTS: usize = 16;
const RECENT_MAX_BYTES: usize = 16 * 1024;

thread_local! {
    /// The objects this thread last answered alone: each slot the kept (compressed) bytes,
    /// held so that no other object's can be at their address while the slot holds them, and
    /// their JSON. At most `RECENT_SLOTS` objects of `RECENT_MAX_BYTES` per thread.
    static RECENT: RefCell<[Option<(Bytes, Bytes)>; RECENT_SLOTS]> =
        const { RefCell::new([const { None }; RECENT_SLOTS]) };
}

/// The dictionary of one kind: its first object's JSON, set once, so every object compressed
/// against it can always be decompressed.
#[derive(Debug, Default)]
pub struct Dictionary(OnceLock<Box<[u8]>>);

impl Dictionary {
    pub const fn new() -> Self {
        Dictionary(OnceLock::new())
    }

    /// `json`, compressed (the first object of the kind becomes the dictionary).
    pub fn compress(&self, json: &[u8]) -> Bytes {
        let dictionary = self.0.get_or_init(|| json.to_vec().into_boxed_slice());
        Bytes::from(lz4_flex::block::compress_prepend_size_with_dict(
            json, dictionary,
        ))
    }

    /// As [`Dictionary::decompress`], for an object answered alone (a GET): an object asked
    /// for again and again (a dashboard's refresh, a controller's reads) is decompressed once,
    /// then answered from its thread's few recent ones while it is unchanged. A list reads
    /// each object once and decompresses it, keeping none.
    pub fn decompress_alone(
        &self,
        raw: &Bytes,
        what: &dyn std::fmt::Display,
    ) -> Result<Bytes, String> {
        // Allocations are 16-byte aligned: the address's low bits say nothing.
        let slot = (raw.as_ptr() as usize >> 4) % RECENT_SLOTS;
        let same = |kept: &Bytes| kept.as_ptr() == raw.as_ptr() && kept.len() == raw.len();
        let recent = RECENT.with_borrow(|recent| match &recent[slot] {
            Some((kept, json)) if same(kept) => Some(json.clone()),
            _ => None,
        });
        if let Some(json) = recent {
            return Ok(json);
        }
        let json = Bytes::from(self.decompress(raw, what)?);
        if !raw.is_empty() && json.len() <= RECENT_MAX_BYTES {
            RECENT.with_borrow_mut(|recent| recent[slot] = Some((raw.clone(), json.clone())));
        }
        Ok(json)
    }

    /// The JSON `raw` was compressed from; `what` names the object in the error.
    pub fn decompress(&self, raw: &[u8], what: &dyn std::fmt::Display) -> Result<Vec<u8>, String> {
        let corrupt = |e: &dyn std::fmt::Display| format!("cached {what} is corrupt: {e}");
        let dictionary = self.0.get().ok_or_else(|| corrupt(&"no dictionary"))?;
        lz4_flex::block::decompress_size_prepended_with_dict(raw, dictionary)
            .map_err(|e| corrupt(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_answered_alone_are_each_their_own_json() {
        let dictionary = Dictionary::new();
        let objects: Vec<(Vec<u8>, Bytes)> = (0..3 * RECENT_SLOTS)
            .map(|i| {
                let json = format!(r#"{{"kind":"Pod","metadata":{{"name":"web-{i}"}}}}"#);
                let raw = dictionary.compress(json.as_bytes());
                (json.into_bytes(), raw)
            })
            .collect();
        // More objects than slots, each asked twice in turn: some share a slot, and each is
        // answered from the slot only while the slot holds that object.
        for _ in 0..2 {
            for (json, raw) in &objects {
                let answered = dictionary.decompress_alone(raw, &"pod").unwrap();
                assert_eq!(answered.as_ref(), json.as_slice());
                let again = dictionary.decompress_alone(raw, &"pod").unwrap();
                assert_eq!(
                    again.as_ptr(),
                    answered.as_ptr(),
                    "kept, not decompressed again"
                );
            }
        }
    }
}
