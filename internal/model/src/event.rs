//! Events about a Pod, as the original client shows them: read live, never cached.

use serde::Serialize;

use crate::rfc3339;

/// An Event about a Pod; `namespace`, `name`, `message`, `reason` are the original client's.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct EventDto {
    /// The Pod's namespace and name.
    pub namespace: String,
    pub name: String,
    pub message: String,
    pub reason: String,
    /// Normal or Warning.
    #[serde(rename = "type")]
    pub type_: String,
    pub count: i32,
    pub first_timestamp: Option<String>,
    pub last_timestamp: Option<String>,
    /// Who reported it (kubelet, default-scheduler, ...).
    pub source: String,
}

impl EventDto {
    /// What `/pods/{name}/event` answers for a Pod without events: its names, the rest empty.
    pub fn none_about(namespace: &str, name: &str) -> Self {
        EventDto {
            namespace: namespace.to_string(),
            name: name.to_string(),
            count: 0,
            ..EventDto::default()
        }
    }

    pub fn from_event(e: &k8s_openapi::api::core::v1::Event) -> Self {
        let last = e
            .last_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .or_else(|| e.event_time.as_ref().map(|t| t.0.to_string()))
            .or_else(|| rfc3339(&e.metadata.creation_timestamp));
        EventDto {
            namespace: e.involved_object.namespace.clone().unwrap_or_default(),
            name: e.involved_object.name.clone().unwrap_or_default(),
            message: e.message.clone().unwrap_or_default(),
            reason: e.reason.clone().unwrap_or_default(),
            type_: e.type_.clone().unwrap_or_default(),
            count: e.count.unwrap_or(1),
            first_timestamp: rfc3339(&e.first_timestamp).or_else(|| last.clone()),
            last_timestamp: last,
            source: e
                .source
                .as_ref()
                .and_then(|s| s.component.clone())
                .or_else(|| e.reporting_component.clone())
                .unwrap_or_default(),
        }
    }
}
