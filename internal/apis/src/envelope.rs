//! The original k8sailor's answer shape, `{"code":0,"data":...,"error":""}`, and the mapping
//! of every failure onto it with the right HTTP status.

use std::time::Duration;

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::dispatch::RouteMatch;
use biz::{BizError, Failure, JsonAnswer};
use k8sdao::DaoError;

/// Every JSON answer: `code` 0 and `data` on success; the HTTP status as `code`, `data` null
/// and the reason in `error` on failure.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Envelope<T> {
    pub code: u16,
    pub data: T,
    pub error: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ListMeta>,
}

/// A failed request's answer: `code` is the HTTP status, `data` null, `error` the reason.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorEnvelope {
    pub code: u16,
    /// Always null.
    pub data: Option<String>,
    pub error: String,
}

/// Beside `data` on list answers; the original client ignores keys it does not know.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListMeta {
    pub resource_version: String,
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remaining_item_count: Option<usize>,
    /// Present (true) when objects in namespaces the caller may not list were left out
    /// (`--auth delegated`, a list across namespaces); counts cover what is shown only.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub access_filtered: bool,
}

/// `code` 0 and the data, as JSON.
pub fn ok<T: Serialize>(data: T) -> Response {
    axum::Json(Envelope {
        code: 0,
        data,
        error: String::new(),
        metadata: None,
    })
    .into_response()
}

/// `code` 0 and the data written from the records' JSON.
pub fn ok_json<T: JsonAnswer>(data: &T) -> Response {
    enveloped(data, None)
}

/// `code` 0, the items written from the records' JSON, and the list metadata.
pub fn ok_page_json<T: JsonAnswer>(page: biz::Page<T>) -> Response {
    let metadata = ListMeta {
        resource_version: page.resource_version,
        continue_token: page.continue_token,
        remaining_item_count: page.remaining,
        access_filtered: page.access_filtered,
    };
    enveloped(&page.items, Some(&metadata))
}

/// The envelope around data that is JSON already: the bytes [`Envelope`] serializes to (the
/// keys in the same order), without serializing the objects again.
fn enveloped(data: &impl JsonAnswer, metadata: Option<&ListMeta>) -> Response {
    // A buffer with room left would become `Bytes` with a header allocated beside it
    // (bytes' `From<Vec<u8>>`); shrunk to its length it is taken as it is, and mimalloc
    // shrinks a block in place while it stays above half its size (`json_len` is close).
    let body = enveloped_bytes(data, metadata).into_boxed_slice();
    json_response(bytes::Bytes::from(body))
}

/// A 200 whose body is JSON already. Built directly: `(headers, Bytes).into_response()`
/// inserts `application/octet-stream` first and then replaces it, two header writes per GET.
pub(crate) fn json_response(body: bytes::Bytes) -> Response {
    let mut response = Response::new(axum::body::Body::from(body));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The one place answers are spliced from JSON fragments; a test ties it to [`Envelope`]'s
/// serde shape.
fn enveloped_bytes(data: &impl JsonAnswer, metadata: Option<&ListMeta>) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.json_len() + 128);
    out.extend_from_slice(br#"{"code":0,"data":"#);
    data.write_json(&mut out);
    out.extend_from_slice(br#","error":"""#);
    if let Some(metadata) = metadata {
        out.extend_from_slice(br#","metadata":"#);
        // Strings and numbers only: serializing into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut out, metadata);
    }
    out.push(b'}');
    out
}

/// A failed request: its status goes in both the HTTP status and `code`.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// When to try again (`Retry-After`, whole seconds); a 503 says 1 unless told otherwise.
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            retry_after: None,
        }
    }

    pub fn retry_after(self, seconds: u64) -> Self {
        ApiError {
            retry_after: Some(seconds),
            ..self
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::warn!(status = %self.status, error = %self.message, "request failed");
        }
        let mut response = (
            self.status,
            axum::Json(ErrorEnvelope {
                code: self.status.as_u16(),
                data: None,
                error: self.message,
            }),
        )
            .into_response();
        let retry_after = self
            .retry_after
            .or((self.status == StatusCode::SERVICE_UNAVAILABLE).then_some(1));
        if let Some(seconds) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// The HTTP status (and the envelope's `code`) that answers a failure: 4xx for the request's
/// faults, 5xx only for ours or the apiserver's.
pub fn status_of(failure: Failure) -> StatusCode {
    match failure {
        Failure::Invalid => StatusCode::BAD_REQUEST,
        Failure::Forbidden => StatusCode::FORBIDDEN,
        Failure::NotFound => StatusCode::NOT_FOUND,
        Failure::Conflict => StatusCode::CONFLICT,
        Failure::Gone => StatusCode::GONE,
        Failure::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Failure::Initializing => StatusCode::TOO_MANY_REQUESTS,
        Failure::Upstream => StatusCode::BAD_GATEWAY,
        Failure::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// When a client should ask again after a failure it may retry: a kind whose first list is
/// not in yet, as the apiserver answers while its watch cache of a kind initializes. A 503
/// says 1 anyway ([`ApiError`]).
pub fn retry_after_of(e: &BizError) -> Option<u64> {
    match e {
        BizError::Source(DaoError::Initializing { waited, .. }) => {
            Some(initializing_retry_after(*waited))
        }
        _ => None,
    }
}

/// The apiserver's `Retry-After` for a kind whose watch cache is (re)initializing
/// (`cacher.calculateRetryAfterForUnreadyCache`): e^(0.06/s × how long it has waited), kept
/// between 1 and 30 and cut to whole seconds as Go's `int()` cuts it: 1 for the first 11.5 s,
/// then longer, up to 30 from 57 s on, so clients back off from a list that is slow to come.
fn initializing_retry_after(waited: Duration) -> u64 {
    (0.06 * waited.as_secs_f64()).exp().clamp(1.0, 30.0) as u64
}

impl From<BizError> for ApiError {
    fn from(e: BizError) -> Self {
        let error = ApiError::new(status_of(e.failure()), e.to_string());
        match retry_after_of(&e) {
            Some(seconds) => error.retry_after(seconds),
            None => error,
        }
    }
}

/// `Query` whose rejection is a 400 envelope.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        decode_query(&parts.uri).map(ApiQuery).map_err(|e| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("invalid query: {}", e.body_text()),
            )
        })
    }
}

/// The query of `uri`, decoded as axum's `Query` decodes it, without the path to the error
/// it tracks on every query: a valid one (nearly all) is decoded once, an invalid one again
/// by `Query`, for its rejection's message.
pub(crate) fn decode_query<T: DeserializeOwned>(uri: &Uri) -> Result<T, QueryRejection> {
    let text = uri.query().unwrap_or("");
    if let Some(Ok(query)) = plain_query::decode(text) {
        return Ok(query);
    }
    if let Ok(query) = serde_urlencoded::from_str(text) {
        return Ok(query);
    }
    Query::<T>::try_from_uri(uri).map(|Query(q)| q)
}

/// A query with nothing to decode (no `%` escape, no `+` for a space), read as
/// `serde_urlencoded` reads it, but from the text itself: that crate decodes every key and
/// value byte by byte, which was most of what reading `?namespace=` cost a GET. Anything
/// else, and any error, goes to `serde_urlencoded`.
mod plain_query {
    use serde::de::value::{Error, MapDeserializer};
    use serde::de::{DeserializeOwned, Deserializer, IntoDeserializer, Visitor};

    pub(super) fn decode<T: DeserializeOwned>(query: &str) -> Option<Result<T, Error>> {
        if query.bytes().any(|b| b == b'%' || b == b'+') {
            return None;
        }
        Some(T::deserialize(MapDeserializer::new(Pairs(query))))
    }

    /// The query's `key=value` pairs (empty ones skipped), found by a plain scan of its
    /// bytes: `str::split` and `split_once` set up a searcher each that costs more than a
    /// short query's whole scan.
    struct Pairs<'de>(&'de str);

    impl<'de> Iterator for Pairs<'de> {
        type Item = (&'de str, Part<'de>);

        fn next(&mut self) -> Option<Self::Item> {
            loop {
                if self.0.is_empty() {
                    return None;
                }
                let (pair, rest) = split_at_first(self.0, b'&');
                self.0 = rest;
                if !pair.is_empty() {
                    let (key, value) = split_at_first(pair, b'=');
                    return Some((key, Part(value)));
                }
            }
        }
    }

    /// `text` before and after the first `separator` (an ASCII byte, so both are text);
    /// all of it and nothing when there is none.
    fn split_at_first(text: &str, separator: u8) -> (&str, &str) {
        match text.bytes().position(|b| b == separator) {
            Some(at) => (&text[..at], &text[at + 1..]),
            None => (text, ""),
        }
    }

    /// A value: text, or what it spells for a number or a flag, as `serde_urlencoded`'s.
    struct Part<'de>(&'de str);

    impl<'de> IntoDeserializer<'de, Error> for Part<'de> {
        type Deserializer = Self;
        fn into_deserializer(self) -> Self {
            self
        }
    }

    macro_rules! parsed {
        ($($method:ident => $visit:ident,)*) => {
            $(
                fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
                    match self.0.parse() {
                        Ok(value) => visitor.$visit(value),
                        Err(e) => Err(serde::de::Error::custom(e)),
                    }
                }
            )*
        };
    }

    impl<'de> Deserializer<'de> for Part<'de> {
        type Error = Error;

        fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            visitor.visit_borrowed_str(self.0)
        }

        fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            visitor.visit_some(self)
        }

        parsed! {
            deserialize_bool => visit_bool,
            deserialize_u8 => visit_u8,
            deserialize_u16 => visit_u16,
            deserialize_u32 => visit_u32,
            deserialize_u64 => visit_u64,
            deserialize_i8 => visit_i8,
            deserialize_i16 => visit_i16,
            deserialize_i32 => visit_i32,
            deserialize_i64 => visit_i64,
            deserialize_f32 => visit_f32,
            deserialize_f64 => visit_f64,
        }

        serde::forward_to_deserialize_any! {
            i128 u128 char str string bytes byte_buf unit unit_struct newtype_struct seq
            tuple tuple_struct map struct enum identifier ignored_any
        }
    }
}

/// `Json` whose rejection is an envelope: 400 for malformed JSON, 415 without
/// `Content-Type: application/json`, 422 for JSON of the wrong shape.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        axum::Json::<T>::from_request(request, state)
            .await
            .map(|axum::Json(body)| ApiJson(body))
            .map_err(|e: JsonRejection| {
                ApiError::new(e.status(), format!("invalid body: {}", e.body_text()))
            })
    }
}

/// A declared route's path parameters ([`RouteMatch`]), a 400 envelope when they are not
/// valid: one `String`, or two as a tuple.
pub struct ApiPath<T>(pub T);

/// What a route's parameters are read as, in the template's order.
pub trait PathValues: Sized {
    fn from_values(values: impl Iterator<Item = String>) -> Option<Self>;
}

impl PathValues for String {
    fn from_values(mut values: impl Iterator<Item = String>) -> Option<String> {
        let value = values.next()?;
        values.next().is_none().then_some(value)
    }
}

impl PathValues for (String, String) {
    fn from_values(mut values: impl Iterator<Item = String>) -> Option<(String, String)> {
        let pair = (values.next()?, values.next()?);
        values.next().is_none().then_some(pair)
    }
}

impl<S: Send + Sync, T: PathValues> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let Some(found) = parts.extensions.get_mut::<RouteMatch>() else {
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal error: a route's parameters read outside the route table",
            ));
        };
        let values = found.take_values().map_err(|reason| {
            ApiError::new(StatusCode::BAD_REQUEST, format!("invalid path: {reason}"))
        })?;
        match T::from_values(values) {
            Some(values) => Ok(ApiPath(values)),
            None => Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!(
                    "internal error: the route {} has another number of parameters than its handler reads",
                    found.template()
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_query_reads_as_serde_urlencoded_reads_it() {
        #[derive(Debug, PartialEq, serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Params {
            namespace: Option<String>,
            limit: Option<usize>,
            watch: Option<bool>,
            #[serde(default)]
            label_selector: String,
            #[serde(default)]
            seconds: i32,
        }
        let queries = [
            "",
            "namespace=ns",
            "namespace=",
            "namespace",
            "&&namespace=ns&",
            "&",
            "=x&namespace=ns",
            "namespace=a=b",
            "namespace=é&limit=5",
            "namespace=a&namespace=b",
            "limit=5",
            "limit=",
            "limit=-1",
            "limit=99999999999999999999999",
            "watch=true",
            "watch=1",
            "labelSelector=app=web,tier!=db",
            "labelSelector=a%3Db",
            "labelSelector=a+b",
            "seconds=-7&unknown=x",
            "seconds=1.5",
        ];
        for query in queries {
            let slow = serde_urlencoded::from_str::<Params>(query);
            match plain_query::decode::<Params>(query) {
                Some(Ok(plain)) => assert_eq!(Some(&plain), slow.as_ref().ok(), "{query}"),
                Some(Err(_)) => assert!(slow.is_err(), "{query}: read plainly, refused"),
                None => assert!(query.contains(['%', '+']), "{query}: not read plainly"),
            }
        }
        let read = plain_query::decode::<Params>("namespace=ns&limit=5&watch=true")
            .and_then(Result::ok)
            .expect("a plain query is read plainly");
        assert_eq!(read.namespace.as_deref(), Some("ns"));
        assert_eq!((read.limit, read.watch), (Some(5), Some(true)));
    }

    #[test]
    fn a_kind_waiting_for_its_first_list_is_retried_later_the_longer_it_waits() {
        let after = |seconds: f64| initializing_retry_after(Duration::from_secs_f64(seconds));
        // The apiserver's e^(0.06 s⁻¹ × t), between 1 and 30, cut to whole seconds.
        for (waited, retry) in [
            (0.0, 1),
            (11.0, 1),
            (11.6, 2),
            (18.4, 3),
            (30.0, 6),
            (56.0, 28),
            (57.0, 30),
            (3600.0, 30),
        ] {
            assert_eq!(after(waited), retry, "{waited} s");
        }
        let waiting = |seconds| {
            BizError::Source(DaoError::Initializing {
                resource: "widgets".into(),
                waited: Duration::from_secs(seconds),
            })
        };
        assert_eq!(retry_after_of(&waiting(0)), Some(1));
        assert_eq!(retry_after_of(&waiting(40)), Some(11));
        assert_eq!(retry_after_of(&BizError::Expired), None);
    }

    /// Data that is JSON already, as records are.
    struct Written(&'static str);

    impl JsonAnswer for Written {
        fn write_json(&self, out: &mut Vec<u8>) {
            out.extend_from_slice(self.0.as_bytes());
        }

        fn json_len(&self) -> usize {
            self.0.len()
        }
    }

    #[test]
    fn spliced_answers_are_the_bytes_the_envelope_serializes_to() {
        // Keys in order, as serde_json::Value keeps them sorted.
        let data = r#"[{"labels":{"app":"web"},"name":"web"}]"#;
        let meta = || ListMeta {
            resource_version: "42".into(),
            continue_token: Some("1.1.ab".into()),
            remaining_item_count: Some(3),
            access_filtered: true,
        };
        for metadata in [None, Some(meta())] {
            let spliced = enveloped_bytes(&Written(data), metadata.as_ref());
            let serialized = serde_json::to_vec(&Envelope {
                code: 0,
                data: serde_json::from_str::<serde_json::Value>(data).unwrap(),
                error: String::new(),
                metadata,
            })
            .unwrap();
            assert_eq!(
                String::from_utf8(spliced).unwrap(),
                String::from_utf8(serialized).unwrap()
            );
        }
    }
}
