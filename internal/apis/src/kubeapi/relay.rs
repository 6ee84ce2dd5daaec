//! `--auth delegated`: what memory does not answer (writes, subresources such as `pods/log`
//! and `deployments/scale`, SelfSubjectAccessReviews, kinds not kept) is relayed to the
//! apiserver with the caller's own token, through the dao's passthrough, and its answer is
//! presented as the apiserver gave it: status, the headers a client reads, and the body,
//! streamed.
//!
//! A relayed stream (`pods/log?follow=true`, a watch of a kind not kept) is not ended when
//! its caller's access is revoked later (a RoleBinding deleted, a ServiceAccount's token
//! invalidated). The same request sent to the apiserver is authorized once, at its start,
//! and its stream outlives any later change of RBAC or of the token until it ends; here the
//! apiserver made that very decision, as the caller, with the caller's own token, and a
//! client of the Kubernetes API expects what the apiserver does. A watch this API serves from
//! memory is authorized once at its start too, as the apiserver's are; only the original
//! client's watches under `/k8sailor/v0` are ended on revocation (k8sailor's own promise
//! there). A relayed stream is still bounded:
//! it ends at shutdown and after a watch's randomised lifetime, as ours do, and the
//! apiserver ends its watches after its own timeout.
//!
//! A request that asks to switch protocols (kubectl's exec, attach and port-forward: a
//! WebSocket, or SPDY where the WebSocket is refused) is relayed as it is, handshake headers
//! and all, on a connection of its own to the apiserver; once the apiserver switched, the
//! caller gets its 101 and the two connections are joined byte for byte, whatever the
//! protocol. The apiserver authorizes the session as the caller, and speaks the protocol with
//! the caller itself. A joined session ends when either side closes, at shutdown, when the
//! connection layer closes the caller's connection (to make room, or a caller that stopped
//! reading), or when the apiserver takes nothing for kube's write timeout (295 s); not after
//! a watch's lifetime: the apiserver bounds no session by time either, and a shell cut at
//! random would be lost.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Extensions, HeaderMap, HeaderName, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use http_body_util::BodyExt;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;

use super::Target;
use super::reads::{Streamed, cached_resource};
use super::status::Status;
use crate::auth::bearer_token;
use crate::fairness::WatchPlace;
use crate::{AppState, ConnectionEnd};
use biz::BizError;
use k8sdao::{RelayedBody, Switch, SwitchedStream, WrittenTo};

/// The request headers the apiserver's answer depends on; the caller's token is added by the
/// dao, and nothing else of the request (cookies, our own hop's headers) goes up.
const REQUEST_HEADERS: [HeaderName; 4] = [
    header::ACCEPT,
    header::ACCEPT_ENCODING,
    header::CONTENT_TYPE,
    header::USER_AGENT,
];

/// The answer's headers a client reads: its media type and encoding, the apiserver's
/// warnings (deprecations, `kubectl apply`'s), when to retry, and the audit id that finds the
/// request in the apiserver's audit log.
const ANSWER_HEADERS: [&str; 5] = [
    "content-type",
    "content-encoding",
    "warning",
    "retry-after",
    "audit-id",
];

/// A switch of protocols' handshake, both ways: the switch asked for and made, WebSocket's
/// key, version, subprotocols (`v5.channel.k8s.io`, `SPDY/3.1+portforward.k8s.io`) and
/// extensions, its accept, and SPDY's stream protocol versions. Passed on unchanged, so the
/// caller and the apiserver agree on the protocol as if they spoke directly (the accept is
/// the apiserver's answer to the caller's own key).
const HANDSHAKE_HEADERS: [&str; 8] = [
    "connection",
    "upgrade",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-protocol",
    "sec-websocket-extensions",
    "sec-websocket-accept",
    "x-stream-protocol-version",
];

/// The caller's headers that go up: [`REQUEST_HEADERS`] and impersonation, which the
/// apiserver authorizes for the caller itself, and for a switch of protocols its handshake.
fn headers_up(headers: &HeaderMap, switching: bool) -> HeaderMap {
    headers
        .iter()
        .filter(|(name, _)| {
            REQUEST_HEADERS.contains(name)
                || name.as_str().starts_with("impersonate-")
                || (switching && HANDSHAKE_HEADERS.contains(&name.as_str()))
        })
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

/// The object a write through `target` changes, if the cache keeps its resource: a
/// subresource's write (`scale`, `status`) changes its object, whose version the answer
/// carries.
pub(super) fn written(
    s: &AppState,
    target: Option<&Target<'_>>,
) -> Option<(k8sdao::Resource, Option<String>)> {
    let (group, version, resource, namespace) = match target? {
        Target::Collection {
            group,
            version,
            resource,
            namespace,
        }
        | Target::Object {
            group,
            version,
            resource,
            namespace,
            ..
        }
        | Target::Subresource {
            group,
            version,
            resource,
            namespace,
            ..
        } => (group, version, resource, namespace),
        Target::Group { .. } | Target::GroupVersion { .. } => return None,
    };
    let resource = cached_resource(s, group, version, resource)?;
    Some((resource, namespace.map(str::to_string)))
}

/// Relays `request` as its caller, and presents the apiserver's answer; `written` is what
/// [`written`] found its target changes.
pub(super) async fn forward(
    s: AppState,
    written: Option<(k8sdao::Resource, Option<String>)>,
    mut request: Request,
) -> Response {
    // The access check let no request without a token through; this is that token.
    let Some(token) = bearer_token(&request).map(str::to_string) else {
        return Status::new(StatusCode::UNAUTHORIZED, "Unauthorized").into_response();
    };
    // Only an HTTP/1.1 request can switch; asked over HTTP/2, it goes up as a plain request
    // and gets the apiserver's answer to that.
    let switching = request.extensions_mut().remove::<OnUpgrade>();
    let (mut parts, body) = request.into_parts();
    // Read already, within --max-body-bytes, by the edge layer.
    let body = match body.collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) => {
            return Status::new(
                StatusCode::BAD_REQUEST,
                format!("cannot read the body: {e}"),
            )
            .into_response();
        }
    };
    let path = parts
        .uri
        .path_and_query()
        .map_or(parts.uri.path(), |p| p.as_str());
    let mut up = axum::http::Request::builder()
        .method(parts.method.clone())
        .uri(path);
    if let Some(headers) = up.headers_mut() {
        *headers = headers_up(&parts.headers, switching.is_some());
    }
    let up = match up.body(body) {
        Ok(up) => up,
        Err(e) => {
            return Status::new(StatusCode::BAD_REQUEST, format!("invalid request: {e}"))
                .into_response();
        }
    };
    if let Some(caller) = switching {
        return switch(&s, up, &token, caller, &mut parts.extensions).await;
    }
    let written = written.as_ref().map(|(resource, namespace)| WrittenTo {
        resource,
        namespace: namespace.as_deref(),
    });
    match s.workloads.source().relay(up, &token, written).await {
        Ok(answer) => presented(&s, answer),
        Err(e) => Status::of(&BizError::Source(e)).into_response(),
    }
}

/// The apiserver's answer as the caller gets it.
fn presented(s: &AppState, answer: axum::http::Response<RelayedBody>) -> Response {
    let (upstream, body) = answer.into_parts();
    // A stream (a log followed, a watch of a kind not kept) ends as our own watches do: at
    // shutdown, or after its randomised lifetime; not on revocation, as the apiserver's own
    // (see the module's documentation).
    let body = Body::from_stream(body.take_until(s.watch_end()));
    let mut response = Response::new(body);
    *response.status_mut() = upstream.status;
    copy_headers(&upstream.headers, &ANSWER_HEADERS, response.headers_mut());
    // Sent as the apiserver encoded it: never held back to be compressed again.
    response.extensions_mut().insert(Streamed);
    response
}

fn copy_headers(from: &HeaderMap, names: &[&'static str], to: &mut HeaderMap) {
    for &name in names {
        for value in from.get_all(name) {
            to.append(name, value.clone());
        }
    }
}

/// Relays a request to switch protocols: the apiserver's refusal as any answer, else its
/// 101, and from then on the caller's connection joined to the apiserver's.
async fn switch(
    s: &AppState,
    up: axum::http::Request<Bytes>,
    token: &str,
    caller: OnUpgrade,
    extensions: &mut Extensions,
) -> Response {
    let (head, upstream) = match s.workloads.source().relay_switch(up, token).await {
        Ok(Switch::Switched { head, stream }) => (head, stream),
        Ok(Switch::Answered(answer)) => return presented(s, answer),
        Err(e) => return Status::of(&BizError::Source(e)).into_response(),
    };
    let session = Session {
        place: extensions.remove::<WatchPlace>(),
        connection_end: extensions.remove::<ConnectionEnd>(),
        shutdown: s.streams.clone(),
    };
    tokio::spawn(session.join(caller, upstream));
    let mut response = Response::new(Body::empty());
    *response.status_mut() = head.status;
    copy_headers(&head.headers, &HANDSHAKE_HEADERS, response.headers_mut());
    copy_headers(&head.headers, &ANSWER_HEADERS, response.headers_mut());
    response.extensions_mut().insert(Streamed);
    response
}

/// A switched session and what bounds it.
struct Session {
    /// Its caller's watch's place in the fair share, held until it ends.
    place: Option<WatchPlace>,
    /// Cancelled when the connection layer closes the caller's connection; None for a
    /// router served without it (unit tests).
    connection_end: Option<ConnectionEnd>,
    shutdown: tokio_util::sync::CancellationToken,
}

impl Session {
    /// Joins the caller's connection, once hyper has sent it the 101, to the apiserver's,
    /// until either side closes (what one side half-closes, the other is told), an error,
    /// shutdown, or the caller's connection is closed under it.
    async fn join(self, caller: OnUpgrade, mut upstream: SwitchedStream) {
        let Session {
            place,
            connection_end,
            shutdown,
        } = self;
        let Ok(caller) = caller.await else {
            // The caller went before its 101 was sent: the apiserver's end closes with this.
            return;
        };
        let mut caller = TokioIo::new(caller);
        let connection_closed = async {
            match connection_end {
                Some(ConnectionEnd(end)) => end.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            joined = tokio::io::copy_bidirectional(&mut caller, &mut upstream) => {
                if let Err(e) = joined {
                    tracing::debug!(error = %e, "a relayed session ended with an error");
                }
            }
            () = shutdown.cancelled() => {}
            () = connection_closed => {}
        }
        drop(place);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    /// The names of the headers that go up of a request with `headers`, sorted.
    fn names_up(headers: &[(&'static str, &'static str)], switching: bool) -> Vec<String> {
        let headers: HeaderMap = headers
            .iter()
            .map(|&(name, value)| {
                (
                    HeaderName::from_static(name),
                    HeaderValue::from_static(value),
                )
            })
            .collect();
        let mut names: Vec<String> = headers_up(&headers, switching)
            .keys()
            .map(|name| name.as_str().to_string())
            .collect();
        names.sort_unstable();
        names
    }

    #[test]
    fn only_what_the_answer_depends_on_goes_up() {
        let headers = [
            ("accept", "application/json"),
            ("content-type", "application/merge-patch+json"),
            ("authorization", "Bearer theirs"),
            ("cookie", "session=1"),
            ("impersonate-user", "alice"),
            ("x-forwarded-for", "10.0.0.1"),
        ];
        // The token is added by the dao, from the checked caller, not copied.
        assert_eq!(
            names_up(&headers, false),
            ["accept", "content-type", "impersonate-user"]
        );
    }

    #[test]
    fn a_switch_of_protocols_goes_up_with_its_handshake_alone() {
        let headers = [
            ("connection", "Upgrade"),
            ("upgrade", "websocket"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("sec-websocket-version", "13"),
            ("sec-websocket-protocol", "v5.channel.k8s.io"),
            ("x-stream-protocol-version", "v4.channel.k8s.io"),
            ("authorization", "Bearer theirs"),
            ("cookie", "session=1"),
        ];
        assert_eq!(
            names_up(&headers, true),
            [
                "connection",
                "sec-websocket-key",
                "sec-websocket-protocol",
                "sec-websocket-version",
                "upgrade",
                "x-stream-protocol-version"
            ]
        );
        // A plain relay never asks the apiserver to switch.
        assert!(names_up(&headers, false).is_empty());
    }
}
