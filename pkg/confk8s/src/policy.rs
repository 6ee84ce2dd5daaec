//! The cluster's RBAC objects kept in memory from watches, so that [`crate::Reviewer`] answers
//! most access questions itself, as the apiserver's RBAC authorizer would, and asks the
//! apiserver (a SubjectAccessReview) only where RBAC says no and another authorizer might
//! say yes. The evaluation is the `rbac` crate's; this module feeds it and says whether it
//! can be trusted: only while all four watches are synced and none is refused.

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::{Client, Resource};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::delta::Delta;
use crate::informer::{FactoryError, Handler, InformerFactory, ListSettings, RelistBatch};
use crate::status::{FirstSync, InformerStatus};

/// How long after we hear of a change to RBAC the apiserver's own authorizer may still
/// answer a SubjectAccessReview as before it: it hears of the change through a watch of its
/// own, which may come after ours (seen at tens of milliseconds on a busy machine).
pub const AUTHORIZER_LAG: Duration = Duration::from_secs(2);

/// Roles, ClusterRoles, RoleBindings and ClusterRoleBindings as the watches last told them.
pub struct Policy {
    index: RwLock<rbac::Index>,
    /// Bumped after each applied change: watches re-check their access when it moves.
    changes: watch::Sender<u64>,
    /// When the last change was applied, if any was.
    changed_at: Mutex<Option<Instant>>,
    statuses: Mutex<Vec<Arc<InformerStatus>>>,
    /// Why the policy is not followed at all (our own account may not list or watch it).
    unavailable: Mutex<Option<String>>,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("mode", &self.mode())
            .finish()
    }
}

/// How access is decided, for readiness and logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PolicyMode {
    /// RBAC evaluated in memory; SubjectAccessReviews only where it says no.
    Local {
        /// Roles and bindings held.
        objects: usize,
    },
    /// Every access asked with a SubjectAccessReview, for the reason given: the RBAC watches
    /// are not synced yet, refused, or were never started.
    Reviews(String),
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            index: RwLock::new(rbac::Index::default()),
            changes: watch::channel(0).0,
            changed_at: Mutex::new(None),
            statuses: Mutex::new(Vec::new()),
            unavailable: Mutex::new(None),
        }
    }
}

impl Policy {
    /// Follows the RBAC objects (in `namespace` only for Roles and RoleBindings, if given)
    /// with watches of their own. If our account may not list and watch all four kinds, the
    /// policy is not followed: this is logged, said by [`Policy::mode`], and every access is
    /// then reviewed by the apiserver, as before. Never an error: delegated auth works either
    /// way. The tasks end when `shutdown` is cancelled.
    pub async fn follow(
        client: Client,
        namespace: Option<String>,
        lists: ListSettings,
        shutdown: CancellationToken,
    ) -> (Arc<Policy>, Vec<JoinHandle<()>>) {
        let policy = Arc::new(Policy::default());
        let factory = InformerFactory::new(client, namespace).with_list_settings(lists);
        let refused = match policy.register(&factory) {
            Err(e) => Some(e.to_string()),
            Ok(()) => match factory.check_access().await {
                Err(e) => Some(e.to_string()),
                Ok(()) => factory
                    .statuses()
                    .iter()
                    .map(|s| s.state())
                    .find(|s| s.is_denied())
                    .map(|s| s.last_error.unwrap_or_default()),
            },
        };
        if let Some(reason) = refused {
            tracing::warn!(%reason, "RBAC is not followed: every access is asked with a SubjectAccessReview; grant list and watch on roles, clusterroles, rolebindings and clusterrolebindings (config/rbac.yaml) to evaluate it in memory");
            *lock(&policy.unavailable) = Some(reason);
            return (policy, Vec::new());
        }
        *lock(&policy.statuses) = factory.statuses();
        let tasks = factory.start(shutdown);
        (policy, tasks)
    }

    fn register(self: &Arc<Self>, factory: &InformerFactory) -> Result<(), FactoryError> {
        factory.add_handler::<Role>(self.clone())?;
        factory.add_handler::<RoleBinding>(self.clone())?;
        factory.add_cluster_handler::<ClusterRole>(self.clone())?;
        factory.add_cluster_handler::<ClusterRoleBinding>(self.clone())
    }

    /// Local evaluation or reviews, and why (for readiness: allocates).
    pub fn mode(&self) -> PolicyMode {
        if let Some(reason) = lock(&self.unavailable).clone() {
            return PolicyMode::Reviews(format!("RBAC is not followed: {reason}"));
        }
        let statuses = lock(&self.statuses);
        if statuses.is_empty() {
            return PolicyMode::Reviews("RBAC is not followed".into());
        }
        for status in statuses.iter() {
            let state = status.state();
            if !state.synced {
                return PolicyMode::Reviews(format!("the {} watch is not synced", state.kind));
            }
            if state.is_denied() {
                let error = state.last_error.unwrap_or_default();
                return PolicyMode::Reviews(format!(
                    "the {} watch is refused: {error}",
                    state.kind
                ));
            }
        }
        PolicyMode::Local {
            objects: read(&self.index).len(),
        }
    }

    /// Whether the index can answer: all four watches synced, none refused.
    pub fn is_usable(&self) -> bool {
        if lock(&self.unavailable).is_some() {
            return false;
        }
        let statuses = lock(&self.statuses);
        !statuses.is_empty()
            && statuses
                .iter()
                .all(|s| s.is_synced() && (s.is_connected() || !s.state().is_denied()))
    }

    /// How many changes have been applied: what an answer given under this RBAC is tagged
    /// with.
    pub fn generation(&self) -> u64 {
        *self.changes.borrow()
    }

    /// Ticks after each change to the RBAC objects.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Until when the apiserver's authorizer may not have heard of the last change yet
    /// ([`AUTHORIZER_LAG`] after it), if that is still to come: until then, what a
    /// SubjectAccessReview answers may be from before it.
    pub fn unsettled_until(&self) -> Option<Instant> {
        let until = (*lock(&self.changed_at))? + AUTHORIZER_LAG;
        (Instant::now() < until).then_some(until)
    }

    /// Reads the index.
    pub fn with_index<T>(&self, read_index: impl FnOnce(&rbac::Index) -> T) -> T {
        read_index(&read(&self.index))
    }

    fn change(&self, apply: impl FnOnce(&mut rbac::Index)) {
        apply(&mut self.index.write().unwrap_or_else(|e| e.into_inner()));
        *lock(&self.changed_at) = Some(Instant::now());
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A policy that is trusted as it is given, for tests of what uses it.
    pub fn fixed(index: rbac::Index) -> Arc<Policy> {
        let policy = Policy {
            index: RwLock::new(index),
            ..Policy::default()
        };
        let status = Arc::new(InformerStatus::new("RoleBinding"));
        status.relisted(FirstSync {
            listed: Duration::ZERO,
            indexed: Duration::ZERO,
        });
        status.heard(None);
        *lock(&policy.statuses) = vec![status];
        Arc::new(policy)
    }

    /// Replaces the index, as a watch would change it (tests).
    pub fn replace(&self, index: rbac::Index) {
        self.change(|i| *i = index);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn read(index: &RwLock<rbac::Index>) -> std::sync::RwLockReadGuard<'_, rbac::Index> {
    index.read().unwrap_or_else(|e| e.into_inner())
}

fn apply_delta<K>(index: &mut rbac::Index, delta: &Delta<K>)
where
    K: rbac::PolicyObject + Resource,
{
    match delta {
        Delta::Added(object) | Delta::Updated(object) => index.apply(object),
        Delta::Deleted(_) | Delta::Vanished(_) => {
            let key = delta.key();
            index.delete::<K>(&key.namespace, &key.name);
        }
    }
}

impl<K> Handler<K> for Policy
where
    K: rbac::PolicyObject + Resource + Clone + Send + Sync + 'static,
{
    fn on_deltas(&self, deltas: &[Delta<K>]) {
        self.change(|index| deltas.iter().for_each(|d| apply_delta(index, d)));
    }

    fn begin_relist(self: Arc<Self>) -> Box<dyn RelistBatch<K>> {
        Box::new(Relist {
            policy: self,
            deltas: Vec::new(),
        })
    }
}

/// A relist's changes, applied together: RBAC objects are few and small, so they are kept
/// whole until the commit.
struct Relist<K> {
    policy: Arc<Policy>,
    deltas: Vec<Delta<K>>,
}

impl<K> RelistBatch<K> for Relist<K>
where
    K: rbac::PolicyObject + Resource + Clone + Send + Sync + 'static,
{
    fn add(&mut self, delta: &Delta<K>) {
        self.deltas.push(delta.clone());
    }

    // The policy keeps no version: access is decided on what is held now.
    fn commit(self: Box<Self>, _version: &str) {
        let Relist { policy, deltas } = *self;
        policy.change(|index| deltas.iter().for_each(|d| apply_delta(index, d)));
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::rbac::v1::{RoleRef, Subject};

    use super::*;
    use crate::delta::ObjectKey;

    fn binding(namespace: &str) -> RoleBinding {
        let mut binding = RoleBinding::default();
        binding.metadata.namespace = Some(namespace.into());
        binding.metadata.name = Some("b".into());
        binding.role_ref = RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: "view".into(),
        };
        binding.subjects = Some(vec![Subject {
            kind: "User".into(),
            name: "alice".into(),
            ..Default::default()
        }]);
        binding
    }

    #[test]
    fn deltas_and_relists_reach_the_index_and_each_change_ticks() {
        let policy = Arc::new(Policy::default());
        let changes = policy.changes();
        Handler::<RoleBinding>::on_deltas(&*policy, &[Delta::Added(binding("a"))]);
        assert_eq!(policy.with_index(rbac::Index::len), 1);
        assert!(changes.has_changed().unwrap());
        let mut relist = Handler::<RoleBinding>::begin_relist(policy.clone());
        relist.add(&Delta::Added(binding("b")));
        relist.add(&Delta::Vanished(ObjectKey::new("a", "b")));
        assert_eq!(
            policy.with_index(rbac::Index::len),
            1,
            "not before the commit"
        );
        relist.commit("7");
        assert_eq!(policy.with_index(rbac::Index::len), 1);
        Handler::<RoleBinding>::on_deltas(&*policy, &[Delta::Deleted(binding("b"))]);
        assert!(policy.with_index(rbac::Index::is_empty));
        assert!(!policy.is_usable(), "never followed: reviews only");
        assert!(Policy::fixed(rbac::Index::default()).is_usable());
    }
}
