//! Sessions with containers through k8sailor: with `--auth delegated`, `kubectl exec`,
//! `attach` and `port-forward` (v1.35: WebSockets, SPDY as their fallback) are relayed to the
//! apiserver as their caller, so the real kubectl, run with the same ServiceAccount token
//! against k8sailor and against the apiserver, prints the same and exits alike, and a caller
//! without the right gets the apiserver's refusal. The control plane's kwok nodes run the
//! sessions (`hack/cluster up --log-nodes`): an exec runs its command on this host, an attach
//! follows the container's log, a port-forward dials the loopback port in the cluster's
//! `port-forward.port`, where the test listens. With `--auth none` a session is refused as a
//! write is.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use serde_json::{Value, json};

use crate::access::{account, grant, rule};
use crate::kubeapi::Kubectl;
use crate::kubeapi_writes::{Both, TlsFront, scratch};
use crate::logs::followed_for;
use crate::support::{SOON, Server, TestNamespace, cluster, eventually};

/// A node kwok plays, whose pods run (hack/cluster up --log-nodes).
const NODE: &str = "demo-node-1";

/// A pod with one container, `app`, on `node` (None: never scheduled, Pending).
async fn pod(ns: &TestNamespace, name: &str, node: Option<&str>) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "busybox:1.36"}]},
    }))
    .unwrap();
    ns.api::<Pod>()
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
}

/// kubectl's exit code, stdout and stderr, with `input` on its stdin.
fn run_with_input(mut command: Command, input: &str) -> (Option<i32>, String, String) {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    child
        .stdin
        .take()
        .expect("its stdin")
        .write_all(input.as_bytes())
        .expect("kubectl reads its stdin");
    let out = child.wait_with_output().expect("kubectl ends");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// kubectl's exit code, stdout and stderr.
fn run(kubectl: &Kubectl, args: &[&str]) -> (Option<i32>, String, String) {
    let out = kubectl.command(args).output().expect("kubectl runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The loopback port kwok forwards every pod port to.
fn forwarded_port() -> u16 {
    let dir = cluster()
        .kubeconfig
        .parent()
        .expect("the cluster's directory");
    let port = std::fs::read_to_string(dir.join("port-forward.port"))
        .expect("hack/cluster up wrote the port kwok forwards to");
    port.trim().parse().expect("a port")
}

/// Answers each of `connections` connections to `listener` with `pong ` and the line it
/// sent, then closes it; joined, the lines it heard.
fn answer_pings(listener: TcpListener, connections: usize) -> std::thread::JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut heard = Vec::new();
        for stream in listener.incoming().take(connections) {
            let Ok(mut stream) = stream else { break };
            let mut line = String::new();
            if BufReader::new(&stream).read_line(&mut line).is_err() {
                break;
            }
            let line = line.trim().to_string();
            let _ = writeln!(stream, "pong {line}");
            heard.push(line);
        }
        heard
    })
}

/// `kubectl port-forward pod/NAME :8080`: the running kubectl and the local port it listens on.
fn port_forward(kubectl: &Kubectl, ns: &str, pod: &str) -> (Child, u16) {
    let mut child = kubectl
        .command(&["port-forward", &format!("pod/{pod}"), ":8080", "-n", ns])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    let mut lines = BufReader::new(child.stdout.take().expect("its stdout")).lines();
    // `Forwarding from 127.0.0.1:PORT -> 8080`, once it listens.
    let port = lines.find_map(|line| {
        let line = line.ok()?;
        let rest = line.strip_prefix("Forwarding from 127.0.0.1:")?;
        rest.split_whitespace().next()?.parse().ok()
    });
    // kubectl goes on printing (`Handling connection for 8080`): a closed pipe would end it.
    std::thread::spawn(move || lines.for_each(drop));
    let Some(port) = port else {
        let _ = child.kill();
        let mut err = String::new();
        if let Some(mut stderr) = child.stderr.take() {
            let _ = stderr.read_to_string(&mut err);
        }
        panic!("kubectl port-forward did not listen: {err}");
    };
    (child, port)
}

/// A line sent through the port `kubectl port-forward` listens on, and the line that came
/// back; kubectl is ended then.
fn ping(forward: (Child, u16), line: &str) -> String {
    let (mut child, port) = forward;
    let answer = (|| {
        let mut stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(SOON))?;
        writeln!(stream, "{line}")?;
        let mut answer = String::new();
        BufReader::new(&stream).read_line(&mut answer)?;
        Ok::<_, std::io::Error>(answer.trim().to_string())
    })();
    let _ = child.kill();
    let out = child.wait_with_output().expect("kubectl ends");
    answer.unwrap_or_else(|e| {
        panic!(
            "no answer through the forward ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[tokio::test]
async fn kubectl_exec_attach_and_port_forward_through_k8sailor_as_through_the_apiserver() {
    let ns = TestNamespace::new("kubeapi-sessions").await;
    let dir = scratch(&ns);
    let operator = account(&ns, "operator").await;
    // kubectl's WebSocket asks with GET, its SPDY with POST: the apiserver wants `create`.
    grant(
        &ns,
        &ns,
        &operator,
        vec![rule(
            "",
            &[
                "pods",
                "pods/log",
                "pods/exec",
                "pods/attach",
                "pods/portforward",
            ],
            &["get", "list", "create"],
        )],
    )
    .await;
    let reader = account(&ns, "reader").await;
    grant(
        &ns,
        &ns,
        &reader,
        vec![rule("", &["pods"], &["get", "list", "watch"])],
    )
    .await;
    pod(&ns, "shell", Some(NODE)).await;
    let server = Server::start(&["--auth", "delegated"]);
    let front = TlsFront::before(&dir, &server);
    let as_operator = Both::new(&dir, &front, &operator);
    let as_reader = Both::new(&dir, &front, &reader);
    let n = ns.name.as_str();
    // Until kwok runs the pod and the apiserver's RBAC has the binding.
    eventually(SOON, "an exec through the apiserver", || async {
        let (ok, out, _) = as_operator
            .apiserver
            .run(&["exec", "shell", "-n", n, "--", "echo", "ready"]);
        (ok && out == "ready\n").then_some(())
    })
    .await;
    eventually(SOON, "k8sailor serves the running pod", || async {
        let (ok, out, _) = as_operator.k8sailor.run(&[
            "get",
            "pod",
            "shell",
            "-n",
            n,
            "-o",
            "jsonpath={.status.phase}",
        ]);
        (ok && out == "Running").then_some(())
    })
    .await;

    // exec: the same output and exit code, of a command that succeeds and of one that fails.
    let (ok, out, err) = as_operator.same(&["exec", "shell", "-n", n, "--", "echo", "hi"]);
    assert!(ok && out == "hi\n", "{out}{err}");
    let failing = [
        "exec",
        "shell",
        "-n",
        n,
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; exit 3",
    ];
    let ours = run(&as_operator.k8sailor, &failing);
    let theirs = run(&as_operator.apiserver, &failing);
    assert_eq!(ours, theirs);
    // kwok tells a command's exit status as an error of the exec (kubectl exits 1), where a
    // kubelet's runtime would give kubectl the status itself.
    assert_eq!((ours.0, ours.1.as_str()), (Some(1), "out\n"), "{ours:?}");
    assert!(
        ours.2.starts_with("err\n") && ours.2.contains("exit status 3"),
        "{ours:?}"
    );
    // With stdin (`-i`): a line in, an answer made of it out.
    let reading = [
        "exec",
        "-i",
        "shell",
        "-n",
        n,
        "--",
        "sh",
        "-c",
        "read line; echo \"got $line\"",
    ];
    let ours = run_with_input(as_operator.k8sailor.command(&reading), "hello\n");
    let theirs = run_with_input(as_operator.apiserver.command(&reading), "hello\n");
    assert_eq!(ours, theirs);
    assert_eq!(
        (ours.0, ours.1.as_str()),
        (Some(0), "got hello\n"),
        "{ours:?}"
    );

    // Without pods/exec: the apiserver's refusal, printed alike.
    let (ok, _, err) = as_reader.same(&["exec", "shell", "-n", n, "--", "echo", "hi"]);
    assert!(!ok && err.contains("Forbidden"), "{err}");

    // attach: the container's output as it comes, lines of its log.
    let attached = followed_for(
        as_operator.k8sailor.command(&["attach", "shell", "-n", n]),
        4,
    );
    assert!(!attached.is_empty(), "kubectl attach printed nothing");
    let (_, log, _) = as_operator.apiserver.run(&["logs", "shell", "-n", n]);
    for line in &attached {
        assert!(
            log.lines().any(|l| l == line),
            "{line:?} is not in the container's log"
        );
    }

    // port-forward: bytes to the listener kwok dials, and its answer back.
    let listener = TcpListener::bind(("127.0.0.1", forwarded_port()))
        .expect("the port kwok forwards to is free");
    let heard = answer_pings(listener, 2);
    let answer = ping(
        port_forward(&as_operator.k8sailor, n, "shell"),
        "through k8sailor",
    );
    assert_eq!(answer, "pong through k8sailor");
    let answer = ping(
        port_forward(&as_operator.apiserver, n, "shell"),
        "through the apiserver",
    );
    assert_eq!(answer, "pong through the apiserver");
    assert_eq!(
        heard.join().unwrap(),
        ["through k8sailor", "through the apiserver"]
    );
}

#[tokio::test]
async fn with_auth_none_a_session_is_refused_as_a_write() {
    let ns = TestNamespace::new("kubeapi-sessions-none").await;
    let dir = scratch(&ns);
    // Pending: kubectl asks for a session with any pod not ended.
    pod(&ns, "idle", None).await;
    let server = Server::start(&["--auth", "none"]);
    let k8sailor = Kubectl::for_k8sailor(&dir, &server);
    let n = ns.name.as_str();
    eventually(SOON, "k8sailor serves the pod", || async {
        let (ok, _, _) = k8sailor.run(&["get", "pod", "idle", "-n", n]);
        ok.then_some(())
    })
    .await;
    let (code, _, err) = run(&k8sailor, &["exec", "idle", "-n", n, "--", "echo", "hi"]);
    assert_ne!(code, Some(0));
    assert!(
        err.contains("the server does not allow this method on the requested resource"),
        "{err}"
    );
    // However kubectl asks (a WebSocket's GET, SPDY's POST), for each kind of session.
    for (method, session) in [
        ("GET", "exec?command=echo&stdout=true"),
        ("POST", "exec?command=echo&stdout=true"),
        ("GET", "attach?stdout=true"),
        ("GET", "portforward?ports=8080"),
    ] {
        let path = format!("/api/v1/namespaces/{n}/pods/idle/{session}");
        let (status, _, body) = server.request(method, &path, &[]).await;
        let body: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        assert_eq!(
            (status, &body["kind"], &body["reason"]),
            (405, &json!("Status"), &json!("MethodNotAllowed")),
            "{method} {path}: {body}"
        );
    }
}
