//! A caller's request relayed to the apiserver as it came, with the caller's own bearer token
//! and nothing of ours: the client has no credentials of k8sailor's (see
//! `confk8s::Connection::without_credentials`), so the apiserver authenticates and authorizes
//! the caller. The answer's body is streamed, never buffered here.

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use http::header::{AUTHORIZATION, HeaderValue};
use http_body_util::BodyExt;
use kube::Client;

use crate::DaoError;

/// The body of a relayed answer, read from the apiserver only as it is polled.
pub type RelayedBody = BoxStream<'static, Result<Bytes, DaoError>>;

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
        let (mut parts, body) = request.into_parts();
        let bearer = HeaderValue::try_from(format!("Bearer {token}"))
            .map_err(|_| DaoError::Unavailable("the bearer token is not a header value".into()))?;
        parts.headers.insert(AUTHORIZATION, bearer);
        let request = http::Request::from_parts(parts, kube::client::Body::from(body));
        let response = self.client.send(request).await?;
        Ok(response.map(|body| {
            body.into_data_stream()
                .map(|chunk| chunk.map_err(|e| DaoError::Unavailable(e.to_string())))
                .boxed()
        }))
    }
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
}
