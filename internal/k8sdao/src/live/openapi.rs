//! The apiserver's OpenAPI documents (`/openapi/v2`, the `/openapi/v3` index and each
//! `/openapi/v3/{group-version}?hash=...` it links to), relayed and kept in memory, so that
//! `kubectl explain` pointed at k8sailor reads the schemas the apiserver has. A document is
//! fetched on its first request and kept with the apiserver's ETag: an unhashed one is asked
//! again (`If-None-Match`, so an unchanged one costs a 304) once older than [`FRESH_FOR`], as a
//! CRD's change changes it; a hashed one is what its hash names, kept as long as there is
//! room. Each document, and all of them together, are bounded in size. The apiserver's
//! discovery documents (legacy per group-version, and aggregated) are kept the same way:
//! they tell the verbs and subresources it serves, which `--auth delegated` relays.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use http_body_util::BodyExt;
use tokio::time::Instant;

use crate::DaoError;

/// How long an unhashed document (the v2 one, the v3 index) is served before it is checked
/// with the apiserver again: a custom resource's schema shows this soon after its CRD.
pub const FRESH_FOR: Duration = Duration::from_secs(10);
/// The largest document kept (the apiserver's v2 document is a few MiB, more with many CRDs).
pub const MAX_DOCUMENT_BYTES: usize = 32 * 1024 * 1024;
/// All documents kept together; past it the least recently served go first.
pub const MAX_KEPT_BYTES: usize = 64 * 1024 * 1024;

/// One document as the apiserver answered it.
#[derive(Debug)]
pub struct OpenApiDocument {
    /// JSON.
    pub body: Bytes,
    /// The apiserver's validator of this content.
    pub etag: Option<HeaderValue>,
    /// The apiserver's caching instructions (hashed documents are immutable).
    pub cache_control: Option<HeaderValue>,
}

/// What the apiserver answers for a document's path.
#[derive(Debug)]
pub enum OpenApiAnswer {
    Document(Arc<OpenApiDocument>),
    /// A hash that is not the current one: the apiserver sends the client to the current one.
    Moved {
        status: StatusCode,
        location: HeaderValue,
    },
    /// No such document (a group-version that is not served).
    NotFound,
}

struct Kept {
    document: Arc<OpenApiDocument>,
    /// When the apiserver last said this is current.
    checked: Instant,
    /// When it was last served, for eviction.
    served: Instant,
    /// Whether its path names its content (`?hash=`): never stale.
    hashed: bool,
}

#[derive(Default)]
struct Documents {
    by_path: HashMap<String, Kept>,
    bytes: usize,
}

impl Documents {
    fn insert(&mut self, path: String, kept: Kept) {
        self.bytes += kept.document.body.len();
        if let Some(old) = self.by_path.insert(path, kept) {
            self.bytes -= old.document.body.len();
        }
        while self.bytes > MAX_KEPT_BYTES {
            let Some(oldest) = self
                .by_path
                .iter()
                .min_by_key(|(_, k)| k.served)
                .map(|(p, _)| p.clone())
            else {
                break;
            };
            if let Some(gone) = self.by_path.remove(&oldest) {
                self.bytes -= gone.document.body.len();
            }
        }
    }
}

/// A path segment that names a document and nothing else: no escape, no `.` or `..`.
fn plain(segment: &str) -> bool {
    !segment.is_empty()
        && segment != "."
        && segment != ".."
        && segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// The path of the legacy discovery document of `group`/`version` (`/api/v1`,
/// `/apis/apps/v1`), if they are plain names.
fn resource_list_path(group: &str, version: &str) -> Option<String> {
    if !plain(version) {
        return None;
    }
    if group.is_empty() {
        Some(format!("/api/{version}"))
    } else {
        plain(group).then(|| format!("/apis/{group}/{version}"))
    }
}

/// What aggregated discovery is asked for with, as kubectl asks for it.
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// The documents kept, and the client that fetches them.
pub struct OpenApiDocs {
    client: kube::Client,
    documents: Mutex<Documents>,
}

/// The request for the OpenAPI document at `path` with content `hash`, if that is one the
/// apiserver serves, and nothing else: these requests carry k8sailor's identity, so no
/// escape (`..`, `%2e`) and no query but the content's `hash` reaches the apiserver (a
/// client's others, as kubectl's `timeout`, are its own business).
fn openapi_request(path: &str, hash: Option<&str>) -> Option<String> {
    let document = path == "/openapi/v2"
        || path == "/openapi/v3"
        || path
            .strip_prefix("/openapi/v3/")
            .is_some_and(|rest| rest.split('/').all(plain));
    let hash_ok =
        hash.is_none_or(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_alphanumeric()));
    if !(document && hash_ok) {
        return None;
    }
    Some(match hash {
        Some(hash) => format!("{path}?hash={hash}"),
        None => path.to_string(),
    })
}

impl OpenApiDocs {
    pub fn new(client: kube::Client) -> OpenApiDocs {
        OpenApiDocs {
            client,
            documents: Mutex::default(),
        }
    }

    fn documents(&self) -> MutexGuard<'_, Documents> {
        self.documents.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The document at `path` (`/openapi/v3/apis/apps/v1`) with content `hash` (the index's
    /// links carry it): kept, or fetched (or checked) now.
    pub async fn get(&self, path: &str, hash: Option<&str>) -> Result<OpenApiAnswer, DaoError> {
        let Some(path_and_query) = openapi_request(path, hash) else {
            return Ok(OpenApiAnswer::NotFound);
        };
        self.fetch(&path_and_query, "application/json", hash.is_some())
            .await
    }

    /// The apiserver's legacy discovery document of `group`/`version` (an `APIResourceList`:
    /// each resource and subresource it serves there, with its verbs), kept as the OpenAPI
    /// documents are.
    pub async fn resource_list(
        &self,
        group: &str,
        version: &str,
    ) -> Result<OpenApiAnswer, DaoError> {
        let Some(path) = resource_list_path(group, version) else {
            return Ok(OpenApiAnswer::NotFound);
        };
        self.fetch(&path, "application/json", false).await
    }

    /// The apiserver's aggregated discovery (an `APIGroupDiscoveryList`) of the core group
    /// (`core`) or of the named groups, kept as the OpenAPI documents are.
    pub async fn aggregated_discovery(&self, core: bool) -> Result<OpenApiAnswer, DaoError> {
        self.fetch(if core { "/api" } else { "/apis" }, AGGREGATED, false)
            .await
    }

    /// The document at `path_and_query`, as `accept` asks for it (one path is only ever asked
    /// for one way, so it keys the document): kept, or fetched (or checked) now. A `hashed`
    /// one never changes.
    async fn fetch(
        &self,
        path_and_query: &str,
        accept: &'static str,
        hashed: bool,
    ) -> Result<OpenApiAnswer, DaoError> {
        let now = Instant::now();
        let known = {
            let mut documents = self.documents();
            match documents.by_path.get_mut(path_and_query) {
                Some(kept) => {
                    kept.served = now;
                    if kept.hashed || now.duration_since(kept.checked) < FRESH_FOR {
                        return Ok(OpenApiAnswer::Document(kept.document.clone()));
                    }
                    Some(kept.document.clone())
                }
                None => None,
            }
        };
        let mut request = http::Request::get(path_and_query).header(header::ACCEPT, accept);
        if let Some(etag) = known.as_ref().and_then(|d| d.etag.clone()) {
            request = request.header(header::IF_NONE_MATCH, etag);
        }
        let request = request
            .body(kube::client::Body::empty())
            .map_err(|e| DaoError::Unavailable(format!("cannot ask for {path_and_query}: {e}")))?;
        let response = self.client.send(request).await?;
        let status = response.status();
        let document = match status {
            StatusCode::NOT_MODIFIED => match known {
                Some(document) => document,
                // We sent no validator: a 304 is the apiserver's fault, not a document.
                None => {
                    return Err(DaoError::Api {
                        code: status.as_u16(),
                        message: format!("{path_and_query}: not modified, but nothing was kept"),
                    });
                }
            },
            StatusCode::OK => {
                let (parts, body) = response.into_parts();
                let body = http_body_util::Limited::new(body, MAX_DOCUMENT_BYTES)
                    .collect()
                    .await
                    .map_err(|e| {
                        DaoError::Unavailable(format!(
                            "reading {path_and_query} (at most {MAX_DOCUMENT_BYTES} bytes): {e}"
                        ))
                    })?
                    .to_bytes();
                Arc::new(OpenApiDocument {
                    body,
                    etag: parts.headers.get(header::ETAG).cloned(),
                    cache_control: parts.headers.get(header::CACHE_CONTROL).cloned(),
                })
            }
            StatusCode::NOT_FOUND => return Ok(OpenApiAnswer::NotFound),
            s if s.is_redirection() => {
                return match response.headers().get(header::LOCATION) {
                    Some(location) => Ok(OpenApiAnswer::Moved {
                        status,
                        location: location.clone(),
                    }),
                    None => Err(DaoError::Api {
                        code: status.as_u16(),
                        message: format!("{path_and_query}: a redirection without a Location"),
                    }),
                };
            }
            _ => {
                return Err(DaoError::Api {
                    code: status.as_u16(),
                    message: format!("{path_and_query}: the apiserver answered {status}"),
                });
            }
        };
        self.documents().insert(
            path_and_query.to_string(),
            Kept {
                document: document.clone(),
                checked: now,
                served: now,
                hashed,
            },
        );
        Ok(OpenApiAnswer::Document(document))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_openapi_documents_are_asked_for() {
        for (path, hash, asked) in [
            ("/openapi/v2", None, "/openapi/v2"),
            ("/openapi/v3", None, "/openapi/v3"),
            (
                "/openapi/v3/apis/apps/v1",
                Some("AB12"),
                "/openapi/v3/apis/apps/v1?hash=AB12",
            ),
            ("/openapi/v3/api/v1", None, "/openapi/v3/api/v1"),
        ] {
            assert_eq!(openapi_request(path, hash).as_deref(), Some(asked));
        }
        for (path, hash) in [
            ("/openapi/v3/", None),
            ("/openapi/v3/../../api/v1/secrets", None),
            ("/openapi/v3/apis//v1", None),
            ("/api/v1/secrets", None),
            ("/openapi/v2/x", None),
            ("/openapi/v3/%2e%2e/api/v1/secrets", None),
            ("/openapi/v3/apis/apps/v1", Some("A&watch=1")),
            ("/openapi/v3/apis/apps/v1", Some("")),
        ] {
            assert_eq!(openapi_request(path, hash), None, "{path} {hash:?}");
        }
    }

    #[test]
    fn only_discovery_documents_of_plain_names_are_asked_for() {
        assert_eq!(resource_list_path("", "v1").as_deref(), Some("/api/v1"));
        assert_eq!(
            resource_list_path("apps", "v1").as_deref(),
            Some("/apis/apps/v1")
        );
        for (group, version) in [
            ("", ".."),
            ("..", "v1"),
            ("a/b", "v1"),
            ("apps", "v1?watch=1"),
            ("apps", ""),
        ] {
            assert_eq!(
                resource_list_path(group, version),
                None,
                "{group} {version}"
            );
        }
    }

    fn kept(bytes: usize, served: Instant) -> Kept {
        Kept {
            document: Arc::new(OpenApiDocument {
                body: Bytes::from(vec![b' '; bytes]),
                etag: None,
                cache_control: None,
            }),
            checked: served,
            served,
            hashed: true,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_bound_the_least_recently_served_go() {
        let mut documents = Documents::default();
        let third = MAX_KEPT_BYTES / 3 + 1;
        let start = Instant::now();
        documents.insert("a".into(), kept(third, start));
        documents.insert("b".into(), kept(third, start + Duration::from_secs(1)));
        documents.insert("a".into(), kept(third, start + Duration::from_secs(2)));
        assert_eq!(
            documents.bytes,
            2 * third,
            "a replaced document counts once"
        );
        documents.insert("c".into(), kept(third, start + Duration::from_secs(3)));
        assert!(documents.bytes <= MAX_KEPT_BYTES);
        assert!(
            !documents.by_path.contains_key("b"),
            "b was served longest ago"
        );
        assert!(documents.by_path.contains_key("a") && documents.by_path.contains_key("c"));
    }
}
