//! Kubernetes RBAC evaluated in memory, rule for rule as the apiserver's RBAC authorizer
//! (`plugin/pkg/auth/authorizer/rbac` and `pkg/apis/rbac/v1/evaluation_helpers.go`) does it:
//! an [`Index`] of Roles, ClusterRoles, RoleBindings and ClusterRoleBindings, kept up to date
//! with [`Index::apply`], [`Index::delete`] and [`Index::reset`] from a watch, answers whether
//! a user may do something ([`Index::allows`]) and in which namespaces
//! ([`Index::namespaces_where`], the access sets of Rancher's steve).
//!
//! Aggregated ClusterRoles are read as the apiserver reads them: their `rules`, which the
//! clusterrole-aggregation controller fills from the ClusterRoles its selectors match. The
//! `aggregationRule` itself grants nothing, so this index never grants what the apiserver
//! does not yet grant (before the controller has written the rules, or when it is not
//! running); the controller's write reaches the index through the same watch.
//!
//! The crate knows nothing of clients: it takes k8s-openapi objects and plain strings.
//!
//! ```
//! use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
//! use rbac::{Attributes, Index, User};
//!
//! let mut index = Index::default();
//! let mut role = ClusterRole::default();
//! role.metadata.name = Some("pod-reader".into());
//! role.rules = Some(vec![PolicyRule {
//!     api_groups: Some(vec!["".into()]),
//!     resources: Some(vec!["pods".into()]),
//!     verbs: vec!["list".into()],
//!     ..Default::default()
//! }]);
//! index.apply(&role);
//! let mut binding = ClusterRoleBinding::default();
//! binding.metadata.name = Some("devs-read-pods".into());
//! binding.role_ref = RoleRef { api_group: "rbac.authorization.k8s.io".into(), kind: "ClusterRole".into(), name: "pod-reader".into() };
//! binding.subjects = Some(vec![Subject { kind: "Group".into(), name: "devs".into(), ..Default::default() }]);
//! index.apply(&binding);
//!
//! let groups = ["devs".to_string()];
//! let alice = User { name: "alice", groups: &groups };
//! assert!(index.allows(&alice, &Attributes::new("list", "", "pods")));
//! assert!(!index.allows(&alice, &Attributes::new("delete", "", "pods")));
//! ```

#![warn(missing_docs)]

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};

/// Who asks, as the TokenReview named them: the groups exactly as it gave them (with
/// `system:authenticated`, `system:serviceaccounts`, `system:serviceaccounts:<ns>` when it
/// gave them), since a SubjectAccessReview for the same user would carry the same.
#[derive(Clone, Copy, Debug)]
pub struct User<'a> {
    /// Such as `alice` or `system:serviceaccount:shop:web`.
    pub name: &'a str,
    /// Such as `system:authenticated`.
    pub groups: &'a [String],
}

/// What a request does, as the authorizer's resource attributes name it. Empty strings are
/// "none": the core group, no subresource, all namespaces (or a cluster-scoped resource), no
/// object name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attributes<'a> {
    /// `get`, `list`, `watch`, `create`, ...
    pub verb: &'a str,
    /// `""` for the core group, `apps`, ...
    pub group: &'a str,
    /// The plural resource, such as `pods`.
    pub resource: &'a str,
    /// Such as `log` or `scale`.
    pub subresource: &'a str,
    /// Empty: in all namespaces, or a cluster-scoped resource.
    pub namespace: &'a str,
    /// Empty: no one object (a list, a create).
    pub name: &'a str,
}

impl<'a> Attributes<'a> {
    /// A verb on a resource in every namespace, no subresource, no name.
    pub fn new(verb: &'a str, group: &'a str, resource: &'a str) -> Self {
        Attributes {
            verb,
            group,
            resource,
            subresource: "",
            namespace: "",
            name: "",
        }
    }

    /// The same in `namespace`.
    pub fn in_namespace(self, namespace: &'a str) -> Self {
        Attributes { namespace, ..self }
    }
}

/// Where a user may do something.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Namespaces {
    /// Cluster-wide (a ClusterRoleBinding grants it), so in every namespace, present or future.
    All,
    /// In these namespaces only (RoleBindings grant it there); possibly none.
    Only(BTreeSet<String>),
}

impl Namespaces {
    /// Whether `namespace` is among them.
    pub fn contains(&self, namespace: &str) -> bool {
        match self {
            Namespaces::All => true,
            Namespaces::Only(set) => set.contains(namespace),
        }
    }
}

/// A PolicyRule, as the evaluation reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rule {
    verbs: Vec<String>,
    api_groups: Vec<String>,
    resources: Vec<String>,
    resource_names: Vec<String>,
}

impl From<&PolicyRule> for Rule {
    fn from(rule: &PolicyRule) -> Self {
        let list = |v: &Option<Vec<String>>| v.clone().unwrap_or_default();
        Rule {
            verbs: rule.verbs.clone(),
            api_groups: list(&rule.api_groups),
            resources: list(&rule.resources),
            resource_names: list(&rule.resource_names),
        }
    }
}

fn rules_of(rules: &Option<Vec<PolicyRule>>) -> Vec<Rule> {
    rules.iter().flatten().map(Rule::from).collect()
}

impl Rule {
    /// `RuleAllows` for a resource request.
    fn allows(&self, a: &Attributes<'_>) -> bool {
        self.verbs.iter().any(|v| v == "*" || v == a.verb)
            && self.api_groups.iter().any(|g| g == "*" || g == a.group)
            && self.matches_resource(a.resource, a.subresource)
            && (self.resource_names.is_empty() || self.resource_names.iter().any(|n| n == a.name))
    }

    /// `ResourceMatches`: `*`, the resource with its subresource (`pods/log`), or
    /// `*/subresource` for that subresource of any resource.
    fn matches_resource(&self, resource: &str, subresource: &str) -> bool {
        self.resources.iter().any(|r| {
            let combined = if subresource.is_empty() {
                r == resource
            } else {
                r.strip_prefix(resource).and_then(|r| r.strip_prefix('/')) == Some(subresource)
            };
            r == "*"
                || combined
                || (!subresource.is_empty() && r.strip_prefix("*/") == Some(subresource))
        })
    }
}

/// The role a binding grants.
#[derive(Clone, Debug, PartialEq, Eq)]
enum RoleName {
    /// A Role in the binding's namespace.
    Role(String),
    ClusterRole(String),
}

#[derive(Clone, Debug, PartialEq)]
struct Binding {
    subjects: Vec<Subject>,
    /// None: a roleRef of a kind the apiserver does not resolve, which grants nothing.
    role: Option<RoleName>,
}

impl Binding {
    fn new(role_ref: &RoleRef, subjects: &Option<Vec<Subject>>) -> Self {
        let role = match role_ref.kind.as_str() {
            "Role" => Some(RoleName::Role(role_ref.name.clone())),
            "ClusterRole" => Some(RoleName::ClusterRole(role_ref.name.clone())),
            _ => None,
        };
        Binding {
            subjects: subjects.clone().unwrap_or_default(),
            role,
        }
    }

    /// `appliesTo`: whether any subject is the user; `namespace` is the binding's ("" for a
    /// ClusterRoleBinding), which a ServiceAccount subject without one lives in.
    fn applies_to(&self, user: &User<'_>, namespace: &str) -> bool {
        self.subjects.iter().any(|s| match s.kind.as_str() {
            "User" => s.name == user.name,
            "Group" => user.groups.contains(&s.name),
            "ServiceAccount" => {
                let sa_namespace = match s.namespace.as_deref() {
                    Some(ns) if !ns.is_empty() => ns,
                    _ => namespace,
                };
                !sa_namespace.is_empty() && is_service_account(user.name, sa_namespace, &s.name)
            }
            _ => false,
        })
    }
}

/// `serviceaccount.MatchesUsername`: `system:serviceaccount:<namespace>:<name>`.
fn is_service_account(username: &str, namespace: &str, name: &str) -> bool {
    username
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.strip_prefix(namespace))
        .and_then(|rest| rest.strip_prefix(':'))
        == Some(name)
}

/// The four RBAC kinds as the index holds them.
#[derive(Clone, Debug, Default)]
pub struct Index {
    roles: HashMap<(String, String), Vec<Rule>>,
    cluster_roles: HashMap<String, Vec<Rule>>,
    /// namespace → name → binding: a namespace's bindings are read together.
    role_bindings: BTreeMap<String, HashMap<String, Binding>>,
    cluster_role_bindings: HashMap<String, Binding>,
}

/// One of the four RBAC kinds; [`Index`] takes any of them.
pub trait PolicyObject: private::Sealed {
    /// Adds or replaces the object.
    fn apply_to(&self, index: &mut Index);
    /// Removes the object of this kind named so (`namespace` empty for cluster-scoped kinds).
    fn delete_from(index: &mut Index, namespace: &str, name: &str);
    /// Removes every object of this kind.
    fn clear(index: &mut Index);
}

mod private {
    pub trait Sealed {}
    impl Sealed for super::Role {}
    impl Sealed for super::ClusterRole {}
    impl Sealed for super::RoleBinding {}
    impl Sealed for super::ClusterRoleBinding {}
}

fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (String, String) {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

impl PolicyObject for Role {
    fn apply_to(&self, index: &mut Index) {
        index
            .roles
            .insert(name_of(&self.metadata), rules_of(&self.rules));
    }
    fn delete_from(index: &mut Index, namespace: &str, name: &str) {
        index
            .roles
            .remove(&(namespace.to_string(), name.to_string()));
    }
    fn clear(index: &mut Index) {
        index.roles.clear();
    }
}

impl PolicyObject for ClusterRole {
    fn apply_to(&self, index: &mut Index) {
        let (_, name) = name_of(&self.metadata);
        index.cluster_roles.insert(name, rules_of(&self.rules));
    }
    fn delete_from(index: &mut Index, _: &str, name: &str) {
        index.cluster_roles.remove(name);
    }
    fn clear(index: &mut Index) {
        index.cluster_roles.clear();
    }
}

impl PolicyObject for RoleBinding {
    fn apply_to(&self, index: &mut Index) {
        let (namespace, name) = name_of(&self.metadata);
        index
            .role_bindings
            .entry(namespace)
            .or_default()
            .insert(name, Binding::new(&self.role_ref, &self.subjects));
    }
    fn delete_from(index: &mut Index, namespace: &str, name: &str) {
        if let Some(bindings) = index.role_bindings.get_mut(namespace) {
            bindings.remove(name);
            if bindings.is_empty() {
                index.role_bindings.remove(namespace);
            }
        }
    }
    fn clear(index: &mut Index) {
        index.role_bindings.clear();
    }
}

impl PolicyObject for ClusterRoleBinding {
    fn apply_to(&self, index: &mut Index) {
        let (_, name) = name_of(&self.metadata);
        index
            .cluster_role_bindings
            .insert(name, Binding::new(&self.role_ref, &self.subjects));
    }
    fn delete_from(index: &mut Index, _: &str, name: &str) {
        index.cluster_role_bindings.remove(name);
    }
    fn clear(index: &mut Index) {
        index.cluster_role_bindings.clear();
    }
}

impl Index {
    /// Adds or replaces a Role, ClusterRole, RoleBinding or ClusterRoleBinding.
    pub fn apply<K: PolicyObject>(&mut self, object: &K) {
        object.apply_to(self);
    }

    /// Removes the `K` named so; `namespace` is empty for ClusterRoles and ClusterRoleBindings.
    pub fn delete<K: PolicyObject>(&mut self, namespace: &str, name: &str) {
        K::delete_from(self, namespace, name);
    }

    /// Replaces every `K` with `objects` (a relist).
    pub fn reset<'a, K: PolicyObject + 'a>(&mut self, objects: impl IntoIterator<Item = &'a K>) {
        K::clear(self);
        for object in objects {
            object.apply_to(self);
        }
    }

    /// Roles, ClusterRoles, RoleBindings and ClusterRoleBindings held.
    pub fn len(&self) -> usize {
        self.roles.len()
            + self.cluster_roles.len()
            + self.role_bindings.values().map(HashMap::len).sum::<usize>()
            + self.cluster_role_bindings.len()
    }

    /// Whether the index holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A role's rules; a ClusterRoleBinding's Role (namespace "") is none, as no Role lives
    /// outside a namespace.
    fn rules(&self, role: &RoleName, namespace: &str) -> &[Rule] {
        let rules = match role {
            RoleName::Role(name) => self.roles.get(&(namespace.to_string(), name.clone())),
            RoleName::ClusterRole(name) => self.cluster_roles.get(name),
        };
        rules.map_or(&[], Vec::as_slice)
    }

    /// Whether `binding` (in `namespace`, "" for a ClusterRoleBinding) grants `a` to `user`.
    fn grants(&self, binding: &Binding, namespace: &str, user: &User<'_>, a: &Attributes) -> bool {
        let Some(role) = &binding.role else {
            return false;
        };
        binding.applies_to(user, namespace)
            && self.rules(role, namespace).iter().any(|r| r.allows(a))
    }

    fn cluster_wide(&self, user: &User<'_>, a: &Attributes<'_>) -> bool {
        self.cluster_role_bindings
            .values()
            .any(|b| self.grants(b, "", user, a))
    }

    fn in_namespace(&self, user: &User<'_>, a: &Attributes<'_>, namespace: &str) -> bool {
        self.role_bindings.get(namespace).is_some_and(|bindings| {
            bindings
                .values()
                .any(|b| self.grants(b, namespace, user, a))
        })
    }

    /// Whether RBAC allows `user` to do `a`: a ClusterRoleBinding's role allows it, or, in a
    /// namespace, a RoleBinding's there does (the authorizer's `VisitRulesFor`).
    pub fn allows(&self, user: &User<'_>, a: &Attributes<'_>) -> bool {
        self.cluster_wide(user, a)
            || (!a.namespace.is_empty() && self.in_namespace(user, a, a.namespace))
    }

    /// Where `user` may do `a` (its namespace ignored): everywhere if a ClusterRoleBinding
    /// allows it, else the namespaces whose RoleBindings do. One pass over the bindings,
    /// however many namespaces there are.
    pub fn namespaces_where(&self, user: &User<'_>, a: &Attributes<'_>) -> Namespaces {
        let everywhere = Attributes {
            namespace: "",
            ..*a
        };
        if self.cluster_wide(user, &everywhere) {
            return Namespaces::All;
        }
        let namespaces = self
            .role_bindings
            .keys()
            .filter(|ns| {
                let here = Attributes {
                    namespace: ns.as_str(),
                    ..*a
                };
                self.in_namespace(user, &here, ns)
            })
            .cloned()
            .collect();
        Namespaces::Only(namespaces)
    }
}

#[cfg(test)]
mod tests;
