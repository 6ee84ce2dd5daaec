//! The k8sailor server: its settings and the wiring of the layers (model -> k8scache ->
//! k8sdao -> biz -> apis, each a crate under internal/ that may use only what its Cargo.toml
//! names; see ARCHITECTURE.md for who may call whom).

pub mod config;
pub mod connections;
pub mod server;
pub mod tls;
