//! `POST /ingresses/{name}` (the original's endpoint DSL and the structured form) and
//! `GET /ingresses/{name}/output`, against the real apiserver: each form creates the rules it
//! says (checked with the apiserver itself), each bad entry is a 400 naming it.

use k8s_openapi::api::networking::v1::Ingress;
use serde_json::{Value, json};

use crate::services::{assert_created_by_own_rights, assert_each_refused, assert_printed};
use crate::support::{Server, TestNamespace};

async fn stored(ns: &TestNamespace, name: &str) -> Value {
    let ingress = ns.api::<Ingress>().get(name).await.expect("the Ingress");
    serde_json::to_value(ingress.spec.expect("a spec")).unwrap()
}

/// Each rule as (host, path, pathType, service, port).
fn rules_of(spec: &Value) -> Vec<(Value, String, String, String, Value)> {
    spec["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let path = &r["http"]["paths"][0];
            let service = &path["backend"]["service"];
            (
                r["host"].clone(),
                path["path"].as_str().unwrap().to_string(),
                path["pathType"].as_str().unwrap().to_string(),
                service["name"].as_str().unwrap().to_string(),
                service["port"].clone(),
            )
        })
        .collect()
}

fn rule_of(
    host: &str,
    path: &str,
    path_type: &str,
    service: &str,
    port: Value,
) -> (Value, String, String, String, Value) {
    (
        json!(host),
        path.into(),
        path_type.into(),
        service.into(),
        port,
    )
}

#[tokio::test]
async fn each_form_creates_the_ingress_it_says() {
    let ns = TestNamespace::new("ingresses").await;
    let server = Server::start(&["--namespace", &ns.name]);
    let at = |path: &str| format!("{path}?namespace={}", ns.name);
    let endpoints = json!({"endpoints": [
        "http://shop.example.com/api*?backend=api:8080&tls=shop-cert",
        "http://shop.example.com:8080/exact?backend=api:http",
        "https://www.example.com",
        "http://static.example.com/assets/*?backend=files:",
    ]});
    let (status, created) = server
        .send("POST", &at("/ingresses/shop"), Some(endpoints))
        .await;
    assert_eq!(status, 200, "{created}");
    assert_eq!(created["code"], 0);
    assert_eq!(created["data"]["kind"], "Ingress", "{created}");
    assert_eq!(created["data"]["metadata"]["name"], "shop");
    let spec = stored(&ns, "shop").await;
    assert_eq!(created["data"]["spec"], spec, "data is the stored object");
    assert_eq!(
        rules_of(&spec),
        [
            rule_of(
                "shop.example.com",
                "/api",
                "Prefix",
                "api",
                json!({"number": 8080})
            ),
            // A URL with a port keeps its host, and one without it too (the original lost it
            // then, making a rule for every host).
            rule_of(
                "shop.example.com",
                "/exact",
                "Exact",
                "api",
                json!({"name": "http"})
            ),
            rule_of(
                "www.example.com",
                "/",
                "Exact",
                "shop",
                json!({"number": 80})
            ),
            rule_of(
                "static.example.com",
                "/assets/",
                "Prefix",
                "files",
                json!({"number": 80})
            ),
        ]
    );
    assert_eq!(
        spec["tls"],
        json!([{"hosts": ["shop.example.com"], "secretName": "shop-cert"}])
    );
    assert!(spec["ingressClassName"].is_null(), "{spec}");

    let structured = json!({
        "rules": [
            {"host": "*.example.com", "path": "/v1", "pathType": "Prefix", "backend": {"service": "api", "port": 8443}},
            {"backend": {"service": "fallback", "port": "web"}},
        ],
        "tls": [{"hosts": ["*.example.com"], "secretName": "wild-cert"}],
    });
    let (status, created) = server
        .send("POST", &at("/ingresses/wild"), Some(structured))
        .await;
    assert_eq!(status, 200, "{created}");
    let spec = stored(&ns, "wild").await;
    let rules = rules_of(&spec);
    assert_eq!(
        rules[0],
        rule_of(
            "*.example.com",
            "/v1",
            "Prefix",
            "api",
            json!({"number": 8443})
        )
    );
    assert_eq!(
        rules[1],
        (
            Value::Null,
            "/".into(),
            "Exact".into(),
            "fallback".into(),
            json!({"name": "web"})
        ),
        "a structured rule without a host is for every host, as asked"
    );
    assert_eq!(
        spec["tls"],
        json!([{"hosts": ["*.example.com"], "secretName": "wild-cert"}])
    );

    let (status, again) = server
        .send(
            "POST",
            &at("/ingresses/shop"),
            Some(json!({"endpoints": ["http://a.example.com/"]})),
        )
        .await;
    assert_eq!(status, 409, "{again}");

    assert_printed(&server, &at("/ingresses/shop/output"), "Ingress", "shop").await;
    let (status, missing) = server.get(&at("/ingresses/nope/output")).await;
    assert_eq!(status, 404, "{missing}");

    let live = Server::start(&["--namespace", &ns.name, "--source", "live"]);
    let (status, created) = live
        .send(
            "POST",
            &at("/ingresses/live"),
            Some(json!({"endpoints": ["http://live.example.com/*"]})),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    assert_eq!(
        rules_of(&stored(&ns, "live").await),
        [rule_of(
            "live.example.com",
            "/",
            "Prefix",
            "live",
            json!({"number": 80})
        )]
    );
    assert_printed(&live, &at("/ingresses/live/output"), "Ingress", "live").await;
}

#[tokio::test]
async fn each_bad_endpoint_is_a_400_naming_it() {
    let ns = TestNamespace::new("badingresses").await;
    let server = Server::start(&["--namespace", &ns.name]);
    let cases = [
        (
            json!({"endpoints": ["http://a.example.com/?backend=api:0"]}),
            "invalid endpoints entry \"http://a.example.com/?backend=api:0\": port \"0\" must be a number from 1 to 65535",
        ),
        (
            json!({"endpoints": ["http://a.example.com/", "http://b.example.com/?backend=api:Not_A_Port"]}),
            "invalid endpoints entry \"http://b.example.com/?backend=api:Not_A_Port\": port \"Not_A_Port\" is neither a number",
        ),
        (
            json!({"endpoints": ["shop.example.com/api"]}),
            "invalid endpoints entry \"shop.example.com/api\": is no URL",
        ),
        (
            json!({"endpoints": ["ftp://a.example.com/"]}),
            "scheme \"ftp\" is not http or https",
        ),
        (
            json!({"endpoints": ["http://10.0.0.1/"]}),
            "host is an IP address",
        ),
        (
            json!({"endpoints": ["http://a.example.com/?backend=Api"]}),
            "service \"Api\" is no Service name",
        ),
        (
            json!({"endpoints": ["http://a.example.com/?tls=Bad_Cert"]}),
            "tls Secret \"Bad_Cert\"",
        ),
        (
            json!({"endpoints": ["http://a.example.com/?backend=a&backend=b"]}),
            "given twice",
        ),
        (
            json!({"endpoints": ["http://a.example.com/?service=a"]}),
            "query parameter \"service\" is unknown",
        ),
        (json!({"endpoints": []}), "at least one endpoint"),
        (
            json!({"endpoints": vec!["http://a.example.com/"; 101]}),
            "101 entries, over the limit of 100",
        ),
        (
            json!({"rules": [{"path": "api", "backend": {"service": "a"}}]}),
            "invalid rules[0]: path \"api\" must start with '/'",
        ),
        (
            json!({"rules": [{"backend": {"service": "a", "port": 70000}}]}),
            "invalid rules[0]: backend port 70000",
        ),
        (
            json!({"endpoints": ["http://a.example.com/"], "rules": []}),
            "give either",
        ),
    ];
    assert_each_refused(&server, &ns, "ingresses", &cases).await;
}

#[tokio::test]
async fn delegated_callers_create_and_print_ingresses_by_their_own_rights() {
    let ns = TestNamespace::new("ingauth").await;
    let body = json!({"endpoints": ["http://web.example.com/*"]});
    let resource = ("networking.k8s.io", "ingresses");
    assert_created_by_own_rights(&ns, resource, body, "Ingress").await;
}
