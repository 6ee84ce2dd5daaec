//! Live updates: a list route with `watch=true` streams the selection, then each change,
//! instead of answering once. Clients that accept `text/event-stream` (browsers'
//! EventSource) get Server-Sent Events; others get newline-delimited JSON, one event a line
//! in the apiserver's watch shape, as `kubectl get --raw '...?watch=true'` shows it.

use std::convert::Infallible;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::ApiError;
use super::metrics::WatchGuard;
use crate::biz::WatchFrames;

/// The content type of a watch answered as JSON lines; never compressed, since a compressor
/// holds bytes back until it has enough of them.
pub const NDJSON: &str = "application/x-ndjson";

/// `watch` as the apiserver takes it.
pub fn is_watch(value: Option<&str>) -> Result<bool, ApiError> {
    match value {
        None | Some("" | "false" | "0") => Ok(false),
        Some("true" | "1") => Ok(true),
        Some(other) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("invalid watch {other:?}: expected true or false"),
        )),
    }
}

fn accepts_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream"))
}

/// The frames as the client asked for them; the stream ends when `end` is cancelled
/// (shutdown), so that no watcher holds the server open. `guard` counts it while it lasts.
pub fn respond(
    frames: WatchFrames,
    headers: &HeaderMap,
    end: CancellationToken,
    guard: WatchGuard,
) -> Response {
    let frames = frames
        .take_until(end.cancelled_owned())
        .inspect(move |_| guard.sent());
    if accepts_event_stream(headers) {
        let events = frames.map(|frame| {
            let event = Event::default()
                .event(frame.event.as_str())
                .data(frame.json);
            Ok::<_, Infallible>(match frame.resource_version {
                Some(rv) => event.id(rv),
                None => event,
            })
        });
        return Sse::new(events)
            .keep_alive(KeepAlive::default())
            .into_response();
    }
    let lines = frames.map(|frame| {
        let mut line = frame.json.into_bytes();
        line.push(b'\n');
        Ok::<_, Infallible>(bytes::Bytes::from(line))
    });
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(NDJSON)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        Body::from_stream(lines),
    )
        .into_response()
}
