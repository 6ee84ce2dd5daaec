use super::*;

#[test]
fn the_schema_has_every_kind_served_by_default() {
    for (group, version, kind) in [
        ("", "v1", "Pod"),
        ("", "v1", "ConfigMap"),
        ("", "v1", "Secret"),
        ("apps", "v1", "Deployment"),
        ("apps", "v1", "ReplicaSet"),
        ("batch", "v1", "Job"),
        ("networking.k8s.io", "v1", "Ingress"),
        ("events.k8s.io", "v1", "Event"),
    ] {
        assert!(
            ListKind::find(group, version, kind).is_some(),
            "{group}/{version} {kind}"
        );
    }
    assert_eq!(ListKind::find("example.com", "v1", "Widget"), None);
}
