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

#[test]
fn strings_are_escaped_as_encoding_json_escapes_them() {
    let cases: &[(&[u8], &str)] = &[
        (b"plain", r#""plain""#),
        (b"a<b>&c", r#""a\u003cb\u003e\u0026c""#),
        (b"q\"\\", r#""q\"\\""#),
        (b"\n\r\t\x08\x0c\x01\x1f", r#""\n\r\t\b\f\u0001\u001f""#),
        ("\u{2028}\u{2029}é".as_bytes(), r#""\u2028\u2029é""#),
        (b"bad\xffutf8", "\"bad\u{fffd}utf8\""),
    ];
    for (go, json) in cases {
        let mut out = Vec::new();
        json::string(&mut out, go);
        assert_eq!(String::from_utf8(out).unwrap(), *json, "{go:?}");
    }
}
