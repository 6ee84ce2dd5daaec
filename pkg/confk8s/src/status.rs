use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// Live health of one informer, shared between its watch task and whoever reports on it.
#[derive(Debug)]
pub struct InformerStatus {
    kind: String,
    synced: AtomicBool,
    connected: AtomicBool,
    streaming: AtomicBool,
    protobuf: AtomicBool,
    refused: AtomicBool,
    added: AtomicU64,
    updated: AtomicU64,
    deleted: AtomicU64,
    relists: AtomicU64,
    errors: AtomicU64,
    inner: Mutex<Inner>,
    /// Where a factory counts its statuses not connected, this one among them while it is not.
    unconnected: Option<Arc<AtomicUsize>>,
}

#[derive(Debug, Default)]
struct Inner {
    last_heard: Option<SystemTime>,
    disconnected_since: Option<SystemTime>,
    last_error: Option<String>,
    last_error_code: Option<u16>,
    resource_version: Option<String>,
    objects: usize,
    first_sync: Option<FirstSync>,
}

/// Where an informer's first sync went: what start-up waits for, told apart so that a slow
/// start names its part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FirstSync {
    /// From the watch's start to the end of its first list: the apiserver's answer, its
    /// decoding and each object's record, built as it arrives.
    pub listed: Duration,
    /// The first list's records put in the index, under its write lock.
    pub indexed: Duration,
}

/// A point-in-time copy of an [`InformerStatus`].
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InformerState {
    /// The kind watched, such as `Pod`.
    pub kind: String,
    /// The first full list has been delivered to the handlers.
    pub synced: bool,
    /// The watch is established (false after an error until the next successful event).
    pub connected: bool,
    /// The watch gets its lists streamed (`sendInitialEvents`); false: in pages.
    pub streaming_lists: bool,
    /// The last list came in protobuf (written as JSON by kubeproto); false: in JSON.
    pub protobuf_lists: bool,
    /// Objects known after the last change; during a relist, the count from before it.
    pub objects: usize,
    /// Additions since start, those found by relists included.
    pub added: u64,
    /// Updates since start, those found by relists included.
    pub updated: u64,
    /// Deletions since start, those found by relists included.
    pub deleted: u64,
    /// Complete lists delivered, the first one included.
    pub relists: u64,
    /// Watch errors since start, and a 403 recorded by the access check. An expired
    /// resourceVersion (410) is a resync and not counted.
    pub errors: u64,
    /// When the watch last delivered an event or was accepted by the apiserver; `None` before
    /// either.
    #[serde(skip)]
    pub last_heard: Option<SystemTime>,
    /// Since when the watch has been failing; the cache is as fresh as this moment.
    #[serde(skip)]
    pub disconnected_since: Option<SystemTime>,
    /// The most recent error; kept after the watch recovers (see `connected`), `None` if there
    /// never was one.
    pub last_error: Option<String>,
    /// The HTTP status of the last error, when the apiserver gave one.
    pub last_error_code: Option<u16>,
    /// See [`InformerStatus::resource_version`].
    pub resource_version: Option<String>,
    /// RBAC does not let us list it, so nothing watches it (see `last_error`): a resource
    /// served only where allowed, such as a custom resource, reported and never synced.
    pub refused: bool,
    /// How the first sync went; `None` before it.
    #[serde(skip)]
    pub first_sync: Option<FirstSync>,
}

impl InformerState {
    /// The apiserver refuses us (401/403): our configuration, not a passing outage.
    pub fn is_denied(&self) -> bool {
        !self.connected && matches!(self.last_error_code, Some(401 | 403))
    }
}

impl InformerStatus {
    /// A status for a watch of `kind` not yet started: neither synced nor connected.
    pub fn new(kind: impl Into<String>) -> Self {
        InformerStatus::with_count(kind.into(), None)
    }

    fn with_count(kind: String, unconnected: Option<Arc<AtomicUsize>>) -> Self {
        if let Some(unconnected) = &unconnected {
            unconnected.fetch_add(1, Ordering::AcqRel);
        }
        InformerStatus {
            kind,
            synced: AtomicBool::new(false),
            connected: AtomicBool::new(false),
            streaming: AtomicBool::new(false),
            protobuf: AtomicBool::new(false),
            refused: AtomicBool::new(false),
            added: AtomicU64::new(0),
            updated: AtomicU64::new(0),
            deleted: AtomicU64::new(0),
            relists: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            inner: Mutex::new(Inner::default()),
            unconnected,
        }
    }

    /// A status counted in `unconnected` while it is not connected (from now: it starts so),
    /// so that whether any of a factory's watches is failing is one load, on every request.
    pub(crate) fn counted_in(kind: impl Into<String>, unconnected: &Arc<AtomicUsize>) -> Self {
        InformerStatus::with_count(kind.into(), Some(unconnected.clone()))
    }

    /// Sets `connected`, counting the change where the status is counted.
    fn set_connected(&self, connected: bool) {
        let was = self.connected.swap(connected, Ordering::AcqRel);
        match &self.unconnected {
            Some(unconnected) if was != connected => {
                if connected {
                    unconnected.fetch_sub(1, Ordering::AcqRel);
                } else {
                    unconnected.fetch_add(1, Ordering::AcqRel);
                }
            }
            _ => {}
        }
    }

    /// The kind watched, such as `Pod`.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// Whether the first full list has been delivered to the handlers. It stays true through
    /// later outages: the cache still holds that list.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Whether RBAC refused the list, so that nothing watches it.
    pub fn is_refused(&self) -> bool {
        self.refused.load(Ordering::Acquire)
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
        self.set_connected(true);
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
        self.set_connected(false);
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut inner = self.inner();
        inner.last_error = Some(message);
        inner.last_error_code = code;
        inner.disconnected_since.get_or_insert_with(SystemTime::now);
    }

    /// RBAC refuses the list: nothing will watch it.
    pub(crate) fn refuse(&self, reason: String) {
        self.error(reason, Some(403));
        self.refused.store(true, Ordering::Release);
    }

    pub(crate) fn counted<K>(&self, deltas: &[crate::Delta<K>], objects: usize) {
        for d in deltas {
            let counter = match d {
                crate::Delta::Added(_) => &self.added,
                crate::Delta::Updated(_) => &self.updated,
                crate::Delta::Deleted(_) | crate::Delta::Vanished(_) => &self.deleted,
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
        self.inner().objects = objects;
    }

    pub(crate) fn lists_streamed(&self, streaming: bool) {
        self.streaming.store(streaming, Ordering::Relaxed);
    }

    pub(crate) fn listed_in(&self, encoding: crate::ListEncoding) {
        let protobuf = encoding == crate::ListEncoding::Protobuf;
        self.protobuf.store(protobuf, Ordering::Relaxed);
    }

    /// A full list was delivered, `sync` telling how, which is kept for the first one.
    pub(crate) fn relisted(&self, sync: FirstSync) {
        self.inner().first_sync.get_or_insert(sync);
        self.relists.fetch_add(1, Ordering::Relaxed);
        self.synced.store(true, Ordering::Release);
    }

    /// The newest resourceVersion seen: the state the cache is at least as recent as. `None`
    /// before the first object arrives.
    pub fn resource_version(&self) -> Option<String> {
        self.inner().resource_version.clone()
    }

    /// A copy of the whole status, for reports and readiness checks.
    pub fn state(&self) -> InformerState {
        let inner = self.inner();
        InformerState {
            kind: self.kind.clone(),
            synced: self.is_synced(),
            connected: self.connected.load(Ordering::Acquire),
            streaming_lists: self.streaming.load(Ordering::Relaxed),
            protobuf_lists: self.protobuf.load(Ordering::Relaxed),
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
            refused: self.is_refused(),
            first_sync: inner.first_sync,
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

impl Drop for InformerStatus {
    fn drop(&mut self) {
        if let Some(unconnected) = &self.unconnected
            && !self.connected.load(Ordering::Acquire)
        {
            unconnected.fetch_sub(1, Ordering::AcqRel);
        }
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

    #[test]
    fn a_counted_status_is_counted_while_it_is_not_connected() {
        let unconnected = Arc::new(AtomicUsize::new(0));
        let count = || unconnected.load(Ordering::Acquire);
        let pods = InformerStatus::counted_in("Pod", &unconnected);
        let services = InformerStatus::counted_in("Service", &unconnected);
        assert_eq!(count(), 2, "a watch not yet started is not connected");
        pods.heard(None);
        pods.heard(Some("7"));
        assert_eq!(count(), 1, "each change counted once");
        services.heard(None);
        assert_eq!(count(), 0);
        pods.error("gone".into(), None);
        pods.error("gone again".into(), Some(500));
        assert_eq!(count(), 1);
        drop(services);
        assert_eq!(count(), 1, "a connected status leaves nothing counted");
        drop(pods);
        assert_eq!(count(), 0, "nor does one that was not");
    }
}
