//! The k8sailor application: watch -> k8scache -> k8sdao -> biz -> apis.
//! See ARCHITECTURE.md for who may call whom.

pub mod k8scache;
pub mod model;
