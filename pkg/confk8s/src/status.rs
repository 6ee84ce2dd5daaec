use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::SystemTime;

/// Live health of one informer, shared between its watch task and whoever reports on it.
#[derive(Debug)]
pub struct InformerStatus {
    kind: String,
    synced: AtomicBool,
    connected: AtomicBool,
    added: AtomicU64,
    updated: AtomicU64,
    deleted: AtomicU64,
    relists: AtomicU64,
    errors: AtomicU64,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    last_heard: Option<SystemTime>,
    disconnected_since: Option<SystemTime>,
    last_error: Option<String>,
    last_error_code: Option<u16>,
    resource_version: Option<String>,
    objects: usize,
}

/// A point-in-time copy of an [`InformerStatus`].
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InformerState {
    pub kind: String,
    /// The first full list has been delivered to the handlers.
    pub synced: bool,
    /// The watch is established (false after an error until the next successful event).
    pub connected: bool,
    pub objects: usize,
    pub added: u64,
    pub updated: u64,
    pub deleted: u64,
    pub relists: u64,
    pub errors: u64,
    #[serde(skip)]
    pub last_heard: Option<SystemTime>,
    /// Since when the watch has been failing; the cache is as fresh as this moment.
    #[serde(skip)]
    pub disconnected_since: Option<SystemTime>,
    pub last_error: Option<String>,
    /// The HTTP status of the last error, when the apiserver gave one.
    pub last_error_code: Option<u16>,
    pub resource_version: Option<String>,
}

impl InformerState {
    /// The apiserver refuses us (401/403): our configuration, not a passing outage.
    pub fn is_denied(&self) -> bool {
        !self.connected && matches!(self.last_error_code, Some(401 | 403))
    }
}

impl InformerStatus {
    pub fn new(kind: impl Into<String>) -> Self {
        InformerStatus {
            kind: kind.into(),
            synced: AtomicBool::new(false),
            connected: AtomicBool::new(false),
            added: AtomicU64::new(0),
            updated: AtomicU64::new(0),
            deleted: AtomicU64::new(0),
            relists: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            inner: Mutex::new(Inner::default()),
        }
    }

    pub fn kind(&self) -> &str {
        &self.kind
    }

    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Lock-free, for checks on every request.
    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Acquire)
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic elsewhere while holding this lock cannot leave the counters inconsistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn heard(&self, resource_version: Option<&str>) {
        self.connected.store(true, Ordering::Release);
        let mut inner = self.inner();
        inner.last_heard = Some(SystemTime::now());
        inner.disconnected_since = None;
        if let Some(rv) = resource_version.filter(|rv| !rv.is_empty())
            && is_newer(rv, inner.resource_version.as_deref())
        {
            inner.resource_version = Some(rv.to_string());
        }
    }

    pub(crate) fn error(&self, message: String, code: Option<u16>) {
        self.connected.store(false, Ordering::Release);
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut inner = self.inner();
        inner.last_error = Some(message);
        inner.last_error_code = code;
        inner.disconnected_since.get_or_insert_with(SystemTime::now);
    }

    pub(crate) fn counted<K>(&self, deltas: &[crate::Delta<K>], objects: usize) {
        for d in deltas {
            let counter = match d {
                crate::Delta::Added(_) => &self.added,
                crate::Delta::Updated(_) => &self.updated,
                crate::Delta::Deleted(_) => &self.deleted,
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
        self.inner().objects = objects;
    }

    pub(crate) fn relisted(&self) {
        self.relists.fetch_add(1, Ordering::Relaxed);
        self.synced.store(true, Ordering::Release);
    }

    /// The newest resourceVersion seen: the state the cache is at least as recent as.
    pub fn resource_version(&self) -> Option<String> {
        self.inner().resource_version.clone()
    }

    pub fn state(&self) -> InformerState {
        let inner = self.inner();
        InformerState {
            kind: self.kind.clone(),
            synced: self.is_synced(),
            connected: self.connected.load(Ordering::Acquire),
            objects: inner.objects,
            added: self.added.load(Ordering::Relaxed),
            updated: self.updated.load(Ordering::Relaxed),
            deleted: self.deleted.load(Ordering::Relaxed),
            relists: self.relists.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            last_heard: inner.last_heard,
            disconnected_since: inner.disconnected_since,
            last_error: inner.last_error.clone(),
            last_error_code: inner.last_error_code,
            resource_version: inner.resource_version.clone(),
        }
    }
}

/// resourceVersions are opaque to clients, but every apiserver backed by etcd issues them as
/// increasing integers, and a list's objects arrive in name order, not version order.
fn is_newer(rv: &str, current: Option<&str>) -> bool {
    match (rv.parse::<u64>(), current.map(str::parse::<u64>)) {
        (Ok(new), Some(Ok(old))) => new > old,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_resource_version() {
        let s = InformerStatus::new("Pod");
        for rv in ["229", "239", "225", ""] {
            s.heard(Some(rv));
        }
        assert_eq!(s.resource_version().as_deref(), Some("239"));
        s.heard(Some("opaque"));
        assert_eq!(s.resource_version().as_deref(), Some("opaque"));
    }
}
