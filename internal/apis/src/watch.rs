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

use super::envelope::status_of;
use super::metrics::WatchGuard;
use super::{ApiError, AppState};
use biz::{BizError, JsonAnswer, WatchUpdate, WatchUpdates};

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

/// The version a watch resumes after: `resourceVersion` if given, else (for a watch) the
/// `Last-Event-ID` an EventSource sends when it reconnects, which is the `id` of the last
/// event it received.
pub fn resume_after(
    resource_version: Option<String>,
    watch: Option<&str>,
    headers: &HeaderMap,
) -> Result<Option<String>, ApiError> {
    if resource_version.is_some() || !is_watch(watch)? {
        return Ok(resource_version);
    }
    match headers.get(LAST_EVENT_ID) {
        None => Ok(None),
        Some(id) => id.to_str().map(|id| Some(id.to_string())).map_err(|_| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid Last-Event-ID: expected the id of an event this server sent".to_string(),
            )
        }),
    }
}

const LAST_EVENT_ID: &str = "last-event-id";

const EVENT_STREAM: (&str, &str) = ("text", "event-stream");
const NDJSON_TYPE: (&str, &str) = ("application", "x-ndjson");

/// How much `Accept` wants a media type: the quality of its most specific matching range
/// (`type/subtype` over `type/*` over `*/*`), with that specificity; None when no range
/// matches. Ranges that do not parse are skipped, as are qualities that do not.
pub(crate) fn preference(accept: &[&str], (kind, subtype): (&str, &str)) -> Option<(u16, u8)> {
    let mut best: Option<(u8, u16)> = None;
    for range in accept.iter().flat_map(|v| v.split(',')) {
        let mut params = range.split(';');
        let Some((k, s)) = params.next().and_then(|m| m.trim().split_once('/')) else {
            continue;
        };
        let (k, s) = (k.trim(), s.trim());
        let specificity = if k.eq_ignore_ascii_case(kind) && s.eq_ignore_ascii_case(subtype) {
            2
        } else if k.eq_ignore_ascii_case(kind) && s == "*" {
            1
        } else if k == "*" && s == "*" {
            0
        } else {
            continue;
        };
        let mut quality = Some(1000);
        for param in params {
            if let Some((name, value)) = param.split_once('=')
                && name.trim().eq_ignore_ascii_case("q")
            {
                quality = parse_quality(value.trim());
            }
        }
        let Some(quality) = quality else { continue };
        if best.is_none_or(|(b, _)| specificity > b) {
            best = Some((specificity, quality));
        }
    }
    best.map(|(specificity, quality)| (quality, specificity))
}

/// RFC 9110's qvalue, in thousandths: `0`, `1`, `0.5`, `1.000`; None if malformed.
fn parse_quality(value: &str) -> Option<u16> {
    let (whole, fraction) = value.split_once('.').unwrap_or((value, ""));
    if fraction.len() > 3 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let thousandths: u16 = format!("{fraction:0<3}").parse().ok()?;
    match whole {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

/// Server-Sent Events when `Accept` prefers them to JSON lines: a higher quality, or the same
/// with a more specific range (`text/event-stream, */*`). A quality of 0 means "not
/// acceptable"; without a preference, JSON lines.
pub(super) fn accepts_event_stream(headers: &HeaderMap) -> bool {
    let accept: Vec<&str> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let Some(sse) = preference(&accept, EVENT_STREAM).filter(|(q, _)| *q > 0) else {
        return false;
    };
    match preference(&accept, NDJSON_TYPE).filter(|(q, _)| *q > 0) {
        Some(ndjson) => sse > ndjson,
        None => true,
    }
}

/// The apiserver's watch event types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EventType {
    Added,
    Modified,
    Deleted,
    Bookmark,
    Error,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
            EventType::Bookmark => "BOOKMARK",
            EventType::Error => "ERROR",
        }
    }
}

/// One event as sent: its type, the resourceVersion it brings the client to (none for
/// errors), and `{"type":..,"object":..}`, the apiserver's watch event shape with our DTOs as
/// objects.
#[derive(Clone, Debug, PartialEq)]
struct Frame {
    event: EventType,
    resource_version: Option<String>,
    json: String,
}

impl Frame {
    /// The one place a frame's JSON is put together; the object is JSON already (a record's,
    /// written once when it changed), so it is copied, not serialized again.
    fn new(event: EventType, resource_version: Option<String>, object: &[u8]) -> Self {
        let mut json = Vec::with_capacity(object.len() + 32);
        json.extend_from_slice(b"{\"type\":\"");
        json.extend_from_slice(event.as_str().as_bytes());
        json.extend_from_slice(b"\",\"object\":");
        json.extend_from_slice(object);
        json.push(b'}');
        Frame {
            event,
            resource_version,
            // Built from JSON fragments, each valid UTF-8.
            json: String::from_utf8_lossy(&json).into_owned(),
        }
    }

    fn of(update: WatchUpdate) -> Self {
        let (event, view) = match update {
            WatchUpdate::Added(view) => (EventType::Added, view),
            WatchUpdate::Modified(view) => (EventType::Modified, view),
            WatchUpdate::Deleted(view) => (EventType::Deleted, view),
            WatchUpdate::Synced {
                resource_version,
                access_filtered,
            } => {
                let mut object = serde_json::json!({
                    "resourceVersion": resource_version, "initialEventsEnd": true});
                if access_filtered {
                    object["accessFiltered"] = true.into();
                }
                return Frame::new(
                    EventType::Bookmark,
                    Some(resource_version),
                    object.to_string().as_bytes(),
                );
            }
            WatchUpdate::Failed(e) => return Frame::error(&e),
        };
        let mut object = Vec::with_capacity(view.json_len());
        view.write_json(&mut object);
        Frame::new(event, Some(view.resource_version().to_string()), &object)
    }

    /// The envelope's `code` and `error`, as a failed request would carry them.
    fn error(e: &BizError) -> Self {
        let code = status_of(e.failure()).as_u16();
        let object = serde_json::json!({"code": code, "error": e.to_string()});
        Frame::new(EventType::Error, None, object.to_string().as_bytes())
    }
}

/// The updates as the client asked for them; the stream ends at shutdown or after the
/// watch's lifetime ([`AppState::watch_end`]), so that no watcher holds the server open.
/// `guard` counts it while it lasts.
pub fn respond(
    updates: WatchUpdates,
    headers: &HeaderMap,
    server: &AppState,
    guard: WatchGuard,
) -> Response {
    let frames = updates
        .take_until(server.watch_end())
        .map(Frame::of)
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
            .keep_alive(KeepAlive::new().interval(server.keep_alive))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_watch_ends_with_the_status_a_request_would_get() {
        let expired = BizError::Source(k8sdao::DaoError::WatchExpired("too far behind".into()));
        let frame = Frame::of(WatchUpdate::Failed(expired));
        assert_eq!(frame.event, EventType::Error);
        assert_eq!(frame.resource_version, None);
        let json: serde_json::Value = serde_json::from_str(&frame.json).unwrap();
        assert_eq!(json["type"], "ERROR");
        assert_eq!(json["object"]["code"], 410);
        let bookmark = Frame::of(WatchUpdate::Synced {
            resource_version: "42".into(),
            access_filtered: true,
        });
        let json: serde_json::Value = serde_json::from_str(&bookmark.json).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"type": "BOOKMARK", "object": {"resourceVersion": "42",
                "initialEventsEnd": true, "accessFiltered": true}})
        );
        assert_eq!(bookmark.resource_version.as_deref(), Some("42"));
    }

    fn sse(accept: &[&str]) -> bool {
        let mut headers = HeaderMap::new();
        for value in accept {
            headers.append(header::ACCEPT, HeaderValue::from_str(value).unwrap());
        }
        accepts_event_stream(&headers)
    }

    #[test]
    fn event_streams_go_to_clients_that_prefer_them() {
        for accept in [
            &["text/event-stream"][..],
            &["TEXT/Event-Stream"],
            &["text/event-stream, */*"],
            &["application/json", "text/event-stream"],
            &["text/event-stream;q=0.5, application/x-ndjson;q=0.4"],
            &["text/*"],
            &["text/event-stream; charset=utf-8; q=1.0"],
        ] {
            assert!(sse(accept), "{accept:?}");
        }
        for accept in [
            &[][..],
            &["*/*"],
            &["application/json"],
            &["text/event-stream;q=0"],
            &["text/event-stream; q=0.000"],
            &["text/event-stream;q=0, */*"],
            &["*/*;q=0.9, text/event-stream;q=0"],
            &["text/event-stream;q=0.5, */*"],
            &["text/event-stream;q=0.5, application/x-ndjson"],
            &["text/event-stream;q=2"],
            &["text/event-stream;q=abc"],
            &["text/plain"],
            &["text/event-streamx"],
        ] {
            assert!(!sse(accept), "{accept:?}");
        }
    }

    #[test]
    fn qualities_are_parsed_as_rfc_9110_writes_them() {
        assert_eq!(parse_quality("1"), Some(1000));
        assert_eq!(parse_quality("1.000"), Some(1000));
        assert_eq!(parse_quality("0"), Some(0));
        assert_eq!(parse_quality("0.5"), Some(500));
        assert_eq!(parse_quality("0.05"), Some(50));
        for bad in ["1.5", "0.0001", "-0", "", ".5", "0.x", "2", "01"] {
            assert_eq!(parse_quality(bad), None, "{bad}");
        }
    }
}
