//! What hack/protoschema read from the Go types: per message, its fields' numbers and how
//! encoding/json writes them.

use std::sync::OnceLock;

use serde::Deserialize;

/// How one value is written.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ValueKind {
    String,
    Bool,
    Int,
    Bytes,
    /// metav1.Time: RFC 3339 to the second, UTC; the zero time is `null`.
    Time,
    /// metav1.MicroTime: RFC 3339 to the microsecond, UTC; the zero time is `null`.
    Microtime,
    /// resource.Quantity: its canonical string, which its message carries at 1.
    Quantity,
    /// intstr.IntOrString: a number or a string, as its type (1) says.
    Intorstring,
    /// runtime.RawExtension, metav1.FieldsV1: their bytes (1) are JSON already.
    Raw,
    /// A named []string (ExtraValue): a message of its own, the strings at 1.
    Strings,
    Message,
    /// Anything else (float, duration): not met in the kinds served; refused.
    #[serde(other)]
    Unsupported,
}

#[derive(Clone, Copy, Debug, Deserialize)]
pub(crate) struct Value {
    pub(crate) kind: ValueKind,
    #[serde(default)]
    pub(crate) message: usize,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Shape {
    #[default]
    Single,
    /// A Go slice: nil when protobuf sent no element.
    List,
    /// A Go map: protobuf's entries (key 1, value 2); encoding/json sorts the keys.
    Map,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Field {
    pub(crate) number: u32,
    #[serde(default)]
    pub(crate) json: String,
    #[serde(default)]
    pub(crate) inline: bool,
    #[serde(default)]
    pub(crate) omitempty: bool,
    #[serde(default)]
    pub(crate) omitzero: bool,
    #[serde(default)]
    pub(crate) pointer: bool,
    #[serde(default)]
    pub(crate) shape: Shape,
    pub(crate) key: Option<Value>,
    pub(crate) value: Value,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Message {
    pub(crate) name: String,
    pub(crate) fields: Vec<Field>,
    /// Field number -> index in `fields`, built after loading.
    #[serde(skip)]
    pub(crate) by_number: Vec<Option<u16>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Kind {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) kind: String,
    pub(crate) list: usize,
}

/// A kind clients send k8sailor itself that no list holds.
#[derive(Debug, Deserialize)]
pub(crate) struct Object {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) kind: String,
    pub(crate) message: usize,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Schema {
    pub(crate) kinds: Vec<Kind>,
    pub(crate) objects: Vec<Object>,
    /// metav1.Status's message.
    pub(crate) status: usize,
    pub(crate) messages: Vec<Message>,
    /// ObjectMeta's `managedFields`: (message index, field index), found after loading.
    #[serde(skip)]
    pub(crate) managed_fields: Option<(usize, usize)>,
}

impl Message {
    pub(crate) fn field(&self, number: u64) -> Option<usize> {
        usize::try_from(number)
            .ok()
            .and_then(|n| self.by_number.get(n).copied().flatten())
            .map(usize::from)
    }
}

/// The Go type every object's `metadata` is.
const OBJECT_META: &str = "k8s.io/apimachinery/pkg/apis/meta/v1.ObjectMeta";

/// The schema, read once. It is written by hack/protoschema and checked by this crate's tests,
/// so reading it cannot fail at run time.
pub(crate) fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let mut schema: Schema =
            serde_json::from_str(include_str!("schema.json")).expect("schema.json is valid");
        for message in &mut schema.messages {
            let top = message.fields.iter().map(|f| f.number).max().unwrap_or(0);
            let mut by_number = vec![None; top as usize + 1];
            for (i, field) in message.fields.iter().enumerate() {
                by_number[field.number as usize] = u16::try_from(i).ok();
            }
            message.by_number = by_number;
        }
        schema.managed_fields = schema.messages.iter().enumerate().find_map(|(at, m)| {
            let field = (m.name == OBJECT_META)
                .then(|| m.fields.iter().position(|f| f.json == "managedFields"))??;
            Some((at, field))
        });
        schema
    })
}
