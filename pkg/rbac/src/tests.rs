//! The apiserver's own cases (rbac_test.go, evaluation_helpers_test.go, subject_locator_test.go)
//! where they apply to resource requests, with mk_role/mk_binding-style builders.

use super::*;

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    PolicyRule {
        api_groups: Some(strings(groups)),
        resources: Some(strings(resources)),
        verbs: strings(verbs),
        ..Default::default()
    }
}

fn named(rule: PolicyRule, names: &[&str]) -> PolicyRule {
    PolicyRule {
        resource_names: Some(names.iter().map(|s| s.to_string()).collect()),
        ..rule
    }
}

fn mk_role(namespace: &str, name: &str, rules: Vec<PolicyRule>) -> Role {
    let mut role = Role::default();
    role.metadata.namespace = Some(namespace.into());
    role.metadata.name = Some(name.into());
    role.rules = Some(rules);
    role
}

fn mk_cluster_role(name: &str, rules: Vec<PolicyRule>) -> ClusterRole {
    let mut role = ClusterRole::default();
    role.metadata.name = Some(name.into());
    role.rules = Some(rules);
    role
}

fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: kind.into(),
        name: name.into(),
    }
}

fn user(name: &str) -> Subject {
    Subject {
        kind: "User".into(),
        name: name.into(),
        ..Default::default()
    }
}

fn group(name: &str) -> Subject {
    Subject {
        kind: "Group".into(),
        name: name.into(),
        ..Default::default()
    }
}

fn service_account(namespace: &str, name: &str) -> Subject {
    Subject {
        kind: "ServiceAccount".into(),
        name: name.into(),
        namespace: (!namespace.is_empty()).then(|| namespace.into()),
        ..Default::default()
    }
}

fn mk_binding(namespace: &str, name: &str, role: RoleRef, subjects: Vec<Subject>) -> RoleBinding {
    let mut binding = RoleBinding::default();
    binding.metadata.namespace = Some(namespace.into());
    binding.metadata.name = Some(name.into());
    binding.role_ref = role;
    binding.subjects = Some(subjects);
    binding
}

fn mk_cluster_binding(name: &str, role: &str, subjects: Vec<Subject>) -> ClusterRoleBinding {
    let mut binding = ClusterRoleBinding::default();
    binding.metadata.name = Some(name.into());
    binding.role_ref = role_ref("ClusterRole", role);
    binding.subjects = Some(subjects);
    binding
}

fn groups(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// The groups a ServiceAccount's token review gives.
fn sa_groups(namespace: &str) -> Vec<String> {
    groups(&[
        "system:serviceaccounts",
        &format!("system:serviceaccounts:{namespace}"),
        "system:authenticated",
    ])
}

fn attrs<'a>(verb: &'a str, group: &'a str, resource: &'a str, ns: &'a str) -> Attributes<'a> {
    Attributes::new(verb, group, resource).in_namespace(ns)
}

/// An index granting `rules` to `subject` by a RoleBinding to a Role in "shop".
fn granted_in_shop(rules: Vec<PolicyRule>, subject: Subject) -> Index {
    let mut index = Index::default();
    index.apply(&mk_role("shop", "r", rules));
    index.apply(&mk_binding(
        "shop",
        "b",
        role_ref("Role", "r"),
        vec![subject],
    ));
    index
}

#[test]
fn verbs_groups_and_resources_match_exactly_or_by_star() {
    let none: Vec<String> = Vec::new();
    let alice = User {
        name: "alice",
        groups: &none,
    };
    let cases: &[(PolicyRule, Attributes, bool)] = &[
        (
            rule(&[""], &["pods"], &["get"]),
            attrs("get", "", "pods", "shop"),
            true,
        ),
        (
            rule(&[""], &["pods"], &["get"]),
            attrs("list", "", "pods", "shop"),
            false,
        ),
        (
            rule(&[""], &["pods"], &["*"]),
            attrs("delete", "", "pods", "shop"),
            true,
        ),
        (
            rule(&["apps"], &["pods"], &["get"]),
            attrs("get", "", "pods", "shop"),
            false,
        ),
        (
            rule(&["*"], &["deployments"], &["get"]),
            attrs("get", "apps", "deployments", "shop"),
            true,
        ),
        (
            rule(&[""], &["*"], &["list"]),
            attrs("list", "", "secrets", "shop"),
            true,
        ),
        (
            rule(&[""], &["pod"], &["list"]),
            attrs("list", "", "pods", "shop"),
            false,
        ),
        // No apiGroups at all matches no group, not every group.
        (
            PolicyRule {
                api_groups: None,
                ..rule(&[], &["pods"], &["get"])
            },
            attrs("get", "", "pods", "shop"),
            false,
        ),
    ];
    for (i, (r, a, expected)) in cases.iter().enumerate() {
        let index = granted_in_shop(vec![r.clone()], user("alice"));
        assert_eq!(
            index.allows(&alice, a),
            *expected,
            "case {i}: {r:?} for {a:?}"
        );
    }
}

#[test]
fn subresources_match_by_their_combined_name_or_star_slash() {
    let none: Vec<String> = Vec::new();
    let alice = User {
        name: "alice",
        groups: &none,
    };
    let sub = |resource, subresource| Attributes {
        subresource,
        ..attrs("get", "", resource, "shop")
    };
    let cases: &[(&[&str], Attributes, bool)] = &[
        (&["pods/log"], sub("pods", "log"), true),
        (&["pods"], sub("pods", "log"), false),
        (&["pods/log"], sub("pods", ""), false),
        (&["pods/status"], sub("pods", "log"), false),
        (&["*/scale"], sub("deployments", "scale"), true),
        (&["*/scale"], sub("deployments", ""), false),
        (&["*/scale"], sub("deployments", "status"), false),
        (&["*"], sub("pods", "log"), true),
        (&["*/*"], sub("pods", "log"), false),
        (&["pods/*"], sub("pods", "log"), false),
        (&["pods/log/x"], sub("pods", "log"), false),
    ];
    for (i, (resources, a, expected)) in cases.iter().enumerate() {
        let index = granted_in_shop(vec![rule(&[""], resources, &["get"])], user("alice"));
        assert_eq!(
            index.allows(&alice, a),
            *expected,
            "case {i}: {resources:?} for {a:?}"
        );
    }
}

#[test]
fn resource_names_allow_those_objects_and_never_a_list() {
    let none: Vec<String> = Vec::new();
    let alice = User {
        name: "alice",
        groups: &none,
    };
    let index = granted_in_shop(
        vec![named(rule(&[""], &["pods"], &["get", "list"]), &["web"])],
        user("alice"),
    );
    let get = |name| Attributes {
        name,
        ..attrs("get", "", "pods", "shop")
    };
    assert!(index.allows(&alice, &get("web")));
    assert!(!index.allows(&alice, &get("db")));
    assert!(!index.allows(&alice, &attrs("list", "", "pods", "shop")));
    assert_eq!(
        index.namespaces_where(&alice, &Attributes::new("list", "", "pods")),
        Namespaces::Only(BTreeSet::new())
    );
}

#[test]
fn subjects_are_users_groups_and_service_accounts() {
    let r = vec![rule(&[""], &["pods"], &["list"])];
    let list = attrs("list", "", "pods", "shop");
    let web = "system:serviceaccount:shop:web";
    let shop_groups = sa_groups("shop");
    let devs = groups(&["devs"]);
    let cases: Vec<(Subject, User, bool)> = vec![
        (
            user("alice"),
            User {
                name: "alice",
                groups: &[],
            },
            true,
        ),
        (
            user("alice"),
            User {
                name: "bob",
                groups: &[],
            },
            false,
        ),
        (
            user("devs"),
            User {
                name: "bob",
                groups: &devs,
            },
            false,
        ),
        (
            group("devs"),
            User {
                name: "bob",
                groups: &devs,
            },
            true,
        ),
        (
            group("devs"),
            User {
                name: "devs",
                groups: &[],
            },
            false,
        ),
        (
            group("system:authenticated"),
            User {
                name: web,
                groups: &shop_groups,
            },
            true,
        ),
        (
            group("system:serviceaccounts"),
            User {
                name: web,
                groups: &shop_groups,
            },
            true,
        ),
        (
            group("system:serviceaccounts:shop"),
            User {
                name: web,
                groups: &shop_groups,
            },
            true,
        ),
        (
            group("system:serviceaccounts:other"),
            User {
                name: web,
                groups: &shop_groups,
            },
            false,
        ),
        (
            service_account("shop", "web"),
            User {
                name: web,
                groups: &[],
            },
            true,
        ),
        (
            service_account("other", "web"),
            User {
                name: web,
                groups: &[],
            },
            false,
        ),
        (
            service_account("shop", "we"),
            User {
                name: web,
                groups: &[],
            },
            false,
        ),
        // A RoleBinding's ServiceAccount without a namespace is in the binding's namespace.
        (
            service_account("", "web"),
            User {
                name: web,
                groups: &[],
            },
            true,
        ),
        (
            service_account("", "web"),
            User {
                name: "system:serviceaccount:other:web",
                groups: &[],
            },
            false,
        ),
        // A username that merely looks like one is matched as the apiserver does: exactly.
        (
            service_account("shop", "web"),
            User {
                name: "system:serviceaccount:shop:web:x",
                groups: &[],
            },
            false,
        ),
        (
            Subject {
                kind: "Robot".into(),
                ..user("alice")
            },
            User {
                name: "alice",
                groups: &[],
            },
            false,
        ),
    ];
    for (i, (subject, u, expected)) in cases.into_iter().enumerate() {
        let index = granted_in_shop(r.clone(), subject.clone());
        assert_eq!(
            index.allows(&u, &list),
            expected,
            "case {i}: {subject:?} for {u:?}"
        );
    }
}

#[test]
fn a_service_account_without_namespace_in_a_cluster_role_binding_matches_no_one() {
    let mut index = Index::default();
    index.apply(&mk_cluster_role(
        "reader",
        vec![rule(&[""], &["pods"], &["list"])],
    ));
    index.apply(&mk_cluster_binding(
        "b",
        "reader",
        vec![service_account("", "web")],
    ));
    let web = User {
        name: "system:serviceaccount:shop:web",
        groups: &[],
    };
    assert!(!index.allows(&web, &attrs("list", "", "pods", "shop")));
}

#[test]
fn a_role_binding_grants_in_its_namespace_and_a_cluster_role_binding_everywhere() {
    let mut index = Index::default();
    index.apply(&mk_cluster_role(
        "reader",
        vec![rule(&[""], &["pods"], &["list"])],
    ));
    index.apply(&mk_binding(
        "shop",
        "b",
        role_ref("ClusterRole", "reader"),
        vec![user("alice")],
    ));
    index.apply(&mk_cluster_binding("all", "reader", vec![user("root")]));
    let alice = User {
        name: "alice",
        groups: &[],
    };
    let root = User {
        name: "root",
        groups: &[],
    };
    let list = Attributes::new("list", "", "pods");
    assert!(index.allows(&alice, &list.in_namespace("shop")));
    assert!(!index.allows(&alice, &list.in_namespace("bank")));
    assert!(
        !index.allows(&alice, &list),
        "across namespaces needs a ClusterRoleBinding"
    );
    assert!(index.allows(&root, &list));
    assert!(index.allows(&root, &list.in_namespace("bank")));
    assert_eq!(
        index.namespaces_where(&alice, &list),
        Namespaces::Only(BTreeSet::from(["shop".to_string()]))
    );
    assert_eq!(index.namespaces_where(&root, &list), Namespaces::All);
}

#[test]
fn a_role_is_read_in_the_binding_namespace_only() {
    let mut index = Index::default();
    index.apply(&mk_role(
        "bank",
        "r",
        vec![rule(&[""], &["pods"], &["list"])],
    ));
    // Names a Role "r", but in shop, where there is none.
    index.apply(&mk_binding(
        "shop",
        "b",
        role_ref("Role", "r"),
        vec![user("alice")],
    ));
    let alice = User {
        name: "alice",
        groups: &[],
    };
    assert!(!index.allows(&alice, &attrs("list", "", "pods", "shop")));
    assert!(!index.allows(&alice, &attrs("list", "", "pods", "bank")));
    // A ClusterRoleBinding cannot name a Role; an unknown roleRef kind grants nothing.
    let mut crb = mk_cluster_binding("c", "r", vec![user("alice")]);
    crb.role_ref = role_ref("Role", "r");
    index.apply(&crb);
    index.apply(&mk_binding(
        "bank",
        "x",
        role_ref("Thing", "r"),
        vec![user("alice")],
    ));
    assert!(!index.allows(&alice, &attrs("list", "", "pods", "bank")));
}

#[test]
fn bindings_and_roles_take_effect_in_any_order_and_go_when_deleted() {
    let mut index = Index::default();
    let alice = User {
        name: "alice",
        groups: &[],
    };
    let list = attrs("list", "", "pods", "shop");
    index.apply(&mk_binding(
        "shop",
        "b",
        role_ref("Role", "r"),
        vec![user("alice")],
    ));
    assert!(
        !index.allows(&alice, &list),
        "a binding to a missing role grants nothing"
    );
    index.apply(&mk_role(
        "shop",
        "r",
        vec![rule(&[""], &["pods"], &["list"])],
    ));
    assert!(index.allows(&alice, &list), "the role arrived later");
    // A role's rules replaced.
    index.apply(&mk_role(
        "shop",
        "r",
        vec![rule(&[""], &["pods"], &["get"])],
    ));
    assert!(!index.allows(&alice, &list));
    index.apply(&mk_role(
        "shop",
        "r",
        vec![rule(&[""], &["pods"], &["list"])],
    ));
    index.delete::<RoleBinding>("shop", "b");
    assert!(!index.allows(&alice, &list), "the binding is gone");
    assert_eq!(index.len(), 1);
    index.delete::<Role>("shop", "r");
    assert!(index.is_empty());
    // Deleting what is not there changes nothing.
    index.delete::<RoleBinding>("nowhere", "b");
    index.delete::<ClusterRole>("", "nothing");
}

#[test]
fn a_reset_replaces_one_kind_only() {
    let mut index = Index::default();
    index.apply(&mk_cluster_role(
        "reader",
        vec![rule(&[""], &["pods"], &["list"])],
    ));
    index.apply(&mk_binding(
        "shop",
        "b",
        role_ref("ClusterRole", "reader"),
        vec![user("alice")],
    ));
    index.apply(&mk_binding(
        "bank",
        "b",
        role_ref("ClusterRole", "reader"),
        vec![user("alice")],
    ));
    let alice = User {
        name: "alice",
        groups: &[],
    };
    let list = Attributes::new("list", "", "pods");
    let bank = mk_binding(
        "bank",
        "b",
        role_ref("ClusterRole", "reader"),
        vec![user("alice")],
    );
    index.reset([&bank]);
    assert_eq!(
        index.namespaces_where(&alice, &list),
        Namespaces::Only(BTreeSet::from(["bank".to_string()]))
    );
    index.reset::<ClusterRole>([]);
    assert_eq!(
        index.namespaces_where(&alice, &list),
        Namespaces::Only(BTreeSet::new())
    );
    assert_eq!(index.len(), 1, "the binding stays");
}

#[test]
fn an_aggregated_cluster_role_grants_the_rules_the_controller_wrote() {
    use k8s_openapi::api::rbac::v1::AggregationRule;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    let aggregate = |rules: Vec<PolicyRule>| {
        let mut role = mk_cluster_role("view-all", rules);
        role.aggregation_rule = Some(AggregationRule {
            cluster_role_selectors: Some(vec![LabelSelector {
                match_labels: Some([("agg".to_string(), "view".to_string())].into()),
                ..Default::default()
            }]),
        });
        role
    };
    let mut part = mk_cluster_role("view-pods", vec![rule(&[""], &["pods"], &["list"])]);
    part.metadata.labels = Some([("agg".to_string(), "view".to_string())].into());
    let mut index = Index::default();
    index.apply(&part);
    index.apply(&aggregate(Vec::new()));
    index.apply(&mk_cluster_binding("b", "view-all", vec![user("alice")]));
    let alice = User {
        name: "alice",
        groups: &[],
    };
    let list = Attributes::new("list", "", "pods");
    assert!(
        !index.allows(&alice, &list),
        "as for the apiserver, nothing until the controller writes the rules"
    );
    index.apply(&aggregate(vec![rule(&[""], &["pods"], &["list"])]));
    assert!(index.allows(&alice, &list));
}

#[test]
fn namespaces_where_is_the_union_of_the_bindings_that_allow() {
    let mut index = Index::default();
    index.apply(&mk_cluster_role(
        "reader",
        vec![rule(&[""], &["pods"], &["list", "watch"])],
    ));
    index.apply(&mk_cluster_role(
        "getter",
        vec![rule(&[""], &["pods"], &["get"])],
    ));
    index.apply(&mk_role(
        "c",
        "lister",
        vec![rule(&[""], &["*"], &["list"])],
    ));
    let web = "system:serviceaccount:a:web";
    let g = sa_groups("a");
    let who = User {
        name: web,
        groups: &g,
    };
    index.apply(&mk_binding(
        "a",
        "own",
        role_ref("ClusterRole", "reader"),
        vec![service_account("", "web")],
    ));
    index.apply(&mk_binding(
        "b",
        "grp",
        role_ref("ClusterRole", "reader"),
        vec![group("system:serviceaccounts:a")],
    ));
    index.apply(&mk_binding(
        "c",
        "role",
        role_ref("Role", "lister"),
        vec![group("system:authenticated")],
    ));
    index.apply(&mk_binding(
        "d",
        "get-only",
        role_ref("ClusterRole", "getter"),
        vec![group("system:authenticated")],
    ));
    index.apply(&mk_binding(
        "e",
        "other",
        role_ref("ClusterRole", "reader"),
        vec![user("alice")],
    ));
    let only = |names: &[&str]| Namespaces::Only(names.iter().map(|s| s.to_string()).collect());
    assert_eq!(
        index.namespaces_where(&who, &Attributes::new("list", "", "pods")),
        only(&["a", "b", "c"])
    );
    assert_eq!(
        index.namespaces_where(&who, &Attributes::new("watch", "", "pods")),
        only(&["a", "b"])
    );
    // The namespace asked for is ignored: this is where, not whether.
    assert_eq!(
        index.namespaces_where(&who, &attrs("list", "", "pods", "zzz")),
        only(&["a", "b", "c"])
    );
    assert!(only(&["a"]).contains("a") && !only(&["a"]).contains("b"));
    assert!(Namespaces::All.contains("anything"));
}
