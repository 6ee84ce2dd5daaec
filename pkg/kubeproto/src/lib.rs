//! The apiserver's protobuf, written as the JSON the apiserver would have sent.
//!
//! The apiserver encodes a list of Pods as JSON about three times slower than as protobuf (its
//! own CPU, on the same list), and at start-up a cache waits for exactly that encoding. This
//! crate lets a client ask for protobuf and still hand the rest of its pipeline JSON, equal as
//! a value to what the apiserver would have written: the apiserver's JSON is Go's
//! encoding/json of the objects it decoded from etcd's protobuf, so the Go types' field
//! numbers, JSON names and omitempty rules (read from k8s.io/api by hack/protoschema into
//! `schema.json`) are all it takes.
//!
//! Only built-in kinds have protobuf; a kind this schema does not know, or a field it does
//! not know (a newer apiserver), is an [`Error`], and the caller asks for JSON instead.

mod json;
mod list;
mod schema;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod wire;

pub use list::ListReader;

/// The four bytes before every protobuf answer of the apiserver's.
pub const MAGIC: &[u8] = b"k8s\0";

/// The media type to ask for, JSON after it: the apiserver answers JSON for kinds without
/// protobuf (custom resources).
pub const ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";

/// The media type of a protobuf answer.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// Why protobuf could not be written as JSON.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    /// The answer does not start with `k8s\0`.
    #[error("not a Kubernetes protobuf answer (no k8s\\0 prefix)")]
    NotProtobuf,
    /// The bytes are not the protobuf they should be.
    #[error("malformed protobuf: {0}")]
    Malformed(&'static str),
    /// A field the schema does not have: the apiserver is newer than the schema.
    #[error("field {number} of {message} is not in the schema (a newer apiserver?)")]
    UnknownField {
        /// The Go type.
        message: String,
        /// The field's number.
        number: u64,
    },
    /// A value the schema cannot write.
    #[error("cannot write {0} as JSON")]
    Unsupported(&'static str),
    /// An item longer than the reader allows.
    #[error("a list item of {0} bytes, above the limit")]
    TooLarge(usize),
    /// The schema names a message it does not have.
    #[error("schema.json is inconsistent")]
    Schema,
}

/// A kind whose lists and objects this crate can read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListKind {
    item: usize,
    meta: usize,
}

impl ListKind {
    /// The kind of `group` (empty for the core group), `version` and `kind`, if the schema
    /// has it.
    pub fn find(group: &str, version: &str, kind: &str) -> Option<Self> {
        let schema = schema::schema();
        let found = schema
            .kinds
            .iter()
            .find(|k| k.group == group && k.version == version && k.kind == kind)?;
        let list = schema.messages.get(found.list)?;
        let part = |number| {
            let field = list.fields.get(list.field(number)?)?;
            (field.value.kind == schema::ValueKind::Message).then_some(field.value.message)
        };
        Some(Self {
            meta: part(1)?,
            item: part(2)?,
        })
    }

    /// One object of the kind (a list's item: its bytes without the envelope) as JSON.
    pub fn object_json(&self, bytes: &[u8]) -> Result<Vec<u8>, Error> {
        self.item_json(json::Writing::whole(schema::schema()), bytes)
    }

    /// [`ListKind::object_json`] without `metadata.managedFields`.
    pub fn object_json_without_managed_fields(&self, bytes: &[u8]) -> Result<Vec<u8>, Error> {
        self.item_json(
            json::Writing::without_managed_fields(schema::schema()),
            bytes,
        )
    }

    fn item_json(&self, writing: json::Writing<'_>, bytes: &[u8]) -> Result<Vec<u8>, Error> {
        let mut out = Vec::with_capacity(bytes.len() * 2);
        json::message(writing, self.item, bytes, &mut out)?;
        Ok(out)
    }

    /// A list's metadata (ListMeta) as JSON.
    pub fn meta_json(&self, bytes: &[u8]) -> Result<Vec<u8>, Error> {
        let mut out = Vec::with_capacity(64);
        json::message(
            json::Writing::whole(schema::schema()),
            self.meta,
            bytes,
            &mut out,
        )?;
        Ok(out)
    }
}

/// A kind a client sends k8sailor itself in protobuf, whose objects this crate can read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectKind {
    message: usize,
}

impl ObjectKind {
    /// The kind of `group`, `version` and `kind`, if the schema has it.
    pub fn find(group: &str, version: &str, kind: &str) -> Option<Self> {
        schema::schema()
            .objects
            .iter()
            .find(|o| o.group == group && o.version == version && o.kind == kind)
            .map(|o| Self { message: o.message })
    }

    /// An object as a client sends it (`k8s\0`, then a `runtime.Unknown` whose `raw` (2) is
    /// the object) as the JSON it would have sent, without its `kind` and `apiVersion`.
    pub fn enveloped_json(&self, body: &[u8]) -> Result<Vec<u8>, Error> {
        enveloped_json(self.message, body)
    }
}

/// An answer in protobuf that is a metav1.Status (an error, or a watch's ERROR event's
/// object) as the JSON the apiserver would have sent, without its `kind` and `apiVersion`.
pub fn status_json(answer: &[u8]) -> Result<Vec<u8>, Error> {
    enveloped_json(schema::schema().status, answer)
}

/// `k8s\0`, then a `runtime.Unknown` whose `raw` (2) is a `message`: that message as JSON.
fn enveloped_json(message: usize, answer: &[u8]) -> Result<Vec<u8>, Error> {
    let envelope = answer.strip_prefix(MAGIC).ok_or(Error::NotProtobuf)?;
    let mut raw: &[u8] = &[];
    for field in wire::Fields::new(envelope) {
        if let (2, wire::Wire::Bytes(bytes)) = field? {
            raw = bytes;
        }
    }
    let mut out = Vec::with_capacity(raw.len() * 2);
    json::message(
        json::Writing::whole(schema::schema()),
        message,
        raw,
        &mut out,
    )?;
    Ok(out)
}

#[cfg(test)]
mod tests;
