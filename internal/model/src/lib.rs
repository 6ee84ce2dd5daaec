//! What k8sailor keeps of each object: the wire DTO (field names of the original k8sailor
//! client, plus the columns dashboards need) and the few fields the indexes use. Records are
//! built once when an object arrives, by the cache and the live source alike, so a read never
//! touches a typed Kubernetes object and the cache never holds one.

pub mod catalog;
mod deployment;
mod event;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
mod generic;
mod ingress;
mod key;
mod kind;
mod namespace;
mod pod;
mod raw;
mod record;
mod replicaset;
mod requests;
mod resource;
mod service;

pub use catalog::{BuiltIn, Object, Visitor, built_in, built_in_rows, typed_row, visit_built_in};
pub use deployment::{DeploymentDto, DeploymentRecord, DeploymentStatusDto};
pub use event::EventDto;
pub use generic::{GenericObject, GenericRecord};
pub use ingress::{IngressDto, IngressPathDto, IngressRecord};
pub use key::{KeyParts, ObjectKey};
pub use kind::Kind;
pub use namespace::{NamespaceDto, NamespaceRecord};
pub use pod::{PodDto, PodRecord, PodSelectableFields, PodStatusDto, RecordedPod};
pub use raw::Dictionary;
pub use record::{
    Keyed, Labels, METADATA_FIELDS, Owner, Record, Selectable, Typed, typed_resource,
};
pub(crate) use record::{metadata_field, object_json, record_fields, rfc3339, to_json};
pub use replicaset::{ReplicaSetDto, ReplicaSetRecord};
pub use requests::*;
pub use resource::{Resource, ResourceInfo, ServedBy};
pub use service::{ServiceDto, ServiceRecord};
