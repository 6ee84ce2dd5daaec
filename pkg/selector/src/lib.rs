//! Kubernetes label and field selectors as they appear in list query strings
//! (`?labelSelector=...&fieldSelector=...`).
//!
//! Parsing follows k8s.io/apimachinery (`labels.Parse` and
//! `fields.ParseSelector`) closely, so that a cache answering list requests
//! accepts, rejects and matches exactly what the apiserver would; inputs the
//! apiserver answers with 400 are [`ParseError`]s here. A parsed selector
//! renders back to a canonical string (its `Display`) that parses to an equal
//! selector.
//!
//! Every label operator is supported, including `key>N` and `key<N`
//! ([`Operator::GreaterThan`], [`Operator::LessThan`]), which kubectl's
//! documentation rarely shows but the apiserver accepts.
//!
//! Where this crate differs from apimachinery:
//! * field selectors render `==` as `==` (apimachinery prints `=`);
//! * [`FieldSelector::matches`] treats a missing field as the empty string.
//!
//! The crate does no I/O and does not panic on any input.
//!
//! ```
//! use std::borrow::Cow;
//! use std::collections::BTreeMap;
//! use selector::{FieldSelector, LabelSelector, Operator};
//!
//! let labels: LabelSelector = "tier in (web, api), !canary, app=shop".parse()?;
//! assert_eq!(labels.to_string(), "app=shop,!canary,tier in (api,web)");
//! assert_eq!(labels.requirements()[2].operator(), Operator::In);
//!
//! let pod_labels = BTreeMap::from([
//!     ("app".to_owned(), "shop".to_owned()),
//!     ("tier".to_owned(), "web".to_owned()),
//! ]);
//! assert!(labels.matches(&pod_labels));
//!
//! let fields = FieldSelector::parse("status.phase!=Failed,spec.nodeName=")?;
//! let pod_fields = |path: &str| match path {
//!     "status.phase" => Some(Cow::Borrowed("Running")),
//!     _ => None, // unscheduled: no spec.nodeName, which `spec.nodeName=` selects
//! };
//! assert!(fields.matches(pod_fields));
//!
//! let replicas = LabelSelector::parse("shard>2,shard<10")?;
//! let shard = |n: &str| BTreeMap::from([("shard".to_owned(), n.to_owned())]);
//! assert!(replicas.matches(&shard("3")));
//! assert!(!replicas.matches(&shard("10")));
//! assert!(!replicas.matches(&shard("three")));
//!
//! let err = LabelSelector::parse("app in (a,b").unwrap_err();
//! assert_eq!(err.position(), 11);
//! # Ok::<(), selector::ParseError>(())
//! ```

#![warn(missing_docs)]

mod error;
mod field;
#[cfg(any(test, feature = "invariants"))]
pub mod invariants;
mod label;
pub mod validation;

pub use error::ParseError;
pub use field::{FieldOperator, FieldSelector, FieldTerm};
pub use label::{LabelSelector, Labels, Operator, Requirement};
