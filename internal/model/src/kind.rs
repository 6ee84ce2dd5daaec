//! The kinds k8sailor serves, as a type: every name a kind goes by (in the API, in RBAC, in
//! errors and metrics) is read from here, never written as a string elsewhere.

/// A kind of Kubernetes object k8sailor knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Deployment,
    Pod,
    ReplicaSet,
    Service,
    Ingress,
    Namespace,
}

impl Kind {
    /// Every kind, in the order probes and metrics list them.
    pub const ALL: &'static [Kind] = &[
        Kind::Deployment,
        Kind::Pod,
        Kind::ReplicaSet,
        Kind::Service,
        Kind::Ingress,
        Kind::Namespace,
    ];

    /// As the API names it (`kind`, `ownerReferences[].kind`).
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Deployment => "Deployment",
            Kind::Pod => "Pod",
            Kind::ReplicaSet => "ReplicaSet",
            Kind::Service => "Service",
            Kind::Ingress => "Ingress",
            Kind::Namespace => "Namespace",
        }
    }

    /// The API group (empty for the core group).
    pub const fn group(self) -> &'static str {
        match self {
            Kind::Deployment | Kind::ReplicaSet => "apps",
            Kind::Pod | Kind::Service | Kind::Namespace => "",
            Kind::Ingress => "networking.k8s.io",
        }
    }

    /// The resource, as RBAC rules and URLs name it.
    pub const fn resource(self) -> &'static str {
        match self {
            Kind::Deployment => "deployments",
            Kind::Pod => "pods",
            Kind::ReplicaSet => "replicasets",
            Kind::Service => "services",
            Kind::Ingress => "ingresses",
            Kind::Namespace => "namespaces",
        }
    }

    /// Whether its objects live in a namespace; a Namespace's own rights are those in it.
    pub const fn is_namespaced(self) -> bool {
        !matches!(self, Kind::Namespace)
    }

    /// The kind an owner reference points at, when it is one of ours: the group of its
    /// apiVersion and its kind must both match (a custom resource may reuse a name).
    pub fn of_reference(api_version: &str, kind: &str) -> Option<Kind> {
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        Kind::ALL
            .iter()
            .copied()
            .find(|k| k.name() == kind && k.group() == group)
    }
}

/// Lowercase, as errors name it: `deployment "web" not found`.
impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name().to_lowercase())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_reference_is_ours_only_in_our_group() {
        assert_eq!(
            Kind::of_reference("apps/v1", "ReplicaSet"),
            Some(Kind::ReplicaSet)
        );
        assert_eq!(Kind::of_reference("v1", "Pod"), Some(Kind::Pod));
        assert_eq!(Kind::of_reference("example.com/v1", "ReplicaSet"), None);
        assert_eq!(Kind::of_reference("apps/v1", "StatefulSet"), None);
    }

    #[test]
    fn each_kind_is_named_consistently() {
        for kind in Kind::ALL {
            assert_eq!(kind.to_string(), kind.name().to_lowercase());
            assert!(kind.resource().starts_with(&kind.to_string()));
        }
    }
}
