//! A fake apiserver for the live source's unit tests (`tower_test`), never a cluster.

use http::{Request, Response};
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};
use tower_test::mock;

use super::LiveSource;

/// A fake apiserver: answers each expected request in order, asserting its path and query.
pub(super) fn source_with(
    answers: Vec<(&'static str, u16, Value)>,
) -> (LiveSource, tokio::task::JoinHandle<()>) {
    source_answering(
        answers
            .into_iter()
            .map(|(path, status, body)| {
                (path.to_string(), status, serde_json::to_vec(&body).unwrap())
            })
            .collect(),
    )
}

/// Like [`source_with`], with the bodies as bytes (a watch answers JSON lines).
pub(super) fn source_answering(
    answers: Vec<(String, u16, Vec<u8>)>,
) -> (LiveSource, tokio::task::JoinHandle<()>) {
    let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
    let server = tokio::spawn(async move {
        for (expected, status, body) in answers {
            let (request, send) = handle.next_request().await.expect("a request");
            let uri = request.uri().to_string();
            assert!(uri.starts_with(&expected), "expected {expected}, got {uri}");
            send.send_response(
                Response::builder()
                    .status(status)
                    .body(Body::from(body))
                    .unwrap(),
            );
        }
    });
    (LiveSource::new(Client::new(service, "default")), server)
}

/// A watch answer: one JSON event a line.
pub(super) fn watch_lines(events: &[Value]) -> Vec<u8> {
    events
        .iter()
        .flat_map(|e| {
            let mut line = serde_json::to_vec(e).unwrap();
            line.push(b'\n');
            line
        })
        .collect()
}

/// A list answer of the kind, at resourceVersion 77.
pub(super) fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": "77"}, "items": items})
}
