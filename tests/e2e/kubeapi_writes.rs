//! What the Kubernetes API does not answer from memory: with `--auth delegated` it is relayed
//! to the apiserver as the caller, so the real kubectl, run with the same ServiceAccount
//! token against k8sailor and against the apiserver, prints the same for `delete`, `scale`,
//! `create -f`, `apply`, `logs` (and `logs -f`), `auth can-i` and a write RBAC refuses; a
//! read right after a write through k8sailor sees it. With `--auth none` a write is the
//! apiserver's MethodNotAllowed and changes nothing. The fair share holds on `/api` too.

use std::path::PathBuf;
use std::process::Command;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::PostParams;
use serde_json::{Value, json};

use crate::access::{User, account, grant, rule};
use crate::kubeapi::{Kubectl, normalized};
use crate::logs::followed_for;
use crate::support::{SOON, Server, TestNamespace, eventually, repo};

/// A node kwok plays, whose pods run and log (hack/cluster up --log-nodes).
const NODE: &str = "demo-node-1";

pub(crate) fn scratch(ns: &TestNamespace) -> PathBuf {
    let dir = repo()
        .join("target")
        .join(format!("e2e-kubeapi-writes-{}", ns.name));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The same kubectl, as the same caller, against both.
pub(crate) struct Both {
    pub(crate) apiserver: Kubectl,
    pub(crate) k8sailor: Kubectl,
}

impl Both {
    pub(crate) fn new(dir: &std::path::Path, front: &TlsFront, user: &User) -> Both {
        Both {
            apiserver: Kubectl::for_apiserver_as(
                dir,
                &format!("apiserver-{}", user.name),
                &user.token,
            ),
            k8sailor: Kubectl::for_k8sailor_as(
                dir,
                &format!("k8sailor-{}", user.name),
                &front.url,
                &front.certificate,
                &user.token,
            ),
        }
    }

    /// Runs `args` against k8sailor, then against the apiserver, and asserts both succeed or
    /// fail alike and print the same (ages aside): kubectl's outcome, k8sailor's output.
    pub(crate) fn same(&self, args: &[&str]) -> (bool, String, String) {
        let ours = self.k8sailor.run(args);
        let theirs = self.apiserver.run(args);
        assert_eq!(
            (ours.0, normalized(&ours.1), normalized(&ours.2)),
            (theirs.0, normalized(&theirs.1), normalized(&theirs.2)),
            "kubectl {args:?}\nk8sailor: {ours:?}\napiserver: {theirs:?}"
        );
        ours
    }
}

/// A ConfigMap manifest in a file of the test's directory.
fn manifest(dir: &std::path::Path, name: &str, value: &str) -> String {
    let path = dir.join(format!("{name}-{value}.json"));
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name}, "data": {"v": value}});
    std::fs::write(&path, cm.to_string()).unwrap();
    path.to_string_lossy().into_owned()
}

/// `kubectl get` of one field through k8sailor, as written (`<none>`-free: jsonpath).
fn field(kubectl: &Kubectl, ns: &str, object: &str, path: &str) -> (bool, String, String) {
    kubectl.run(&["get", object, "-n", ns, "-o", &format!("jsonpath={path}")])
}

#[tokio::test]
async fn kubectl_writes_through_k8sailor_as_through_the_apiserver() {
    let ns = TestNamespace::new("kubeapi-writes").await;
    let dir = scratch(&ns);
    let writer = account(&ns, "writer").await;
    grant(
        &ns,
        &ns,
        &writer,
        vec![
            rule("", &["configmaps"], &["*"]),
            rule("", &["pods", "pods/log"], &["get", "list", "watch"]),
            rule("apps", &["statefulsets", "statefulsets/scale"], &["*"]),
        ],
    )
    .await;
    let reader = account(&ns, "reader").await;
    // Reads of what its writes name, so that kubectl reaches the write the apiserver refuses.
    grant(
        &ns,
        &ns,
        &reader,
        vec![
            rule("", &["configmaps", "pods"], &["get", "list", "watch"]),
            rule("apps", &["statefulsets"], &["get", "list", "watch"]),
        ],
    )
    .await;
    let statefulset: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "registry.invalid/web:1"}]}}},
    }))
    .unwrap();
    ns.api::<StatefulSet>()
        .create(&PostParams::default(), &statefulset)
        .await
        .unwrap();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "logger"},
        "spec": {"nodeName": NODE, "containers": [{"name": "app", "image": "busybox:1.36"}]},
    }))
    .unwrap();
    ns.api::<Pod>()
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    let server = Server::start(&["--auth", "delegated"]);
    let front = TlsFront::before(&dir, &server);
    let as_writer = Both::new(&dir, &front, &writer);
    let as_reader = Both::new(&dir, &front, &reader);
    let n = ns.name.as_str();
    eventually(SOON, "k8sailor serves the StatefulSet", || async {
        let (ok, out, _) = field(
            &as_writer.k8sailor,
            n,
            "statefulset/web",
            "{.spec.replicas}",
        );
        (ok && out == "0").then_some(())
    })
    .await;

    // auth can-i: the SelfSubjectAccessReview is the caller's own, allowed and refused. The
    // apiserver's RBAC sees the new binding a moment after it is made, and the two kubectl
    // runs compared are asked a moment apart: once it does.
    let can_i = ["auth", "can-i", "create", "configmaps", "-n", n];
    eventually(SOON, "the apiserver to let the writer create", || async {
        let (allowed, _, _) = as_writer.apiserver.run(&can_i);
        allowed.then_some(())
    })
    .await;
    let (allowed, out, _) = as_writer.same(&can_i);
    assert!(allowed && out.trim() == "yes", "{out}");
    let (allowed, out, _) = as_reader.same(&["auth", "can-i", "create", "configmaps", "-n", n]);
    assert!(!allowed && out.trim() == "no", "{out}");

    // create -f, then a read at once sees it; the same create through the apiserver prints
    // the same once the first object is gone.
    // kubectl validates a manifest against /openapi, which is not served here yet.
    let made = manifest(&dir, "made", "1");
    let (ok, out, err) =
        as_writer
            .k8sailor
            .run(&["create", "--validate=false", "-f", &made, "-n", n]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "configmap/made created");
    assert_eq!(
        field(&as_writer.k8sailor, n, "configmap/made", "{.data.v}").1,
        "1"
    );
    // delete: printed alike, and gone at once for a read through k8sailor.
    let (ok, deleted, err) = as_writer
        .k8sailor
        .run(&["delete", "configmap", "made", "-n", n]);
    assert!(ok, "{err}");
    let (ok, _, err) = field(&as_writer.k8sailor, n, "configmap/made", "{.data.v}");
    assert!(!ok && err.contains("NotFound"), "{err}");
    let (ok, theirs, err) =
        as_writer
            .apiserver
            .run(&["create", "--validate=false", "-f", &made, "-n", n]);
    assert!(ok && theirs == out, "{theirs} {err}");
    let (ok, theirs, err) = as_writer
        .apiserver
        .run(&["delete", "configmap", "made", "-n", n]);
    assert!(ok && theirs == deleted, "{theirs} {err}");

    // apply: created, then configured, each seen at once by the next read.
    for (value, printed) in [("1", "created"), ("2", "configured")] {
        let applied = manifest(&dir, "applied", value);
        let (ok, out, err) =
            as_writer
                .k8sailor
                .run(&["apply", "--validate=false", "-f", &applied, "-n", n]);
        assert!(ok, "{err}");
        assert_eq!(out.trim(), format!("configmap/applied {printed}"));
        assert_eq!(
            field(&as_writer.k8sailor, n, "configmap/applied", "{.data.v}").1,
            value
        );
    }
    // Read-your-writes with no kubectl start-up between the write and the read: a PATCH
    // relayed, then at once a GET from memory, each time the new value.
    let bearer = format!("Bearer {}", writer.token);
    let object = format!("/api/v1/namespaces/{n}/configmaps/applied");
    for value in 10..20 {
        let patch = json!({"data": {"v": value.to_string()}}).to_string();
        let written = server
            .http
            .patch(format!("{}{object}", server.root()))
            .header("authorization", &bearer)
            .header("content-type", "application/merge-patch+json")
            .body(patch)
            .send()
            .await
            .unwrap();
        assert_eq!(written.status(), 200);
        let (status, _, read) = server
            .request("GET", &object, &[("authorization", &bearer)])
            .await;
        let read: Value = serde_json::from_str(&read).unwrap();
        assert_eq!(
            (status, &read["data"]["v"]),
            (200, &json!(value.to_string()))
        );
    }

    let (ok, _, err) = as_writer
        .apiserver
        .run(&["delete", "configmap", "applied", "-n", n]);
    assert!(ok, "{err}");
    for value in ["1", "2"] {
        let applied = manifest(&dir, "applied", value);
        as_writer.same(&[
            "apply",
            "--validate=false",
            "-f",
            &applied,
            "-n",
            n,
            "--dry-run=server",
        ]);
    }

    // scale: through the scale subresource; the StatefulSet shows it at once.
    let (ok, out, err) =
        as_writer
            .k8sailor
            .run(&["scale", "statefulset", "web", "--replicas=2", "-n", n]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "statefulset.apps/web scaled");
    assert_eq!(
        field(
            &as_writer.k8sailor,
            n,
            "statefulset/web",
            "{.spec.replicas}"
        )
        .1,
        "2"
    );
    let (ok, theirs, err) =
        as_writer
            .apiserver
            .run(&["scale", "statefulset", "web", "--replicas=0", "-n", n]);
    assert!(ok && theirs == out, "{theirs} {err}");

    // A write RBAC refuses: the apiserver's Forbidden, printed alike.
    let (ok, _, err) = as_reader.same(&["delete", "configmap", "applied", "-n", n]);
    assert!(!ok && err.contains("Forbidden"), "{err}");
    let (ok, _, err) = as_reader.same(&["scale", "statefulset", "web", "--replicas=1", "-n", n]);
    assert!(!ok && err.contains("Forbidden"), "{err}");

    // logs: the pod's log as kubectl reads it (the log only grows, so the apiserver's, read
    // after, starts with k8sailor's), and followed: new lines arrive.
    let ours = eventually(SOON, "the pod logs", || async {
        let (ok, out, _) = as_writer.k8sailor.run(&["logs", "logger", "-n", n]);
        (ok && !out.is_empty()).then_some(out)
    })
    .await
    .0;
    let (ok, theirs, err) = as_writer.apiserver.run(&["logs", "logger", "-n", n]);
    assert!(ok && theirs.starts_with(&ours), "{err}\n{ours}\n{theirs}");
    let lines = followed_for(
        as_writer
            .k8sailor
            .command(&["logs", "-f", "logger", "-n", n, "--tail=1"]),
        3,
    );
    assert!(lines.len() >= 2, "kubectl logs -f followed {lines:?}");
    let (_, theirs, _) = as_writer.apiserver.run(&["logs", "logger", "-n", n]);
    for line in &lines {
        assert!(
            theirs.lines().any(|l| l == line),
            "{line:?} is not in the pod's log"
        );
    }
    // A caller without pods/log: the apiserver's refusal.
    let (ok, _, err) = as_reader.same(&["logs", "logger", "-n", n]);
    assert!(!ok && err.contains("Forbidden"), "{err}");
}

#[tokio::test]
async fn with_auth_none_a_write_is_the_apiservers_method_not_allowed() {
    let ns = TestNamespace::new("kubeapi-none").await;
    let dir = scratch(&ns);
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "kept"}})).unwrap();
    ns.api::<ConfigMap>()
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let server = Server::start(&["--auth", "none"]);
    let k8sailor = Kubectl::for_k8sailor(&dir, &server);
    let n = ns.name.as_str();
    eventually(SOON, "k8sailor serves the ConfigMap", || async {
        let (ok, _, _) = k8sailor.run(&["get", "configmap", "kept", "-n", n]);
        ok.then_some(())
    })
    .await;
    let (ok, _, err) = k8sailor.run(&["delete", "configmap", "kept", "-n", n, "--wait=false"]);
    assert!(!ok);
    assert_eq!(
        err.trim(),
        "Error from server (MethodNotAllowed): the server does not allow this method on the requested resource"
    );
    let (status, _, body) = server
        .request(
            "DELETE",
            &format!("/api/v1/namespaces/{n}/configmaps/kept"),
            &[],
        )
        .await;
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (status, &body["kind"], &body["reason"], &body["code"]),
        (
            405,
            &json!("Status"),
            &json!("MethodNotAllowed"),
            &json!(405)
        ),
        "{body}"
    );
    // Nothing was written with k8sailor's identity.
    assert!(
        ns.api::<ConfigMap>()
            .get_opt("kept")
            .await
            .unwrap()
            .is_some()
    );
    // A subresource is not served from memory: the apiserver's 404.
    let (status, _, body) = server
        .request("GET", &format!("/api/v1/namespaces/{n}/pods/kept/log"), &[])
        .await;
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (status, &body["reason"]),
        (404, &json!("NotFound")),
        "{body}"
    );
}

/// A relayed request gets the apiserver's own refusal at once: its 504 for a version it has
/// not reached (PodTemplates are not kept, so their list is relayed), never retried behind
/// the caller's back (kube's client would retry it for minutes).
#[tokio::test]
async fn a_relayed_refusal_is_the_apiservers_answer_as_it_is() {
    let ns = TestNamespace::new("kubeapi-relayed-504").await;
    let reader = account(&ns, "reader").await;
    grant(
        &ns,
        &ns,
        &reader,
        vec![rule("", &["podtemplates"], &["get", "list", "watch"])],
    )
    .await;
    let server = Server::start(&["--auth", "delegated"]);
    let bearer = format!("Bearer {}", reader.token);
    let path = format!(
        "/api/v1/namespaces/{}/podtemplates?resourceVersion=999999999",
        ns.name
    );
    // Until the apiserver's RBAC has the new binding (a 403 before).
    let (status, headers, body) =
        eventually(SOON, "the apiserver authorizes the reader", || async {
            let answer = server
                .request("GET", &path, &[("Authorization", bearer.as_str())])
                .await;
            (answer.0 != 403).then_some(answer)
        })
        .await
        .0;
    let body: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(
        (status, &body["kind"], &body["reason"], &body["code"]),
        (504, &json!("Status"), &json!("Timeout"), &json!(504)),
        "{body}"
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("Timeout: Too large resource version: 999999999, current: "),
        "{body}"
    );
    assert_eq!(
        headers.get("retry-after").map(|v| v.to_str().unwrap()),
        Some("1")
    );
}

/// A watch of ConfigMaps at `/api` as `token`: its answer, the body still streaming.
async fn watch_as(server: &Server, ns: &str, token: &str) -> reqwest::Response {
    let url = format!(
        "{}/api/v1/namespaces/{ns}/configmaps?watch=true",
        server.root()
    );
    server
        .http
        .get(&url)
        .bearer_auth(token)
        .send()
        .await
        .expect("k8sailor answers")
}

/// Opens a watch with [`watch_as`], and reads until its first event.
async fn open_watch(server: &Server, ns: &str, token: &str) -> reqwest::Response {
    let mut response = watch_as(server, ns, token).await;
    assert_eq!(response.status(), 200);
    let first = tokio::time::timeout(SOON, response.chunk()).await;
    assert!(
        matches!(first, Ok(Ok(Some(_)))),
        "the watch started: {first:?}"
    );
    response
}

#[tokio::test]
async fn on_the_kubernetes_api_a_caller_past_its_share_gets_429_and_another_is_served() {
    let ns = TestNamespace::new("kubeapi-fair").await;
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "one"}})).unwrap();
    ns.api::<ConfigMap>()
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let hog = account(&ns, "hog").await;
    let quiet = account(&ns, "quiet").await;
    for user in [&hog, &quiet] {
        grant(
            &ns,
            &ns,
            user,
            vec![rule("", &["configmaps"], &["get", "list", "watch"])],
        )
        .await;
    }
    let server = Server::start(&["--auth", "delegated", "--max-watches", "4"]);
    let n = ns.name.as_str();
    let held = eventually(SOON, "the hog's first watch", || async {
        let response = watch_as(&server, n, &hog.token).await;
        (response.status() == 200).then_some(response)
    })
    .await
    .0;
    let mut held = vec![held];
    for _ in 0..3 {
        held.push(open_watch(&server, n, &hog.token).await);
    }
    let refused = watch_as(&server, n, &hog.token).await;
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "1");
    let body: Value = tokio::time::timeout(SOON, refused.json())
        .await
        .expect("a refusal, not a stream")
        .unwrap();
    let user = format!("system:serviceaccount:{n}:hog");
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("user {user:?} holds 4 open watches, its share of 4 (maxWatches \
                divided among the clients with watches open): try again when one ends"),
            "reason": "TooManyRequests", "details": {"retryAfterSeconds": 1}, "code": 429})
    );
    // Another caller is served as if the hog were not there: it lists and it watches.
    let (status, _, list) = server
        .request(
            "GET",
            &format!("/api/v1/namespaces/{n}/configmaps"),
            &[("authorization", &format!("Bearer {}", quiet.token))],
        )
        .await;
    assert_eq!(status, 200, "{list}");
    let _quiet_watch = open_watch(&server, n, &quiet.token).await;
    drop(held);
}

/// TLS in front of a k8sailor process, as an ingress would terminate it: kubectl sends a
/// bearer token only over TLS (kubectl#744). Its certificate, for 127.0.0.1, is made by
/// openssl for the test and is its own CA.
pub(crate) struct TlsFront {
    /// `https://127.0.0.1:PORT`.
    url: String,
    /// The certificate, PEM: the kubeconfig's certificate-authority-data.
    certificate: String,
    /// Its own runtime: the test's thread blocks while kubectl runs.
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl TlsFront {
    pub(crate) fn before(dir: &std::path::Path, server: &Server) -> TlsFront {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let (cert, key) = (dir.join("front.crt"), dir.join("front.key"));
        let made = Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
            ])
            .args(["-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"])
            .args(["-addext", "subjectAltName=IP:127.0.0.1"])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .expect("openssl runs");
        assert!(
            made.status.success(),
            "{}",
            String::from_utf8_lossy(&made.stderr)
        );
        let chain = vec![CertificateDer::from_pem_file(&cert).expect("the certificate")];
        let private = PrivateKeyDer::from_pem_file(&key).expect("the key");
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(chain, private)
            .expect("a TLS configuration");
        let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let backend = server.root().trim_start_matches("http://").to_string();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((client, _)) = listener.accept().await {
                let (acceptor, backend) = (acceptor.clone(), backend.clone());
                tokio::spawn(async move {
                    let Ok(mut client) = acceptor.accept(client).await else {
                        return;
                    };
                    let Ok(mut upstream) = tokio::net::TcpStream::connect(&backend).await else {
                        return;
                    };
                    let _ = relay_bytes(&mut client, &mut upstream).await;
                });
            }
        });
        TlsFront {
            url,
            certificate: std::fs::read_to_string(&cert).unwrap(),
            runtime: Some(runtime),
        }
    }
}

/// Bytes waiting to go one way.
struct Pending {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    read_done: bool,
    shut: bool,
}

impl Pending {
    fn new() -> Pending {
        Pending {
            buf: vec![0; 16 * 1024].into_boxed_slice(),
            start: 0,
            end: 0,
            read_done: false,
            shut: false,
        }
    }

    /// Moves what `from` has to `to` until one of them must wait; Ready once `from` ended
    /// and all of it went.
    fn pump<R, W>(
        &mut self,
        cx: &mut std::task::Context<'_>,
        from: &mut R,
        to: &mut W,
    ) -> std::task::Poll<std::io::Result<()>>
    where
        R: tokio::io::AsyncRead + Unpin,
        W: tokio::io::AsyncWrite + Unpin,
    {
        use std::pin::Pin;
        use std::task::Poll;
        loop {
            if self.start < self.end {
                match Pin::new(&mut *to).poll_write(cx, &self.buf[self.start..self.end]) {
                    Poll::Ready(Ok(n)) => self.start += n,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => return Poll::Pending,
                }
                continue;
            }
            if self.read_done {
                if !self.shut {
                    match Pin::new(&mut *to).poll_shutdown(cx) {
                        Poll::Ready(_) => self.shut = true,
                        Poll::Pending => return Poll::Pending,
                    }
                }
                return Poll::Ready(Ok(()));
            }
            match Pin::new(&mut *to).poll_flush(cx) {
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) | Poll::Pending => {}
            }
            let mut read = tokio::io::ReadBuf::new(&mut self.buf);
            match Pin::new(&mut *from).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) => {
                    let n = read.filled().len();
                    (self.start, self.end) = (0, n);
                    self.read_done = n == 0;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// Copies both ways until both sides have ended (tokio's `copy_bidirectional` is behind a
/// feature the build does not turn on).
async fn relay_bytes<A, B>(a: &mut A, b: &mut B) -> std::io::Result<()>
where
    A: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    B: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut up, mut down) = (Pending::new(), Pending::new());
    let (mut up_done, mut down_done) = (false, false);
    std::future::poll_fn(|cx| {
        if !up_done {
            match up.pump(cx, a, b) {
                std::task::Poll::Ready(Ok(())) => up_done = true,
                std::task::Poll::Ready(Err(e)) => return std::task::Poll::Ready(Err(e)),
                std::task::Poll::Pending => {}
            }
        }
        if !down_done {
            match down.pump(cx, b, a) {
                std::task::Poll::Ready(Ok(())) => down_done = true,
                std::task::Poll::Ready(Err(e)) => return std::task::Poll::Ready(Err(e)),
                std::task::Poll::Pending => {}
            }
        }
        if up_done && down_done {
            std::task::Poll::Ready(Ok(()))
        } else {
            std::task::Poll::Pending
        }
    })
    .await
}
