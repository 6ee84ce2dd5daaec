//! The query of a Kubernetes API read, as the apiserver names its parameters and checks
//! them: which version a list is of, where a watch starts and what it sends first.

use axum::http::StatusCode;
use serde::Deserialize;

use super::status::{FieldError, Status};
use biz::ReadAt;

/// The query parameters of a read; `timeoutSeconds` of a list is accepted and ignored.
/// Part of the key a list's answer is kept under (`answers.rs`), whole.
#[derive(Deserialize, Default, Debug, Clone, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub(super) struct KubeQuery {
    pub(super) label_selector: Option<String>,
    pub(super) field_selector: Option<String>,
    pub(super) limit: Option<String>,
    #[serde(rename = "continue")]
    pub(super) continue_token: Option<String>,
    pub(super) resource_version: Option<String>,
    pub(super) resource_version_match: Option<String>,
    pub(super) watch: Option<String>,
    pub(super) allow_watch_bookmarks: Option<String>,
    pub(super) timeout_seconds: Option<String>,
    pub(super) include_object: Option<String>,
    pub(super) send_initial_events: Option<String>,
}

/// A boolean parameter as the apiserver reads it.
pub(super) fn flag(value: Option<&str>, what: &str) -> Result<bool, Status> {
    Ok(optional_flag(value, what)?.unwrap_or(false))
}

/// A boolean parameter whose absence means something of its own (`sendInitialEvents`).
fn optional_flag(value: Option<&str>, what: &str) -> Result<Option<bool>, Status> {
    match value {
        None => Ok(None),
        Some("" | "false" | "0") => Ok(Some(false)),
        Some("true" | "1") => Ok(Some(true)),
        Some(other) => Err(Status::new(
            StatusCode::BAD_REQUEST,
            format!("invalid {what} {other:?}: expected true or false"),
        )),
    }
}

pub(super) fn number(value: Option<&str>, what: &str) -> Result<Option<u64>, Status> {
    value
        .filter(|v| !v.is_empty())
        .map(|v| {
            v.parse().map_err(|_| {
                Status::new(
                    StatusCode::BAD_REQUEST,
                    format!("invalid {what} {v:?}: expected a non-negative integer"),
                )
            })
        })
        .transpose()
}

/// `resourceVersionMatch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum VersionMatch {
    Exact,
    NotOlderThan,
}

const MATCH: &str = "resourceVersionMatch";

/// What a watch sends before the changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum InitialEvents {
    /// The state as ADDED events if it starts from the newest state, nothing if it resumes.
    Implied,
    /// `sendInitialEvents=true`: the state, then (with bookmarks) the
    /// `k8s.io/initial-events-end` bookmark, as client-go's WatchList waits for.
    Sent,
    /// `sendInitialEvents=false`: only the changes from where the watch starts.
    Skipped,
}

/// Where a watch starts, and what it sends first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct WatchStart {
    pub(super) from: ReadAt,
    pub(super) initial: InitialEvents,
}

/// `resourceVersion`: empty or absent is None, "0" is Some(0). Not a number: the apiserver's
/// words (Go's `strconv` error in them), after `prefix` (a list's "invalid resource version: ").
fn version(value: Option<&str>, prefix: &str) -> Result<Option<u64>, Status> {
    match value.filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => v.parse().map(Some).map_err(|e: std::num::ParseIntError| {
            let why = match e.kind() {
                std::num::IntErrorKind::PosOverflow => "value out of range",
                _ => "invalid syntax",
            };
            Status::new(
                StatusCode::BAD_REQUEST,
                format!(
                    "{prefix}resourceVersion: Invalid value: {v:?}: strconv.ParseUint: parsing {v:?}: {why}"
                ),
            )
        }),
    }
}

impl KubeQuery {
    /// The bytes of every parameter's value.
    pub(super) fn text_len(&self) -> usize {
        [
            &self.label_selector,
            &self.field_selector,
            &self.limit,
            &self.continue_token,
            &self.resource_version,
            &self.resource_version_match,
            &self.watch,
            &self.allow_watch_bookmarks,
            &self.timeout_seconds,
            &self.include_object,
            &self.send_initial_events,
        ]
        .iter()
        .map(|value| value.as_ref().map_or(0, String::len))
        .sum()
    }

    fn version_match(&self) -> Option<&str> {
        self.resource_version_match
            .as_deref()
            .filter(|m| !m.is_empty())
    }

    fn continued(&self) -> bool {
        self.continue_token
            .as_deref()
            .is_some_and(|t| !t.is_empty())
    }

    fn given_version(&self) -> Option<&str> {
        self.resource_version.as_deref().filter(|v| !v.is_empty())
    }

    /// The state a list is of, its parameters checked as the apiserver's `ValidateListOptions`
    /// checks them: absent, the newest; "0", any (the newest we have); n, not older than n
    /// (waiting for it); n with `Exact`, the state at n.
    pub(super) fn list_at(&self) -> Result<ReadAt, Status> {
        let mut errors = Vec::new();
        let matching = match self.version_match() {
            None => None,
            Some(given) => {
                if self.given_version().is_none() {
                    errors.push(FieldError::Forbidden {
                        field: MATCH,
                        detail:
                            "resourceVersionMatch is forbidden unless resourceVersion is provided"
                                .into(),
                    });
                }
                if self.continued() {
                    errors.push(continue_forbidden());
                }
                let matching = match given {
                    "Exact" => Some(VersionMatch::Exact),
                    "NotOlderThan" => Some(VersionMatch::NotOlderThan),
                    other => {
                        errors.push(FieldError::NotSupported {
                            field: MATCH,
                            value: other.to_string(),
                            supported: &["Exact", "NotOlderThan", ""],
                        });
                        None
                    }
                };
                if matching == Some(VersionMatch::Exact) && self.given_version() == Some("0") {
                    errors.push(FieldError::Forbidden {
                        field: MATCH,
                        detail:
                            "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""
                                .into(),
                    });
                }
                matching
            }
        };
        if self.send_initial_events.is_some() {
            errors.push(FieldError::Forbidden {
                field: "sendInitialEvents",
                detail: "sendInitialEvents is forbidden for list".into(),
            });
        }
        if !errors.is_empty() {
            return Err(Status::invalid_list_options(&errors));
        }
        let version = version(self.given_version(), "invalid resource version: ")?;
        if self.continued() && version.is_some_and(|v| v > 0) {
            return Err(Status::new(
                StatusCode::BAD_REQUEST,
                "specifying resource version is not allowed when using continue",
            ));
        }
        Ok(match (version, matching) {
            (None | Some(0), _) => ReadAt::Newest,
            (Some(v), Some(VersionMatch::Exact)) => ReadAt::Version(v),
            (Some(v), None | Some(VersionMatch::NotOlderThan)) => ReadAt::NotOlderThan(v),
        })
    }

    /// Where a watch starts, its parameters checked as the apiserver's validation of watch
    /// options checks them: `sendInitialEvents` only with `resourceVersionMatch=NotOlderThan`
    /// and that only with it.
    pub(super) fn watch_start(&self) -> Result<WatchStart, Status> {
        let send_initial = optional_flag(self.send_initial_events.as_deref(), "sendInitialEvents")?;
        let mut errors = Vec::new();
        let matching = self.version_match();
        if send_initial.is_some() && matching != Some("NotOlderThan") {
            errors.push(FieldError::Forbidden {
                field: MATCH,
                detail: "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
                    .into(),
            });
        }
        if let Some(given) = matching {
            if send_initial.is_none() {
                errors.push(FieldError::Forbidden {
                    field: MATCH,
                    detail: "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided".into(),
                });
            }
            if given != "NotOlderThan" {
                errors.push(FieldError::NotSupported {
                    field: MATCH,
                    value: given.to_string(),
                    supported: &["NotOlderThan"],
                });
            }
            if self.continued() {
                errors.push(continue_forbidden());
            }
        }
        if !errors.is_empty() {
            return Err(Status::invalid_list_options(&errors));
        }
        // The apiserver answers this one 500 without a reason; the request is at fault.
        let version = version(self.given_version(), "")?;
        Ok(match (send_initial, version) {
            (Some(true), None | Some(0)) => WatchStart {
                from: ReadAt::Newest,
                initial: InitialEvents::Sent,
            },
            (Some(true), Some(v)) => WatchStart {
                from: ReadAt::NotOlderThan(v),
                initial: InitialEvents::Sent,
            },
            (Some(false), None | Some(0)) => WatchStart {
                from: ReadAt::Newest,
                initial: InitialEvents::Skipped,
            },
            (None, None | Some(0)) => WatchStart {
                from: ReadAt::Newest,
                initial: InitialEvents::Implied,
            },
            (Some(false) | None, Some(v)) => WatchStart {
                from: ReadAt::Version(v),
                initial: InitialEvents::Implied,
            },
        })
    }
}

fn continue_forbidden() -> FieldError {
    FieldError::Forbidden {
        field: MATCH,
        detail: "resourceVersionMatch is forbidden when continue is provided".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> KubeQuery {
        let uri: axum::http::Uri = format!(
            "/api/v1/pods?{}",
            pairs
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("&")
        )
        .parse()
        .unwrap();
        axum::extract::Query::<KubeQuery>::try_from_uri(&uri)
            .unwrap()
            .0
    }

    fn list_at(pairs: &[(&str, &str)]) -> Result<ReadAt, (u16, String)> {
        query(pairs)
            .list_at()
            .map_err(|s| (s.code.as_u16(), s.message))
    }

    #[test]
    fn a_list_is_of_the_version_its_parameters_ask() {
        assert_eq!(list_at(&[]), Ok(ReadAt::Newest));
        assert_eq!(list_at(&[("resourceVersion", "")]), Ok(ReadAt::Newest));
        assert_eq!(list_at(&[("resourceVersion", "0")]), Ok(ReadAt::Newest));
        assert_eq!(
            list_at(&[
                ("resourceVersion", "0"),
                ("resourceVersionMatch", "NotOlderThan")
            ]),
            Ok(ReadAt::Newest)
        );
        assert_eq!(
            list_at(&[("resourceVersion", "12")]),
            Ok(ReadAt::NotOlderThan(12))
        );
        assert_eq!(
            list_at(&[
                ("resourceVersion", "12"),
                ("resourceVersionMatch", "NotOlderThan")
            ]),
            Ok(ReadAt::NotOlderThan(12))
        );
        assert_eq!(
            list_at(&[("resourceVersion", "12"), ("resourceVersionMatch", "Exact")]),
            Ok(ReadAt::Version(12))
        );
        // A continue token carries its own version; "0" is "any" and so no conflict.
        assert_eq!(
            list_at(&[("continue", "t"), ("resourceVersion", "0")]),
            Ok(ReadAt::Newest)
        );
    }

    #[test]
    fn invalid_list_versions_are_refused_in_the_apiservers_words() {
        assert_eq!(
            list_at(&[("resourceVersionMatch", "Exact")]),
            Err((422, "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided".into()))
        );
        assert_eq!(
            list_at(&[("resourceVersion", "0"), ("resourceVersionMatch", "Exact")]),
            Err((422, "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"".into()))
        );
        assert_eq!(
            list_at(&[("resourceVersion", "5"), ("resourceVersionMatch", "Newest")]),
            Err((422, "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Unsupported value: \"Newest\": supported values: \"Exact\", \"NotOlderThan\", \"\"".into()))
        );
        assert_eq!(
            list_at(&[("continue", "t"), ("resourceVersionMatch", "Exact")]),
            Err((422, "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided, resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided]".into()))
        );
        assert_eq!(
            list_at(&[("continue", "t"), ("resourceVersion", "5")]),
            Err((
                400,
                "specifying resource version is not allowed when using continue".into()
            ))
        );
        assert_eq!(
            list_at(&[("resourceVersion", "abc")]),
            Err((400, "invalid resource version: resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax".into()))
        );
        assert_eq!(
            list_at(&[("sendInitialEvents", "true")]).unwrap_err().0,
            422
        );
    }

    fn watch_start(pairs: &[(&str, &str)]) -> Result<WatchStart, (u16, String)> {
        query(pairs)
            .watch_start()
            .map_err(|s| (s.code.as_u16(), s.message))
    }

    #[test]
    fn a_watch_starts_where_its_parameters_ask() {
        let start = |from, initial| Ok(WatchStart { from, initial });
        assert_eq!(
            watch_start(&[]),
            start(ReadAt::Newest, InitialEvents::Implied)
        );
        assert_eq!(
            watch_start(&[("resourceVersion", "0")]),
            start(ReadAt::Newest, InitialEvents::Implied)
        );
        assert_eq!(
            watch_start(&[("resourceVersion", "9")]),
            start(ReadAt::Version(9), InitialEvents::Implied)
        );
        // client-go's WatchList.
        assert_eq!(
            watch_start(&[
                ("sendInitialEvents", "true"),
                ("resourceVersionMatch", "NotOlderThan"),
                ("resourceVersion", "")
            ]),
            start(ReadAt::Newest, InitialEvents::Sent)
        );
        assert_eq!(
            watch_start(&[
                ("sendInitialEvents", "true"),
                ("resourceVersionMatch", "NotOlderThan"),
                ("resourceVersion", "9")
            ]),
            start(ReadAt::NotOlderThan(9), InitialEvents::Sent)
        );
        assert_eq!(
            watch_start(&[
                ("sendInitialEvents", "false"),
                ("resourceVersionMatch", "NotOlderThan"),
            ]),
            start(ReadAt::Newest, InitialEvents::Skipped)
        );
        assert_eq!(
            watch_start(&[
                ("sendInitialEvents", "false"),
                ("resourceVersionMatch", "NotOlderThan"),
                ("resourceVersion", "9")
            ]),
            start(ReadAt::Version(9), InitialEvents::Implied)
        );
    }

    #[test]
    fn invalid_watch_parameters_are_refused_in_the_apiservers_words() {
        assert_eq!(
            watch_start(&[("sendInitialEvents", "true")]),
            Err((422, "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan".into()))
        );
        assert_eq!(
            watch_start(&[("resourceVersion", "5"), ("resourceVersionMatch", "NotOlderThan")]),
            Err((422, "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided".into()))
        );
        assert_eq!(
            watch_start(&[("sendInitialEvents", "true"), ("resourceVersionMatch", "Exact")]),
            Err((422, "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan, resourceVersionMatch: Unsupported value: \"Exact\": supported values: \"NotOlderThan\"]".into()))
        );
        assert_eq!(watch_start(&[("resourceVersion", "x")]).unwrap_err().0, 400);
    }
}
