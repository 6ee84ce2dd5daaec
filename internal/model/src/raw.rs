//! Objects kept whole, for the Kubernetes API and `/output`: compact JSON, LZ4-compressed
//! against a dictionary of the kind. Objects of one kind resemble each other (keys, defaults,
//! conditions): against the first one this process saw, an object takes about a quarter of
//! what it takes compressed alone.

use std::sync::OnceLock;

use bytes::Bytes;

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

    /// The JSON `raw` was compressed from; `what` names the object in the error.
    pub fn decompress(&self, raw: &[u8], what: &dyn std::fmt::Display) -> Result<Vec<u8>, String> {
        let corrupt = |e: &dyn std::fmt::Display| format!("cached {what} is corrupt: {e}");
        let dictionary = self.0.get().ok_or_else(|| corrupt(&"no dictionary"))?;
        lz4_flex::block::decompress_size_prepended_with_dict(raw, dictionary)
            .map_err(|e| corrupt(&e))
    }
}
