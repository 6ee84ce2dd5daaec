use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// namespace/name; the namespace is empty for cluster-scoped objects. The model's own, so the
/// records need nothing of the informer machinery.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ObjectKey {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The key of an object's metadata; the apiserver always sends a name, and a
    /// cluster-scoped object has no namespace.
    pub fn of(meta: &ObjectMeta) -> Self {
        ObjectKey::new(
            meta.namespace.as_deref().unwrap_or(""),
            meta.name.as_deref().unwrap_or(""),
        )
    }
}

/// A key as a lookup is asked with: borrowed parts, no key made for it. An [`ObjectKey`]
/// borrows as one, ordered alike, so a map of keys is searched with `(namespace, name)`.
pub trait KeyParts {
    fn parts(&self) -> (&str, &str);
}

impl KeyParts for ObjectKey {
    fn parts(&self) -> (&str, &str) {
        (&self.namespace, &self.name)
    }
}

impl KeyParts for (&str, &str) {
    fn parts(&self) -> (&str, &str) {
        *self
    }
}

impl<'a> std::borrow::Borrow<dyn KeyParts + 'a> for ObjectKey {
    fn borrow(&self) -> &(dyn KeyParts + 'a) {
        self
    }
}

impl PartialEq for dyn KeyParts + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn KeyParts + '_ {}

impl PartialOrd for dyn KeyParts + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// As `ObjectKey`'s derived order: namespace, then name.
impl Ord for dyn KeyParts + '_ {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.parts().cmp(&other.parts())
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_found_by_their_parts_in_the_order_they_are_kept() {
        let keys: std::collections::BTreeMap<ObjectKey, u32> = [
            (ObjectKey::new("a", "z"), 1),
            (ObjectKey::new("ab", "a"), 2),
            (ObjectKey::new("b", ""), 3),
            (ObjectKey::new("", "n"), 4),
        ]
        .into_iter()
        .collect();
        let find = |parts: &dyn KeyParts| keys.get(parts).copied();
        for (key, id) in &keys {
            let parts = (key.namespace.as_str(), key.name.as_str());
            assert_eq!(find(&parts), Some(*id), "{key}");
        }
        assert_eq!(find(&("a", "")), None);
        assert_eq!(find(&("b", "z")), None);
    }
}
