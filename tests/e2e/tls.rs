//! TLS and HTTP/2 (`--tls-cert-file`, `--tls-private-key-file`): the real kubectl trusting a
//! CA made here reads through k8sailor as through the apiserver; ALPN picks HTTP/2, and h2c
//! with prior knowledge works on a plain listener; rotated files give new connections the new
//! certificate while an open watch goes on; bad files are refused at start and kept out at a
//! rotation; `kubectl explain` prints what it prints against the apiserver (the OpenAPI
//! documents relayed); a thousand watches share one HTTP/2 connection and each sees a change.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use serde_json::json;

use crate::deploy::TempDir;
use crate::kubeapi::{Kubectl, normalized};
use crate::support::{SOON, Server, TestNamespace, eventually, heavy, pod, repo};

/// A CA of this test run, made with openssl, and the serving certificates it signs.
pub(crate) struct TestCa {
    dir: PathBuf,
    pub(crate) cert: PathBuf,
    key: PathBuf,
}

/// A serving certificate for 127.0.0.1 and localhost.
pub(crate) struct Serving {
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
    /// As `openssl x509 -serial` prints it: upper-case hex.
    pub(crate) serial: String,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The run's CA, made once.
pub(crate) fn test_ca() -> &'static TestCa {
    static CA: OnceLock<TestCa> = OnceLock::new();
    CA.get_or_init(|| {
        let dir = repo()
            .join("target")
            .join(format!("e2e-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("the CA's directory");
        openssl(
            &dir,
            &[
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj",
                "/CN=k8sailor-e2e-ca", "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            ],
        );
        std::fs::write(
            dir.join("serving.ext"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
        )
        .expect("the extensions file");
        TestCa {
            cert: dir.join("ca.crt"),
            key: dir.join("ca.key"),
            dir,
        }
    })
}

impl TestCa {
    /// A new serving certificate with a serial of its own.
    pub(crate) fn issue(&self) -> Serving {
        static SERIAL: AtomicU64 = AtomicU64::new(0x1000);
        let serial = format!(
            "{:X}{:04X}",
            std::process::id(),
            SERIAL.fetch_add(1, Ordering::Relaxed)
        );
        let serial = serial_digits(&serial);
        let (key, csr, cert) = (
            format!("{serial}.key"),
            format!("{serial}.csr"),
            format!("{serial}.crt"),
        );
        openssl(
            &self.dir,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                &key,
                "-out",
                &csr,
                "-subj",
                "/CN=k8sailor",
            ],
        );
        openssl(
            &self.dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-set_serial",
                &format!("0x{serial}"),
                "-days",
                "2",
                "-extfile",
                "serving.ext",
                "-out",
                &cert,
            ],
        );
        let _ = &self.key;
        Serving {
            cert: self.dir.join(cert),
            key: self.dir.join(key),
            serial,
        }
    }

    /// A TLS client configuration that trusts this CA alone, offering `alpn`.
    fn client_config(&self, alpn: &[&[u8]]) -> rustls::ClientConfig {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(&self.cert).expect("the CA's file") {
            roots
                .add(cert.expect("the CA's certificate"))
                .expect("a root");
        }
        let mut config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        config
    }

    /// An HTTPS client that trusts this CA and offers `alpn`.
    fn client(&self, alpn: &[&[u8]]) -> reqwest::Client {
        reqwest::Client::builder()
            .tls_backend_preconfigured(self.client_config(alpn))
            .build()
            .expect("an HTTPS client")
    }

    /// HTTP/1.1 over TLS: a `Host` a test sets is what the server reads (HTTP/2 names the
    /// host in `:authority`, from the URL).
    pub(crate) fn http_client(&self) -> reqwest::Client {
        self.client(&[b"http/1.1"])
    }

    /// HTTP/2 or HTTP/1.1, as ALPN settles: h2 offered first, as Go's clients do.
    pub(crate) fn h2_client(&self) -> reqwest::Client {
        self.client(&[b"h2", b"http/1.1"])
    }
}

/// The serial of the certificate a new connection to `server` is given, as openssl's own
/// client reads it.
fn served_serial(server: &Server) -> String {
    let address = server.root().trim_start_matches("https://");
    let script = format!(
        "openssl s_client -connect {address} -CAfile {} -verify_return_error </dev/null 2>/dev/null | openssl x509 -noout -serial",
        test_ca().cert.display()
    );
    let out = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .output()
        .expect("openssl runs");
    serial_digits(
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .trim_start_matches("serial="),
    )
}

/// A serial's hex digits without the leading zeros openssl may print (it prints whole bytes).
fn serial_digits(hex: &str) -> String {
    hex.trim_start_matches('0').to_ascii_uppercase()
}

pub(crate) fn start_tls(serving: &Serving, extra: &[&str]) -> Server {
    let (cert, key) = (
        serving.cert.to_str().unwrap().to_string(),
        serving.key.to_str().unwrap().to_string(),
    );
    let mut args = vec!["--tls-cert-file", &cert, "--tls-private-key-file", &key];
    args.extend_from_slice(extra);
    Server::start(&args)
}

/// kubectl pointed at `server` over TLS, trusting the test CA (auth none).
fn kubectl_over_tls(dir: &TempDir, server: &Server) -> Kubectl {
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "k8sailor", "cluster": {
            "server": server.root(),
            "certificate-authority": test_ca().cert,
        }}],
        "contexts": [{"name": "k8sailor", "context": {"cluster": "k8sailor", "user": "anonymous"}}],
        // Over https kubectl asks a user without credentials for a password on stdin; with
        // auth none the token is never read.
        "users": [{"name": "anonymous", "user": {"token": "unread"}}],
        "current-context": "k8sailor",
    });
    let kubeconfig = dir.write("kubeconfig-tls", config.to_string().as_bytes());
    Kubectl::new(kubeconfig, dir.path().join("cache-k8sailor"))
}

#[tokio::test]
async fn kubectl_reads_over_tls_with_http2_as_from_the_apiserver() {
    let ns = TestNamespace::new("tls-get").await;
    for name in ["web-1", "web-2"] {
        ns.api::<Pod>()
            .create(&PostParams::default(), &pod(name, &[("app", "web")]))
            .await
            .unwrap();
    }
    let serving = test_ca().issue();
    let server = start_tls(&serving, &[]);
    assert!(server.root().starts_with("https://"), "{}", server.root());
    let dir = TempDir::new("tls-get");
    let ours = kubectl_over_tls(&dir, &server);
    let theirs = Kubectl::for_apiserver(dir.path());
    let args = ["get", "pods", "-n", &ns.name, "-o", "wide"];
    let (expected, _) = eventually(SOON, "the apiserver to list both pods", || async {
        let (ok, out, _) = theirs.run(&args);
        (ok && out.contains("web-2")).then_some(out)
    })
    .await;
    let (printed, _) = eventually(SOON, "kubectl over TLS to print the same", || async {
        let (ok, out, err) = ours.run(&args);
        assert!(ok || !err.contains("certificate"), "TLS failed: {err}");
        (ok && normalized(&out) == normalized(&expected)).then_some(out)
    })
    .await;
    assert!(printed.contains("web-1"), "{printed}");

    // ALPN offers h2 first: the answer comes over HTTP/2, and HTTP/1.1 is still served.
    let h2 = test_ca().h2_client();
    let url = format!("{}/api/v1/namespaces/{}/pods", server.root(), ns.name);
    let answer = h2.get(&url).send().await.unwrap();
    assert_eq!(answer.version(), reqwest::Version::HTTP_2);
    assert_eq!(answer.status(), 200);
    let answer = test_ca().http_client().get(&url).send().await.unwrap();
    assert_eq!(answer.version(), reqwest::Version::HTTP_11);
    assert_eq!(answer.status(), 200);
    assert_eq!(served_serial(&server), serving.serial);
}

#[tokio::test]
async fn h2c_with_prior_knowledge_is_served_on_a_plain_listener() {
    let ns = TestNamespace::new("h2c").await;
    let server = Server::start(&[]);
    let h2c = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let url = format!("{}/api/v1/namespaces/{}/pods", server.root(), ns.name);
    let answer = h2c.get(&url).send().await.unwrap();
    assert_eq!(answer.version(), reqwest::Version::HTTP_2);
    assert_eq!(answer.status(), 200);
    let list: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(list["kind"], "PodList", "{list}");
    // HTTP/1.1 on the same listener, as before.
    let answer = server.http.get(&url).send().await.unwrap();
    assert_eq!(answer.version(), reqwest::Version::HTTP_11);
    assert_eq!(answer.status(), 200);
}

/// Replaces `to`'s contents at once (a rename), as a mounted Secret's files are swapped.
fn replace(from: &Path, to: &Path) {
    let staged = to.with_extension("new");
    std::fs::copy(from, &staged).unwrap();
    std::fs::rename(&staged, to).unwrap();
}

/// Waits until a line of kubectl's watch names `name`.
async fn watched(lines: &mut tokio::sync::mpsc::UnboundedReceiver<String>, name: &str) {
    let mut printed = Vec::new();
    eventually(SOON, &format!("the watch to print {name}"), || {
        while let Ok(line) = lines.try_recv() {
            printed.push(line);
        }
        let found = printed.iter().any(|l| l.contains(name));
        async move { found.then_some(()) }
    })
    .await;
}

#[tokio::test]
async fn rotated_files_serve_new_connections_while_an_open_watch_goes_on() {
    let ns = TestNamespace::new("tls-rotate").await;
    let dir = TempDir::new("tls-rotate");
    let first = test_ca().issue();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    replace(&first.cert, &cert);
    replace(&first.key, &key);
    let server = start_tls(
        &Serving {
            cert: cert.clone(),
            key: key.clone(),
            serial: first.serial.clone(),
        },
        &[],
    );
    assert_eq!(served_serial(&server), first.serial);

    // A watch on a connection made with the first certificate.
    let kubectl = kubectl_over_tls(&dir, &server);
    let mut watch = kubectl
        .command(&["get", "pods", "-n", &ns.name, "-w", "--output-watch-events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (lines_tx, mut lines) = tokio::sync::mpsc::unbounded_channel();
    let stdout = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                return;
            }
        }
    });
    ns.api::<Pod>()
        .create(&PostParams::default(), &pod("before", &[]))
        .await
        .unwrap();
    watched(&mut lines, "before").await;

    // A rotation to files that make no certificate keeps the served one, and says why.
    std::fs::write(&cert, "not a certificate\n").unwrap();
    eventually(SOON, "the bad rotation to be logged", || async {
        server
            .logs()
            .contains("do not make a certificate")
            .then_some(())
    })
    .await;
    assert_eq!(served_serial(&server), first.serial);

    let second = test_ca().issue();
    replace(&second.key, &key);
    replace(&second.cert, &cert);
    eventually(
        SOON,
        "a new connection to get the new certificate",
        || async { (served_serial(&server) == second.serial).then_some(()) },
    )
    .await;
    ns.api::<Pod>()
        .create(&PostParams::default(), &pod("after", &[]))
        .await
        .unwrap();
    watched(&mut lines, "after").await;
    assert!(
        matches!(watch.try_wait(), Ok(None)),
        "the watch opened before the rotation is still open"
    );
    let _ = watch.kill();
    let _ = watch.wait();
}

#[test]
fn a_bad_certificate_file_at_start_is_one_line_naming_it_and_exit_1() {
    let dir = TempDir::new("tls-bad");
    let serving = test_ca().issue();
    let missing = dir.path().join("missing.crt");
    let garbage = dir.write("garbage.crt", b"-----BEGIN CERTIFICATE-----\nnope\n");
    let other = test_ca().issue();
    let cases = [
        (missing.clone(), serving.key.clone(), missing.clone()),
        (garbage.clone(), serving.key.clone(), garbage.clone()),
        (other.cert.clone(), serving.key.clone(), serving.key.clone()),
    ];
    for (cert, key, named) in cases {
        let err = match Server::start_with(
            crate::support::cluster().kubeconfig.to_str().unwrap(),
            &[
                "--tls-cert-file",
                cert.to_str().unwrap(),
                "--tls-private-key-file",
                key.to_str().unwrap(),
            ],
        ) {
            Ok(_) => panic!("k8sailor started with {cert:?} and {key:?}"),
            Err(e) => e,
        };
        let (status, printed) = err.split_once("): ").unwrap_or_else(|| panic!("{err}"));
        assert!(status.ends_with("exit status: 1"), "{err}");
        assert_eq!(printed.trim().lines().count(), 1, "one line: {printed}");
        assert!(
            printed.starts_with("k8sailor: ") && printed.contains(named.to_str().unwrap()),
            "names {named:?}: {printed}"
        );
    }
}

#[tokio::test]
async fn kubectl_explain_prints_the_same_through_k8sailor() {
    let serving = test_ca().issue();
    let server = start_tls(&serving, &[]);
    let dir = TempDir::new("tls-explain");
    let ours = kubectl_over_tls(&dir, &server);
    let theirs = Kubectl::for_apiserver(dir.path());
    for args in [
        // Deployments join once the Kubernetes API serves them (their records keep only
        // their DTO today, so discovery does not list them); a StatefulSet's replicas are
        // the same schema's kind of field, from the same apps/v1 document.
        &["explain", "statefulsets.spec.replicas"][..],
        &["explain", "pods.spec.containers.image"][..],
    ] {
        let (ok, expected, err) = theirs.run(args);
        assert!(ok, "{args:?} against the apiserver: {err}");
        let (ok, printed, err) = ours.run(args);
        assert!(ok, "{args:?} against k8sailor: {err}");
        assert_eq!(printed, expected, "{args:?}");
    }

    // JSON only; protobuf alone is refused as the apiserver's Status.
    let client = test_ca().h2_client();
    let url = format!("{}/openapi/v2", server.root());
    let answer = client
        .get(&url)
        .header(
            "Accept",
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 406);
    let status: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(status["reason"], "NotAcceptable", "{status}");
    let answer = client.get(&url).send().await.unwrap();
    assert_eq!(answer.status(), 200);
    let etag = answer.headers().get("etag").cloned();
    let document: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(document["swagger"], "2.0");
    if let Some(etag) = etag {
        let answer = client
            .get(&url)
            .header("If-None-Match", etag)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 304);
    }
    let index: serde_json::Value = client
        .get(format!("{}/openapi/v3", server.root()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let apps = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap_or_else(|| panic!("apps/v1 in the index: {index}"));
    assert!(apps.contains("?hash="), "{apps}");
    let answer = client
        .get(format!("{}{apps}", server.root()))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let answer = client
        .get(format!(
            "{}/openapi/v3/apis/nothing.example/v9",
            server.root()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 404);
}

#[tokio::test]
async fn a_thousand_watches_share_one_http2_connection_and_each_sees_a_change() {
    const WATCHES: usize = 1000;
    let _heavy = heavy().await;
    let ns = TestNamespace::new("h2-watches").await;
    let max_watches = (2 * WATCHES).to_string();
    let server = Server::start(&["--max-watches", &max_watches]);
    let address = server.root().trim_start_matches("http://").to_string();
    let tcp = tokio::net::TcpStream::connect(&address).await.unwrap();
    let (send, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await
    .expect("an HTTP/2 connection (h2c)");
    tokio::spawn(connection);
    let url = format!(
        "http://{address}/api/v1/namespaces/{}/pods?watch=true",
        ns.name
    );
    let opening = futures::stream::iter(0..WATCHES)
        .map(|_| {
            let mut send = send.clone();
            let url = url.clone();
            async move {
                let request = http::Request::get(&url)
                    .body(http_body_util::Empty::<bytes::Bytes>::new())
                    .unwrap();
                send.ready().await.expect("a stream");
                let answer = send.send_request(request).await.expect("a watch");
                assert_eq!(answer.status(), 200);
                answer.into_body()
            }
        })
        .buffer_unordered(100)
        .collect::<Vec<_>>();
    // A bound on streams below the watches would leave the rest waiting for a stream.
    let opened = tokio::time::timeout(SOON, opening)
        .await
        .expect("every watch opened on the one connection");
    assert_eq!(opened.len(), WATCHES);
    ns.api::<Pod>()
        .create(&PostParams::default(), &pod("changed", &[]))
        .await
        .unwrap();
    let seen = futures::future::join_all(opened.into_iter().map(|mut body| async move {
        let mut text = Vec::new();
        tokio::time::timeout(SOON, async {
            while let Some(frame) = body.frame().await {
                if let Ok(data) = frame.expect("the watch goes on").into_data() {
                    text.extend_from_slice(&data);
                    if String::from_utf8_lossy(&text).contains("\"changed\"") {
                        return true;
                    }
                }
            }
            false
        })
        .await
        .unwrap_or(false)
    }))
    .await;
    let missed = seen.iter().filter(|s| !**s).count();
    assert_eq!(
        missed, 0,
        "{missed} of {WATCHES} watches did not see the change"
    );
}

#[tokio::test]
async fn under_delegated_auth_openapi_needs_an_authenticated_caller() {
    let server = Server::start(&["--auth", "delegated"]);
    // Discovery names what is served, never an object: open at every level, the roots too.
    for path in ["/version", "/api", "/apis", "/api/v1", "/apis/apps/v1"] {
        let open = server
            .http
            .get(format!("{}{path}", server.root()))
            .send()
            .await
            .unwrap();
        assert_eq!(open.status(), 200, "{path}");
    }
    let url = format!("{}/openapi/v3", server.root());
    let anonymous = server.http.get(&url).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let status: serde_json::Value = anonymous.json().await.unwrap();
    assert_eq!(status["kind"], "Status", "{status}");
    let unknown = server
        .http
        .get(&url)
        .bearer_auth("not-a-token")
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 401);
    let known = server
        .http
        .get(&url)
        .bearer_auth(crate::deploy::admin_token())
        .send()
        .await
        .unwrap();
    assert_eq!(known.status(), 200);
    let index: serde_json::Value = known.json().await.unwrap();
    assert!(index["paths"]["api/v1"].is_object(), "{index}");
}
