//! Each user sees exactly what they may see: with `--auth delegated`, a matrix of
//! ServiceAccounts x namespaces x routes, each answer of k8sailor checked against what the
//! apiserver itself lets the same token do (its list per namespace is the truth). Lists and
//! watches across namespaces show the union of what the user may list, nothing else; single
//! objects, events, writes and continue tokens follow the same rights.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Event, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde_json::{Value, json};

use crate::support::{
    SOON, Server, TestNamespace, cleanup_in_background, cluster, decode_token, deployment,
    encode_token, eventually, eventually_shown, pod,
};

/// An object as (namespace, name).
type Key = (String, String);

/// A ServiceAccount of the test, with its token and a client that acts as it.
pub(crate) struct User {
    pub name: &'static str,
    pub token: String,
    pub client: Client,
}

/// A kube client that authenticates with `token` only.
async fn client_of(token: &str) -> Client {
    let text = std::fs::read_to_string(&cluster().kubeconfig).expect("the cluster's kubeconfig");
    let mut kubeconfig: Value = serde_saphyr::from_str(&text).expect("kubeconfig YAML");
    for user in kubeconfig["users"].as_array_mut().expect("users") {
        user["user"] = json!({ "token": token });
    }
    let kubeconfig: Kubeconfig = serde_json::from_value(kubeconfig).expect("a kubeconfig");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("a config");
    Client::try_from(config).expect("a client")
}

async fn create<K>(api: &Api<K>, object: &K)
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.create(&PostParams::default(), object)
        .await
        .unwrap_or_else(|e| panic!("create {object:?}: {e}"));
}

pub(crate) async fn account(home: &TestNamespace, name: &'static str) -> User {
    let accounts = home.api::<ServiceAccount>();
    let mut account = ServiceAccount::default();
    account.metadata.name = Some(name.into());
    create(&accounts, &account).await;
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let token = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .expect("a token")
        .status
        .expect("a token in the answer")
        .token;
    User {
        name,
        client: client_of(&token).await,
        token,
    }
}

fn subject(home: &TestNamespace, user: &User) -> Vec<Subject> {
    vec![Subject {
        kind: "ServiceAccount".into(),
        name: user.name.into(),
        namespace: Some(home.name.clone()),
        ..Subject::default()
    }]
}

pub(crate) fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.into()]),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..PolicyRule::default()
    }
}

/// Grants `user` the rules in `ns` through a Role and a RoleBinding.
pub(crate) async fn grant(
    ns: &TestNamespace,
    home: &TestNamespace,
    user: &User,
    rules: Vec<PolicyRule>,
) {
    let name = format!("access-{}", user.name);
    let mut role = Role::default();
    role.metadata.name = Some(name.clone());
    role.rules = Some(rules);
    create(&ns.api::<Role>(), &role).await;
    let mut binding = RoleBinding::default();
    binding.metadata.name = Some(name.clone());
    binding.role_ref = RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: "Role".into(),
        name,
    };
    binding.subjects = Some(subject(home, user));
    create(&ns.api::<RoleBinding>(), &binding).await;
}

/// The cluster-wide role and binding of the test, deleted when it ends.
struct ClusterGrant(String);

impl Drop for ClusterGrant {
    fn drop(&mut self) {
        let name = self.0.clone();
        cleanup_in_background(move |client| async move {
            let dp = DeleteParams::default();
            let _ = Api::<ClusterRoleBinding>::all(client.clone())
                .delete(&name, &dp)
                .await;
            let _ = Api::<ClusterRole>::all(client).delete(&name, &dp).await;
        });
    }
}

async fn grant_cluster_wide(
    home: &TestNamespace,
    user: &User,
    rules: Vec<PolicyRule>,
) -> ClusterGrant {
    let name = format!("k8sailor-e2e-access-{}", home.name);
    let guard = ClusterGrant(name.clone());
    let mut role = ClusterRole::default();
    role.metadata.name = Some(name.clone());
    role.rules = Some(rules);
    create(&Api::all(home.client.clone()), &role).await;
    let mut binding = ClusterRoleBinding::default();
    binding.metadata.name = Some(name.clone());
    binding.role_ref = RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: "ClusterRole".into(),
        name,
    };
    binding.subjects = Some(subject(home, user));
    create(&Api::all(home.client.clone()), &binding).await;
    guard
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Pods,
    Deployments,
}

impl Kind {
    fn route(self) -> &'static str {
        match self {
            Kind::Pods => "pods",
            Kind::Deployments => "deployments",
        }
    }
}

/// What the apiserver lists for the user: the keys, or the status of its refusal.
async fn truth(
    user: &User,
    kind: Kind,
    ns: &str,
    labels: Option<&str>,
) -> Result<BTreeSet<Key>, u16> {
    let mut params = ListParams::default();
    if let Some(labels) = labels {
        params = params.labels(labels);
    }
    fn keys<K: kube::Resource>(items: Vec<K>) -> BTreeSet<Key> {
        items
            .iter()
            .map(|o| {
                let meta = o.meta();
                (meta.namespace.clone().unwrap(), meta.name.clone().unwrap())
            })
            .collect()
    }
    let answer = match kind {
        Kind::Pods => Api::<Pod>::namespaced(user.client.clone(), ns)
            .list(&params)
            .await
            .map(|l| keys(l.items)),
        Kind::Deployments => Api::<Deployment>::namespaced(user.client.clone(), ns)
            .list(&params)
            .await
            .map(|l| keys(l.items)),
    };
    answer.map_err(|e| match e {
        kube::Error::Api(status) => status.code,
        other => panic!("the apiserver did not answer: {other}"),
    })
}

/// Whether the apiserver lets the user read one object (or list `events` in its namespace).
async fn may(user: &User, what: &str, ns: &str, name: &str) -> bool {
    let answer = match what {
        "pod" => Api::<Pod>::namespaced(user.client.clone(), ns)
            .get(name)
            .await
            .map(drop),
        "deployment" => Api::<Deployment>::namespaced(user.client.clone(), ns)
            .get(name)
            .await
            .map(drop),
        "events" => Api::<Event>::namespaced(user.client.clone(), ns)
            .list(&ListParams::default().limit(1))
            .await
            .map(drop),
        other => panic!("{other}"),
    };
    match answer {
        Ok(()) => true,
        Err(kube::Error::Api(status)) if status.code == 403 => false,
        Err(e) => panic!("the apiserver about {what} {ns}/{name}: {e}"),
    }
}

pub(crate) async fn ask(server: &Server, method: &str, path: &str, token: &str) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let res = server
        .http
        .request(method, format!("{}{path}", server.base))
        .bearer_auth(token)
        .send()
        .await
        .expect("k8sailor answers");
    let status = res.status().as_u16();
    let text = res.text().await.expect("a body");
    let body = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text}"));
    (status, body)
}

fn keys_of(body: &Value) -> Vec<Key> {
    body["data"]
        .as_array()
        .unwrap_or_else(|| panic!("a list: {body}"))
        .iter()
        .map(|i| {
            (
                i["namespace"].as_str().unwrap().to_string(),
                i["name"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A refusal that tells nothing of the object: 403, no data, and not its spec.
fn assert_refused(status: u16, body: &Value, what: &str) {
    assert_eq!(status, 403, "{what}: {body}");
    assert_eq!(body["code"], 403, "{what}: {body}");
    assert!(body["data"].is_null(), "{what}: {body}");
    let error = body["error"].as_str().unwrap_or_default();
    assert!(!error.contains("busybox"), "{what}: {error}");
}

/// A watch answer read line by line (newline-delimited JSON).
pub(crate) struct WatchLines {
    pub(crate) response: reqwest::Response,
    buffer: Vec<u8>,
}

impl WatchLines {
    pub(crate) async fn open(server: &Server, path: &str, token: &str) -> WatchLines {
        let response = server
            .http
            .get(format!("{}{path}", server.base))
            .bearer_auth(token)
            .send()
            .await
            .expect("k8sailor answers");
        assert_eq!(response.status(), 200, "{path}");
        WatchLines {
            response,
            buffer: Vec::new(),
        }
    }

    pub(crate) async fn next(&mut self) -> Value {
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return serde_json::from_slice(&line).expect("a JSON event");
            }
            let chunk = tokio::time::timeout(SOON, self.response.chunk())
                .await
                .expect("an event in time")
                .expect("the stream goes on")
                .expect("the stream is not over");
            self.buffer.extend_from_slice(&chunk);
        }
    }

    /// The objects of the initial ADDED events, and the BOOKMARK that ends them.
    pub(crate) async fn initial(&mut self) -> (BTreeSet<Key>, Value) {
        let mut added = BTreeSet::new();
        loop {
            let event = self.next().await;
            match event["type"].as_str() {
                Some("ADDED") => {
                    added.insert(key_of(&event["object"]));
                }
                Some("BOOKMARK") => return (added, event["object"].clone()),
                _ => panic!("before the bookmark: {event}"),
            }
        }
    }
}

fn key_of(object: &Value) -> Key {
    (
        object["namespace"].as_str().unwrap().to_string(),
        object["name"].as_str().unwrap().to_string(),
    )
}

/// An event about the pod `solo` of `ns`, its reason [`SOLO_EVENT`]: what the event routes
/// answer to those who may read it.
fn event_of_solo(ns: &str) -> Event {
    let now = "2026-01-01T00:00:00Z";
    serde_json::from_value(json!({
        "metadata": {"name": "solo.access-e2e"},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": ns, "name": "solo"},
        "reason": SOLO_EVENT,
        "message": format!("solo of {ns}"),
        "type": "Normal",
        "source": {"component": "access-e2e"},
        "count": 1,
        "firstTimestamp": now,
        "lastTimestamp": now,
    }))
    .unwrap()
}

const SOLO_EVENT: &str = "AccessProbe";

/// The test's world: three namespaces with a Deployment `web` and a bare pod `solo` each,
/// and four users: pods in two namespaces, deployments in one, nothing, and everything
/// (cluster-wide, reading only).
struct World {
    namespaces: Vec<TestNamespace>,
    users: Vec<User>,
    /// Selects the bare pods of this test only.
    solo_label: String,
    _grant: ClusterGrant,
}

impl World {
    async fn new() -> World {
        let namespaces = vec![
            TestNamespace::new("access-a").await,
            TestNamespace::new("access-b").await,
            TestNamespace::new("access-c").await,
        ];
        // Unique to this world: the tests run at once in one process.
        let solo_label = format!("solo-{}", namespaces[0].name);
        for ns in &namespaces {
            create(&ns.api::<Deployment>(), &deployment("web", 1, &[])).await;
            create(
                &ns.api::<Pod>(),
                &pod("solo", &[("access-e2e", &solo_label)]),
            )
            .await;
            create(&ns.api::<Event>(), &event_of_solo(&ns.name)).await;
        }
        let home = &namespaces[0];
        let pods_two = account(home, "pods-two").await;
        let deploys_one = account(home, "deploys-one").await;
        let nothing = account(home, "nothing").await;
        let everything = account(home, "everything").await;
        for ns in &namespaces[..2] {
            let rules = vec![rule("", &["pods"], &["get", "list", "watch"])];
            grant(ns, home, &pods_two, rules).await;
        }
        let rules = vec![rule("apps", &["deployments"], &["get", "list", "watch"])];
        grant(&namespaces[1], home, &deploys_one, rules).await;
        let grant = grant_cluster_wide(
            home,
            &everything,
            vec![
                rule("", &["pods"], &["get", "list", "watch"]),
                rule("apps", &["deployments"], &["get", "list", "watch"]),
                rule("", &["events"], &["list"]),
            ],
        )
        .await;
        World {
            namespaces,
            users: vec![pods_two, deploys_one, nothing, everything],
            solo_label,
            _grant: grant,
        }
    }

    fn mine(&self) -> BTreeSet<String> {
        self.namespaces.iter().map(|n| n.name.clone()).collect()
    }

    fn user(&self, name: &str) -> &User {
        self.users.iter().find(|u| u.name == name).unwrap()
    }

    /// What the user may list of `kind` in the test's namespaces, as the apiserver says.
    async fn union(&self, user: &User, kind: Kind, labels: Option<&str>) -> BTreeSet<Key> {
        let mut union = BTreeSet::new();
        for ns in &self.namespaces {
            if let Ok(keys) = truth(user, kind, &ns.name, labels).await {
                union.extend(keys);
            }
        }
        union
    }
}

/// Waits until k8sailor's cache shows every object of the test (the Deployments and their
/// pods), so that lists can be compared with the apiserver's: each kind comes on a watch of
/// its own, so pods in the cache say nothing of the Deployments.
async fn settle(server: &Server, world: &World) {
    let admin_truth = |ns: String| async move {
        let client = cluster().client().await;
        Api::<Pod>::namespaced(client, &ns)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len()
    };
    eventually(Duration::from_secs(60), "the Deployments' pods", || async {
        for ns in &world.namespaces {
            if admin_truth(ns.name.clone()).await < 2 {
                return None;
            }
        }
        Some(())
    })
    .await;
    let everything = world.user("everything");
    for kind in [Kind::Pods, Kind::Deployments] {
        let want = world.union(everything, kind, None).await;
        let path = format!("/{}", kind.route());
        let what = format!("k8sailor's cache of {}", kind.route());
        eventually_shown(SOON, &what, || async {
            let (status, body) = ask(server, "GET", &path, &everything.token).await;
            let have: BTreeSet<Key> = keys_of(&body)
                .into_iter()
                .filter(|(ns, _)| world.mine().contains(ns))
                .collect();
            if status == 200 && have == want {
                Ok(())
            } else {
                Err(format!("{status}: {have:?}, the apiserver's {want:?}"))
            }
        })
        .await;
    }
}

#[tokio::test]
async fn each_user_sees_exactly_what_the_apiserver_lets_it_list() {
    list_matrix("cache").await;
}

#[tokio::test]
async fn each_user_sees_exactly_what_the_apiserver_lets_it_list_from_the_live_source() {
    list_matrix("live").await;
}

async fn list_matrix(source: &str) {
    let world = World::new().await;
    let server = Server::start(&["--auth", "delegated", "--source", source]);
    settle(&server, &world).await;
    let mine = world.mine();

    for user in &world.users {
        for kind in [Kind::Pods, Kind::Deployments] {
            // One namespace: its own right, answered as the apiserver answers.
            for ns in &world.namespaces {
                let path = format!("/{}?namespace={}", kind.route(), ns.name);
                let (status, body) = ask(&server, "GET", &path, &user.token).await;
                match truth(user, kind, &ns.name, None).await {
                    Err(code) => {
                        assert_eq!(code, 403);
                        assert_refused(status, &body, &format!("{} {path}", user.name));
                    }
                    Ok(want) => {
                        assert_eq!(status, 200, "{} {path}: {body}", user.name);
                        let have: BTreeSet<Key> = keys_of(&body).into_iter().collect();
                        assert_eq!(have, want, "{} {path}", user.name);
                        assert!(body["metadata"].get("accessFiltered").is_none());
                    }
                }
            }

            // All namespaces: never a refusal, the union of what it may list, said filtered.
            let path = format!("/{}", kind.route());
            let (status, body) = ask(&server, "GET", &path, &user.token).await;
            assert_eq!(status, 200, "{} {path}: {body}", user.name);
            let have = keys_of(&body);
            let namespaces: BTreeSet<&String> = have.iter().map(|(ns, _)| ns).collect();
            for ns in namespaces {
                assert!(
                    truth(user, kind, ns, None).await.is_ok(),
                    "LEAK: {} got {path} objects of namespace {ns}",
                    user.name
                );
            }
            let have_mine: BTreeSet<Key> = have
                .iter()
                .filter(|(ns, _)| mine.contains(ns))
                .cloned()
                .collect();
            let want = world.union(user, kind, None).await;
            assert_eq!(have_mine, want, "{} {path}", user.name);
            let filtered = body["metadata"]["accessFiltered"] == true;
            assert_eq!(
                filtered,
                user.name != "everything",
                "{} {path}: {}",
                user.name,
                body["metadata"]
            );
        }

        // A selector and pages: every page from the user's own rights, counts included.
        let selector = format!("access-e2e={}", world.solo_label);
        let want = world.union(user, Kind::Pods, Some(&selector)).await;
        let first = format!("/pods?labelSelector={selector}&limit=1&sort=-namespace");
        let (status, body) = ask(&server, "GET", &first, &user.token).await;
        assert_eq!(status, 200, "{} {first}: {body}", user.name);
        let mut seen = keys_of(&body);
        let remaining = body["metadata"]["remainingItemCount"].as_u64().unwrap_or(0);
        assert_eq!(
            seen.len() as u64 + remaining,
            want.len() as u64,
            "{}: the count is of what it may see: {body}",
            user.name
        );
        let mut token = body["metadata"]["continue"].as_str().map(str::to_string);
        while let Some(t) = token {
            let next =
                format!("/pods?labelSelector={selector}&limit=1&sort=-namespace&continue={t}");
            let (status, body) = ask(&server, "GET", &next, &user.token).await;
            assert_eq!(status, 200, "{} {next}: {body}", user.name);
            seen.extend(keys_of(&body));
            token = body["metadata"]["continue"].as_str().map(str::to_string);
        }
        assert_eq!(
            seen.into_iter().collect::<BTreeSet<_>>(),
            want,
            "{}: the pages",
            user.name
        );
    }
}

#[tokio::test]
async fn a_continue_token_gives_another_user_only_what_it_may_list() {
    let world = World::new().await;
    let server = Server::start(&["--auth", "delegated"]);
    settle(&server, &world).await;
    // A token is base64 JSON anyone can write: one that does not decode, or continues another
    // query, is the caller's fault (400); one of a version this replica no longer keeps says
    // start again (410), one it has not reached yet says retry (503). None gives a page.
    let everything = world.user("everything");
    let (status, first) = ask(&server, "GET", "/pods?limit=1", &everything.token).await;
    assert_eq!(status, 200, "{first}");
    let ours = decode_token(first["metadata"]["continue"].as_str().expect("more pages"));
    let version = ours["rv"].as_u64().expect("a version");
    let with = |field: &str, value: Value| {
        let mut token = ours.clone();
        token[field] = value;
        encode_token(&token)
    };
    for (forged, code, why) in [
        ("1.1".to_string(), 400, "invalid continue token"),
        (with("q", json!("0123456789abcdef")), 400, "another query"),
        (with("rv", json!(1)), 410, "has expired"),
        (
            with("rv", json!(version + 1_000_000)),
            503,
            "newer than this cache",
        ),
    ] {
        let path = format!("/pods?limit=1&continue={forged}");
        let (status, body) = ask(&server, "GET", &path, &everything.token).await;
        assert_eq!(
            (status, &body["code"]),
            (code, &json!(code)),
            "{path}: {body}"
        );
        assert!(body["data"].is_null(), "{body}");
        let error = body["error"].as_str().unwrap_or_default();
        assert!(error.contains(why), "{path}: {why:?} in {error}");
    }
    let selector = format!("access-e2e={}", world.solo_label);
    // A token says where the next page starts, not what its owner saw: whoever uses it gets
    // that page of their own list, selected by their own rights (across namespaces, and in
    // one namespace where those who may not list are refused before any token is read).
    let queries = [
        format!("/pods?namespace={}&limit=1", world.namespaces[0].name),
        format!("/pods?labelSelector={selector}&limit=1"),
    ];
    let mut others_pages = 0;
    for first in &queries {
        let whole = first.replace("&limit=1", "");
        for owner in ["everything", "pods-two"] {
            let (status, body) = ask(&server, "GET", first, &world.user(owner).token).await;
            assert_eq!(status, 200, "{body}");
            let token = body["metadata"]["continue"].as_str().expect("more pages");
            let [after] = keys_of(&body).try_into().expect("a page of one");
            let next = format!("{first}&continue={token}");
            for user in &world.users {
                let (status, own) = ask(&server, "GET", &whole, &user.token).await;
                let (next_status, page) = ask(&server, "GET", &next, &user.token).await;
                assert_eq!(
                    next_status, status,
                    "{owner}'s token used by {}: {page}",
                    user.name
                );
                if status != 200 {
                    assert_eq!(status, 403, "{own}");
                    assert!(
                        page["data"].is_null() && page.get("metadata").is_none(),
                        "{page}"
                    );
                    continue;
                }
                // The user's own list is in (namespace, name) order: the page is the item
                // that follows the owner's first one there.
                let expected: Vec<Key> = keys_of(&own)
                    .into_iter()
                    .filter(|key| *key > after)
                    .take(1)
                    .collect();
                assert_eq!(
                    keys_of(&page),
                    expected,
                    "{owner}'s token used by {}: {page}",
                    user.name
                );
                if user.name != owner && !expected.is_empty() {
                    others_pages += 1;
                }
            }
        }
    }
    assert!(
        others_pages > 0,
        "no token gave another user a page to check"
    );
}

#[tokio::test]
async fn single_objects_events_and_writes_need_the_users_own_rights() {
    let world = World::new().await;
    let server = Server::start(&["--auth", "delegated"]);
    settle(&server, &world).await;
    for user in &world.users {
        for ns in &world.namespaces {
            let ns = &ns.name;
            let who = |path: &str| format!("{} {path}", user.name);
            // Whether an object (or a DTO, or an event about it) is this namespace's solo.
            let is_solo = |v: &Value| v["namespace"] == json!(ns) && v["name"] == "solo";
            let may_pod = may(user, "pod", ns, "solo").await;
            let path = format!("/pods/solo?namespace={ns}");
            let (status, body) = ask(&server, "GET", &path, &user.token).await;
            if may_pod {
                assert_eq!(status, 200, "{}: {body}", who(&path));
                assert!(is_solo(&body["data"]), "{}: {body}", who(&path));
            } else {
                assert_refused(status, &body, &who(&path));
            }
            // The object itself, not enveloped.
            let path = format!("/pods/solo/output?namespace={ns}");
            let (status, body) = ask(&server, "GET", &path, &user.token).await;
            if may_pod {
                assert_eq!(status, 200, "{}: {body}", who(&path));
                assert!(
                    body["kind"] == "Pod" && is_solo(&body["metadata"]),
                    "{}: {body}",
                    who(&path)
                );
            } else {
                assert_refused(status, &body, &who(&path));
            }
            // An absent object where the user may not look is refused alike: no oracle.
            let path = format!("/pods/ghost?namespace={ns}");
            let (status, body) = ask(&server, "GET", &path, &user.token).await;
            if may_pod {
                assert_eq!(status, 404, "{}: {body}", who(&path));
            } else {
                assert_refused(status, &body, &who(&path));
            }
            // The events: the test's among them, each about solo; the newest one is one that
            // was read (an empty reason is the answer for none).
            let may_events = may_pod && may(user, "events", ns, "").await;
            let path = format!("/pods/solo/events?namespace={ns}");
            let (status, body) = ask(&server, "GET", &path, &user.token).await;
            if may_events {
                assert_eq!(status, 200, "{}: {body}", who(&path));
                let events = body["data"].as_array().expect("a list");
                assert!(
                    events.iter().all(is_solo) && events.iter().any(|e| e["reason"] == SOLO_EVENT),
                    "{}: {body}",
                    who(&path)
                );
            } else {
                assert_refused(status, &body, &who(&path));
            }
            let path = format!("/pods/solo/event?namespace={ns}");
            let (status, body) = ask(&server, "GET", &path, &user.token).await;
            if may_events {
                assert_eq!(status, 200, "{}: {body}", who(&path));
                let event = &body["data"];
                assert!(
                    is_solo(event) && event["reason"].as_str().is_some_and(|r| !r.is_empty()),
                    "{}: {body}",
                    who(&path)
                );
            } else {
                assert_refused(status, &body, &who(&path));
            }
            let may_deployment = may(user, "deployment", ns, "web").await;
            let path = format!("/deployments/web?namespace={ns}");
            let (status, body) = ask(&server, "GET", &path, &user.token).await;
            if may_deployment {
                assert_eq!(status, 200, "{}: {body}", who(&path));
            } else {
                assert_refused(status, &body, &who(&path));
            }
            let path = format!("/deployments/web/pods?namespace={ns}");
            let (status, body) = ask(&server, "GET", &path, &user.token).await;
            let may_pods = truth(user, Kind::Pods, ns, None).await;
            match (may_deployment, may_pods) {
                (true, Ok(pods)) => {
                    assert_eq!(status, 200, "{}: {body}", who(&path));
                    // web's one pod (settle waited for it), whatever its generated name.
                    let of_web: Vec<Key> = pods
                        .iter()
                        .filter(|(_, name)| name.starts_with("web-"))
                        .cloned()
                        .collect();
                    assert_eq!(of_web.len(), 1, "{}: {pods:?}", who(&path));
                    assert_eq!(keys_of(&body), of_web, "{}", who(&path));
                }
                _ => assert_refused(status, &body, &who(&path)),
            }

            // No user of the test may write; the apiserver agrees (dry run), and so do we.
            let dry = DeleteParams {
                dry_run: true,
                ..DeleteParams::default()
            };
            let apiserver = Api::<Pod>::namespaced(user.client.clone(), ns)
                .delete("solo", &dry)
                .await;
            assert!(
                matches!(&apiserver, Err(kube::Error::Api(s)) if s.code == 403),
                "{}: the apiserver lets it delete",
                user.name
            );
            for (method, path, body) in [
                ("DELETE", format!("/pods/solo?namespace={ns}"), None),
                ("DELETE", format!("/deployments/web?namespace={ns}"), None),
                (
                    "PUT",
                    format!("/deployments/web/replicas?namespace={ns}&replicas=3"),
                    None,
                ),
                (
                    "POST",
                    format!("/deployments/intruder?namespace={ns}"),
                    Some(json!({"containers": [{"image": "nginx:1.27"}]})),
                ),
            ] {
                let mut req = server
                    .http
                    .request(
                        reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
                        format!("{}{path}", server.base),
                    )
                    .bearer_auth(&user.token);
                if let Some(body) = body {
                    req = req.json(&body);
                }
                let res = req.send().await.expect("k8sailor answers");
                let status = res.status().as_u16();
                let body: Value = res.json().await.expect("an envelope");
                assert_refused(status, &body, &format!("{} {method} {path}", user.name));
            }
        }
    }
    // Nothing was written.
    for ns in &world.namespaces {
        let pod = ns
            .api::<Pod>()
            .get("solo")
            .await
            .expect("solo is still there");
        assert!(pod.metadata.deletion_timestamp.is_none());
        let web = ns
            .api::<Deployment>()
            .get("web")
            .await
            .expect("web is still there");
        assert_eq!(web.spec.unwrap().replicas, Some(1));
        assert!(
            ns.api::<Deployment>()
                .get_opt("intruder")
                .await
                .unwrap()
                .is_none()
        );
    }
}

#[tokio::test]
async fn a_restricted_watch_never_sends_an_object_of_a_forbidden_namespace() {
    restricted_watch("cache").await;
}

#[tokio::test]
async fn a_restricted_live_watch_never_sends_an_object_of_a_forbidden_namespace() {
    restricted_watch("live").await;
}

async fn restricted_watch(source: &str) {
    let world = World::new().await;
    let server = Server::start(&["--auth", "delegated", "--source", source]);
    settle(&server, &world).await;
    let pods_two = world.user("pods-two");
    // A namespace where pods-two may read pods but that holds none yet: a Deployment scaled
    // to zero.
    let idle = TestNamespace::new("access-idle").await;
    let rules = vec![rule("", &["pods"], &["get", "list", "watch"])];
    grant(&idle, &world.namespaces[0], pods_two, rules).await;
    create(&idle.api::<Deployment>(), &deployment("idle", 0, &[])).await;
    let idle_deployment = format!("/deployments/idle?namespace={}", idle.name);
    let everything = world.user("everything");
    eventually(SOON, "the idle Deployment in the cache", || async {
        let (status, _) = ask(&server, "GET", &idle_deployment, &everything.token).await;
        (status == 200).then_some(())
    })
    .await;
    let allowed: BTreeSet<String> = world.namespaces[..2]
        .iter()
        .chain([&idle])
        .map(|n| n.name.clone())
        .collect();

    let mut watch = WatchLines::open(&server, "/pods?watch=true", &pods_two.token).await;
    let (initial, bookmark) = watch.initial().await;
    assert_eq!(bookmark["accessFiltered"], true, "{bookmark}");
    assert_eq!(initial, world.union(pods_two, Kind::Pods, None).await);

    // Others' watches: deployments of one namespace; nothing at all.
    let deploys_one = world.user("deploys-one");
    let mut deployments =
        WatchLines::open(&server, "/deployments?watch=true", &deploys_one.token).await;
    let (initial, bookmark) = deployments.initial().await;
    assert_eq!(bookmark["accessFiltered"], true);
    assert_eq!(
        initial,
        BTreeSet::from([(world.namespaces[1].name.clone(), "web".to_string())])
    );
    let nothing = world.user("nothing");
    let mut none = WatchLines::open(&server, "/pods?watch=true", &nothing.token).await;
    let (initial, none_began) = none.initial().await;
    assert!(initial.is_empty(), "{initial:?}");

    // A pod where pods-two may not look, one in a namespace made after the watch began, then
    // a marker where it may: the marker comes, the others never.
    create(&world.namespaces[2].api::<Pod>(), &pod("late", &[])).await;
    let fresh = TestNamespace::new("access-new").await;
    create(&fresh.api::<Pod>(), &pod("late", &[])).await;
    create(&world.namespaces[0].api::<Pod>(), &pod("marker", &[])).await;
    loop {
        let event = watch.next().await;
        let key = key_of(&event["object"]);
        assert!(
            allowed.contains(&key.0),
            "LEAK: a watch of pods-two sent {event}"
        );
        if key == (world.namespaces[0].name.clone(), "marker".to_string()) {
            break;
        }
    }
    // Also later, and for the user who may see nothing: no event at all.
    create(&fresh.api::<Pod>(), &pod("later", &[])).await;
    create(&world.namespaces[0].api::<Pod>(), &pod("marker-2", &[])).await;
    loop {
        let event = watch.next().await;
        let key = key_of(&event["object"]);
        assert!(allowed.contains(&key.0), "LEAK: {event}");
        if key.1 == "marker-2" {
            break;
        }
    }
    // That nothing came is shown, not waited for: a watch of the cache resumed from where the
    // watch of nothing began replays every change since (this test's included) through the
    // filter of a live one, then a bookmark at the cache's version: nothing may come before
    // it. The live source's bookmark of a resumed watch comes first, at the version asked
    // for, so it shows nothing; its filter is the one the markers above prove for pods-two.
    if source == "cache" {
        let began = none_began["resourceVersion"].as_str().unwrap();
        let marker_2 = world.namespaces[0]
            .api::<Pod>()
            .get("marker-2")
            .await
            .unwrap()
            .metadata
            .resource_version
            .unwrap();
        let mut resumed = WatchLines::open(
            &server,
            &format!("/pods?watch=true&resourceVersion={began}"),
            &nothing.token,
        )
        .await;
        let first = resumed.next().await;
        assert_eq!(first["type"], "BOOKMARK", "a watch of nothing sent {first}");
        let reached: u64 = first["object"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            reached >= marker_2.parse::<u64>().unwrap(),
            "the bookmark at {reached} is before marker-2 ({marker_2})"
        );
    }
    drop(none);

    // The idle Deployment scaled up: its pod joins pods-two's watch.
    let scale = serde_json::json!({"spec": {"replicas": 1}});
    idle.api::<Deployment>()
        .patch(
            "idle",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&scale),
        )
        .await
        .expect("scale the idle Deployment");
    loop {
        let event = watch.next().await;
        let key = key_of(&event["object"]);
        assert!(allowed.contains(&key.0), "LEAK: {event}");
        if key.0 == idle.name {
            assert_eq!(event["type"], "ADDED", "{event}");
            break;
        }
    }
}
