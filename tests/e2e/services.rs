//! `POST /services/{name}` (the original's DSL and the structured form) and
//! `GET /services/{name}/output`, against the real apiserver: each form creates the Service it
//! says (checked with the apiserver itself), each bad entry is a 400 naming it.

use k8s_openapi::api::core::v1::Service;
use serde_json::{Value, json};

use crate::access::{account, grant, rule};
use crate::support::{Server, TestNamespace};

/// A node port in the cluster's default range (30000-32767), different for each test
/// process so that runs sharing a control plane do not collide (node ports are cluster-wide).
pub(crate) fn free_node_port(offset: u32) -> i32 {
    30000 + ((std::process::id() * 7 + offset) % 2700) as i32
}

/// Each bad body is a 400 whose error contains the fragment (the entry and why), and the
/// object was not created.
pub(crate) async fn assert_each_refused(
    server: &Server,
    ns: &TestNamespace,
    kind: &str,
    cases: &[(Value, &str)],
) {
    for (i, (body, fragment)) in cases.iter().enumerate() {
        let path = format!("/{kind}/bad-{i}?namespace={}", ns.name);
        let (status, answer) = server.send("POST", &path, Some(body.clone())).await;
        assert_eq!(
            (status, &answer["code"]),
            (400, &json!(400)),
            "{body}: {answer}"
        );
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(fragment),
            "{body}: {fragment:?} in {error:?}"
        );
        let (status, _) = server
            .get_text(&format!("/{kind}/bad-{i}/output?namespace={}", ns.name))
            .await;
        assert_eq!(status, 404, "{body} created nothing");
    }
}

/// The printed object: `kubectl get -o json` and `-o yaml` of it, through k8sailor.
pub(crate) async fn assert_printed(server: &Server, path: &str, kind: &str, name: &str) {
    let res = server
        .http
        .get(format!("{}{path}", server.base))
        .send()
        .await
        .expect("k8sailor answers");
    assert_eq!(res.status().as_u16(), 200, "{path}");
    assert_eq!(res.headers()["content-type"], "application/json", "{path}");
    let object: Value = serde_json::from_str(&res.text().await.unwrap()).unwrap();
    assert_eq!(
        (object["kind"].as_str(), object["metadata"]["name"].as_str()),
        (Some(kind), Some(name))
    );
    assert!(object["metadata"]["managedFields"].is_null(), "{object}");
    let yaml_path = format!("{path}&outputFormat=yaml");
    let res = server
        .http
        .get(format!("{}{yaml_path}", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.headers()["content-type"],
        "application/yaml",
        "{yaml_path}"
    );
    let yaml: Value = serde_saphyr::from_str(&res.text().await.unwrap()).expect("YAML");
    assert_eq!(yaml, object, "json and yaml print the same object");
    let (status, answer) = server.get(&format!("{path}&outputFormat=xml")).await;
    assert_eq!(status, 400, "{answer}");
}

async fn stored(ns: &TestNamespace, name: &str) -> Value {
    let service = ns.api::<Service>().get(name).await.expect("the Service");
    serde_json::to_value(service.spec.expect("a spec")).unwrap()
}

fn ports_of(spec: &Value) -> Vec<(i64, Value, String)> {
    spec["ports"]
        .as_array()
        .map(|ports| {
            ports
                .iter()
                .map(|p| {
                    (
                        p["port"].as_i64().unwrap(),
                        p["targetPort"].clone(),
                        p["name"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn in_cluster_range(spec: &Value) -> bool {
    spec["clusterIP"]
        .as_str()
        .is_some_and(|ip| ip.starts_with("10.0.0."))
}

#[tokio::test]
async fn each_form_creates_the_service_it_says() {
    let ns = TestNamespace::new("services").await;
    let server = Server::start(&["--namespace", &ns.name]);
    let at = |path: &str| format!("{path}?namespace={}", ns.name);
    let fixed = free_node_port(0);
    let fixed_json = free_node_port(1);
    // The fixed node ports first, before the cluster hands out any of its own choosing.
    for (name, body) in [
        ("fixed", json!({"services": [format!("!{fixed}:80:8080")]})),
        (
            "json-node",
            json!({"type": "NodePort", "ports": [{"port": 80, "targetPort": 8080, "nodePort": fixed_json}]}),
        ),
        ("plain", json!({"services": ["80", "443:8443", "81:http"]})),
        ("node", json!({"services": ["!80:8080", "81:8081"]})),
        ("headless", json!({"services": ["#80:8080"]})),
        (
            "external",
            json!({"services": ["80:8080", "@db.example.com", "!x"]}),
        ),
        (
            "json-headless",
            json!({"type": "Headless", "ports": [{"port": 5432, "name": "pg"}]}),
        ),
        (
            "json-external",
            json!({"type": "ExternalName", "externalName": "db.example.com"}),
        ),
    ] {
        let (status, created) = server
            .send(
                "POST",
                &at(&format!("/services/{name}")),
                Some(body.clone()),
            )
            .await;
        assert_eq!(status, 200, "{name} {body}: {created}");
        // The envelope around the Service as the apiserver stored it.
        assert_eq!(created["code"], 0);
        assert_eq!(created["data"]["kind"], "Service", "{created}");
        assert_eq!(created["data"]["metadata"]["name"], name);
        assert_eq!(created["data"]["metadata"]["namespace"], ns.name.as_str());
        assert!(created["data"]["metadata"]["uid"].is_string(), "{created}");
        let spec = stored(&ns, name).await;
        assert_eq!(
            created["data"]["spec"], spec,
            "{name}: data is the stored object"
        );
        if !name.ends_with("external") {
            assert_eq!(spec["selector"], json!({"app": name}), "{name}");
        }
    }

    let spec = stored(&ns, "plain").await;
    assert_eq!(spec["type"], "ClusterIP");
    assert!(in_cluster_range(&spec), "{spec}");
    assert_eq!(
        ports_of(&spec),
        [
            (80, json!(80), "80-80".into()),
            (443, json!(8443), "443-8443".into()),
            (81, json!("http"), "81-http".into()),
        ]
    );

    let spec = stored(&ns, "node").await;
    assert_eq!(
        spec["type"], "NodePort",
        "one '!' entry makes the whole Service a NodePort"
    );
    assert_eq!(ports_of(&spec).len(), 2);
    for port in spec["ports"].as_array().unwrap() {
        let node_port = port["nodePort"]
            .as_i64()
            .expect("a node port the cluster chose");
        assert!((30000..=32767).contains(&node_port), "{port}");
    }

    let spec = stored(&ns, "fixed").await;
    assert_eq!(spec["type"], "NodePort");
    assert_eq!(spec["ports"][0]["nodePort"], fixed);
    assert_eq!(ports_of(&spec), [(80, json!(8080), "80-8080".into())]);

    let spec = stored(&ns, "headless").await;
    assert_eq!(spec["type"], "ClusterIP");
    assert_eq!(spec["clusterIP"], "None");
    assert_eq!(ports_of(&spec), [(80, json!(8080), "80-8080".into())]);

    let spec = stored(&ns, "external").await;
    assert_eq!(spec["type"], "ExternalName");
    assert_eq!(spec["externalName"], "db.example.com");
    assert!(
        spec["ports"].is_null(),
        "the '@' entry drops the others: {spec}"
    );

    let spec = stored(&ns, "json-node").await;
    assert_eq!(
        (&spec["type"], &spec["ports"][0]["nodePort"]),
        (&json!("NodePort"), &json!(fixed_json))
    );
    assert_eq!(ports_of(&spec), [(80, json!(8080), "80-8080".into())]);
    let spec = stored(&ns, "json-headless").await;
    assert_eq!(spec["clusterIP"], "None");
    assert_eq!(ports_of(&spec), [(5432, json!(5432), "pg".into())]);
    let spec = stored(&ns, "json-external").await;
    assert_eq!(
        (&spec["type"], &spec["externalName"]),
        (&json!("ExternalName"), &json!("db.example.com"))
    );

    // A second create of the same name is the apiserver's conflict.
    let (status, again) = server
        .send(
            "POST",
            &at("/services/plain"),
            Some(json!({"services": ["80"]})),
        )
        .await;
    assert_eq!(status, 409, "{again}");
    assert!(
        again["error"].as_str().unwrap().contains("already exists"),
        "{again}"
    );

    assert_printed(
        &server,
        &at("/services/headless/output"),
        "Service",
        "headless",
    )
    .await;
    let (status, missing) = server.get(&at("/services/nope/output")).await;
    assert_eq!(status, 404, "{missing}");
    assert!(
        missing["error"].as_str().unwrap().contains("not found"),
        "{missing}"
    );

    // The live source serves the same routes the same way.
    let live = Server::start(&["--namespace", &ns.name, "--source", "live"]);
    let (status, created) = live
        .send(
            "POST",
            &at("/services/live"),
            Some(json!({"services": ["#80"]})),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    assert_eq!(stored(&ns, "live").await["clusterIP"], "None");
    assert_printed(&live, &at("/services/live/output"), "Service", "live").await;
}

#[tokio::test]
async fn each_bad_entry_is_a_400_naming_it() {
    let ns = TestNamespace::new("badservices").await;
    let server = Server::start(&["--namespace", &ns.name]);
    let cases = [
        (
            json!({"services": ["http"]}),
            "invalid services entry \"http\": port \"http\" must be a number from 1 to 65535",
        ),
        (
            json!({"services": ["80:8080", "!abc:80:8080"]}),
            "invalid services entry \"!abc:80:8080\": port \"abc\" must be",
        ),
        (
            json!({"services": ["80:0"]}),
            "invalid services entry \"80:0\": port \"0\" must be",
        ),
        (
            json!({"services": ["30080:80:8080"]}),
            "needs the '!' prefix",
        ),
        (
            json!({"services": ["!80", "#81"]}),
            "invalid services entry \"#81\": a Service is NodePort or headless, not both",
        ),
        (
            json!({"services": ["80", "80:81"]}),
            "invalid services entry \"80:81\": port 80 is given twice",
        ),
        (
            json!({"services": [""]}),
            "invalid services entry \"\": is empty",
        ),
        (
            json!({"services": ["@Bad_Host"]}),
            "invalid services entry \"@Bad_Host\"",
        ),
        (json!({"services": []}), "at least one entry"),
        (
            json!({"services": vec!["80"; 101]}),
            "101 entries, over the limit of 100",
        ),
        (
            json!({"ports": [{"port": 80, "nodePort": 30080}]}),
            "invalid ports[0]: nodePort needs type NodePort",
        ),
        (
            json!({"ports": [{"port": 80}, {"port": "http"}]}),
            "invalid ports[1]: port \"http\" must be a number from 1 to 65535",
        ),
        (
            json!({"type": "NodePort", "ports": [{"port": 80, "targetPort": 70000}]}),
            "invalid ports[0]: targetPort 70000",
        ),
        (
            json!({"services": ["80"], "type": "NodePort"}),
            "give either",
        ),
    ];
    assert_each_refused(&server, &ns, "services", &cases).await;
    // JSON of another shape than the body's is a 422, as for every body.
    let (status, answer) = server
        .send(
            "POST",
            &format!("/services/lb?namespace={}", ns.name),
            Some(json!({"type": "LoadBalancer", "ports": [{"port": 80}]})),
        )
        .await;
    assert_eq!(status, 422, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("unknown variant `LoadBalancer`"),
        "{answer}"
    );
    // A node port outside the cluster's range is the apiserver's refusal, said as it says it.
    let (status, answer) = server
        .send(
            "POST",
            &format!("/services/low?namespace={}", ns.name),
            Some(json!({"services": ["!1000:80:8080"]})),
        )
        .await;
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("nodePort"),
        "{answer}"
    );
    let (status, answer) = server
        .send("POST", "/services/Web", Some(json!({"services": ["80"]})))
        .await;
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("DNS-1035"),
        "{answer}"
    );
}

/// Under `--auth delegated`: a caller who may only get `resource` (of `group`) is refused the
/// create, nothing is written; one who may create does; creating is not reading the output.
pub(crate) async fn assert_created_by_own_rights(
    ns: &TestNamespace,
    (group, resource): (&str, &str),
    body: Value,
    kind: &str,
) {
    let reader = account(ns, "reader").await;
    grant(ns, ns, &reader, vec![rule(group, &[resource], &["get"])]).await;
    let creator = account(ns, "creator").await;
    grant(
        ns,
        ns,
        &creator,
        vec![rule(group, &[resource], &["create"])],
    )
    .await;
    let server = Server::start(&["--namespace", &ns.name, "--auth", "delegated"]);
    let path = format!("/{resource}/web?namespace={}", ns.name);
    let output = format!("/{resource}/web/output?namespace={}", ns.name);

    let (status, answer) = server
        .send_as(Some(&reader.token), "POST", &path, Some(body.clone()))
        .await;
    assert_eq!(status, 403, "{answer}");
    let error = answer["error"].as_str().unwrap();
    assert!(error.contains(&format!("create {resource}")), "{answer}");
    let (status, _) = server
        .send_as(Some(&reader.token), "GET", &output, None)
        .await;
    assert_eq!(status, 404, "nothing written");

    let (status, answer) = server
        .send_as(Some(&creator.token), "POST", &path, Some(body))
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["data"]["kind"], kind, "{answer}");
    let (status, answer) = server
        .send_as(Some(&creator.token), "GET", &output, None)
        .await;
    assert_eq!(status, 403, "creating is not reading: {answer}");
    let (status, printed) = server
        .send_as(Some(&reader.token), "GET", &output, None)
        .await;
    assert_eq!((status, &printed["kind"]), (200, &json!(kind)), "{printed}");
    let (status, answer) = server
        .send_as(Some("not-a-token"), "GET", &output, None)
        .await;
    assert_eq!(status, 401, "{answer}");
}

#[tokio::test]
async fn delegated_callers_create_and_print_services_by_their_own_rights() {
    let ns = TestNamespace::new("svcauth").await;
    let body = json!({"services": ["80:8080"]});
    assert_created_by_own_rights(&ns, ("", "services"), body, "Service").await;
}
