//! The drop-in promise without the original's code: every request the original web client
//! makes (routes, query parameters, bodies), replayed against k8sailor with the real
//! apiserver behind it, from another loopback origin as the client runs, and each answer
//! checked for the envelope and for the fields, with their types, that the client reads
//! (the wire contract in REFERENCE.md sections 1 and 7).

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::PostParams;
use serde_json::{Value, json};

use crate::support::{SOON, Server, TestNamespace, eventually, pod};

/// The client's page: another port of a loopback host than the API's.
const ORIGIN: &str = "http://localhost:8080";

/// Checks `value` against `shape`: an object's keys must all be present with their shapes
/// (other keys may be there too); `["T"]` is an array of T; leaves name a type: `string`,
/// `integer`, `boolean`, `rfc3339` (a string), `labels` (an object of strings).
fn conforms(value: &Value, shape: &Value, at: &str) {
    match shape {
        Value::Object(fields) => {
            let object = value
                .as_object()
                .unwrap_or_else(|| panic!("{at}: not an object: {value}"));
            for (key, inner) in fields {
                let field = object
                    .get(key)
                    .unwrap_or_else(|| panic!("{at}.{key} missing from {value}"));
                conforms(field, inner, &format!("{at}.{key}"));
            }
        }
        Value::Array(items) => {
            let array = value
                .as_array()
                .unwrap_or_else(|| panic!("{at}: not an array: {value}"));
            for (i, item) in array.iter().enumerate() {
                conforms(item, &items[0], &format!("{at}[{i}]"));
            }
        }
        Value::String(kind) => {
            let ok = match kind.as_str() {
                "string" => value.is_string(),
                "integer" => value.is_i64(),
                "boolean" => value.is_boolean(),
                "rfc3339" => value
                    .as_str()
                    .is_some_and(|s| s.parse::<jiff::Timestamp>().is_ok()),
                "labels" => value
                    .as_object()
                    .is_some_and(|m| m.values().all(Value::is_string)),
                other => panic!("unknown type {other} in a shape"),
            };
            assert!(ok, "{at}: not a {kind}: {value}");
        }
        other => panic!("bad shape {other}"),
    }
}

/// The fields the client reads have exactly these values (others may be there too).
fn assert_fields(value: &Value, expected: Value) {
    let read: serde_json::Map<String, Value> = expected
        .as_object()
        .unwrap()
        .keys()
        .map(|k| (k.clone(), value[k].clone()))
        .collect();
    assert_eq!(Value::Object(read), expected, "in {value}");
}

fn deployment_shape() -> Value {
    json!({
        "name": "string", "namespace": "string", "replicas": "integer", "images": ["string"],
        "status": {"replicas": "integer", "availableReplicas": "integer",
            "unavailableReplicas": "integer"},
        "labelSelector": "labels"
    })
}

fn pod_shape() -> Value {
    json!({
        "name": "string", "namespace": "string", "images": ["string"], "nodeName": "string",
        "nodeIp": "string", "podIp": "string", "createTime": "rfc3339",
        "status": {"phase": "string", "reason": "string", "message": "string"},
        "labels": "labels"
    })
}

/// A request as the client's page sends it (with its Origin): status, the envelope, and the
/// CORS header it needs to read the answer.
async fn call(server: &Server, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut req = server
        .http
        .request(method, format!("{}{path}", server.base))
        .header("Origin", ORIGIN);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    assert_eq!(
        res.headers()
            .get("access-control-allow-origin")
            .map(|v| v.to_str().unwrap()),
        Some(ORIGIN),
        "{path}: the page may read the answer"
    );
    let text = res.text().await.unwrap();
    let answer: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text}"));
    (status, answer)
}

/// A success: `{"code": 0, "data": ..., "error": ""}`; its data.
async fn ok(server: &Server, method: &str, path: &str, body: Option<Value>) -> Value {
    let (status, answer) = call(server, method, path, body).await;
    assert_eq!(status, 200, "{method} {path}: {answer}");
    // Lists add their `metadata` (resourceVersion, continue), which the client ignores.
    let mut keys: Vec<&str> = answer
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.retain(|k| !(*k == "metadata" && answer["data"].is_array()));
    assert_eq!(keys, ["code", "data", "error"], "{answer}");
    assert_eq!(
        (&answer["code"], &answer["error"]),
        (&json!(0), &json!("")),
        "{answer}"
    );
    answer["data"].clone()
}

/// The preflight a browser sends before a write from the client's page.
async fn preflight(server: &Server, method: &str, path: &str) {
    let (status, headers, body) = server
        .request(
            "OPTIONS",
            &format!("/k8sailor/v0{path}"),
            &[
                ("Origin", ORIGIN),
                ("Access-Control-Request-Method", method),
                ("Access-Control-Request-Headers", "content-type"),
            ],
        )
        .await;
    // A browser takes any 2xx as a preflight's success.
    assert!(
        (200..300).contains(&status),
        "preflight {method} {path}: {status} {body}"
    );
    let header = |name: &str| {
        headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_ascii_lowercase())
            .unwrap_or_default()
    };
    assert_eq!(header("access-control-allow-origin"), ORIGIN);
    assert_eq!(header("access-control-allow-credentials"), "true");
    assert!(
        header("access-control-allow-methods").contains(&method.to_ascii_lowercase()),
        "{headers:?}"
    );
    assert!(
        header("access-control-allow-headers").contains("content-type"),
        "{headers:?}"
    );
}

#[tokio::test]
async fn every_request_of_the_original_client_gets_what_it_reads() {
    let ns = TestNamespace::new("contract").await;
    let server = Server::start(&[]);
    let q = format!("namespace={}", ns.name);

    let (status, _, pong) = server.request("GET", "/k8sailor/v0/ping", &[]).await;
    assert_eq!((status, pong.as_str()), (200, "pong"));

    // Create, as the client's form sends it.
    preflight(&server, "POST", &format!("/deployments/web?{q}")).await;
    let body = json!({"replicas": 2, "containers": [{"image": "nginx:1.27", "ports": [80]}]});
    let created = ok(
        &server,
        "POST",
        &format!("/deployments/web?{q}"),
        Some(body),
    )
    .await;
    conforms(&created, &deployment_shape(), "POST /deployments/web");
    assert_eq!(
        (&created["name"], &created["replicas"], &created["images"]),
        (&json!("web"), &json!(2), &json!(["nginx:1.27"]))
    );

    // Lists are arrays (the client calls data.sort), in the namespace asked for and, with
    // namespace empty, in all of them (the original answered nothing).
    let list = ok(&server, "GET", &format!("/deployments?{q}"), None).await;
    conforms(&list, &json!([deployment_shape()]), "GET /deployments");
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list[0]["name"], "web");
    let all = ok(&server, "GET", "/deployments?namespace=", None).await;
    conforms(
        &all,
        &json!([deployment_shape()]),
        "GET /deployments?namespace=",
    );
    assert!(
        all.as_array()
            .unwrap()
            .iter()
            .any(|d| d["namespace"] == ns.name.as_str()),
        "{all}"
    );
    let one = ok(&server, "GET", &format!("/deployments/web?{q}"), None).await;
    conforms(&one, &deployment_shape(), "GET /deployments/web");
    assert_eq!(one["labelSelector"], json!({"app": "web"}));

    // Its pods, once kube-controller-manager has made them.
    let pods_path = format!("/deployments/web/pods?{q}");
    let (pods, _) = eventually(SOON, "two pods of web", || async {
        let pods = ok(&server, "GET", &pods_path, None).await;
        (pods.as_array().unwrap().len() == 2).then_some(pods)
    })
    .await;
    conforms(&pods, &json!([pod_shape()]), "GET /deployments/web/pods");
    for pod in pods.as_array().unwrap() {
        assert_eq!(pod["labels"]["app"], "web", "{pod}");
        assert_eq!(pod["images"], json!(["nginx:1.27"]), "{pod}");
    }

    // A pod without events: the event the client reads unguarded, with empty strings.
    let pod_name = pods[0]["name"].as_str().unwrap().to_string();
    let event = ok(&server, "GET", &format!("/pods/{pod_name}/event?{q}"), None).await;
    assert_fields(
        &event,
        json!({"namespace": ns.name, "name": pod_name, "message": "", "reason": ""}),
    );
    // With one, its message and reason.
    ns.api::<Pod>()
        .create(&PostParams::default(), &pod("lone", &[]))
        .await
        .unwrap();
    let recorded: Event = serde_json::from_value(json!({
        "metadata": {"name": "lone.1"},
        "involvedObject": {"kind": "Pod", "name": "lone", "namespace": ns.name},
        "reason": "BackOff", "message": "Back-off pulling image", "type": "Warning",
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z"
    }))
    .unwrap();
    ns.api::<Event>()
        .create(&PostParams::default(), &recorded)
        .await
        .unwrap();
    // The cache sees the pod and its event a moment after the apiserver answered.
    eventually(SOON, "the pod and its event cached", || async {
        let (status, answer) = call(&server, "GET", &format!("/pods/lone/event?{q}"), None).await;
        (status == 200 && answer["data"]["message"] != "").then_some(())
    })
    .await;
    let event = ok(&server, "GET", &format!("/pods/lone/event?{q}"), None).await;
    assert_fields(
        &event,
        json!({"namespace": ns.name, "name": "lone", "message": "Back-off pulling image",
            "reason": "BackOff"}),
    );

    // The raw Pod, in both formats.
    let path = format!("/k8sailor/v0/pods/{pod_name}/output?{q}&outputFormat=json");
    let (status, _, raw) = server.request("GET", &path, &[("Origin", ORIGIN)]).await;
    assert_eq!(status, 200, "{raw}");
    let raw: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(
        (&raw["kind"], &raw["metadata"]["name"]),
        (&json!("Pod"), &json!(pod_name))
    );
    let path = format!("/k8sailor/v0/pods/{pod_name}/output?{q}&outputFormat=yaml");
    let (status, _, yaml) = server.request("GET", &path, &[("Origin", ORIGIN)]).await;
    assert_eq!(status, 200, "{yaml}");
    assert!(yaml.contains("kind: Pod\n"), "{yaml}");
    assert!(yaml.contains(&format!("  name: {pod_name}\n")), "{yaml}");

    // Scale, delete a pod, delete the Deployment: each `true`, each after a preflight.
    let scale = format!("/deployments/web/replicas?{q}&replicas=3");
    preflight(&server, "PUT", &scale).await;
    assert_eq!(ok(&server, "PUT", &scale, None).await, json!(true));
    let one = ok(&server, "GET", &format!("/deployments/web?{q}"), None).await;
    assert_eq!(one["replicas"], 3);
    let delete_pod = format!("/pods/{pod_name}?{q}");
    preflight(&server, "DELETE", &delete_pod).await;
    assert_eq!(ok(&server, "DELETE", &delete_pod, None).await, json!(true));
    let delete = format!("/deployments/web?{q}");
    preflight(&server, "DELETE", &delete).await;
    assert_eq!(ok(&server, "DELETE", &delete, None).await, json!(true));

    // Not found is a 404 in the envelope (the original answered 500).
    let (status, answer) = call(&server, "GET", &format!("/deployments/web?{q}"), None).await;
    assert_eq!(status, 404, "{answer}");
    assert_eq!(
        answer,
        json!({"code": 404, "data": null,
            "error": format!("deployment \"web\" not found in namespace \"{}\"", ns.name)})
    );

    // A trailing slash is redirected, with the CORS headers the page needs to follow it.
    let res = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!("{}/deployments/?{q}", server.base))
        .header("Origin", ORIGIN)
        .send()
        .await
        .unwrap();
    let headers = res.headers().clone();
    assert_eq!(res.status(), 301);
    assert_eq!(
        headers["location"],
        format!("/k8sailor/v0/deployments?{q}").as_str()
    );
    assert_eq!(headers["access-control-allow-origin"], ORIGIN);
    assert_eq!(headers["access-control-allow-credentials"], "true");
}
