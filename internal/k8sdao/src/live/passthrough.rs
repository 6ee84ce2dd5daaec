//! A caller's request relayed to the apiserver as it came, with the caller's own bearer token
//! and nothing of ours: the client has no credentials of k8sailor's (see
//! `confk8s::Connection::without_credentials`), so the apiserver authenticates and authorizes
//! the caller. The answer's body is streamed, never buffered here. A request that asks to
//! switch protocols (exec, attach and port-forward, over WebSocket or SPDY) is sent the same
//! way on a connection of its own (HTTP/1.1: kube's client speaks no h2), and once the
//! apiserver switched, that connection is handed back as a byte stream both ways.

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use http::StatusCode;
use http::header::{AUTHORIZATION, HeaderValue};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use kube::Client;

use crate::DaoError;

/// The body of a relayed answer, read from the apiserver only as it is polled.
pub type RelayedBody = BoxStream<'static, Result<Bytes, DaoError>>;

/// The apiserver's end of a connection switched to another protocol: bytes both ways,
/// whatever the protocol (WebSocket, SPDY) carries.
pub type SwitchedStream = TokioIo<hyper::upgrade::Upgraded>;

/// What the apiserver answered a request to switch protocols.
pub enum Switch {
    /// 101 Switching Protocols: its head (the protocol chosen, `Sec-WebSocket-Accept`), and
    /// the connection, now the caller's stream to the apiserver.
    Switched {
        head: http::response::Parts,
        stream: SwitchedStream,
    },
    /// Any other answer (a 403, the apiserver's 400 for a protocol it does not speak): an
    /// answer to relay as any other.
    Answered(http::Response<RelayedBody>),
}

/// Relays callers' requests to the apiserver with their own tokens.
#[derive(Clone)]
pub struct Passthrough {
    client: Client,
}

impl Passthrough {
    /// `client` must carry no credentials of its own: every request it sends authenticates
    /// as whoever's token it is given.
    pub fn new(client: Client) -> Self {
        Passthrough { client }
    }

    /// Sends `request` (its path and query, the headers the caller's answer depends on, its
    /// body) with `token` as its bearer token, and answers what the apiserver answered:
    /// status, headers and body, the body streamed. An error only when no answer came.
    pub async fn send(
        &self,
        request: http::Request<Bytes>,
        token: &str,
    ) -> Result<http::Response<RelayedBody>, DaoError> {
        Ok(self.answer(request, token).await?.map(streamed))
    }

    /// Sends `request`, which asks to switch protocols (its `Upgrade`, `Connection` and
    /// protocol headers given), as [`Passthrough::send`] does; once the apiserver switched,
    /// the connection is the caller's.
    pub async fn switch(
        &self,
        request: http::Request<Bytes>,
        token: &str,
    ) -> Result<Switch, DaoError> {
        let mut response = self.answer(request, token).await?;
        if response.status() != StatusCode::SWITCHING_PROTOCOLS {
            return Ok(Switch::Answered(response.map(streamed)));
        }
        let upgraded = hyper::upgrade::on(&mut response).await.map_err(|e| {
            DaoError::Unavailable(format!("the apiserver switched protocols, then: {e}"))
        })?;
        let (head, _) = response.into_parts();
        Ok(Switch::Switched {
            head,
            stream: TokioIo::new(upgraded),
        })
    }

    /// The apiserver's answer to `request` sent with `token`.
    async fn answer(
        &self,
        request: http::Request<Bytes>,
        token: &str,
    ) -> Result<http::Response<kube::client::Body>, DaoError> {
        let (mut parts, body) = request.into_parts();
        let bearer = HeaderValue::try_from(format!("Bearer {token}"))
            .map_err(|_| DaoError::Unavailable("the bearer token is not a header value".into()))?;
        parts.headers.insert(AUTHORIZATION, bearer);
        let request = http::Request::from_parts(parts, kube::client::Body::from(body));
        Ok(self.client.send(request).await?)
    }
}

/// An answer's body, read as it is polled.
fn streamed(body: kube::client::Body) -> RelayedBody {
    body.into_data_stream()
        .map(|chunk| chunk.map_err(|e| DaoError::Unavailable(e.to_string())))
        .boxed()
}

#[cfg(test)]
mod tests {
    use http::{Request, Response};
    use kube::client::Body;
    use tower_test::mock;

    use super::*;

    #[tokio::test]
    async fn the_callers_token_and_body_go_up_and_the_answer_comes_back_whole() {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let apiserver = tokio::spawn(async move {
            let (request, send) = handle.next_request().await.expect("a request");
            assert_eq!(request.method(), http::Method::DELETE);
            assert_eq!(
                request.uri().to_string(),
                "/api/v1/namespaces/shop/configmaps/web?dryRun=All"
            );
            assert_eq!(request.headers()[AUTHORIZATION], "Bearer caller-token");
            assert_eq!(request.headers()["content-type"], "application/json");
            let body = request.into_body().collect_bytes().await.unwrap();
            assert_eq!(&body[..], br#"{"propagationPolicy":"Background"}"#);
            send.send_response(
                Response::builder()
                    .status(403)
                    .header("audit-id", "a1")
                    .body(Body::from(br#"{"kind":"Status","code":403}"#.to_vec()))
                    .unwrap(),
            );
        });
        let relay = Passthrough::new(Client::new(service, "default"));
        let request = Request::delete("/api/v1/namespaces/shop/configmaps/web?dryRun=All")
            .header("content-type", "application/json")
            .body(Bytes::from_static(br#"{"propagationPolicy":"Background"}"#))
            .unwrap();
        let response = relay.send(request, "caller-token").await.unwrap();
        // A refusal is the apiserver's answer to relay, not an error of ours.
        assert_eq!(response.status(), 403);
        assert_eq!(response.headers()["audit-id"], "a1");
        let body: Vec<Bytes> = response
            .into_body()
            .map(Result::unwrap)
            .collect::<Vec<_>>()
            .await;
        assert_eq!(body.concat(), br#"{"kind":"Status","code":403}"#);
        apiserver.await.unwrap();
    }

    /// A small apiserver on a loopback port that switches to an echo of bytes, upper-cased,
    /// for a request with the caller's token, and refuses any other with a 403.
    async fn switching_apiserver() -> std::net::SocketAddr {
        use hyper::service::service_fn;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let service = service_fn(
                |mut request: http::Request<hyper::body::Incoming>| async move {
                    if request.headers()[AUTHORIZATION] != "Bearer caller-token" {
                        return http::Response::builder()
                            .status(403)
                            .body(http_body_util::Full::new(Bytes::from_static(b"forbidden")));
                    }
                    assert_eq!(request.headers()["upgrade"], "websocket");
                    let switched = hyper::upgrade::on(&mut request);
                    tokio::spawn(async move {
                        let mut stream = TokioIo::new(switched.await.unwrap());
                        let mut buf = [0; 64];
                        loop {
                            let n = stream.read(&mut buf).await.unwrap();
                            if n == 0 {
                                break;
                            }
                            buf[..n].make_ascii_uppercase();
                            stream.write_all(&buf[..n]).await.unwrap();
                        }
                    });
                    http::Response::builder()
                        .status(101)
                        .header("upgrade", "websocket")
                        .header("connection", "Upgrade")
                        .header("sec-websocket-protocol", "v5.channel.k8s.io")
                        .body(http_body_util::Full::new(Bytes::new()))
                },
            );
            hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades()
                .await
                .unwrap();
        });
        address
    }

    fn switch_request() -> Request<Bytes> {
        Request::get("/api/v1/namespaces/shop/pods/web/exec?command=cat&stdin=true")
            .header("connection", "Upgrade")
            .header("upgrade", "websocket")
            .header("sec-websocket-protocol", "v5.channel.k8s.io")
            .body(Bytes::new())
            .unwrap()
    }

    fn client_of(address: std::net::SocketAddr) -> Client {
        let url = format!("http://{address}").parse().unwrap();
        Client::try_from(kube::Config::new(url)).unwrap()
    }

    #[tokio::test]
    async fn once_the_apiserver_switched_its_connection_is_the_callers_stream() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let relay = Passthrough::new(client_of(switching_apiserver().await));
        let Switch::Switched { head, mut stream } = relay
            .switch(switch_request(), "caller-token")
            .await
            .unwrap()
        else {
            panic!("the apiserver switched");
        };
        assert_eq!(head.status, StatusCode::SWITCHING_PROTOCOLS);
        assert_eq!(head.headers["sec-websocket-protocol"], "v5.channel.k8s.io");
        stream.write_all(b"echo hi").await.unwrap();
        let mut echoed = [0; 7];
        stream.read_exact(&mut echoed).await.unwrap();
        assert_eq!(&echoed, b"ECHO HI");
    }

    #[tokio::test]
    async fn a_refused_switch_is_the_apiservers_answer() {
        let relay = Passthrough::new(client_of(switching_apiserver().await));
        let Switch::Answered(answer) = relay.switch(switch_request(), "other").await.unwrap()
        else {
            panic!("the apiserver refused");
        };
        assert_eq!(answer.status(), 403);
        let body: Vec<Bytes> = answer
            .into_body()
            .map(Result::unwrap)
            .collect::<Vec<_>>()
            .await;
        assert_eq!(body.concat(), b"forbidden");
    }
}
