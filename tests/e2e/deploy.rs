//! Shipping k8sailor in-cluster: the manifests under config/ pass the apiserver's checks, the
//! shipped ClusterRole is enough to serve (a missing verb stops start-up loudly), and with no
//! kubeconfig k8sailor runs from the service-account files a pod gets.

use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Subject};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::config::Kubeconfig;
use serde_json::{Value, json};

use crate::support::{
    SOON, Server, TestNamespace, cluster, deployment, eventually, names, pod, repo,
};

static SEQ: AtomicU32 = AtomicU32::new(0);

/// The objects of one manifest file under config/, as JSON.
fn manifest(file: &str) -> Vec<Value> {
    let path = repo().join("config").join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()))
        .into_iter()
        .filter(|doc| !doc.is_null())
        .collect()
}

/// The one object of `kind` in `file`, typed.
fn shipped<K: serde::de::DeserializeOwned>(file: &str, kind: &str) -> K {
    let mut found: Vec<Value> = manifest(file)
        .into_iter()
        .filter(|doc| doc["kind"] == kind)
        .collect();
    assert_eq!(found.len(), 1, "config/{file} must hold exactly one {kind}");
    serde_json::from_value(found.remove(0))
        .unwrap_or_else(|e| panic!("the {kind} in config/{file}: {e}"))
}

/// config/rbac.yaml, checked to hang together: the binding grants the role to the account.
pub(crate) struct ShippedRbac {
    account: ServiceAccount,
    role: ClusterRole,
    binding: ClusterRoleBinding,
}

impl ShippedRbac {
    pub(crate) fn load() -> ShippedRbac {
        let account: ServiceAccount = shipped("rbac.yaml", "ServiceAccount");
        let role: ClusterRole = shipped("rbac.yaml", "ClusterRole");
        let binding: ClusterRoleBinding = shipped("rbac.yaml", "ClusterRoleBinding");
        assert_eq!(binding.role_ref.kind, "ClusterRole");
        assert_eq!(Some(&binding.role_ref.name), role.metadata.name.as_ref());
        let subjects = binding.subjects.clone().unwrap_or_default();
        assert!(
            subjects.iter().any(|s| s.kind == "ServiceAccount"
                && Some(&s.name) == account.metadata.name.as_ref()
                && s.namespace == account.metadata.namespace),
            "the ClusterRoleBinding does not bind the shipped ServiceAccount: {subjects:?}"
        );
        ShippedRbac {
            account,
            role,
            binding,
        }
    }

    pub(crate) fn rules(&self) -> Vec<PolicyRule> {
        self.role.rules.clone().unwrap_or_default()
    }
}

/// Deletes cluster-scoped objects a test made, however the test ends.
#[derive(Default)]
pub(crate) struct ClusterScoped {
    namespaces: Vec<String>,
    roles: Vec<String>,
    bindings: Vec<String>,
}

impl Drop for ClusterScoped {
    fn drop(&mut self) {
        let (namespaces, roles, bindings) = (
            std::mem::take(&mut self.namespaces),
            std::mem::take(&mut self.roles),
            std::mem::take(&mut self.bindings),
        );
        // As in TestNamespace: a runtime and client of our own, since Drop cannot await.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            rt.block_on(async {
                let client = cluster().client().await;
                let dp = DeleteParams::background();
                for name in bindings {
                    let _ = Api::<ClusterRoleBinding>::all(client.clone())
                        .delete(&name, &dp)
                        .await;
                }
                for name in roles {
                    let _ = Api::<ClusterRole>::all(client.clone())
                        .delete(&name, &dp)
                        .await;
                }
                for name in namespaces {
                    let _ = Api::<Namespace>::all(client.clone())
                        .delete(&name, &dp)
                        .await;
                }
            })
        })
        .join();
    }
}

/// A private directory under target/ (not under /run, which the in-cluster test hides).
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn new(what: &str) -> TempDir {
        let path = repo().join("target").join(format!(
            "e2e-{what}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&path)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
        TempDir(path)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }

    pub(crate) fn write(&self, name: &str, contents: &[u8]) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The test cluster's API URL and CA bundle (PEM), from its kubeconfig.
pub(crate) fn endpoint() -> (String, Vec<u8>) {
    let path = &cluster().kubeconfig;
    let kc = Kubeconfig::read_from(path).expect("the test cluster's kubeconfig");
    let current = kc.current_context.clone().expect("a current-context");
    let context = kc
        .contexts
        .iter()
        .find(|c| c.name == current)
        .and_then(|c| c.context.clone())
        .expect("the current context");
    let named = kc
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .and_then(|c| c.cluster.clone())
        .expect("the current context's cluster");
    let server = named.server.clone().expect("a server URL");
    let ca = if let Some(data) = &named.certificate_authority_data {
        base64_decode(data)
    } else if let Some(file) = &named.certificate_authority {
        std::fs::read(file).unwrap_or_else(|e| panic!("cannot read the cluster CA {file}: {e}"))
    } else {
        panic!("the test cluster's kubeconfig {} has no CA", path.display())
    };
    (server, ca)
}

fn base64_decode(data: &str) -> Vec<u8> {
    let mut child = Command::new("base64")
        .arg("-d")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("coreutils base64");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(data.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "base64 -d failed on the CA data");
    out.stdout
}

/// A copy of the shipped ServiceAccount in `ns`, bound to a cluster-wide role with `rules`
/// (named after the shipped role, unique to this run), and a fresh token for it.
pub(crate) async fn account_with_rules(
    ns: &TestNamespace,
    rbac: &ShippedRbac,
    rules: Vec<PolicyRule>,
    cleanup: &mut ClusterScoped,
) -> String {
    let name = format!(
        "{}-e2e-{}-{}",
        rbac.role.metadata.name.as_deref().unwrap(),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let pp = PostParams::default();

    let mut role = rbac.role.clone();
    role.metadata.name = Some(name.clone());
    role.rules = Some(rules);
    cleanup.roles.push(name.clone());
    Api::<ClusterRole>::all(ns.client.clone())
        .create(&pp, &role)
        .await
        .expect("create the ClusterRole");

    let mut account = rbac.account.clone();
    account.metadata.namespace = Some(ns.name.clone());
    let account_name = account.metadata.name.clone().unwrap();
    let accounts = ns.api::<ServiceAccount>();
    accounts
        .create(&pp, &account)
        .await
        .expect("create the ServiceAccount");

    let mut binding = rbac.binding.clone();
    binding.metadata.name = Some(name.clone());
    binding.role_ref.name = name.clone();
    binding.subjects = Some(vec![Subject {
        kind: "ServiceAccount".into(),
        name: account_name.clone(),
        namespace: Some(ns.name.clone()),
        ..Subject::default()
    }]);
    cleanup.bindings.push(name.clone());
    Api::<ClusterRoleBinding>::all(ns.client.clone())
        .create(&pp, &binding)
        .await
        .expect("create the ClusterRoleBinding");

    token_of(&accounts, &account_name).await
}

/// A fresh token (one hour) for a ServiceAccount.
async fn token_of(accounts: &Api<ServiceAccount>, name: &str) -> String {
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let answer = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .expect("a TokenRequest for the ServiceAccount");
    answer.status.expect("a token in the answer").token
}

/// A kubeconfig for the test cluster that authenticates with `token` only.
pub(crate) fn token_kubeconfig(dir: &TempDir, token: &str) -> String {
    let (server, ca) = endpoint();
    let ca = dir.write("ca.crt", &ca);
    // JSON is YAML, which kubeconfig files are.
    let kubeconfig = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": server, "certificate-authority": ca}}],
        "users": [{"name": "e2e", "user": {"token": token}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "e2e"}}],
        "current-context": "e2e",
    });
    let path = dir.write("kubeconfig", kubeconfig.to_string().as_bytes());
    path.to_str().unwrap().to_string()
}

/// Creates a two-replica Deployment and waits until k8sailor lists it and its two pods.
async fn serves_a_new_deployment(ns: &TestNamespace, server: &Server) {
    ns.api::<Deployment>()
        .create(&PostParams::default(), &deployment("web", 2, &[]))
        .await
        .expect("create the Deployment");
    let list = format!("/deployments?namespace={}", ns.name);
    eventually(SOON, "web in /deployments", || async {
        let (status, body) = server.get(&list).await;
        (status == 200 && names(&body) == ["web"]).then_some(())
    })
    .await;
    let pods = format!("/deployments/web/pods?namespace={}", ns.name);
    let (body, _) = eventually(SOON, "two pods of web", || async {
        let (status, body) = server.get(&pods).await;
        (status == 200 && names(&body).len() == 2).then_some(body)
    })
    .await;
    for pod in body["data"].as_array().unwrap() {
        assert_eq!(pod["deployment"], "web", "{pod}");
    }
}

/// The kubectl that `hack/cluster build` made (cached after the first build).
pub(crate) fn kubectl() -> PathBuf {
    let out = Command::new(repo().join("hack/cluster"))
        .arg("build")
        .stdin(Stdio::null())
        .output()
        .expect("run hack/cluster build");
    assert!(
        out.status.success(),
        "hack/cluster build failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = String::from_utf8_lossy(&out.stdout);
    let kubectl = PathBuf::from(dir.trim().lines().last().unwrap_or_default()).join("kubectl");
    assert!(kubectl.is_file(), "no kubectl at {}", kubectl.display());
    kubectl
}

#[test]
fn the_shipped_cluster_role_only_reads_what_k8sailor_needs() {
    let rbac = ShippedRbac::load();
    let mut granted = BTreeSet::new();
    for rule in rbac.rules() {
        assert!(
            rule.resource_names.is_none() && rule.non_resource_urls.is_none(),
            "unexpected rule {rule:?}"
        );
        for group in rule.api_groups.clone().unwrap_or_default() {
            for resource in rule.resources.clone().unwrap_or_default() {
                for verb in &rule.verbs {
                    granted.insert(format!("{group}/{resource}:{verb}"));
                }
            }
        }
    }
    let expected: BTreeSet<String> = [
        "/pods:get",
        "/pods:list",
        "/pods:watch",
        "/services:get",
        "/services:list",
        "/services:watch",
        "/namespaces:get",
        "/namespaces:list",
        "/namespaces:watch",
        "networking.k8s.io/ingresses:get",
        "networking.k8s.io/ingresses:list",
        "networking.k8s.io/ingresses:watch",
        "apps/deployments:get",
        "apps/deployments:list",
        "apps/deployments:watch",
        "apps/replicasets:get",
        "apps/replicasets:list",
        "apps/replicasets:watch",
        "/events:list",
        "/events:watch",
        "/configmaps:list",
        "/configmaps:watch",
        "/persistentvolumeclaims:list",
        "/persistentvolumeclaims:watch",
        "/persistentvolumes:list",
        "/persistentvolumes:watch",
        "/serviceaccounts:list",
        "/serviceaccounts:watch",
        "/nodes:list",
        "/nodes:watch",
        "/resourcequotas:list",
        "/resourcequotas:watch",
        "/limitranges:list",
        "/limitranges:watch",
        "/endpoints:list",
        "/endpoints:watch",
        "events.k8s.io/events:list",
        "events.k8s.io/events:watch",
        "apps/statefulsets:list",
        "apps/statefulsets:watch",
        "apps/daemonsets:list",
        "apps/daemonsets:watch",
        "batch/jobs:list",
        "batch/jobs:watch",
        "batch/cronjobs:list",
        "batch/cronjobs:watch",
        "autoscaling/horizontalpodautoscalers:list",
        "autoscaling/horizontalpodautoscalers:watch",
        "policy/poddisruptionbudgets:list",
        "policy/poddisruptionbudgets:watch",
        "discovery.k8s.io/endpointslices:list",
        "discovery.k8s.io/endpointslices:watch",
        "networking.k8s.io/ingressclasses:list",
        "networking.k8s.io/ingressclasses:watch",
        "networking.k8s.io/networkpolicies:list",
        "networking.k8s.io/networkpolicies:watch",
        "storage.k8s.io/storageclasses:list",
        "storage.k8s.io/storageclasses:watch",
        "scheduling.k8s.io/priorityclasses:list",
        "scheduling.k8s.io/priorityclasses:watch",
        "coordination.k8s.io/leases:list",
        "coordination.k8s.io/leases:watch",
        "apiextensions.k8s.io/customresourcedefinitions:list",
        "apiextensions.k8s.io/customresourcedefinitions:watch",
        // The /logs routes relay pods/log.
        "/pods/log:get",
        "rbac.authorization.k8s.io/roles:list",
        "rbac.authorization.k8s.io/roles:watch",
        "rbac.authorization.k8s.io/rolebindings:list",
        "rbac.authorization.k8s.io/rolebindings:watch",
        "rbac.authorization.k8s.io/clusterroles:list",
        "rbac.authorization.k8s.io/clusterroles:watch",
        "rbac.authorization.k8s.io/clusterrolebindings:list",
        "rbac.authorization.k8s.io/clusterrolebindings:watch",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(granted, expected);
}

/// `kubectl apply --dry-run=server -k dir` (dir under the repository): the objects the
/// apiserver would create, after checking that it accepted them without warnings.
fn dry_run(dir: &str) -> Vec<Value> {
    let out = Command::new(kubectl())
        .arg("--kubeconfig")
        .arg(&cluster().kubeconfig)
        .args(["apply", "--dry-run=server", "-o", "json", "-k"])
        .arg(repo().join(dir))
        .stdin(Stdio::null())
        .output()
        .expect("run kubectl");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "kubectl apply --dry-run=server -k {dir} failed: {stderr}"
    );
    // kubectl warns that a namespace created above lacks its last-applied annotation: harmless.
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("Warning:") && !l.contains("last-applied-configuration"))
        .collect();
    assert!(
        warnings.is_empty(),
        "the apiserver warned about {dir}: {warnings:#?}"
    );

    let answer: Value = serde_json::from_slice(&out.stdout).expect("kubectl -o json");
    match answer["kind"].as_str() {
        Some("List") => answer["items"].as_array().unwrap().clone(),
        _ => vec![answer],
    }
}

/// `kind/namespace/name`, or `kind/name` for cluster-scoped objects.
fn object_names(items: &[Value]) -> BTreeSet<String> {
    items
        .iter()
        .map(|o| {
            let m = &o["metadata"];
            match m["namespace"].as_str() {
                Some(ns) => format!("{}/{ns}/{}", o["kind"], m["name"]),
                None => format!("{}/{}", o["kind"], m["name"]),
            }
        })
        .map(|s| s.replace('"', ""))
        .collect()
}

fn of_kind<'a>(items: &'a [Value], kind: &str) -> &'a Value {
    items
        .iter()
        .find(|o| o["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind}"))
}

/// The k8sailor container's arguments in a Deployment.
fn container_args(deployment: &Value) -> Vec<String> {
    serde_json::from_value(deployment["spec"]["template"]["spec"]["containers"][0]["args"].clone())
        .expect("string arguments")
}

/// `kubectl kustomize dir`: the objects `kubectl apply -k dir` would send.
fn kustomize(dir: &str) -> Vec<Value> {
    let out = Command::new(kubectl())
        .arg("kustomize")
        .arg(repo().join(dir))
        .stdin(Stdio::null())
        .output()
        .expect("run kubectl kustomize");
    assert!(
        out.status.success(),
        "kubectl kustomize {dir} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_saphyr::from_multiple::<Value>(&String::from_utf8_lossy(&out.stdout))
        .expect("kustomize's YAML")
        .into_iter()
        .filter(|doc| !doc.is_null())
        .collect()
}

const SHIPPED_OBJECTS: [&str; 8] = [
    "Namespace/k8sailor",
    "ServiceAccount/k8sailor/k8sailor",
    "ClusterRole/k8sailor-reader",
    "ClusterRoleBinding/k8sailor-reader",
    "ClusterRoleBinding/k8sailor-auth-delegator",
    "Deployment/k8sailor/k8sailor",
    "PodDisruptionBudget/k8sailor/k8sailor",
    "Service/k8sailor/k8sailor",
];

#[tokio::test]
async fn the_manifests_and_the_no_auth_overlay_pass_a_server_side_dry_run() {
    let client = cluster().client().await;
    let mut cleanup = ClusterScoped::default();

    // The apiserver admits namespaced objects, even in a dry run, only into a namespace that
    // exists: create the shipped one for real. Its Pod Security labels then make the
    // apiserver warn about a pod template that breaks the restricted profile.
    let shipped_ns: Namespace = shipped("namespace.yaml", "Namespace");
    let ns_name = shipped_ns.metadata.name.clone().unwrap();
    let namespaces = Api::<Namespace>::all(client);
    let (created, _) = eventually(SOON, "namespace k8sailor to exist", || async {
        match namespaces.get_opt(&ns_name).await.expect("get namespace") {
            // A previous run's namespace still terminating: wait for it to go.
            Some(ns) if ns.metadata.deletion_timestamp.is_some() => None,
            Some(_) => Some(false),
            None => namespaces
                .create(&PostParams::default(), &shipped_ns)
                .await
                .ok()
                .map(|_| true),
        }
    })
    .await;
    if created {
        cleanup.namespaces.push(ns_name.clone());
    }

    let items = dry_run("config");
    let expected: BTreeSet<String> = SHIPPED_OBJECTS.into_iter().map(String::from).collect();
    assert_eq!(object_names(&items), expected);

    // The pieces fit: the pod runs as the bound account, the probes and the Service reach the
    // port k8sailor listens on.
    let deployment = of_kind(&items, "Deployment");
    let pod = &deployment["spec"]["template"];
    let service = &of_kind(&items, "Service")["spec"];
    assert_eq!(pod["spec"]["serviceAccountName"], "k8sailor");
    let selector = service["selector"].as_object().unwrap();
    assert!(
        !selector.is_empty(),
        "a Service without a selector reaches no pod"
    );
    for (key, value) in selector {
        assert_eq!(&pod["metadata"]["labels"][key], value, "selector {key}");
    }
    let container = &pod["spec"]["containers"][0];
    assert_eq!(
        container["ports"],
        json!([{"name": "https", "containerPort": 8088, "protocol": "TCP"},
               {"name": "health", "containerPort": 8089, "protocol": "TCP"}])
    );
    assert_eq!(service["ports"][0]["targetPort"], "https");
    assert_eq!(service["ports"][0]["port"], 8088);
    // Two replicas, never both disrupted at once, each with room for a large cluster's cache.
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(
        deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"],
        0
    );
    let budget = &of_kind(&items, "PodDisruptionBudget")["spec"];
    assert_eq!(budget["minAvailable"], 1);
    assert_eq!(
        budget["selector"]["matchLabels"], pod["metadata"]["labels"],
        "the budget covers the Deployment's pods"
    );
    assert_eq!(container["resources"]["limits"]["memory"], "1536Mi");
    assert_eq!(container["resources"]["requests"]["memory"], "512Mi");
    // Reachable by every pod through the Service, so callers authenticate.
    assert_eq!(
        container_args(deployment),
        [
            "--listen=0.0.0.0:8088",
            "--auth=delegated",
            "--log-format=json",
            "--shutdown-delay=5s",
            "--health-listen=0.0.0.0:8089",
            "--tls-cert-file=/etc/k8sailor/tls/tls.crt",
            "--tls-private-key-file=/etc/k8sailor/tls/tls.key",
        ]
    );
    // The certificate comes from a Secret volume the kubelet updates in place when it is
    // rotated (a subPath mount would never see the new files).
    assert_eq!(
        container["volumeMounts"],
        json!([{"name": "tls", "mountPath": "/etc/k8sailor/tls", "readOnly": true}])
    );
    let volume = &pod["spec"]["volumes"][0];
    assert_eq!(volume["name"], "tls");
    assert_eq!(volume["secret"]["secretName"], "k8sailor-tls");
    // cert-manager's overlay issues exactly that Secret, for the Service's names.
    let issued = kustomize("overlays/cert-manager");
    let certificate = issued
        .iter()
        .find(|o| o["kind"] == "Certificate" && o["metadata"]["name"] == "k8sailor-tls")
        .expect("the serving Certificate");
    assert_eq!(certificate["spec"]["secretName"], "k8sailor-tls");
    assert!(
        certificate["spec"]["dnsNames"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "k8sailor.k8sailor.svc"),
        "{certificate}"
    );
    // The plain-HTTP option: no TLS flags, no volume, the port named for what it serves.
    let plain = dry_run("overlays/plain-http");
    assert_eq!(object_names(&plain), expected);
    let plain_deployment = of_kind(&plain, "Deployment");
    assert!(
        !container_args(plain_deployment)
            .iter()
            .any(|a| a.starts_with("--tls")),
        "{plain_deployment}"
    );
    assert!(plain_deployment["spec"]["template"]["spec"]["volumes"].is_null());
    assert_eq!(
        of_kind(&plain, "Service")["spec"]["ports"][0]["targetPort"],
        "http"
    );
    // Probes and the scrape on the health listener, which API clients cannot crowd out.
    for (probe, path) in [("livenessProbe", "/livez"), ("readinessProbe", "/readyz")] {
        assert_eq!(container[probe]["httpGet"]["path"], path, "{probe}");
        assert_eq!(container[probe]["httpGet"]["port"], "health", "{probe}");
    }
    assert_eq!(
        pod["metadata"]["annotations"],
        json!({"prometheus.io/scrape": "true", "prometheus.io/port": "8089",
               "prometheus.io/path": "/metrics"})
    );
    // Delegated auth needs the account to review tokens and requests.
    let delegator = items
        .iter()
        .find(|o| o["metadata"]["name"] == "k8sailor-auth-delegator")
        .unwrap();
    assert_eq!(delegator["roleRef"]["name"], "system:auth-delegator");
    assert_eq!(
        delegator["subjects"],
        json!([{"kind": "ServiceAccount", "name": "k8sailor", "namespace": "k8sailor"}])
    );

    // The opt-out: no auth, said so explicitly, no delegator binding, and a NetworkPolicy
    // that lets only the namespace's own pods in.
    let items = dry_run("overlays/no-auth");
    let mut expected = expected;
    expected.remove("ClusterRoleBinding/k8sailor-auth-delegator");
    expected.insert("NetworkPolicy/k8sailor/k8sailor-no-auth".into());
    assert_eq!(object_names(&items), expected);
    let args = container_args(of_kind(&items, "Deployment"));
    for arg in [
        "--listen=0.0.0.0:8088",
        "--auth=none",
        "--allow-unauthenticated",
    ] {
        assert!(args.iter().any(|a| a == arg), "{arg} in {args:?}");
    }
    assert!(!args.iter().any(|a| a == "--auth=delegated"), "{args:?}");
    let policy = &of_kind(&items, "NetworkPolicy")["spec"];
    assert_eq!(
        policy["podSelector"]["matchLabels"],
        pod["metadata"]["labels"]
    );
    assert_eq!(policy["policyTypes"], json!(["Ingress"]));
    assert_eq!(
        policy["ingress"],
        json!([{"from": [{"podSelector": {}}], "ports": [{"port": "https", "protocol": "TCP"},
                                                          {"port": "health", "protocol": "TCP"}]}])
    );
}

/// The k8sailor container's arguments in `kubectl kustomize dir`, but listening on free
/// loopback ports (as [`Server::start_with`] does) instead of 0.0.0.0:8088 and :8089, with a
/// certificate of the test CA where the pod's would be mounted.
fn shipped_args_on_loopback(dir: &str) -> Vec<String> {
    let items = kustomize(dir);
    let serving = crate::tls::test_ca().issue();
    container_args(of_kind(&items, "Deployment"))
        .into_iter()
        .filter(|a| !a.starts_with("--listen"))
        .map(|a| {
            if a.starts_with("--health-listen=") {
                "--health-listen=127.0.0.1:0".to_string()
            } else if a.starts_with("--tls-cert-file=") {
                format!("--tls-cert-file={}", serving.cert.display())
            } else if a.starts_with("--tls-private-key-file=") {
                format!("--tls-private-key-file={}", serving.key.display())
            } else {
                a
            }
        })
        .collect()
}

#[tokio::test]
async fn the_shipped_arguments_need_a_token_and_the_overlays_serve_the_service_names() {
    let kubeconfig = cluster().kubeconfig.to_str().unwrap();
    let args = shipped_args_on_loopback("config");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = Server::start_with(kubeconfig, &args)
        .unwrap_or_else(|e| panic!("k8sailor with the shipped arguments {args:?}: {e}"));
    let (status, _, body) = server.request("GET", "/k8sailor/v0/pods", &[]).await;
    assert_eq!(status, 401, "{body}");
    // With a token to check, the Host check has nothing to add: a rebound page has none.
    let (status, _, body) = server
        .request("GET", "/k8sailor/v0/pods", &[("Host", "evil.example")])
        .await;
    assert_eq!(status, 401, "{body}");
    let (status, _, body) = server
        .request(
            "GET",
            "/k8sailor/v0/ping",
            &[("Host", "k8sailor.k8sailor.svc")],
        )
        .await;
    assert_eq!(status, 200, "{body}");
    drop(server);

    let args = shipped_args_on_loopback("overlays/no-auth");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = Server::start_with(kubeconfig, &args)
        .unwrap_or_else(|e| panic!("k8sailor with the no-auth overlay's arguments {args:?}: {e}"));
    for host in [
        "k8sailor:8088",
        "k8sailor.k8sailor:8088",
        "k8sailor.k8sailor.svc:8088",
        "k8sailor.k8sailor.svc.cluster.local:8088",
        "localhost:8088",
    ] {
        let (status, _, body) = server
            .request("GET", "/k8sailor/v0/pods", &[("Host", host)])
            .await;
        assert_eq!(status, 200, "{host}: {body}");
    }
    let (status, _, body) = server
        .request("GET", "/k8sailor/v0/pods", &[("Host", "evil.example")])
        .await;
    assert_eq!(status, 421, "{body}");
}

#[tokio::test]
async fn the_shipped_cluster_role_is_enough_to_serve() {
    let ns = TestNamespace::new("rbac").await;
    let rbac = ShippedRbac::load();
    let mut cleanup = ClusterScoped::default();
    let token = account_with_rules(&ns, &rbac, rbac.rules(), &mut cleanup).await;
    let dir = TempDir::new("rbac");
    let kubeconfig = token_kubeconfig(&dir, &token);

    // All namespaces, as the shipped Deployment runs.
    let server = Server::start_with(&kubeconfig, &[])
        .unwrap_or_else(|e| panic!("k8sailor with the shipped ClusterRole: {e}"));
    serves_a_new_deployment(&ns, &server).await;
    // It only reads: a write is the apiserver's 403, reason included.
    let (status, answer) = server
        .send(
            "PUT",
            &format!("/deployments/web/replicas?namespace={}&replicas=1", ns.name),
            None,
        )
        .await;
    assert_eq!(status, 403, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("forbidden"),
        "{answer}"
    );
}

#[tokio::test]
async fn the_opt_in_writer_role_is_enough_for_every_write() {
    let ns = TestNamespace::new("writer").await;
    let rbac = ShippedRbac::load();
    let writer: ClusterRole = shipped("rbac-writer.yaml", "ClusterRole");
    let writer_binding: ClusterRoleBinding = shipped("rbac-writer.yaml", "ClusterRoleBinding");
    assert_eq!(
        writer_binding.role_ref.name,
        writer.metadata.name.clone().unwrap()
    );
    assert_eq!(
        writer_binding.subjects, rbac.binding.subjects,
        "it binds the shipped account"
    );
    let mut rules = rbac.rules();
    rules.extend(writer.rules.unwrap_or_default());
    let mut cleanup = ClusterScoped::default();
    let token = account_with_rules(&ns, &rbac, rules, &mut cleanup).await;
    let dir = TempDir::new("writer");
    let server = Server::start_with(&token_kubeconfig(&dir, &token), &[])
        .unwrap_or_else(|e| panic!("k8sailor with the writer role: {e}"));
    let at = |path: &str| format!("{path}?namespace={}", ns.name);
    let body = serde_json::json!({"replicas": 1, "containers": [{"image": "nginx"}]});
    let (status, answer) = server
        .send("POST", &at("/deployments/web"), Some(body))
        .await;
    assert_eq!(status, 200, "create: {answer}");
    let pods = at("/deployments/web/pods");
    let (pod, _) = eventually(SOON, "a pod of web", || async {
        server.names(&pods).await.and_then(|p| p.first().cloned())
    })
    .await;
    // Each write done, as the apiserver tells.
    let deployments = ns.api::<Deployment>();
    let pods = ns.api::<k8s_openapi::api::core::v1::Pod>();
    let path = format!("{}&replicas=2", at("/deployments/web/replicas"));
    let (status, answer) = server.send("PUT", &path, None).await;
    assert_eq!(status, 200, "PUT {path}: {answer}");
    let stored = deployments.get("web").await.unwrap();
    assert_eq!(stored.spec.unwrap().replicas, Some(2), "scaled");
    let path = at(&format!("/pods/{pod}"));
    let (status, answer) = server.send("DELETE", &path, None).await;
    assert_eq!(status, 200, "DELETE {path}: {answer}");
    let gone = pods.get_opt(&pod).await.unwrap();
    assert!(
        gone.is_none_or(|p| p.metadata.deletion_timestamp.is_some()),
        "{pod} is deleted"
    );
    let path = at("/deployments/web");
    let (status, answer) = server.send("DELETE", &path, None).await;
    assert_eq!(status, 200, "DELETE {path}: {answer}");
    let gone = deployments.get_opt("web").await.unwrap();
    assert!(
        gone.is_none_or(|d| d.metadata.deletion_timestamp.is_some()),
        "web is deleted"
    );
    // Services and Ingresses: created with the writer role, printed with the reader role.
    for (path, kind, body) in [
        (
            "/services/web",
            "Service",
            serde_json::json!({"services": ["80"]}),
        ),
        (
            "/ingresses/web",
            "Ingress",
            serde_json::json!({"endpoints": ["http://web.example.com/"]}),
        ),
    ] {
        let (status, answer) = server.send("POST", &at(path), Some(body)).await;
        assert_eq!(status, 200, "POST {path}: {answer}");
        assert_eq!(
            (&answer["data"]["kind"], &answer["data"]["metadata"]["name"]),
            (&json!(kind), &json!("web")),
            "POST {path}: {answer}"
        );
        crate::services::assert_printed(&server, &at(&format!("{path}/output")), kind, "web").await;
    }
}

#[tokio::test]
async fn without_watch_on_pods_it_serves_unready_and_says_why_until_granted() {
    let ns = TestNamespace::new("nowatch").await;
    let rbac = ShippedRbac::load();
    let mut rules = rbac.rules();
    let pods = rules
        .iter_mut()
        .find(|r| {
            r.api_groups.as_deref() == Some(&["".to_string()])
                && r.resources
                    .as_deref()
                    .is_some_and(|res| res.contains(&"pods".to_string()))
        })
        .expect("a rule for core pods in config/rbac.yaml");
    assert!(pods.verbs.contains(&"watch".to_string()), "{pods:?}");
    pods.verbs.retain(|v| v != "watch");
    let mut cleanup = ClusterScoped::default();
    let token = account_with_rules(&ns, &rbac, rules, &mut cleanup).await;
    let dir = TempDir::new("nowatch");
    let kubeconfig = token_kubeconfig(&dir, &token);

    // It may list pods, so it syncs and serves, but says it is not ready, and why.
    let server = Server::start_with(&kubeconfig, &[])
        .unwrap_or_else(|e| panic!("k8sailor without watch on pods: {e}"));
    let (body, _) = eventually(SOON, "/readyz to fail on the pod watch", || async {
        let (status, body) = server.probe("/readyz?verbose").await;
        (status == 503 && body.contains("[-]informer-Pod failed")).then_some(body)
    })
    .await;
    assert!(body.contains("forbidden"), "{body}");
    assert!(body.contains("[+]informer-Deployment ok"), "{body}");
    // The logs say why.
    server
        .logged("forbidden by RBAC: cannot watch Pod (pods) in all namespaces")
        .await;

    // Granted, the watch recovers without a restart: ready again, and changes show.
    let role = cleanup.roles.last().unwrap().clone();
    Api::<ClusterRole>::all(ns.client.clone())
        .patch(
            &role,
            &PatchParams::default(),
            &Patch::Merge(json!({"rules": rbac.rules()})),
        )
        .await
        .expect("grant watch on pods");
    let pods = ns.api::<k8s_openapi::api::core::v1::Pod>();
    pods.create(&PostParams::default(), &pod("after-grant", &[]))
        .await
        .unwrap();
    let list = format!("/pods?namespace={}", ns.name);
    // The watch retries with client-go's backoff (up to 30 s between attempts).
    eventually(
        Duration::from_secs(90),
        "ready, with the new pod",
        || async {
            let (status, _) = server.probe("/readyz").await;
            let names = server.names(&list).await?;
            (status == 200 && names == ["after-grant"]).then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn in_cluster_it_uses_the_service_account_files() {
    // kube-rs reads the token and CA from fixed paths under /var/run. The test must not write
    // there, so k8sailor runs in a mount namespace of its own with a tmpfs over that directory.
    let run = std::fs::canonicalize("/var/run").expect("/var/run");
    match Command::new("unshare")
        .args(["--mount", "--propagation", "private", "--", "true"])
        .stdin(Stdio::null())
        .output()
    {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "`unshare --mount` is not permitted on this machine ({}: {}), so in-cluster mode \
             cannot be tested without writing to the real {}; run the tests as root or with \
             CAP_SYS_ADMIN",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim(),
            run.display()
        ),
        Err(e) => panic!("cannot run `unshare` (util-linux), needed for the in-cluster test: {e}"),
    }

    let ns = TestNamespace::new("incluster").await;
    let rbac = ShippedRbac::load();
    let mut cleanup = ClusterScoped::default();
    let token = account_with_rules(&ns, &rbac, rbac.rules(), &mut cleanup).await;
    let dir = TempDir::new("incluster");
    let (server_url, ca) = endpoint();
    let uri: http::Uri = server_url.parse().expect("the cluster URL");
    let host = uri.host().expect("a host").to_string();
    let port = uri.port_u16().unwrap_or(443).to_string();
    let files = dir.0.join("serviceaccount");
    std::fs::create_dir(&files).unwrap();
    dir.write("serviceaccount/token", token.as_bytes());
    dir.write("serviceaccount/ca.crt", &ca);
    dir.write("serviceaccount/namespace", ns.name.as_bytes());
    let home = dir.0.join("home");
    std::fs::create_dir(&home).unwrap();
    let log = dir.0.join("k8sailor.log");

    let script = r#"set -e
mount -t tmpfs -o mode=0755 tmpfs "$1"
mkdir -p "$1/secrets/kubernetes.io/serviceaccount"
cp "$2/token" "$2/ca.crt" "$2/namespace" "$1/secrets/kubernetes.io/serviceaccount/"
exec "$3" httpserver --listen 127.0.0.1:0 --sync-timeout 30s 2>"$4""#;
    let mut command = Command::new("unshare");
    command
        .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg(script)
        .arg("sh")
        .arg(&run)
        .arg(&files)
        .arg(env!("CARGO_BIN_EXE_k8sailor"))
        .arg(&log)
        // Nothing of ours leaks in: no KUBECONFIG, no K8SAILOR_*, a HOME without ~/.kube.
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("KUBERNETES_SERVICE_HOST", &host)
        .env("KUBERNETES_SERVICE_PORT", &port)
        .env("RUST_LOG", "info");
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    let server = Server::start_command(command)
        .unwrap_or_else(|e| panic!("in-cluster k8sailor did not start: {e}\n{}", read_log()));
    let logs = read_log();
    assert!(
        logs.contains("in-cluster service account"),
        "k8sailor did not say it uses the in-cluster config: {logs}"
    );
    serves_a_new_deployment(&ns, &server).await;
}

/// A ServiceAccount in `ns` allowed `verbs` on pods in `ns` only (a Role), and a token for it.
async fn namespace_pod_reader(ns: &TestNamespace, verbs: &[&str]) -> String {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding, RoleRef};
    let pp = PostParams::default();
    let name = "pod-reader";
    let mut account = ServiceAccount::default();
    account.metadata.name = Some(name.into());
    ns.api::<ServiceAccount>()
        .create(&pp, &account)
        .await
        .expect("create the ServiceAccount");
    let mut role = Role::default();
    role.metadata.name = Some(name.into());
    role.rules = Some(vec![PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["pods".into()]),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..PolicyRule::default()
    }]);
    ns.api::<Role>()
        .create(&pp, &role)
        .await
        .expect("create the Role");
    let mut binding = RoleBinding::default();
    binding.metadata.name = Some(name.into());
    binding.role_ref = RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: "Role".into(),
        name: name.into(),
    };
    binding.subjects = Some(vec![Subject {
        kind: "ServiceAccount".into(),
        name: name.into(),
        namespace: Some(ns.name.clone()),
        ..Subject::default()
    }]);
    ns.api::<RoleBinding>()
        .create(&pp, &binding)
        .await
        .expect("create the RoleBinding");
    token_of(&ns.api::<ServiceAccount>(), name).await
}

/// The test cluster's admin token, from its kubeconfig.
pub(crate) fn admin_token() -> String {
    let text =
        std::fs::read_to_string(&cluster().kubeconfig).expect("the test cluster's kubeconfig");
    let kubeconfig: Value = serde_saphyr::from_str(&text).expect("kubeconfig YAML");
    kubeconfig["users"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|u| u["user"]["token"].as_str())
        .expect("a token in the test cluster's kubeconfig")
        .to_string()
}

#[tokio::test]
async fn delegated_auth_serves_each_caller_what_its_rbac_allows() {
    let ns = TestNamespace::new("auth").await;
    let other = TestNamespace::new("auth-other").await;
    let rbac = ShippedRbac::load();
    let delegator: ClusterRoleBinding = shipped("rbac-auth.yaml", "ClusterRoleBinding");
    assert_eq!(delegator.role_ref.name, "system:auth-delegator");
    assert_eq!(
        delegator.subjects, rbac.binding.subjects,
        "it binds the shipped account"
    );
    let mut cleanup = ClusterScoped::default();
    let dir = TempDir::new("auth");

    // With the shipped reader role alone, --auth delegated refuses to start, saying why.
    let reader = account_with_rules(&ns, &rbac, rbac.rules(), &mut cleanup).await;
    let refused = Server::start_with(&token_kubeconfig(&dir, &reader), &["--auth", "delegated"])
        .err()
        .expect("k8sailor refuses to start without system:auth-delegator");
    assert!(refused.contains("system:auth-delegator"), "{refused}");

    // The reader role plus what the shipped binding grants: it serves.
    let auth_delegator = Api::<ClusterRole>::all(ns.client.clone())
        .get(&delegator.role_ref.name)
        .await
        .expect("the built-in ClusterRole");
    let mut rules = rbac.rules();
    rules.extend(auth_delegator.rules.unwrap_or_default());
    let without_rbac: Vec<PolicyRule> = rules
        .iter()
        .filter(|r| r.api_groups.as_deref() != Some(&["rbac.authorization.k8s.io".to_string()][..]))
        .cloned()
        .collect();
    assert_eq!(
        without_rbac.len() + 1,
        rules.len(),
        "one rule for the RBAC kinds"
    );
    let account = account_with_rules(&other, &rbac, rules, &mut cleanup).await;
    let server = Server::start_with(&token_kubeconfig(&dir, &account), &["--auth", "delegated"])
        .unwrap_or_else(|e| panic!("k8sailor with --auth delegated: {e}"));
    // With the shipped role, RBAC is evaluated in memory.
    eventually(SOON, "RBAC evaluated in memory", || async {
        let (status, body) = server.probe("/readyz?verbose").await;
        (status == 200 && body.contains("[+]authorization ok, RBAC evaluated in memory"))
            .then_some(())
    })
    .await;
    // Without the right to watch RBAC it still serves, asking SubjectAccessReviews, and says so.
    let reviews_only = {
        let home = TestNamespace::new("auth-reviews").await;
        let account = account_with_rules(&home, &rbac, without_rbac, &mut cleanup).await;
        Server::start_with(&token_kubeconfig(&dir, &account), &["--auth", "delegated"])
            .unwrap_or_else(|e| panic!("k8sailor without the RBAC rule: {e}"))
    };
    let (status, body) = reviews_only.probe("/readyz?verbose").await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(
            "[+]authorization ok, every access asked with a SubjectAccessReview: RBAC is not followed: forbidden by RBAC: cannot list Role"
        ),
        "{body}"
    );
    reviews_only.logged("RBAC is not followed").await;
    let (status, body) = reviews_only
        .send_as(Some(&admin_token()), "GET", "/pods", None)
        .await;
    assert_eq!(status, 200, "reviews only: {body}");
    drop(reviews_only);
    ns.api::<k8s_openapi::api::core::v1::Pod>()
        .create(&PostParams::default(), &pod("p", &[]))
        .await
        .unwrap();

    let viewer = namespace_pod_reader(&ns, &["get", "list"]).await;
    let ask = |path: String, token: Option<String>| {
        let mut req = server.http.get(format!("{}{path}", server.base));
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        async move {
            let res = req.send().await.expect("k8sailor answers");
            let status = res.status().as_u16();
            let body: Value = res.json().await.expect("an envelope");
            (status, body)
        }
    };
    let pods = format!("/pods?namespace={}", ns.name);

    let (status, body) = ask(pods.clone(), None).await;
    assert_eq!((status, &body["code"]), (401, &json!(401)), "{body}");
    let (status, body) = ask(pods.clone(), Some("not-a-token".into())).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(server.get_text("/ping").await, (200, "pong".to_string()));

    // The viewer reads pods of its namespace, and nothing else.
    let (body, _) = eventually(SOON, "the viewer's pods", || async {
        let (status, body) = ask(pods.clone(), Some(viewer.clone())).await;
        (status == 200 && names(&body) == ["p"]).then_some(body)
    })
    .await;
    assert_eq!(body["code"], 0);
    // Across namespaces it is no longer refused (issue 9): it sees its namespace's pods only,
    // and the answer says it was filtered.
    let (status, body) = ask("/pods".into(), Some(viewer.clone())).await;
    assert_eq!(status, 200, "{body}");
    let namespaces: BTreeSet<&str> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(namespaces, BTreeSet::from([ns.name.as_str()]), "{body}");
    assert_eq!(body["metadata"]["accessFiltered"], true, "{body}");
    for (path, why) in [
        (
            format!("/pods?namespace={}", other.name),
            "list pods in namespace",
        ),
        (
            format!("/deployments?namespace={}", ns.name),
            "list deployments.apps in namespace",
        ),
        (
            format!("/pods?namespace={}&watch=true", ns.name),
            "watch pods in namespace",
        ),
    ] {
        let (status, body) = ask(path.clone(), Some(viewer.clone())).await;
        assert_eq!(status, 403, "{path}: {body}");
        let error = body["error"].as_str().unwrap();
        assert!(
            error.contains(&format!(
                "system:serviceaccount:{}:pod-reader may not {why}",
                ns.name
            )),
            "{path}: {error}"
        );
    }

    // The cluster's admin reads everything: a Deployment where the viewer may not look,
    // and an answer not filtered.
    other
        .api::<Deployment>()
        .create(&PostParams::default(), &deployment("d", 0, &[]))
        .await
        .unwrap();
    let (body, _) = eventually(SOON, "the admin's view of d", || async {
        let (status, body) = ask("/deployments".into(), Some(admin_token())).await;
        let theirs = body["data"]
            .as_array()?
            .iter()
            .any(|d| d["namespace"] == other.name.as_str() && d["name"] == "d");
        (status == 200 && theirs).then_some(body)
    })
    .await;
    assert_ne!(body["metadata"]["accessFiltered"], true, "{body}");
}
