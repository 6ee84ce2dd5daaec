//! End-to-end tests against a real kube-apiserver, etcd and kube-controller-manager on
//! 127.0.0.1, started by `hack/cluster` once for the whole run (or reused from
//! `K8SAILOR_TEST_KUBECONFIG`). Each test works in a namespace of its own.

mod support;

mod access;
mod auth_limits;
mod cached_writes;
mod clientgo;
mod contract;
mod crds;
mod demo;
mod deploy;
mod edge;
mod exposure;
mod fairness;
mod ingresses;
mod initial_list;
mod k9s;
mod kinds;
mod kubeapi;
mod kubeapi_auth;
mod kubeapi_queries;
mod kubeapi_sessions;
mod kubeapi_websocket;
mod kubeapi_writes;
mod logs;
mod operations;
mod parity;
mod printers;
mod protobuf;
mod queries;
mod read_path;
mod replicas;
mod resources;
mod revocation;
mod selectors;
mod services;
mod startup;
mod tls;
mod versions;
mod watch;
mod writes;
