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

#[test]
fn times_are_written_as_metav1_writes_them() {
    let cases = [
        (
            (0, 0),
            "1970-01-01T00:00:00Z",
            "1970-01-01T00:00:00.000000Z",
        ),
        (
            (1_764_583_200, 123_456_789),
            "2025-12-01T10:00:00Z",
            "2025-12-01T10:00:00.123456Z",
        ),
        // Before 1970 the fraction still counts up from the second.
        (
            (-1, 500_000_000),
            "1969-12-31T23:59:59Z",
            "1969-12-31T23:59:59.500000Z",
        ),
        (
            (253_402_207_199, 999_999_000),
            "9999-12-30T21:59:59Z",
            "9999-12-30T21:59:59.999999Z",
        ),
        (
            (-62_000_000_000, 0),
            "0005-04-19T09:46:40Z",
            "0005-04-19T09:46:40.000000Z",
        ),
    ];
    for ((seconds, nanos), time, microtime) in cases {
        let at = jiff::Timestamp::new(seconds, nanos).unwrap();
        for (micro, want) in [(false, time), (true, microtime)] {
            let mut out = Vec::new();
            json::rfc3339(&mut out, at, micro);
            assert_eq!(String::from_utf8(out).unwrap(), format!("\"{want}\""));
        }
    }
}

#[test]
fn an_item_can_be_written_without_its_managed_fields() {
    use testing::message;
    let kind = ListKind::find("", "v1", "Pod").unwrap();
    let entry = message(&[(1, b"kubectl"), (2, b"Apply")]);
    let mut metadata = message(&[(1, b"web"), (3, b"shop")]);
    metadata.extend(message(&[(17, &entry), (17, &entry)]));
    let pod = message(&[(1, &metadata), (2, b"")]);
    let whole: serde_json::Value =
        serde_json::from_slice(&kind.object_json(&pod).unwrap()).unwrap();
    let mut without: serde_json::Value =
        serde_json::from_slice(&kind.object_json_without_managed_fields(&pod).unwrap()).unwrap();
    assert_eq!(whole["metadata"]["managedFields"][1]["manager"], "kubectl");
    assert_eq!(without["metadata"].get("managedFields"), None);
    without["metadata"]["managedFields"] = whole["metadata"]["managedFields"].clone();
    assert_eq!(without, whole, "nothing else differs");

    let mut list = message(&[(1, b""), (2, &pod), (2, &pod)]);
    list = testing::enveloped("v1", "PodList", &list);
    let mut items = Vec::new();
    let mut reader = ListReader::new(kind, usize::MAX).without_managed_fields();
    reader.feed(&list, |item| items.push(item)).unwrap();
    reader.finish().unwrap();
    assert_eq!(items.len(), 2);
    for item in items {
        let item: serde_json::Value = serde_json::from_slice(&item).unwrap();
        assert_eq!(item["metadata"].get("managedFields"), None);
        assert_eq!(item["metadata"]["name"], "web");
    }
}
