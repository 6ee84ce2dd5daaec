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

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}
