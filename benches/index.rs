//! A 1%-selective label query over 50,000 cached pods, answered from the label index, against
//! a selector with the same answer that no index can serve (a full scan). Prints a table and
//! writes it to target/bench-index.md. Run: `cargo bench --bench index [-- --pods N]`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use biz::{PodRecord, Typed};
use confk8s::Delta;
use k8s_openapi::api::core::v1::Pod;
use k8scache::Caches;
use k8sdao::{CacheSource, ListQuery, ReadAt, WorkloadSource};

const BUCKETS: usize = 100;

fn pod(i: usize) -> Pod {
    let tier = ["web", "api", "db"][i % 3];
    serde_json::from_value(serde_json::json!({
        "metadata": {"namespace": format!("ns-{}", i % 20), "name": format!("pod-{i:06}"),
                     "uid": format!("uid-{i}"), "resourceVersion": "1",
                     "labels": {"app": format!("app-{}", i % 1000), "bucket": (i % BUCKETS).to_string(),
                                "tier": tier, "env": "prod"}},
        "spec": {"nodeName": format!("node-{}", i % 50), "containers": [{"name": "c", "image": "nginx:1.27"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1"}
    }))
    .expect("a valid pod")
}

/// Median time of `f` over enough runs to fill about a second.
async fn median<F, Fut>(mut f: F) -> (Duration, usize)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = usize>,
{
    let mut times = Vec::new();
    let mut found = 0;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(1) || times.len() < 5 {
        let t = Instant::now();
        found = black_box(f().await);
        times.push(t.elapsed());
    }
    times.sort();
    (times[times.len() / 2], found)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let pods = args
        .windows(2)
        .find(|w| w[0] == "--pods")
        .and_then(|w| w[1].parse().ok())
        .unwrap_or(50_000usize);
    let caches = Arc::new(Caches::default());
    let deltas: Vec<Delta<Pod>> = (0..pods).map(|i| Delta::Added(pod(i))).collect();
    caches.pods.apply_deltas(&deltas);
    let source = CacheSource::new(caches, Vec::new());

    let query = |selector: &str| ListQuery {
        labels: selector.parse().expect("a valid selector"),
        ..Default::default()
    };
    let indexed = query("bucket=7");
    let others: Vec<String> = (0..BUCKETS)
        .filter(|b| *b != 7)
        .map(|b| b.to_string())
        .collect();
    let scanned = query(&format!("bucket,bucket notin ({})", others.join(",")));

    let (t_index, n_index) = median(|| async {
        source
            .list::<PodRecord>(PodRecord::resource(), &indexed, ReadAt::Newest)
            .await
            .unwrap()
            .items
            .len()
    })
    .await;
    let (t_scan, n_scan) = median(|| async {
        source
            .list::<PodRecord>(PodRecord::resource(), &scanned, ReadAt::Newest)
            .await
            .unwrap()
            .items
            .len()
    })
    .await;
    assert_eq!(n_index, n_scan, "both queries select the same pods");

    let table = format!(
        "| query over {pods} cached pods | selects | median time |\n|---|---|---|\n\
         | `bucket=7` (label index) | {n_index} | {t_index:?} |\n\
         | `bucket,bucket notin (...99 others)` (full scan, same answer) | {n_scan} | {t_scan:?} |\n\
         | index / scan | | {:.3} |\n",
        t_index.as_secs_f64() / t_scan.as_secs_f64()
    );
    println!("{table}");
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-index.md");
    std::fs::write(&out, &table).expect("write target/bench-index.md");
}
