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

#[test]
fn a_status_is_written_as_the_apiservers_json() {
    use testing::{enveloped, message, push_varint};
    let cause = message(&[
        (1, b"FieldValueInvalid"),
        (2, b"must be <= 10"),
        (3, b"spec.x"),
    ]);
    let details = message(&[(1, b"web"), (3, b"pods"), (4, &cause)]);
    let mut status = message(&[
        (1, b""),
        (2, b"Failure"),
        (3, b"pods \"web\" is forbidden"),
        (4, b"Forbidden"),
        (5, &details),
    ]);
    push_varint(&mut status, 6 << 3);
    push_varint(&mut status, 403);
    let answer = enveloped("v1", "Status", &status);
    let json: serde_json::Value = serde_json::from_slice(&status_json(&answer).unwrap()).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "metadata": {},
            "status": "Failure",
            "message": "pods \"web\" is forbidden",
            "reason": "Forbidden",
            "details": {
                "name": "web",
                "kind": "pods",
                "causes": [{"reason": "FieldValueInvalid", "message": "must be <= 10", "field": "spec.x"}],
            },
            "code": 403,
        })
    );
    assert_eq!(status_json(b"{}"), Err(Error::NotProtobuf));
}

#[test]
fn an_object_a_client_sends_is_written_as_the_json_it_would_have_sent() {
    use testing::{enveloped, message};
    let kind = ObjectKind::find("authorization.k8s.io", "v1", "SelfSubjectAccessReview")
        .expect("the schema has the reviews k9s sends");
    let attributes = message(&[(2, b"list"), (5, b"pods")]);
    let review = message(&[(2, &message(&[(1, &attributes)]))]);
    let sent = enveloped(
        "authorization.k8s.io/v1",
        "SelfSubjectAccessReview",
        &review,
    );
    let json: serde_json::Value =
        serde_json::from_slice(&kind.enveloped_json(&sent).unwrap()).unwrap();
    assert_eq!(
        json["spec"],
        serde_json::json!({"resourceAttributes": {"verb": "list", "resource": "pods"}})
    );
    assert_eq!(kind.enveloped_json(b"{}"), Err(Error::NotProtobuf));
    assert_eq!(
        ObjectKind::find("", "v1", "Pod"),
        None,
        "lists' items are ListKind's"
    );
}
