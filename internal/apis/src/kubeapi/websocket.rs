//! A watch asked over WebSocket, as browser clients ask (Headlamp's frontend and backend,
//! Lens, the Kubernetes dashboard: a browser cannot read a chunked stream's frames as they
//! come, nor set `Authorization` on a WebSocket). The apiserver serves such a watch from the
//! same watch as its HTTP stream (`handlers/watch.go`: `wsstream.IsWebSocketRequest`, then
//! `websocket.Handler(HandleWS)` of golang.org/x/net), and so does k8sailor: the frames come
//! from the one watch pipeline of `reads.rs`, and only their transport differs. Each event
//! is one text message holding exactly the line the HTTP stream would send, and the stream's
//! end (timeoutSeconds, the watch's lifetime, shutdown, an ERROR event such as 410 Expired)
//! is a close frame with 1000 (Normal), as x/net's `Conn.Close` sends. What the client sends
//! is read and dropped (pings answered), as the apiserver's `IgnoreReceives`; a client's close
//! ends the watch.
//!
//! Everything the watch checks comes first and is answered as HTTP, as the apiserver answers
//! it before it switches (the access check's 403, the fair share's 429, a bad query's 400);
//! then the handshake is checked as x/net checks it: GET only (405), a `Sec-WebSocket-Key`
//! (400), version 13 (400 naming it), an `Origin` that parses as a request URI (403: x/net's
//! `websocket.Handler` refuses a handshake without one) and at most one subprotocol (400),
//! which is echoed whatever it is (`base64.binary.k8s.io`, `binary.k8s.io`: the frames are
//! the same JSON text either way). An HTTP/2 request cannot carry `Connection`/`Upgrade`
//! (the h2 layer resets such a stream, as Go's does), so over HTTP/2 a watch is the plain
//! stream.

use std::time::Duration;

use axum::body::Body;
use axum::extract::FromRequestParts;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade, close_code};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{SinkExt, StreamExt};
use tokio_util::sync::CancellationToken;

use super::reads::Streamed;
use crate::ConnectionEnd;
use crate::fairness::{Holding, WatchPlace};

/// The largest message or frame taken from a client, which should send none: what it sends
/// is dropped, and one this large ends the watch.
const MAX_RECEIVED_BYTES: usize = 64 * 1024;

/// How long a socket may take the close frame once shutdown began, before it is dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// Whether the request asks for a WebSocket, as the apiserver tells
/// (`wsstream.IsWebSocketRequest`): its first `Upgrade` is `websocket`, and its first
/// `Connection` names `upgrade` among its tokens.
pub(crate) fn asks_websocket(headers: &HeaderMap) -> bool {
    let first = |name| headers.get(name).and_then(|v| v.to_str().ok());
    first(header::UPGRADE).is_some_and(|u| u.eq_ignore_ascii_case("websocket"))
        && first(header::CONNECTION).is_some_and(names_upgrade)
}

/// The apiserver's `(^|.*,\s*)upgrade($|\s*,)` on the lowercased `Connection`.
fn names_upgrade(connection: &str) -> bool {
    let connection = connection.to_ascii_lowercase();
    let tokens: Vec<&str> = connection.split(',').collect();
    let last = tokens.len() - 1;
    tokens.iter().enumerate().any(|(i, token)| {
        let token = if i == 0 { token } else { token.trim_start() };
        let token = if i == last { token } else { token.trim_end() };
        token == "upgrade"
    })
}

/// The start of the subprotocol that carries a bearer token where a browser cannot set
/// `Authorization` on a WebSocket (Headlamp's frontend):
/// `base64url.bearer.authorization.k8s.io.<the token, base64url without padding>`.
const BEARER_PROTOCOL: &str = "base64url.bearer.authorization.k8s.io.";

/// Why a bearer token carried as a subprotocol is refused (the apiserver's 401).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(super) enum ProtocolTokenError {
    #[error("multiple base64.bearer.authorization tokens specified")]
    Several,
    #[error("invalid base64.bearer.authorization token encoding")]
    Encoding,
    #[error("invalid base64.bearer.authorization token")]
    NotText,
    #[error("missing additional subprotocol")]
    NoOtherProtocol,
}

/// The bearer token a WebSocket handshake carries as a subprotocol, taken out of its
/// subprotocols as the apiserver takes it (its websocket `ProtocolAuthenticator`), so that
/// the handshake echoes one of the others; None when it carries none.
pub(super) fn take_protocol_token(
    headers: &mut HeaderMap,
) -> Result<Option<String>, ProtocolTokenError> {
    use base64::Engine;
    if !asks_websocket(headers) {
        return Ok(None);
    }
    let mut token = None;
    let mut others = Vec::new();
    for value in headers.get_all(header::SEC_WEBSOCKET_PROTOCOL) {
        for protocol in String::from_utf8_lossy(value.as_bytes()).split(',') {
            let protocol = protocol.trim();
            let Some(encoded) = protocol.strip_prefix(BEARER_PROTOCOL) else {
                others.push(protocol.to_string());
                continue;
            };
            if token.is_some() {
                return Err(ProtocolTokenError::Several);
            }
            let decoded = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(encoded)
                .map_err(|_| ProtocolTokenError::Encoding)?;
            token = Some(String::from_utf8(decoded).map_err(|_| ProtocolTokenError::NotText)?);
        }
    }
    let Some(token) = token.filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    if others.is_empty() {
        return Err(ProtocolTokenError::NoOtherProtocol);
    }
    let others =
        HeaderValue::from_str(&others.join(",")).map_err(|_| ProtocolTokenError::Encoding)?;
    headers.insert(header::SEC_WEBSOCKET_PROTOCOL, others);
    Ok(Some(token))
}

/// A handshake x/net refuses: its status, its text, and for a version it does not speak the
/// version it does.
#[derive(Debug, PartialEq, Eq)]
struct Refusal {
    status: StatusCode,
    message: &'static str,
    names_version: bool,
}

impl Refusal {
    fn new(status: StatusCode, message: &'static str) -> Refusal {
        Refusal {
            status,
            message,
            names_version: false,
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        // x/net writes the status line and its text on the hijacked connection, then closes it.
        let mut response = (self.status, self.message).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        if self.names_version {
            headers.insert(
                header::SEC_WEBSOCKET_VERSION,
                HeaderValue::from_static("13"),
            );
        }
        response
    }
}

/// x/net's server handshake (`hybiServerHandshaker.ReadHandshake`, `websocket.Handler`'s
/// origin check, `AcceptHandshake`) of a request that asks for a WebSocket: the subprotocol
/// to echo, if the client named one.
fn handshake(method: &Method, headers: &HeaderMap) -> Result<Option<HeaderValue>, Refusal> {
    // Go's `Header.Get`: the first value of each.
    let first = |name| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    };
    if method != Method::GET {
        return Err(Refusal::new(StatusCode::METHOD_NOT_ALLOWED, "bad method"));
    }
    if first(header::SEC_WEBSOCKET_KEY).is_empty() {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "mismatch challenge/response",
        ));
    }
    if first(header::SEC_WEBSOCKET_VERSION) != "13" {
        return Err(Refusal {
            names_version: true,
            ..Refusal::new(StatusCode::BAD_REQUEST, "bad protocol version")
        });
    }
    if !is_request_uri(first(header::ORIGIN)) {
        return Err(Refusal::new(StatusCode::FORBIDDEN, ""));
    }
    let protocols = first(header::SEC_WEBSOCKET_PROTOCOL).trim();
    if protocols.is_empty() {
        return Ok(None);
    }
    // A token the access check did not take (auth none reads no credentials) is no
    // protocol to speak.
    let protocols: Vec<&str> = protocols
        .split(',')
        .map(str::trim)
        .filter(|p| !p.starts_with(BEARER_PROTOCOL))
        .collect();
    match protocols[..] {
        [] => Ok(None),
        [protocol] => Ok(HeaderValue::from_str(protocol).ok()),
        // x/net echoes one, and leaves the choice among several to a handshake function the
        // apiserver does not give it.
        _ => Err(Refusal::new(StatusCode::BAD_REQUEST, "")),
    }
}

/// Whether Go's `url.ParseRequestURI` takes `origin`: an absolute URI (a scheme: a letter,
/// then letters, digits, `+`, `-`, `.`, then `:`) or an absolute path, without spaces or
/// control characters. An empty one, or the `null` of a sandboxed page, is not.
fn is_request_uri(origin: &str) -> bool {
    if origin.is_empty() || origin.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return false;
    }
    if origin.starts_with('/') {
        return true;
    }
    let Some((scheme, _)) = origin.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// How a watch's frames reach its caller: as its answer's body, or as the messages of its
/// connection switched to a WebSocket; with what bounds a stream that outlives its answer.
/// The default is a plain body that holds nothing.
#[derive(Default)]
pub(super) struct Transport {
    /// The caller asked for a WebSocket: its handshake, checked once the watch is set up.
    websocket: Option<Asked>,
    /// The watch's place in its caller's fair share, when a request that may switch
    /// protocols carried it (hyper drops a 101's body): held by the socket, or by the body.
    place: Option<WatchPlace>,
    /// Cancelled when the connection layer closes the caller's connection.
    connection_end: Option<ConnectionEnd>,
}

struct Asked {
    handshake: Result<Option<HeaderValue>, Refusal>,
    /// axum's side of the switch (the key's accept, hyper's handle on the connection);
    /// None where the connection cannot switch (HTTP/2, or one served without upgrades).
    upgrade: Option<WebSocketUpgrade>,
}

impl Transport {
    /// What the request carries for a stream.
    pub(super) async fn of(parts: &mut Parts) -> Transport {
        let websocket = if asks_websocket(&parts.headers) {
            let handshake = handshake(&parts.method, &parts.headers);
            let upgrade = WebSocketUpgrade::from_request_parts(parts, &()).await.ok();
            Some(Asked { handshake, upgrade })
        } else {
            None
        };
        Transport {
            websocket,
            place: parts.extensions.remove::<WatchPlace>(),
            connection_end: parts.extensions.remove::<ConnectionEnd>(),
        }
    }

    /// A watch whose frames are `frames` (each an event as the HTTP stream sends it, its
    /// newline included), sent as asked; `shutdown` ends a socket that takes no close frame.
    pub(super) fn respond(
        self,
        frames: BoxStream<'static, Bytes>,
        shutdown: CancellationToken,
    ) -> Response {
        let Transport {
            websocket,
            place,
            connection_end,
        } = self;
        let Some(Asked { handshake, upgrade }) = websocket else {
            let body = Body::from_stream(frames.map(Ok::<_, std::convert::Infallible>));
            let body = match place {
                Some(place) => Body::new(Holding::new(body, place)),
                None => body,
            };
            let mut response = (
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                body,
            )
                .into_response();
            response.extensions_mut().insert(Streamed);
            return response;
        };
        let protocol = match handshake {
            Ok(protocol) => protocol,
            Err(refusal) => return refusal.into_response(),
        };
        let Some(mut upgrade) = upgrade else {
            return Refusal::new(StatusCode::BAD_REQUEST, "the connection cannot switch")
                .into_response();
        };
        if let Some(protocol) = protocol {
            upgrade.set_selected_protocol(protocol);
        }
        let session = Session {
            place,
            connection_end,
            shutdown,
        };
        let mut response = upgrade
            .max_message_size(MAX_RECEIVED_BYTES)
            .max_frame_size(MAX_RECEIVED_BYTES)
            .on_upgrade(move |socket| session.run(socket, frames));
        response.extensions_mut().insert(Streamed);
        response
    }
}

/// A watch on a switched connection and what bounds it besides its frames' end.
struct Session {
    /// Its caller's watch's place in the fair share, held until it ends.
    place: Option<WatchPlace>,
    connection_end: Option<ConnectionEnd>,
    shutdown: CancellationToken,
}

impl Session {
    async fn run(self, socket: WebSocket, frames: BoxStream<'static, Bytes>) {
        let Session {
            place,
            connection_end,
            shutdown,
        } = self;
        let connection_closed = async {
            match connection_end {
                Some(ConnectionEnd(end)) => end.cancelled().await,
                None => std::future::pending().await,
            }
        };
        // The frames end at shutdown, and the close frame follows: a socket that does not
        // take it in time is dropped.
        let shut_down = async {
            shutdown.cancelled().await;
            tokio::time::sleep(CLOSE_GRACE).await;
        };
        tokio::select! {
            () = send_frames(socket, frames) => {}
            () = connection_closed => {}
            () = shut_down => {}
        }
        drop(place);
    }
}

/// Sends each frame as a text message until the frames end (then a close frame, 1000) or
/// the client closes or fails; what the client sends meanwhile is dropped.
async fn send_frames<S>(mut socket: S, mut frames: BoxStream<'static, Bytes>)
where
    S: futures::Sink<Message> + futures::Stream<Item = Result<Message, axum::Error>> + Unpin,
{
    loop {
        tokio::select! {
            frame = frames.next() => {
                let message = match frame.map(Utf8Bytes::try_from) {
                    Some(Ok(text)) => Message::Text(text),
                    Some(Err(e)) => {
                        // Frames are JSON written from JSON the apiserver sent: never.
                        tracing::warn!(error = %e, "a watch frame is not UTF-8: the WebSocket closes");
                        Message::Close(Some(CloseFrame {
                            code: close_code::ERROR,
                            reason: Utf8Bytes::from_static(""),
                        }))
                    }
                    None => Message::Close(Some(CloseFrame {
                        code: close_code::NORMAL,
                        reason: Utf8Bytes::from_static(""),
                    })),
                };
                let closing = matches!(message, Message::Close(_));
                if socket.send(message).await.is_err() || closing {
                    return;
                }
            }
            received = socket.next() => match received {
                // The client's close is answered (its frame flushed) before the socket goes.
                Some(Ok(Message::Close(_))) => {
                    let _ = socket.close().await;
                    return;
                }
                Some(Err(_)) | None => return,
                Some(Ok(_)) => {}
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|&(name, value)| {
                (
                    header::HeaderName::from_static(name),
                    HeaderValue::from_static(value),
                )
            })
            .collect()
    }

    #[test]
    fn a_websocket_is_asked_as_the_apiserver_tells_it() {
        for connection in [
            "Upgrade",
            "keep-alive, Upgrade",
            "upgrade,keep-alive",
            "a,  upgrade",
        ] {
            let asked = headers(&[("upgrade", "WebSocket"), ("connection", connection)]);
            assert!(asks_websocket(&asked), "{connection}");
        }
        for (upgrade, connection) in [
            ("websocket", "keep-alive"),
            ("websocket", "upgrades"),
            ("websocket", " upgrade"),
            ("websocket", "upgrade x"),
            ("h2c", "Upgrade"),
            ("websocket, h2c", "Upgrade"),
        ] {
            let asked = headers(&[("upgrade", upgrade), ("connection", connection)]);
            assert!(!asks_websocket(&asked), "{upgrade} {connection}");
        }
        assert!(!asks_websocket(&headers(&[("upgrade", "websocket")])));
    }

    #[test]
    fn a_token_carried_as_a_subprotocol_is_taken_out_as_the_apiserver_takes_it() {
        let socket = |protocols: &'static str| {
            headers(&[
                ("upgrade", "websocket"),
                ("connection", "Upgrade"),
                ("sec-websocket-protocol", protocols),
            ])
        };
        // "token", and "???" (whose base64url has a '_'), without padding.
        let mut asked = socket(
            "base64.binary.k8s.io, base64url.bearer.authorization.k8s.io.dG9rZW4, binary.k8s.io",
        );
        assert_eq!(
            take_protocol_token(&mut asked),
            Ok(Some("token".to_string()))
        );
        assert_eq!(
            asked[header::SEC_WEBSOCKET_PROTOCOL],
            "base64.binary.k8s.io,binary.k8s.io"
        );
        let mut asked = socket("base64url.bearer.authorization.k8s.io.Pz8_, x");
        assert_eq!(take_protocol_token(&mut asked), Ok(Some("???".to_string())));
        for (protocols, error) in [
            (
                "x, base64url.bearer.authorization.k8s.io.dG9rZW4, base64url.bearer.authorization.k8s.io.dG9rZW4",
                ProtocolTokenError::Several,
            ),
            (
                "x, base64url.bearer.authorization.k8s.io.dG9rZW4=",
                ProtocolTokenError::Encoding,
            ),
            (
                "x, base64url.bearer.authorization.k8s.io.__8",
                ProtocolTokenError::NotText,
            ),
            (
                "base64url.bearer.authorization.k8s.io.dG9rZW4",
                ProtocolTokenError::NoOtherProtocol,
            ),
        ] {
            assert_eq!(
                take_protocol_token(&mut socket(protocols)),
                Err(error),
                "{protocols}"
            );
        }
        // Not a WebSocket, or none carried: nothing taken, nothing changed.
        let mut plain = headers(&[(
            "sec-websocket-protocol",
            "x, base64url.bearer.authorization.k8s.io.dG9rZW4",
        )]);
        assert_eq!(take_protocol_token(&mut plain), Ok(None));
        let mut none = socket("base64.binary.k8s.io");
        assert_eq!(take_protocol_token(&mut none), Ok(None));
        assert_eq!(none[header::SEC_WEBSOCKET_PROTOCOL], "base64.binary.k8s.io");
    }

    /// The handshake headers of a browser's WebSocket, with `extra` added or replacing.
    fn handshake_of(
        extra: &[(&'static str, &'static str)],
    ) -> Result<Option<HeaderValue>, Refusal> {
        let mut asked = headers(&[
            ("upgrade", "websocket"),
            ("connection", "Upgrade"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("sec-websocket-version", "13"),
            ("origin", "http://localhost:4466"),
        ]);
        for (name, value) in extra {
            asked.insert(*name, HeaderValue::from_static(value));
        }
        handshake(&Method::GET, &asked)
    }

    #[test]
    fn the_handshake_is_checked_as_the_apiserver_checks_it() {
        assert_eq!(handshake_of(&[]), Ok(None));
        assert_eq!(
            handshake_of(&[("sec-websocket-protocol", " base64.binary.k8s.io ")]),
            Ok(Some(HeaderValue::from_static("base64.binary.k8s.io")))
        );
        let refused = |extra: &[(&'static str, &'static str)], status: StatusCode| {
            let refusal = handshake_of(extra).expect_err("refused");
            assert_eq!(refusal.status, status, "{extra:?}");
            refusal
        };
        refused(
            &[(
                "sec-websocket-protocol",
                "base64.binary.k8s.io, binary.k8s.io",
            )],
            StatusCode::BAD_REQUEST,
        );
        let version = refused(&[("sec-websocket-version", "8")], StatusCode::BAD_REQUEST);
        assert!(version.names_version);
        refused(&[("sec-websocket-key", "")], StatusCode::BAD_REQUEST);
        for origin in ["", "null", "1http://a", "http://a b", "localhost"] {
            refused(&[("origin", origin)], StatusCode::FORBIDDEN);
        }
        for origin in [
            "https://headlamp.example",
            "/relative",
            "app:x",
            "localhost:80x",
        ] {
            assert!(handshake_of(&[("origin", origin)]).is_ok(), "{origin}");
        }
        // A token left among the protocols (auth none reads none) is not one to echo.
        assert_eq!(
            handshake_of(&[(
                "sec-websocket-protocol",
                "base64.binary.k8s.io, base64url.bearer.authorization.k8s.io.dG9rZW4"
            )]),
            Ok(Some(HeaderValue::from_static("base64.binary.k8s.io")))
        );
        let asked = headers(&[("sec-websocket-key", "k"), ("sec-websocket-version", "13")]);
        assert_eq!(
            handshake(&Method::HEAD, &asked)
                .expect_err("refused")
                .status,
            StatusCode::METHOD_NOT_ALLOWED
        );
    }
}
