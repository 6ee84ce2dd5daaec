//! The k8sailor application: watch -> k8scache -> k8sdao -> biz -> apis.
//! See ARCHITECTURE.md for who may call whom.

pub mod apis;
pub mod biz;
pub mod config;
pub mod connections;
pub mod k8scache;
pub mod k8sdao;
pub mod model;
pub mod server;
