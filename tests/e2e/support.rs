//! The control plane, namespaces, k8sailor processes and polling helpers the tests share.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use kube::api::{DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde_json::Value;

pub struct Cluster {
    pub kubeconfig: PathBuf,
}

pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// reqwest is built with rustls but no crypto provider of its own (ring is the server's, and
/// kube's): building any client, even a plain HTTP one, needs the process default set first.
/// Every test reaches [`cluster`] or [`Server::start_command`] before it makes a client.
fn install_tls_provider() {
    // Err: already installed, by an earlier test or by kube.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The control plane of this test run; a failure to start it fails every test that needs it.
pub fn cluster() -> &'static Cluster {
    install_tls_provider();
    static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();
    let cluster = CLUSTER.get_or_init(|| {
        if let Some(kc) = std::env::var_os("K8SAILOR_TEST_KUBECONFIG") {
            return Ok(Cluster {
                kubeconfig: kc.into(),
            });
        }
        let dir = repo()
            .join("target")
            .join(format!("e2e-cluster-{}", std::process::id()));
        // kwok's nodes without a scheduler: pods that name one run and log (tests/e2e/logs.rs),
        // every other pod stays Pending, as the other tests expect.
        Cluster::up(&dir, &["--log-nodes"])
    });
    match cluster {
        Ok(c) => c,
        Err(e) => panic!("the local control plane is not available, so this test cannot run: {e}"),
    }
}

impl Cluster {
    /// `hack/cluster up DIR ARGS`, torn down by itself when this test process ends.
    pub fn up(dir: &Path, args: &[&str]) -> Result<Cluster, String> {
        let output = Command::new(repo().join("hack/cluster"))
            .arg("up")
            .arg(dir)
            .arg("--owner-pid")
            .arg(std::process::id().to_string())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run hack/cluster: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "hack/cluster up failed ({}):\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        Ok(Cluster {
            kubeconfig: dir.join("kubeconfig"),
        })
    }

    pub async fn client(&self) -> Client {
        let kc = Kubeconfig::read_from(&self.kubeconfig).expect("readable kubeconfig");
        let mut config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .expect("valid kubeconfig");
        // The apiserver's 429, 503 and 504 are answers the tests compare, not to be retried.
        config.default_retry = false;
        Client::try_from(config).expect("a client")
    }
}

/// A namespace for one test, deleted when the test ends.
pub struct TestNamespace {
    pub name: String,
    pub client: Client,
}

impl TestNamespace {
    pub async fn new(test: &str) -> TestNamespace {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "e2e-{test}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let client = cluster().client().await;
        let ns: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("create the test namespace");
        TestNamespace { name, client }
    }

    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }

    /// Waits until the controller-manager has given the namespace what it gives every new one,
    /// its `kube-root-ca.crt` ConfigMap and its `default` ServiceAccount: they come a moment
    /// after the namespace, so a test that compares the namespace's contents as k8sailor and
    /// the apiserver show them at two moments must not begin before they are there.
    pub async fn wait_for_defaults(&self) {
        let config_maps = self.api::<ConfigMap>();
        let accounts = self.api::<ServiceAccount>();
        let what = format!(
            "the kube-root-ca.crt and default of namespace {}",
            self.name
        );
        eventually(SOON, &what, || async {
            let config_map = config_maps.get_opt("kube-root-ca.crt").await.ok()?;
            let account = accounts.get_opt("default").await.ok()?;
            (config_map.is_some() && account.is_some()).then_some(())
        })
        .await;
    }
}

/// Runs async cleanup from a `Drop`: the test's runtime is blocked in the drop and its
/// clients are tied to it, so the work gets a thread, a runtime and a client of its own.
pub fn cleanup_in_background<F, Fut>(work: F)
where
    F: FnOnce(Client) -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    let _ = std::thread::spawn(move || {
        if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            rt.block_on(async { work(cluster().client().await).await });
        }
    })
    .join();
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        let name = self.name.clone();
        // The namespace controller then removes its contents in the background.
        cleanup_in_background(move |client| async move {
            let _ = Api::<Namespace>::all(client)
                .delete(&name, &DeleteParams::background())
                .await;
        });
    }
}

/// A k8sailor process on a free loopback port, killed when dropped.
pub struct Server {
    pub child: Child,
    pub base: String,
    pub http: reqwest::Client,
    logs: Arc<Mutex<String>>,
}

impl Server {
    /// Starts `k8sailor httpserver` against the test cluster with extra arguments.
    pub fn start(args: &[&str]) -> Server {
        Self::start_with(cluster().kubeconfig.to_str().unwrap(), args)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    pub fn start_with(kubeconfig: &str, args: &[&str]) -> Result<Server, String> {
        Self::start_command(Self::command(kubeconfig, args))
    }

    /// The command [`Server::start_with`] runs, for a test that changes its environment.
    pub fn command(kubeconfig: &str, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_k8sailor"));
        command
            .args([
                "httpserver",
                "--listen",
                "127.0.0.1:0",
                "--kubeconfig",
                kubeconfig,
            ])
            .args(["--sync-timeout", "30s"])
            .args(args)
            .env("RUST_LOG", "warn");
        command
    }

    /// GET a path under the API prefix: status and JSON body.
    pub async fn get(&self, path: &str) -> (u16, Value) {
        let (status, body) = self.get_text(path).await;
        let json =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"));
        (status, json)
    }

    /// The names a list route answers, or None until it answers 200 (a Deployment the cache has
    /// not seen yet is a 404).
    pub async fn names(&self, path: &str) -> Option<Vec<String>> {
        let (status, body) = self.get(path).await;
        (status == 200).then(|| names(&body))
    }

    pub async fn get_text(&self, path: &str) -> (u16, String) {
        let res = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("k8sailor answers");
        (res.status().as_u16(), res.text().await.expect("a body"))
    }

    /// A write under the API prefix, with a JSON body when given: status and JSON answer.
    pub async fn send(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        self.send_as(None, method, path, body).await
    }

    /// [`Server::send`] with `Authorization: Bearer <token>` when a token is given.
    pub async fn send_as(
        &self,
        token: Option<&str>,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let res = req.send().await.expect("k8sailor answers");
        let status = res.status().as_u16();
        let text = res.text().await.expect("a body");
        let json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text}"));
        (status, json)
    }
}

impl Drop for Server {
    /// SIGTERM, then SIGKILL if it is still running after a while: a process that exits by
    /// itself writes its coverage profile when hack/test built it instrumented.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = Command::new("kill")
                .args(["-TERM", &self.child.id().to_string()])
                .status();
            let start = Instant::now();
            while matches!(self.child.try_wait(), Ok(None)) && start.elapsed() < SOON {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Tests that load the machine (thousands of connections or containers at once) hold the
/// lock alone; tests of a timeout of a second or two share it, so that they never run beside
/// one of those and a loaded moment cannot pass for a timeout (or hide one).
static LOAD: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// Held for the whole of a heavy test: no timing-sensitive test runs meanwhile.
pub async fn heavy() -> tokio::sync::RwLockWriteGuard<'static, ()> {
    LOAD.write().await
}

/// Held for the whole of a test whose feature is a short timeout.
pub async fn timing_sensitive() -> tokio::sync::RwLockReadGuard<'static, ()> {
    LOAD.read().await
}

/// Raises this process's soft limit of open files to `needed` (the servers it starts inherit
/// it): a test that opens thousands of sockets would otherwise fail at the common default of
/// 1,024, on this side or on k8sailor's.
pub fn raise_open_files_limit(needed: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct it is given, which outlives the call.
    let got = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    assert_eq!(got, 0, "getrlimit: {}", std::io::Error::last_os_error());
    if limit.rlim_cur >= needed {
        return;
    }
    assert!(
        limit.rlim_max >= needed,
        "this test opens {needed} files, over the hard limit of {}: raise it (ulimit -Hn)",
        limit.rlim_max
    );
    limit.rlim_cur = needed;
    // SAFETY: setrlimit only reads the struct it is given, which outlives the call.
    let set = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
    assert_eq!(set, 0, "setrlimit: {}", std::io::Error::last_os_error());
}

/// Polls `check` until it returns Some or `timeout` passes; returns the value and the time taken.
/// How long a change may take to show, on a loaded machine.
pub const SOON: Duration = Duration::from_secs(20);

pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> (T, Duration)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return (v, start.elapsed());
        }
        if start.elapsed() > timeout {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Like [`eventually`], for a check that says what it saw each time the condition did not
/// hold: on timeout the last of it is shown.
pub async fn eventually_shown<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let start = Instant::now();
    loop {
        let seen = match check().await {
            Ok(v) => return v,
            Err(seen) => seen,
        };
        if start.elapsed() > timeout {
            panic!("timed out after {timeout:?} waiting for {what}; last seen: {seen}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether `group` is a built-in one: other tests' custom resources come and go meanwhile.
pub fn built_in_group(group: &str) -> bool {
    !group.contains('.') || group.ends_with(".k8s.io")
}

/// Discovery of the built-in groups only: a group another test deletes between discovery's
/// list of groups and its read of that group's resources fails the whole run with a 404.
pub async fn built_in_discovery(client: &Client) -> kube::Discovery {
    let groups = client.list_api_groups().await.expect("the API groups");
    let mut built_in: Vec<&str> = groups
        .groups
        .iter()
        .map(|group| group.name.as_str())
        .filter(|name| built_in_group(name))
        .collect();
    built_in.push(kube::discovery::ApiGroup::CORE_GROUP);
    kube::Discovery::new(client.clone())
        .filter(&built_in)
        .run()
        .await
        .expect("discovery of the built-in groups")
}

pub fn names(list: &Value) -> Vec<String> {
    list["data"]
        .as_array()
        .unwrap_or_else(|| panic!("a list: {list}"))
        .iter()
        .map(|i| i["name"].as_str().unwrap().to_string())
        .collect()
}

/// A continue token as k8sailor issues it: URL-safe base64 of a JSON object (`rv`, `q`, `t`,
/// `after`). Tests decode one to forge another that passes decoding and reaches the checks
/// behind it.
pub fn decode_token(token: &str) -> Value {
    use base64::Engine;
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .unwrap_or_else(|e| panic!("a continue token is base64: {e}: {token}"));
    serde_json::from_slice(&json).unwrap_or_else(|e| panic!("a continue token is JSON: {e}"))
}

/// The token of `fields`, encoded as k8sailor encodes its own.
pub fn encode_token(fields: &Value) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(fields.to_string())
}

/// Labels as a JSON object.
fn labels_json(labels: &[(&str, &str)]) -> Value {
    labels
        .iter()
        .map(|(k, v)| (k.to_string(), Value::from(*v)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// A bare Pod (no controller) with one container and the given labels.
pub fn pod(name: &str, labels: &[(&str, &str)]) -> k8s_openapi::api::core::v1::Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": labels_json(labels)},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}
    }))
    .unwrap()
}

pub fn deployment(
    name: &str,
    replicas: i32,
    labels: &[(&str, &str)],
) -> k8s_openapi::api::apps::v1::Deployment {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": labels_json(labels)},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "nginx:1.27"}]}
            }
        }
    }))
    .unwrap()
}

impl Server {
    /// Like [`Server::start_with`] for a command the caller built (its own flags, environment
    /// or wrapper such as `unshare`): waits for the "listening" line, or returns the exit
    /// status and stderr of a process that ended without serving.
    pub fn start_command(mut command: Command) -> Result<Server, String> {
        install_tls_provider();
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {command:?}: {e}"))?;
        // Drained on a thread: an unread pipe would block the server once its buffer fills.
        let stderr = child.stderr.take().unwrap();
        let logs = Arc::new(Mutex::new(String::new()));
        let drain = {
            let logs = logs.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    let mut logs = logs.lock().unwrap_or_else(|e| e.into_inner());
                    logs.push_str(&line);
                    logs.push('\n');
                }
            })
        };
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        let Some(base) = line.trim().strip_prefix("k8sailor listening on ") else {
            let _ = child.kill();
            let status = child.wait().map_err(|e| e.to_string())?;
            let _ = drain.join();
            let logs = logs.lock().unwrap_or_else(|e| e.into_inner()).clone();
            return Err(format!("k8sailor did not start ({status}): {logs}"));
        };
        // A server on TLS is asked through a client that trusts the run's test CA.
        let http = if base.starts_with("https://") {
            crate::tls::test_ca().http_client()
        } else {
            reqwest::Client::new()
        };
        Ok(Server {
            base: base.to_string(),
            child,
            http,
            logs,
        })
    }

    /// GET a path outside the API prefix (probes, metrics): status and text.
    pub async fn probe(&self, path: &str) -> (u16, String) {
        let root = self.base.trim_end_matches("/k8sailor/v0");
        let res = self
            .http
            .get(format!("{root}{path}"))
            .send()
            .await
            .expect("k8sailor answers");
        (res.status().as_u16(), res.text().await.expect("a body"))
    }

    /// What the server logged so far (stderr).
    pub fn logs(&self) -> String {
        self.logs.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The server's logs once they hold `line`: stderr is read by a thread of its own, so a
    /// line written before the answer a test just had may not be read yet.
    pub async fn logged(&self, line: &str) -> String {
        let what = format!("{line:?} in the server's logs");
        eventually_shown(SOON, &what, || async {
            let logs = self.logs();
            if logs.contains(line) {
                Ok(logs)
            } else {
                Err(format!("\n{logs}"))
            }
        })
        .await
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill {signal}");
    }

    /// Waits for the process to exit after a signal; its exit code.
    pub fn exit_code(&mut self, timeout: Duration) -> Option<i32> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("k8sailor still running {timeout:?} after SIGTERM");
    }
}

impl Server {
    /// `http://127.0.0.1:PORT`, without the API prefix.
    pub fn root(&self) -> &str {
        self.base.trim_end_matches("/k8sailor/v0")
    }

    /// A request to `path` under [`Server::root`] with these headers (a `Host` given here is
    /// sent as given): status, headers and body text.
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> (u16, reqwest::header::HeaderMap, String) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self.http.request(method, format!("{}{path}", self.root()));
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        // Bounded, so a request k8sailor never answers fails the test naming it, not hangs it.
        let answer = async {
            let res = req.send().await.expect("k8sailor answers");
            let (status, headers) = (res.status().as_u16(), res.headers().clone());
            (status, headers, res.text().await.expect("a body"))
        };
        tokio::time::timeout(Duration::from_secs(60), answer)
            .await
            .unwrap_or_else(|_| panic!("{path}: no answer within 60 s"))
    }
}

/// A kubeconfig at `path` whose server is `server` (a root URL such as
/// [`Server::root`]) and whose user has no credentials, as an anonymous client of k8sailor
/// with `--auth none` is.
pub fn anonymous_kubeconfig(path: &Path, server: &str) {
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "k8sailor", "cluster": {"server": server}}],
        "contexts": [{"name": "k8sailor", "context": {"cluster": "k8sailor", "user": "anonymous"}}],
        "users": [{"name": "anonymous", "user": {}}],
        "current-context": "k8sailor",
    });
    std::fs::write(path, config.to_string()).unwrap();
}
