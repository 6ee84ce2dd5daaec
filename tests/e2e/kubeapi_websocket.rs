//! A watch asked over WebSocket, as browser clients ask it (Headlamp's frontend and backend,
//! Lens, the Kubernetes dashboard): the same handshake is sent to the apiserver and to
//! k8sailor with a real WebSocket client (tokio-tungstenite), the same changes are made, and
//! both must switch or refuse alike, echo the same subprotocol, and send the same events
//! (types and objects, managedFields aside), one text message each, ended by the same close.

use std::sync::Arc;

use base64::Engine;
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::handshake::client::{Request, Response};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use crate::access::{account, grant, rule};
use crate::kubeapi_queries::{Setup, setup, summary, without_managed_fields};
use crate::support::{SOON, Server, cluster};

/// Where a WebSocket is opened: the apiserver (TLS with the cluster's CA) or k8sailor.
enum Peer {
    Apiserver {
        /// `127.0.0.1:PORT`.
        address: String,
        tls: tokio_rustls::TlsConnector,
    },
    K8sailor {
        /// `127.0.0.1:PORT`.
        address: String,
    },
}

/// The apiserver's address, its CA and the admin token, from the cluster's kubeconfig.
fn apiserver() -> (Peer, String) {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let text = std::fs::read_to_string(&cluster().kubeconfig).expect("the cluster's kubeconfig");
    let kubeconfig: Value = serde_saphyr::from_str(&text).expect("kubeconfig YAML");
    let cluster = &kubeconfig["clusters"][0]["cluster"];
    let server = cluster["server"].as_str().expect("a server");
    let address = server.trim_start_matches("https://").to_string();
    let ca = base64::engine::general_purpose::STANDARD
        .decode(
            cluster["certificate-authority-data"]
                .as_str()
                .expect("a CA"),
        )
        .expect("base64");
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&ca) {
        roots
            .add(cert.expect("the CA's certificate"))
            .expect("a root");
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let token = kubeconfig["users"][0]["user"]["token"]
        .as_str()
        .expect("the admin token")
        .to_string();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config));
    (Peer::Apiserver { address, tls }, token)
}

fn k8sailor(server: &Server) -> Peer {
    Peer::K8sailor {
        address: server.root().trim_start_matches("http://").to_string(),
    }
}

/// An open WebSocket: its handshake's answer, and what it receives.
struct Socket {
    response: Response,
    messages: BoxStream<'static, Result<Message, WsError>>,
}

/// A browser's WebSocket handshake for `path`: from a page, with these headers added.
fn handshake(address: &str, path: &str, headers: &[(&str, &str)]) -> Request {
    let mut request = format!("ws://{address}{path}")
        .into_client_request()
        .expect("a request");
    request.headers_mut().insert(
        "origin",
        "http://localhost:4466".parse().expect("an origin"),
    );
    for (name, value) in headers {
        let name: http::HeaderName = name.parse().expect("a header name");
        if value.is_empty() {
            request.headers_mut().remove(name);
        } else {
            request
                .headers_mut()
                .insert(name, value.parse().expect("a header value"));
        }
    }
    request
}

async fn switch<S>(request: Request, stream: S) -> Result<Socket, WsError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (socket, response) = tokio_tungstenite::client_async(request, stream).await?;
    Ok(Socket {
        response,
        messages: socket.boxed(),
    })
}

impl Peer {
    /// Opens a WebSocket for `path` with `headers` (an empty value removes one).
    async fn open(&self, path: &str, headers: &[(&str, &str)]) -> Result<Socket, WsError> {
        match self {
            Peer::Apiserver { address, tls } => {
                let request = handshake(address, path, headers);
                let tcp = tokio::net::TcpStream::connect(address).await?;
                let name = rustls::pki_types::ServerName::try_from("127.0.0.1")
                    .expect("a name")
                    .to_owned();
                let stream = tls.connect(name, tcp).await?;
                switch(request, stream).await
            }
            Peer::K8sailor { address } => {
                let request = handshake(address, path, headers);
                let tcp = tokio::net::TcpStream::connect(address).await?;
                switch(request, tcp).await
            }
        }
    }

    /// The status of a handshake that must be refused, and its body.
    async fn refused(&self, path: &str, headers: &[(&str, &str)]) -> (u16, Vec<u8>) {
        match self.open(path, headers).await {
            Err(WsError::Http(response)) => (
                response.status().as_u16(),
                response.body().clone().unwrap_or_default(),
            ),
            Err(e) => panic!("{path}: an HTTP refusal, not {e}"),
            Ok(socket) => panic!("{path}: refused, not {:?}", socket.response),
        }
    }
}

/// What a socket received: each text message (whether it ended with a newline, its event),
/// and the close that ended it (None: the client stopped reading).
#[derive(Debug)]
struct Received {
    events: Vec<Value>,
    newlines: Vec<bool>,
    close: Option<CloseCode>,
}

impl Socket {
    /// Reads until the server closes, or until `enough` holds of the events so far; bounded
    /// by [`SOON`], so a socket that never ends fails the test naming it.
    async fn read(mut self, who: &str, enough: impl Fn(&[Value]) -> bool) -> Received {
        let mut received = Received {
            events: Vec::new(),
            newlines: Vec::new(),
            close: None,
        };
        let reading = async {
            while let Some(message) = self.messages.next().await {
                match message.expect("a message") {
                    Message::Text(text) => {
                        received.newlines.push(text.ends_with('\n'));
                        let event = serde_json::from_str(&text)
                            .unwrap_or_else(|e| panic!("{e}: one event a message: {text}"));
                        received.events.push(event);
                        if enough(&received.events) {
                            return;
                        }
                    }
                    Message::Close(frame) => {
                        received.close = Some(frame.expect("a close code").code);
                        return;
                    }
                    other => panic!("a text message, not {other:?}"),
                }
            }
        };
        let ended = tokio::time::timeout(SOON, reading).await.is_ok();
        assert!(ended, "{who}'s socket ends within {SOON:?}: {received:?}");
        received
    }
}

/// The events' types and objects, managedFields aside, the initial ADDED ones by name (each
/// server lists its state in its own order).
fn comparable(events: &[Value]) -> Vec<(String, Value)> {
    let mut events: Vec<(String, Value)> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().expect("a type").to_string(),
                without_managed_fields(e["object"].clone()),
            )
        })
        .collect();
    let added = events.iter().take_while(|(t, _)| t == "ADDED").count();
    events[..added].sort_by_key(|(_, o)| o["metadata"]["name"].to_string());
    events
}

/// Both sent the same events as the same kind of messages, and closed alike.
fn same(theirs: &Received, ours: &Received, what: &str) {
    assert_eq!(
        comparable(&ours.events),
        comparable(&theirs.events),
        "{what}"
    );
    assert_eq!(
        ours.newlines, theirs.newlines,
        "{what}: the messages' newlines"
    );
    assert_eq!(ours.close, theirs.close, "{what}: the close");
}

/// Whether the events so far include `name`'s change.
fn modified(name: &'static str) -> impl Fn(&[Value]) -> bool {
    move |events: &[Value]| {
        summary(events)
            .iter()
            .any(|(t, n)| t == "MODIFIED" && n == name)
    }
}

/// What both sockets received until their servers closed them.
async fn to_the_end(theirs: Socket, ours: Socket) -> (Received, Received) {
    (
        theirs.read("the apiserver", |_| false).await,
        ours.read("k8sailor", |_| false).await,
    )
}

/// Opens the same socket on both, checking both switched with the same subprotocol.
async fn both(
    theirs: &Peer,
    ours: &Peer,
    path: &str,
    headers: &[(&str, &str)],
) -> (Socket, Socket) {
    let opened = |peer: &'static str, socket: Result<Socket, WsError>| {
        socket.unwrap_or_else(|e| panic!("{peer} switches for {path} {headers:?}: {e}"))
    };
    let theirs = opened("the apiserver", theirs.open(path, headers).await);
    let ours = opened("k8sailor", ours.open(path, headers).await);
    let protocol = |s: &Socket| s.response.headers().get("sec-websocket-protocol").cloned();
    assert_eq!(protocol(&ours), protocol(&theirs), "{path} {headers:?}");
    (theirs, ours)
}

#[tokio::test]
async fn a_websocket_watch_is_the_apiservers() {
    let s: Setup = setup("kubeapi-websocket").await;
    let (theirs, admin) = apiserver();
    let bearer = format!("Bearer {admin}");
    let ours = k8sailor(&s.server);
    let admin_only = |extra: &[(&'static str, &'static str)]| {
        let mut headers = vec![("authorization", bearer.as_str())];
        headers.extend_from_slice(extra);
        headers
    };

    // No subprotocol: the state, then a change made while both are open.
    let path = s.configmaps("?watch=true");
    let (their_socket, our_socket) = both(&theirs, &ours, &path, &admin_only(&[])).await;
    assert!(
        our_socket
            .response
            .headers()
            .get("sec-websocket-protocol")
            .is_none(),
        "none asked, none echoed"
    );
    s.change("cm-c").await;
    let (their_events, our_events) = (
        their_socket.read("the apiserver", modified("cm-c")).await,
        our_socket.read("k8sailor", modified("cm-c")).await,
    );
    same(&their_events, &our_events, "no subprotocol");
    assert_eq!(
        summary(&our_events.events).last(),
        Some(&("MODIFIED".to_string(), "cm-c".to_string()))
    );

    // Headlamp's subprotocol, and the end of timeoutSeconds: the state, then the close.
    let path = s.configmaps("?watch=true&timeoutSeconds=1");
    let protocol = [("sec-websocket-protocol", "base64.binary.k8s.io")];
    let (their_socket, our_socket) = both(&theirs, &ours, &path, &admin_only(&protocol)).await;
    assert_eq!(
        our_socket.response.headers()["sec-websocket-protocol"],
        "base64.binary.k8s.io"
    );
    let (their_events, our_events) = to_the_end(their_socket, our_socket).await;
    same(&their_events, &our_events, "base64.binary.k8s.io");
    assert_eq!(our_events.close, Some(CloseCode::Normal));
    assert!(our_events.events.len() >= 3, "{our_events:?}");

    // Table frames, as a dashboard asks them (the column definitions on the first only).
    let table = [(
        "accept",
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
    )];
    let (their_socket, our_socket) = both(&theirs, &ours, &path, &admin_only(&table)).await;
    let (their_events, our_events) = to_the_end(their_socket, our_socket).await;
    let tables = |received: &Received| -> Vec<(String, Value, Value, Vec<Value>)> {
        let mut frames: Vec<_> = received
            .events
            .iter()
            .map(|e| {
                let table = &e["object"];
                let columns = table["columnDefinitions"]
                    .as_array()
                    .map(|c| c.iter().map(|c| c["name"].clone()).collect::<Vec<_>>());
                let rows: Vec<Value> = table["rows"]
                    .as_array()
                    .expect("rows")
                    .iter()
                    .map(|r| r["object"]["metadata"]["name"].clone())
                    .collect();
                (
                    e["type"].to_string(),
                    table["kind"].clone(),
                    json!(columns),
                    rows,
                )
            })
            .collect();
        // The first frame carries the columns: only the rows are in each server's order.
        if let Some((_, rest)) = frames.split_first_mut() {
            rest.sort_by_key(|f| f.3.iter().map(Value::to_string).collect::<Vec<_>>());
        }
        frames
    };
    assert_eq!(tables(&our_events), tables(&their_events), "Table frames");
    assert_eq!(our_events.newlines, their_events.newlines);
    assert_eq!(our_events.close, their_events.close);
    assert_eq!(our_events.events[0]["object"]["kind"], "Table");

    // From a resourceVersion: the changes after it.
    let before = s.listed_version().await;
    s.change("cm-b").await;
    let path = s.configmaps(&format!(
        "?watch=true&timeoutSeconds=1&resourceVersion={before}"
    ));
    let (their_socket, our_socket) = both(&theirs, &ours, &path, &admin_only(&[])).await;
    let (their_events, our_events) = to_the_end(their_socket, our_socket).await;
    same(&their_events, &our_events, "from a resourceVersion");
    assert_eq!(
        summary(&our_events.events),
        vec![("MODIFIED".to_string(), "cm-b".to_string())]
    );

    // An expired resourceVersion: the 410 as an ERROR event, then the close, as the
    // apiserver's watch cache ends such a watch (its errWatcher, then `Conn.Close`). Asked of
    // k8sailor alone: a young cluster's etcd is not compacted yet, so the apiserver still
    // reads version 1 from it (the whole history) where k8sailor's history no longer goes.
    let path = s.configmaps("?watch=true&resourceVersion=1");
    let expired = ours
        .open(&path, &admin_only(&[]))
        .await
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .read("k8sailor", |_| false)
        .await;
    let [event] = &expired.events[..] else {
        panic!("one event: {expired:?}");
    };
    assert_eq!(event["type"], "ERROR", "{expired:?}");
    assert_eq!(event["object"]["code"], 410, "{expired:?}");
    assert_eq!(event["object"]["reason"], "Expired", "{expired:?}");
    let message = event["object"]["message"].as_str().expect("a message");
    assert!(
        message.starts_with("too old resource version: 1 ("),
        "{message}"
    );
    assert_eq!(expired.close, Some(CloseCode::Normal));
    assert_eq!(expired.newlines, [true]);

    // Refusals: a bad query before the switch; the handshake without an Origin or with two
    // subprotocols.
    for (query, headers) in [
        ("?watch=true&timeoutSeconds=x", admin_only(&[])),
        ("?watch=true", admin_only(&[("origin", "")])),
        (
            "?watch=true",
            admin_only(&[(
                "sec-websocket-protocol",
                "base64.binary.k8s.io, binary.k8s.io",
            )]),
        ),
    ] {
        let path = s.configmaps(query);
        let (their_status, _) = theirs.refused(&path, &headers).await;
        let (our_status, _) = ours.refused(&path, &headers).await;
        assert_eq!(our_status, their_status, "{path} {headers:?}");
        assert!(our_status >= 400, "{path} {headers:?}");
    }
}

#[tokio::test]
async fn a_websocket_watch_with_delegated_auth_is_authorized_as_the_apiserver_does() {
    let s: Setup = setup("kubeapi-websocket-auth").await;
    let (theirs, _) = apiserver();
    let delegated = Server::start(&["--auth", "delegated"]);
    let ours = k8sailor(&delegated);
    let nobody = account(&s.ns, "nobody").await;
    let reader = account(&s.ns, "reader").await;
    grant(
        &s.ns,
        &s.ns,
        &reader,
        vec![rule("", &["configmaps"], &["get", "list", "watch"])],
    )
    .await;
    let path = s.configmaps("?watch=true&timeoutSeconds=1");

    // No `watch`: the apiserver's 403 Status, before any switch.
    let bearer = format!("Bearer {}", nobody.token);
    let headers = [("authorization", bearer.as_str())];
    let (their_status, their_body) = theirs.refused(&path, &headers).await;
    let (our_status, our_body) = ours.refused(&path, &headers).await;
    assert_eq!(their_status, 403);
    let status = |body: &[u8]| -> Value {
        serde_json::from_slice(body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(body)))
    };
    assert_eq!(
        (our_status, status(&our_body)),
        (their_status, status(&their_body))
    );

    // A browser's token, carried as a subprotocol beside the one to echo, as Headlamp sends
    // it: read as the caller's, and taken out of what is echoed.
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&reader.token);
    let protocols =
        format!("base64.binary.k8s.io, base64url.bearer.authorization.k8s.io.{encoded}");
    let headers = [("sec-websocket-protocol", protocols.as_str())];
    // RBAC reaches the apiserver's authorizer, and k8sailor's, a moment after the grant.
    let (theirs, ours, path, headers) = (&theirs, &ours, path.as_str(), &headers[..]);
    let (their_socket, our_socket) = crate::support::eventually(SOON, "the grant", || async move {
        let theirs = theirs.open(path, headers).await.ok()?;
        let ours = ours.open(path, headers).await.ok()?;
        Some((theirs, ours))
    })
    .await
    .0;
    for socket in [&their_socket, &our_socket] {
        assert_eq!(
            socket.response.headers()["sec-websocket-protocol"],
            "base64.binary.k8s.io"
        );
    }
    let (their_events, our_events) = to_the_end(their_socket, our_socket).await;
    same(&their_events, &our_events, "a token as a subprotocol");
    assert!(our_events.events.len() >= 3, "{our_events:?}");
}
