//! How the caches get their full lists (`--initial-list`): whole (one list without a limit,
//! the default), streamed (WatchList, `sendInitialEvents`) or paged, each delivering the whole
//! namespace, and auto choosing the stream on an apiserver that serves it (kube-apiserver 1.35
//! does by default). The fallback
//! from a refused stream to pages is a unit test (confk8s' informer), against an apiserver
//! without WatchList.

use std::collections::BTreeSet;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;

use crate::support::{Server, TestNamespace, pod};

/// More than one page of a paged list (500 objects).
const PODS: usize = 510;

/// `k8sailor_informer_streaming_lists{kind="Pod"}`, as /metrics says it.
async fn pods_streamed(server: &Server) -> bool {
    let (status, metrics) = server.probe("/metrics").await;
    assert_eq!(status, 200);
    let line = metrics
        .lines()
        .find(|l| l.starts_with("k8sailor_informer_streaming_lists{kind=\"Pod\"}"))
        .unwrap_or_else(|| panic!("no streaming-lists gauge for pods in:\n{metrics}"));
    let value: f64 = line
        .rsplit(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("unexpected gauge line {line}"));
    value == 1.0
}

#[tokio::test]
async fn streamed_and_paged_lists_fill_the_same_complete_cache() {
    let ns = TestNamespace::new("initial-list").await;
    let api = ns.api::<Pod>();
    let created: BTreeSet<String> = (0..PODS).map(|i| format!("p-{i:03}")).collect();
    futures::stream::iter(created.iter().enumerate())
        .for_each_concurrent(16, |(i, name)| {
            let api = api.clone();
            let bucket = (i % 7).to_string();
            async move {
                api.create(&PostParams::default(), &pod(name, &[("bucket", &bucket)]))
                    .await
                    .expect("create a pod");
            }
        })
        .await;

    let mut answers = Vec::new();
    for (mode, streamed) in [
        ("default", false),
        ("whole", false),
        ("auto", true),
        ("streaming", true),
        ("paged", false),
    ] {
        let server = if mode == "default" {
            Server::start(&["--namespace", &ns.name])
        } else {
            Server::start(&["--namespace", &ns.name, "--initial-list", mode])
        };
        assert_eq!(
            pods_streamed(&server).await,
            streamed,
            "--initial-list {mode}"
        );
        let (status, list) = server.get(&format!("/pods?namespace={}", ns.name)).await;
        assert_eq!(status, 200, "{list}");
        let pods = list["data"].as_array().expect("a list").clone();
        let names: BTreeSet<String> = pods
            .iter()
            .map(|p| p["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(names, created, "--initial-list {mode}: every pod, once");
        assert_eq!(pods.len(), PODS, "--initial-list {mode}: no pod twice");
        let (_, selected) = server
            .get(&format!(
                "/pods?namespace={}&labelSelector=bucket%3D3",
                ns.name
            ))
            .await;
        assert_eq!(
            selected["data"].as_array().map(Vec::len),
            Some((0..PODS).filter(|i| i % 7 == 3).count()),
            "--initial-list {mode}: the labels indexed"
        );
        answers.push((mode, pods));
    }
    // The same records, field for field, whichever way the list came.
    for (mode, pods) in &answers[1..] {
        assert_eq!(
            pods, &answers[0].1,
            "--initial-list {mode} against the default"
        );
    }
}

#[tokio::test]
async fn an_unknown_initial_list_mode_is_refused_at_start() {
    let error = Server::start_with(
        crate::support::cluster().kubeconfig.to_str().unwrap(),
        &["--initial-list", "sometimes"],
    )
    .err()
    .expect("refused");
    assert!(error.contains("sometimes"), "{error}");
}
