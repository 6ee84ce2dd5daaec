//! Tells informers when the apiserver accepted one of their watch requests. The watcher
//! reports each failed attempt but not the attempt that succeeds: a cache that reconnected
//! with nothing new to apply would otherwise go on saying its watch is failing (stale, or not
//! ready) until some object changed. A layer in the client sees every watch request's answer.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};

use http::{Request, Response, Uri};
use tower::{Layer, Service};

use crate::InformerStatus;

/// Which informer watches which resource; shared by the client layer and the factory.
#[derive(Clone, Default)]
pub struct WatchSignals(Arc<RwLock<Vec<Watcher>>>);

struct Watcher {
    /// The API group, "" for the core group.
    group: String,
    plural: String,
    status: Arc<InformerStatus>,
}

impl std::fmt::Debug for WatchSignals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WatchSignals")
    }
}

impl WatchSignals {
    pub(crate) fn subscribe(&self, group: &str, plural: &str, status: Arc<InformerStatus>) {
        self.0
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(Watcher {
                group: group.to_string(),
                plural: plural.to_string(),
                status,
            });
    }

    /// The watch reporting to `status` has ended.
    pub(crate) fn unsubscribe(&self, status: &Arc<InformerStatus>) {
        self.0
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|w| !Arc::ptr_eq(&w.status, status));
    }

    /// The apiserver accepted a watch of `path`: its informer is connected again.
    fn accepted(&self, path: &str) {
        for w in self.0.read().unwrap_or_else(|e| e.into_inner()).iter() {
            if watches(path, &w.group, &w.plural) {
                w.status.heard(None);
            }
        }
    }
}

/// `/api/v1[/namespaces/NS]/PLURAL` for the core group, `/apis/GROUP/VERSION[/namespaces/NS]/PLURAL`
/// for the others.
fn watches(path: &str, group: &str, plural: &str) -> bool {
    let Some(base) = path.strip_suffix(plural).and_then(|p| p.strip_suffix('/')) else {
        return false;
    };
    let base = match base.rsplit_once("/namespaces/") {
        Some((base, namespace)) if !namespace.contains('/') => base,
        _ => base,
    };
    let parts: Vec<&str> = base.split('/').collect();
    match parts.as_slice() {
        ["", "api", _version] => group.is_empty(),
        ["", "apis", g, _version] => *g == group,
        _ => false,
    }
}

fn is_watch(uri: &Uri) -> bool {
    uri.query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"))
}

/// Client layer that reports accepted watch requests to [`WatchSignals`].
#[derive(Clone)]
pub struct WatchSignalLayer(pub WatchSignals);

impl<S> Layer<S> for WatchSignalLayer {
    type Service = WatchSignalService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        WatchSignalService {
            inner,
            signals: self.0.clone(),
        }
    }
}

#[derive(Clone)]
pub struct WatchSignalService<S> {
    inner: S,
    signals: WatchSignals,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B, RB> Service<Request<B>> for WatchSignalService<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Future: Send + 'static,
    RB: 'static,
{
    type Response = Response<RB>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Response<RB>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let watch = is_watch(request.uri()).then(|| request.uri().path().to_string());
        let signals = self.signals.clone();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let response = answer.await?;
            if let Some(path) = watch
                && response.status().is_success()
            {
                signals.accepted(&path);
            }
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_path_names_its_group_and_resource() {
        assert!(watches("/api/v1/pods", "", "pods"));
        assert!(watches("/api/v1/namespaces/ns/pods", "", "pods"));
        assert!(watches("/apis/apps/v1/deployments", "apps", "deployments"));
        assert!(watches(
            "/apis/apps/v1/namespaces/ns/replicasets",
            "apps",
            "replicasets"
        ));
        assert!(!watches("/apis/apps/v1/deployments", "", "deployments"));
        assert!(!watches("/api/v1/pods", "apps", "pods"));
        assert!(!watches("/api/v1/namespaces/ns/pods", "", "deployments"));
        assert!(!watches("/api/v1/namespaces/ns/pods/p/log", "", "pods"));
        assert!(!watches("/api/v1/namespaces/ns/mypods", "", "pods"));
    }

    #[test]
    fn only_watch_requests_count() {
        let uri = |s: &str| s.parse::<Uri>().unwrap();
        assert!(is_watch(&uri("/api/v1/pods?watch=true&resourceVersion=5")));
        assert!(is_watch(&uri("/api/v1/pods?&watch=1")));
        assert!(!is_watch(&uri("/api/v1/pods?limit=500")));
        assert!(!is_watch(&uri("/api/v1/pods")));
    }

    #[tokio::test]
    async fn an_accepted_watch_reconnects_its_informer_and_no_other() {
        use tower::ServiceExt;
        let signals = WatchSignals::default();
        let (pods, deployments) = (
            Arc::new(InformerStatus::new("Pod")),
            Arc::new(InformerStatus::new("Deployment")),
        );
        signals.subscribe("", "pods", pods.clone());
        signals.subscribe("apps", "deployments", deployments.clone());
        for s in [&pods, &deployments] {
            s.error("connection refused".into(), None);
        }
        let answer = |status: u16| {
            tower::service_fn(move |_: Request<()>| async move {
                Ok::<_, std::convert::Infallible>(
                    Response::builder().status(status).body(()).unwrap(),
                )
            })
        };
        let watch = |path: &str| Request::get(format!("{path}?watch=true")).body(()).unwrap();
        let refused = WatchSignalLayer(signals.clone()).layer(answer(403));
        refused.oneshot(watch("/api/v1/pods")).await.unwrap();
        assert!(!pods.is_connected(), "a refused watch is not a connection");
        let accepted = WatchSignalLayer(signals.clone()).layer(answer(200));
        accepted.oneshot(watch("/api/v1/pods")).await.unwrap();
        assert!(pods.is_connected());
        assert!(!deployments.is_connected());
    }
}
