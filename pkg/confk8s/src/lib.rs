//! Kubernetes plumbing that any kube-rs service can reuse: a client built from a kubeconfig file
//! and context or from the in-cluster environment, a shared informer factory that runs one
//! watch per resource kind however many handlers register for it, watches of resources known
//! only at run time (custom resources, followed from their CRDs with [`CrdFollower`]), and delegated
//! authentication and authorization of a service's callers ([`Reviewer`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use confk8s::{ClientOptions, Delta, Handler, InformerFactory};
//! use k8s_openapi::api::core::v1::Pod;
//!
//! struct CountPods;
//! impl Handler<Pod> for CountPods {
//!     fn on_deltas(&self, deltas: &[Delta<Pod>]) { println!("{} changes", deltas.len()); }
//!     fn begin_relist(self: Arc<Self>) -> Box<dyn confk8s::RelistBatch<Pod>> { Box::new(Count(0)) }
//! }
//! struct Count(usize);
//! impl confk8s::RelistBatch<Pod> for Count {
//!     fn add(&mut self, _: &Delta<Pod>) { self.0 += 1; }
//!     fn commit(self: Box<Self>, version: &str) { println!("relisted: {} changes, at {version}", self.0); }
//! }
//!
//! let connection = confk8s::connect(&ClientOptions::default()).await?;
//! println!("connected through {}", connection.source);
//! let factory = InformerFactory::new(connection.client, None).with_watch_signals(connection.watches);
//! factory.add_handler::<Pod>(Arc::new(CountPods))?;
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! let tasks = factory.start(shutdown.clone());
//! factory.wait_for_sync(std::time::Duration::from_secs(30)).await?;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod client;
mod crds;
mod delta;
mod informer;
mod items;
mod policy;
mod review;
mod sent;
mod signals;
mod status;
mod watcher;

pub use client::{ClientError, ClientOptions, ConfigSource, Connection, connect, load_config};
pub use crds::{Command, CrdEvent, CrdFollower, Crds, CustomResource};
pub use delta::{Delta, DeltaTracker, ObjectKey, Step, strip_noise};
pub use informer::{
    DynamicInformer, FactoryError, Handler, InformerFactory, InitialList, ListSettings,
    RelistBatch, Watchable, Watched,
};
pub use policy::{AUTHORIZER_LAG, Policy, PolicyMode};
pub use rbac::Namespaces;
pub use review::{
    Access, ReviewCounts, ReviewError, ReviewTtls, Reviewer, TokenReviewLimits, UserInfo,
};
pub use sent::Sent;
pub use signals::{WatchSignalLayer, WatchSignals};
pub use status::{FirstSync, InformerState, InformerStatus};
pub use watcher::ListEncoding;
