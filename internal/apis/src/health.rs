//! Probes outside the API prefix: `/livez` (the process serves) and `/readyz` (every cache
//! synced, no watch refused, not shutting down), both with `?verbose` listing each check in
//! the apiserver's `[+]name ok` / `[-]name failed: reason` style.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use confk8s::{InformerState, PolicyMode};

use super::AppState;

/// What probes report beyond the informers.
#[derive(Debug, Default)]
pub struct Health {
    shutting_down: AtomicBool,
}

impl Health {
    /// From now on /readyz fails, so load balancers stop sending before we stop serving.
    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::Release);
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }
}

fn seconds_since(t: Option<SystemTime>) -> u64 {
    t.and_then(|t| t.elapsed().ok()).map_or(0, |d| d.as_secs())
}

/// One informer's readiness. A watch that merely lost the apiserver stays ready: we keep
/// serving what we have and say how old it is. A refused watch (401/403) is our own
/// misconfiguration and is not ready.
fn informer_check(s: &InformerState) -> Result<String, String> {
    let error = s.last_error.as_deref().unwrap_or("");
    // A custom resource RBAC does not let us list is left out, not a fault of ours to fix.
    if s.refused {
        return Ok(format!("not served: {error}"));
    }
    if !s.synced {
        return Err(if error.is_empty() {
            "not synced yet".to_string()
        } else {
            format!("not synced: {error}")
        });
    }
    if s.is_denied() {
        return Err(format!("watch refused by the apiserver: {error}"));
    }
    if !s.connected {
        return Ok(format!(
            "ok, serving cached data {}s old; watch failing: {error}",
            seconds_since(s.disconnected_since)
        ));
    }
    Ok("ok".to_string())
}

/// Seconds since the oldest failing watch last heard from the apiserver; None when all are live.
pub fn staleness(states: &[InformerState]) -> Option<u64> {
    states
        .iter()
        .filter(|s| s.synced && !s.connected)
        .map(|s| seconds_since(s.disconnected_since))
        .max()
}

/// How `--auth delegated` decides access; never a failure, since reviews work either way.
fn authorization_note(reviewer: &confk8s::Reviewer) -> String {
    match reviewer.policy().map(|p| p.mode()) {
        Some(PolicyMode::Local { objects }) => {
            format!("ok, RBAC evaluated in memory ({objects} roles and bindings)")
        }
        Some(PolicyMode::Reviews(reason)) => {
            format!("ok, every access asked with a SubjectAccessReview: {reason}")
        }
        None => "ok, every access asked with a SubjectAccessReview".to_string(),
    }
}

fn is_verbose(query: Option<&str>) -> bool {
    query.is_some_and(|q| {
        q.split('&')
            .any(|p| p == "verbose" || p.starts_with("verbose="))
    })
}

#[utoipa::path(get, path = "/livez", tag = "operations",
    params(("verbose" = Option<String>, Query, description = "List each check")),
    responses((status = 200, description = "The process serves", body = String, content_type = "text/plain")))]
pub async fn livez(RawQuery(query): RawQuery) -> Response {
    let body = if is_verbose(query.as_deref()) {
        "[+]ping ok\nlivez check passed\n"
    } else {
        "ok"
    };
    (StatusCode::OK, body).into_response()
}

#[utoipa::path(get, path = "/readyz", tag = "operations",
    params(("verbose" = Option<String>, Query, description = "List each check as [+]name ok / [-]name failed: reason")),
    responses(
        (status = 200, description = "Every cache synced, no watch refused, not shutting down", body = String, content_type = "text/plain"),
        (status = 503, description = "Not ready; ?verbose says why", body = String, content_type = "text/plain"),
    ))]
pub async fn readyz(State(state): State<AppState>, RawQuery(query): RawQuery) -> Response {
    let mut checks: Vec<(String, Result<String, String>)> = state
        .workloads
        .source()
        .informer_states()
        .iter()
        .map(|s| (format!("informer-{}", s.kind), informer_check(s)))
        .collect();
    let shutdown = if state.health.is_shutting_down() {
        Err("shutting down".to_string())
    } else {
        Ok("ok".to_string())
    };
    checks.push(("shutdown".to_string(), shutdown));
    // Selected but refused by RBAC at start: told, not failed (the rest is served).
    for (resource, reason) in state.workloads.source().registry().not_served() {
        checks.push((
            format!("resource-{resource}"),
            Ok(format!("not served: {reason}")),
        ));
    }
    if let Some(reviewer) = &state.reviewer {
        checks.push((
            "authorization".to_string(),
            Ok(authorization_note(reviewer)),
        ));
    }
    let ready = checks.iter().all(|(_, r)| r.is_ok());
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = if is_verbose(query.as_deref()) {
        let mut body: String = checks
            .iter()
            .map(|(name, r)| match r {
                Ok(msg) => format!("[+]{name} {msg}\n"),
                Err(msg) => format!("[-]{name} failed: {msg}\n"),
            })
            .collect();
        body.push_str(if ready {
            "readyz check passed\n"
        } else {
            "readyz check failed\n"
        });
        body
    } else if ready {
        "ok".to_string()
    } else {
        "readyz check failed".to_string()
    };
    (status, body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(synced: bool, connected: bool, code: Option<u16>) -> InformerState {
        InformerState {
            kind: "Pod".into(),
            synced,
            connected,
            streaming_lists: true,
            protobuf_lists: false,
            objects: 0,
            added: 0,
            updated: 0,
            deleted: 0,
            relists: 0,
            errors: 0,
            last_heard: None,
            disconnected_since: (!connected).then(SystemTime::now),
            last_error: code.map(|c| format!("ApiError {c}")),
            last_error_code: code,
            resource_version: None,
            refused: false,
            first_sync: None,
        }
    }

    #[test]
    fn outages_stay_ready_refusals_do_not() {
        assert_eq!(informer_check(&state(true, true, None)), Ok("ok".into()));
        assert!(informer_check(&state(false, false, None)).is_err());
        assert!(
            informer_check(&state(true, false, None))
                .unwrap()
                .contains("cached data")
        );
        assert!(informer_check(&state(true, false, Some(503))).is_ok());
        assert!(
            informer_check(&state(true, false, Some(403)))
                .unwrap_err()
                .contains("refused")
        );
        // A custom resource we may not list is named, and left out.
        let refused = InformerState {
            refused: true,
            ..state(false, false, Some(403))
        };
        assert!(informer_check(&refused).unwrap().starts_with("not served"));
        assert_eq!(staleness(&[state(true, true, None)]), None);
        assert_eq!(
            staleness(&[state(true, true, None), state(true, false, None)]),
            Some(0)
        );
    }

    #[test]
    fn verbose_is_a_flag_or_a_value() {
        assert!(is_verbose(Some("verbose")));
        assert!(is_verbose(Some("a=b&verbose=1")));
        assert!(!is_verbose(Some("verbosely")));
        assert!(!is_verbose(None));
    }
}
