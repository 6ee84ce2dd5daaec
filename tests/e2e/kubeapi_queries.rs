//! The Kubernetes API's query semantics: k8sailor and the apiserver are asked the same raw
//! HTTP questions (lists at a resourceVersion, with resourceVersionMatch, invalid
//! combinations, metadata-only answers, `Accept` negotiation, watch parameters) and must give
//! the same codes, reasons, messages and objects.

use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::support::{SOON, Server, TestNamespace, eventually};

/// An answer to a GET: status, Content-Type, Retry-After and body.
#[derive(Debug)]
struct Answer {
    status: u16,
    content_type: Option<String>,
    retry_after: Option<String>,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {self:?}"))
    }

    /// The watch events of a watch's body, one JSON object a line.
    fn events(&self) -> Vec<Value> {
        self.body
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    /// A failure's Status without what differs between two servers by nature.
    fn status_object(&self) -> Value {
        let mut status = self.json();
        assert_eq!(status["kind"], "Status", "{self:?}");
        status.as_object_mut().unwrap().remove("metadata");
        status
    }
}

async fn ask_apiserver(client: &Client, path: &str, accept: Option<&str>) -> Answer {
    let mut request = http::Request::builder().uri(path);
    if let Some(accept) = accept {
        request = request.header("Accept", accept);
    }
    let response = client
        .send(request.body(Vec::new().into()).unwrap())
        .await
        .unwrap_or_else(|e| panic!("the apiserver answers {path}: {e}"));
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
    };
    let (content_type, retry_after) = (header("content-type"), header("retry-after"));
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        content_type,
        retry_after,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

async fn ask_k8sailor(server: &Server, path: &str, accept: Option<&str>) -> Answer {
    let headers: Vec<(&str, &str)> = accept.map(|a| ("Accept", a)).into_iter().collect();
    let (status, headers, body) = server.request("GET", path, &headers).await;
    let header = |name: &str| headers.get(name).map(|v| v.to_str().unwrap().to_string());
    Answer {
        status,
        content_type: header("content-type"),
        retry_after: header("retry-after"),
        body,
    }
}

/// The objects of a list or watch answer, managedFields aside, by name.
pub(crate) fn without_managed_fields(mut object: Value) -> Value {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    object
}

fn items(list: &Value) -> Vec<Value> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("a list: {list}"))
        .iter()
        .cloned()
        .map(without_managed_fields)
        .collect()
}

pub(crate) struct Setup {
    pub(crate) ns: TestNamespace,
    pub(crate) server: Server,
    apiserver: Client,
}

pub(crate) async fn setup(test: &str) -> Setup {
    let ns = TestNamespace::new(test).await;
    // Its kube-root-ca.crt is among the ConfigMaps compared: made before ours, it is older
    // than the last version below, which k8sailor is then waited for.
    ns.wait_for_defaults().await;
    let mut last = None;
    for name in ["cm-a", "cm-b", "cm-c"] {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": "queries"}},
            "data": {"key": name},
        }))
        .unwrap();
        let created = ns
            .api::<ConfigMap>()
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
        last = created.metadata.resource_version;
    }
    let server = Server::start(&["--auth", "none"]);
    let apiserver = ns.client.clone();
    let setup = Setup {
        ns,
        server,
        apiserver,
    };
    setup
        .until_k8sailor_has_seen(last.as_deref().unwrap())
        .await;
    setup
}

impl Setup {
    pub(crate) fn configmaps(&self, query: &str) -> String {
        format!("/api/v1/namespaces/{}/configmaps{query}", self.ns.name)
    }

    async fn both(&self, path: &str, accept: Option<&str>) -> (Answer, Answer) {
        let theirs = ask_apiserver(&self.apiserver, path, accept).await;
        let ours = ask_k8sailor(&self.server, path, accept).await;
        (theirs, ours)
    }

    /// The version k8sailor's list of the namespace's ConfigMaps is at: the revision of
    /// the last change to a ConfigMap it has seen, which the apiserver reads at as well.
    pub(crate) async fn listed_version(&self) -> u64 {
        let list = ask_k8sailor(&self.server, &self.configmaps(""), None).await;
        list.json()["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    }

    /// Until k8sailor has seen the write that brought an object to `version` (a list not
    /// older than it answers).
    async fn until_k8sailor_has_seen(&self, version: &str) {
        let path = self.configmaps(&format!("?resourceVersion={version}"));
        eventually(SOON, "k8sailor reaches the apiserver's version", || async {
            (ask_k8sailor(&self.server, &path, None).await.status == 200).then_some(())
        })
        .await;
    }

    /// Both refuse `path` with the same Status.
    async fn same_failure(&self, path: &str, accept: Option<&str>) -> Value {
        let (theirs, ours) = self.both(path, accept).await;
        assert!(
            theirs.status >= 400,
            "{path}: the apiserver answered {theirs:?}"
        );
        assert_eq!(ours.status, theirs.status, "{path}\n{ours:?}\n{theirs:?}");
        assert_eq!(
            ours.status_object(),
            theirs.status_object(),
            "{path}: the Status"
        );
        ours.status_object()
    }

    /// Changes cm `name`; the version it is then at, once k8sailor has seen it.
    pub(crate) async fn change(&self, name: &str) -> u64 {
        let patch = json!({"data": {"key": "changed"}});
        let patched = self
            .ns
            .api::<ConfigMap>()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
        let version = patched.metadata.resource_version.unwrap();
        self.until_k8sailor_has_seen(&version).await;
        version.parse().unwrap()
    }

    /// Both list the same objects at the same version for `path`.
    async fn same_list(&self, path: &str) -> Value {
        let (theirs, ours) = self.both(path, None).await;
        assert_eq!(theirs.status, 200, "{path}: {theirs:?}");
        assert_eq!(ours.status, 200, "{path}: {ours:?}");
        let (theirs, ours) = (theirs.json(), ours.json());
        assert_eq!(items(&ours), items(&theirs), "{path}: the items");
        assert_eq!(
            ours["metadata"]["resourceVersion"], theirs["metadata"]["resourceVersion"],
            "{path}: the list's version"
        );
        ours
    }
}

#[tokio::test]
async fn lists_at_a_version_are_the_apiservers() {
    let s = setup("queries-versions").await;
    // The list as it is now, then cm-a changed: the list at the first version is of the
    // old cm-a, on both.
    let before = s.listed_version().await;
    let now = s.change("cm-a").await;
    let exact = s
        .same_list(&s.configmaps(&format!(
            "?resourceVersion={before}&resourceVersionMatch=Exact"
        )))
        .await;
    assert_eq!(exact["metadata"]["resourceVersion"], before.to_string());
    let old_a = &items(&exact)[0];
    assert_eq!(old_a["data"]["key"], "cm-a", "{exact}");
    // Not older than a version both have: the newest state.
    for query in [
        format!("?resourceVersion={now}&resourceVersionMatch=NotOlderThan"),
        format!("?resourceVersion={before}"),
        format!("?resourceVersion={now}&resourceVersionMatch=Exact&limit=2"),
    ] {
        let (theirs, ours) = s.both(&s.configmaps(&query), None).await;
        assert_eq!((ours.status, theirs.status), (200, 200), "{query}");
        assert_eq!(items(&ours.json()), items(&theirs.json()), "{query}");
    }
    // "0" and unset: any version; the objects are the newest here, as the apiserver's are.
    for query in [
        "?resourceVersion=0",
        "",
        "?resourceVersion=0&resourceVersionMatch=NotOlderThan",
    ] {
        let (theirs, ours) = s.both(&s.configmaps(query), None).await;
        assert_eq!((ours.status, theirs.status), (200, 200), "{query}");
        assert_eq!(items(&ours.json()), items(&theirs.json()), "{query}");
    }
    // The pages of an Exact list are of that version too.
    let first = ask_k8sailor(
        &s.server,
        &s.configmaps(&format!(
            "?resourceVersion={before}&resourceVersionMatch=Exact&limit=1"
        )),
        None,
    )
    .await
    .json();
    assert_eq!(first["metadata"]["resourceVersion"], before.to_string());
    let token = first["metadata"]["continue"].as_str().unwrap();
    let rest = ask_k8sailor(
        &s.server,
        &s.configmaps(&format!("?continue={token}")),
        None,
    )
    .await
    .json();
    assert_eq!(rest["metadata"]["resourceVersion"], before.to_string());

    // A version neither has reached: the apiserver's Timeout after its wait.
    let ahead = now + 1_000_000;
    for query in [
        format!("?resourceVersion={ahead}&resourceVersionMatch=NotOlderThan"),
        format!("?resourceVersion={ahead}"),
    ] {
        let (theirs, ours) = s.both(&s.configmaps(&query), None).await;
        assert_eq!(
            (ours.status, theirs.status),
            (504, 504),
            "{query}: {ours:?}"
        );
        let (t, o) = (theirs.status_object(), ours.status_object());
        assert_eq!(o["reason"], t["reason"], "{query}");
        assert_eq!(o["details"], t["details"], "{query}");
        assert_eq!(ours.retry_after, theirs.retry_after, "{query}");
        let prefix = format!("Timeout: Too large resource version: {ahead}, current: ");
        for message in [&o["message"], &t["message"]] {
            assert!(message.as_str().unwrap().starts_with(&prefix), "{message}");
        }
    }
    // Older than k8sailor's history (it began at its start): the apiserver's 410 for a list
    // its storage no longer has (etcd here has not compacted yet, so only the wording is
    // the apiserver's).
    let old = ask_k8sailor(
        &s.server,
        &s.configmaps("?resourceVersion=1&resourceVersionMatch=Exact"),
        None,
    )
    .await;
    assert_eq!(old.status, 410, "{old:?}");
    assert_eq!(
        old.status_object(),
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410,
               "reason": "Expired",
               "message": "The resourceVersion for the provided list is too old."})
    );
}

#[tokio::test]
async fn invalid_list_and_watch_parameters_are_refused_as_the_apiserver_does() {
    let s = setup("queries-invalid").await;
    for query in [
        "?resourceVersionMatch=Exact",
        "?resourceVersionMatch=NotOlderThan",
        "?resourceVersion=0&resourceVersionMatch=Exact",
        "?resourceVersion=5&resourceVersionMatch=Newest",
        "?continue=abc&resourceVersionMatch=Exact",
        "?sendInitialEvents=true",
        "?watch=true&sendInitialEvents=true",
        "?watch=true&sendInitialEvents=false",
        "?watch=true&resourceVersion=5&resourceVersionMatch=NotOlderThan",
        "?watch=true&sendInitialEvents=true&resourceVersionMatch=Exact",
    ] {
        let status = s.same_failure(&s.configmaps(query), None).await;
        assert_eq!(status["code"], 422, "{query}: {status}");
    }
    let status = s
        .same_failure(&s.configmaps("?resourceVersion=abc"), None)
        .await;
    assert_eq!(status["code"], 400, "{status}");
    // A continue token carries its version: none may be given beside it.
    let (theirs, ours) = s.both(&s.configmaps("?limit=1"), None).await;
    let token = |a: &Answer| {
        a.json()["metadata"]["continue"]
            .as_str()
            .unwrap()
            .to_string()
    };
    for (token, asked) in [(token(&theirs), "apiserver"), (token(&ours), "k8sailor")] {
        let path = s.configmaps(&format!("?limit=1&continue={token}&resourceVersion=5"));
        let answer = match asked {
            "apiserver" => ask_apiserver(&s.apiserver, &path, None).await,
            _ => ask_k8sailor(&s.server, &path, None).await,
        };
        assert_eq!(answer.status, 400, "{asked}: {answer:?}");
        assert_eq!(
            answer.status_object()["message"],
            "specifying resource version is not allowed when using continue",
            "{asked}"
        );
    }
}

#[tokio::test]
async fn metadata_answers_and_accept_are_the_apiservers() {
    let s = setup("queries-accept").await;
    // What client-go's metadata client asks, but for protobuf first, which the apiserver
    // would answer (k8sailor answers the JSON after it: below).
    const METADATA_LIST: &str =
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    const METADATA: &str =
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
    let (theirs, ours) = s.both(&s.configmaps(""), Some(METADATA_LIST)).await;
    assert_eq!((ours.status, theirs.status), (200, 200), "{ours:?}");
    let (theirs, ours) = (theirs.json(), ours.json());
    assert_eq!(ours["kind"], "PartialObjectMetadataList");
    assert_eq!(
        (&ours["kind"], &ours["apiVersion"]),
        (&theirs["kind"], &theirs["apiVersion"])
    );
    assert_eq!(items(&ours), items(&theirs));
    assert!(items(&ours).len() >= 3, "{ours}");
    let with_protobuf = ask_k8sailor(
        &s.server,
        &s.configmaps(""),
        Some(&format!(
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,{METADATA_LIST}"
        )),
    )
    .await;
    assert_eq!(items(&with_protobuf.json()), items(&ours));

    let (theirs, ours) = s.both(&s.configmaps("/cm-b"), Some(METADATA)).await;
    assert_eq!((ours.status, theirs.status), (200, 200), "{ours:?}");
    let (theirs, ours) = (
        without_managed_fields(theirs.json()),
        without_managed_fields(ours.json()),
    );
    assert_eq!(ours["kind"], "PartialObjectMetadata");
    assert_eq!(ours, theirs);

    // Metadata of the wrong cardinality.
    s.same_failure(
        &s.configmaps(""),
        Some("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),
    )
    .await;
    s.same_failure(
        &s.configmaps("/cm-b"),
        Some("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"),
    )
    .await;

    // Protobuf or JSON: JSON, the same objects.
    let accept = Some("application/vnd.kubernetes.protobuf,application/json");
    let (theirs, ours) = s.both(&s.configmaps(""), accept).await;
    assert_eq!(ours.content_type.as_deref(), Some("application/json"));
    assert_eq!(
        theirs.content_type.as_deref(),
        Some("application/vnd.kubernetes.protobuf")
    );
    let (_, json) = s.both(&s.configmaps(""), None).await;
    assert_eq!(items(&ours.json()), items(&json.json()));
    // YAML, as the apiserver answers it.
    let (theirs, ours) = s
        .both(&s.configmaps("/cm-b"), Some("application/yaml"))
        .await;
    assert_eq!((ours.status, theirs.status), (200, 200), "{ours:?}");
    assert_eq!(ours.content_type, theirs.content_type);
    assert!(ours.body.contains("name: cm-b"), "{}", ours.body);
    // Protobuf alone k8sailor cannot encode: refused as the apiserver refuses a type its
    // route does not produce (as both refuse text/html), naming what is served.
    let protobuf = ask_k8sailor(
        &s.server,
        &s.configmaps(""),
        Some("application/vnd.kubernetes.protobuf"),
    )
    .await;
    let (theirs, html) = s.both(&s.configmaps(""), Some("text/html")).await;
    for ours in [&protobuf, &html] {
        assert_eq!(ours.status, 406, "{ours:?}");
        let (o, t) = (ours.status_object(), theirs.status_object());
        assert_eq!(
            (&o["code"], &o["reason"], &o["details"]),
            (&t["code"], &t["reason"], &t["details"])
        );
        assert_eq!(
            o["message"],
            "406: Not Acceptable\n\nAvailable representations: application/json, application/yaml, application/json;stream=watch"
        );
        assert!(
            t["message"]
                .as_str()
                .unwrap()
                .starts_with("406: Not Acceptable\n\nAvailable representations: application/json, application/yaml"),
            "{t}"
        );
    }
    // A served type asking a conversion that is not: the handler's 406.
    let (theirs, ours) = s
        .both(
            &s.configmaps("/cm-b"),
            Some("application/json;as=Foo;g=meta.k8s.io;v=v1"),
        )
        .await;
    let (o, t) = (ours.status_object(), theirs.status_object());
    assert_eq!(
        (&o["code"], &o["reason"]),
        (&t["code"], &t["reason"]),
        "{o}"
    );
    assert_eq!(
        o["message"],
        "only the following media types are accepted: application/json, application/yaml"
    );
    assert!(
        t["message"].as_str().unwrap().starts_with(
            "only the following media types are accepted: application/json, application/yaml"
        ),
        "{t}"
    );
}

/// A watch of `query`, ended by the server after `timeoutSeconds`.
fn watch(s: &Setup, query: &str) -> String {
    s.configmaps(&format!("?watch=true&timeoutSeconds=2{query}"))
}

/// The events' types and objects' names, in order.
pub(crate) fn summary(events: &[Value]) -> Vec<(String, String)> {
    events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_string(),
                e["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn watch_parameters_are_the_apiservers() {
    let s = setup("queries-watch").await;
    // The namespace's ConfigMaps: ours, and the controller-manager's kube-root-ca.crt.
    let list = ask_apiserver(&s.apiserver, &s.configmaps(""), None)
        .await
        .json();
    let mut added: Vec<(String, String)> = items(&list)
        .iter()
        .map(|o| {
            (
                "ADDED".to_string(),
                o["metadata"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    added.sort();
    assert!(added.len() >= 3, "{list}");
    let sorted = |events: &[Value]| {
        let mut summary = summary(events);
        summary.sort();
        summary
    };
    // WatchList as client-go asks it: the state, then the initial-events-end bookmark.
    let watch_list = "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=";
    let (theirs, ours) = s
        .both(
            &watch(&s, &format!("{watch_list}&allowWatchBookmarks=true")),
            None,
        )
        .await;
    for answer in [&theirs, &ours] {
        // The apiserver may also send its periodic bookmarks: only the annotated one counts.
        let events: Vec<Value> = answer
            .events()
            .into_iter()
            .filter(|e| {
                e["type"] != "BOOKMARK"
                    || e["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"] == "true"
            })
            .collect();
        let (last, state) = events.split_last().expect("events");
        assert_eq!(sorted(state), added, "{answer:?}");
        assert_eq!(last["type"], "BOOKMARK", "{answer:?}");
        assert_eq!(
            last["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true",
            "{answer:?}"
        );
        let version = last["object"]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap();
        assert!(version.parse::<u64>().is_ok(), "{version}");
    }
    // Without bookmarks allowed, no bookmark at all.
    let (theirs, ours) = s.both(&watch(&s, watch_list), None).await;
    assert_eq!(sorted(&ours.events()), sorted(&theirs.events()));
    assert_eq!(sorted(&ours.events()), added);
    // resourceVersion 0 and unset: the state as ADDED (no bookmark unless asked).
    for query in ["&resourceVersion=0", ""] {
        let (theirs, ours) = s.both(&watch(&s, query), None).await;
        assert_eq!(sorted(&ours.events()), sorted(&theirs.events()), "{query}");
        assert_eq!(sorted(&ours.events()), added, "{query}");
    }
    // sendInitialEvents=false: only changes, and there are none.
    let (theirs, ours) = s
        .both(
            &watch(
                &s,
                "&sendInitialEvents=false&resourceVersionMatch=NotOlderThan",
            ),
            None,
        )
        .await;
    assert_eq!((ours.events(), theirs.events()), (vec![], vec![]));
    // From a version: the changes after it, as the apiserver sends them.
    let before = s.listed_version().await;
    s.change("cm-c").await;
    let (theirs, ours) = s
        .both(&watch(&s, &format!("&resourceVersion={before}")), None)
        .await;
    assert_eq!(summary(&ours.events()), summary(&theirs.events()));
    assert_eq!(
        summary(&ours.events()),
        vec![("MODIFIED".to_string(), "cm-c".to_string())]
    );
    // Metadata frames.
    let accept = Some("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1");
    let (theirs, ours) = s.both(&watch(&s, ""), accept).await;
    let objects = |a: &Answer| {
        let mut objects: Vec<Value> = a
            .events()
            .into_iter()
            .map(|e| without_managed_fields(e["object"].clone()))
            .collect();
        objects.sort_by_key(|o| o["metadata"]["name"].to_string());
        objects
    };
    assert_eq!(objects(&ours), objects(&theirs));
    assert_eq!(objects(&ours)[0]["kind"], "PartialObjectMetadata");
    // A version older than k8sailor's history: the apiserver's 410 as an ERROR event.
    let ours = ask_k8sailor(&s.server, &watch(&s, "&resourceVersion=1"), None).await;
    let events = ours.events();
    assert_eq!(events.len(), 1, "{ours:?}");
    assert_eq!(events[0]["type"], "ERROR");
    assert_eq!(events[0]["object"]["code"], 410);
    assert_eq!(events[0]["object"]["reason"], "Expired");
    let message = events[0]["object"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("too old resource version: 1 ("),
        "{message}"
    );
}
