//! Writes: scale, create and delete, each answering what it left behind ([`WriteEffect`]) for
//! a cache to catch up with.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};

use super::LiveSource;
use crate::{DaoError, Kind, Namespaced, WriteEffect};
use model::Typed;
use model::{DeploymentRecord, NewDeployment};

/// The labels of a Deployment we create, its selector and its Pods' labels alike.
fn app_labels(name: &str) -> std::collections::BTreeMap<String, String> {
    [("app".to_string(), name.to_string())].into()
}

fn deployment_object(namespace: &str, new: &NewDeployment) -> Deployment {
    use k8s_openapi::api::apps::v1::DeploymentSpec;
    use k8s_openapi::api::core::v1::{Container, ContainerPort, PodSpec, PodTemplateSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
    let labels = app_labels(&new.name);
    let containers = new
        .containers
        .iter()
        .map(|c| Container {
            name: c.name.clone(),
            image: Some(c.image.clone()),
            ports: (!c.ports.is_empty()).then(|| {
                c.ports
                    .iter()
                    .map(|p| ContainerPort {
                        container_port: *p,
                        protocol: Some("TCP".into()),
                        ..Default::default()
                    })
                    .collect()
            }),
            ..Default::default()
        })
        .collect();
    Deployment {
        metadata: ObjectMeta {
            name: Some(new.name.clone()),
            namespace: Some(namespace.to_string()),
            labels: Some(labels.clone()),
            ..Default::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(new.replicas),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers,
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        status: None,
    }
}

/// The resourceVersion a write answered with, if the cache can compare it: etcd's revisions
/// are numbers, but Kubernetes calls resourceVersions opaque.
fn version_of(meta: &kube::api::ObjectMeta) -> Option<u64> {
    meta.resource_version.as_deref()?.parse().ok()
}

/// What a create or scale left: the object at its new version. The write is done either
/// way, so an answer without a version the cache can compare is no failure: it is said so
/// (`Unversioned`) and the cache is not waited on for something it cannot show.
pub(super) fn written(kind: Kind, meta: &kube::api::ObjectMeta) -> WriteEffect {
    match version_of(meta) {
        Some(rv) => WriteEffect::Version(rv),
        None => unversioned(kind, meta),
    }
}

fn unversioned(kind: Kind, meta: &kube::api::ObjectMeta) -> WriteEffect {
    tracing::warn!(%kind, name = ?meta.name, resource_version = ?meta.resource_version,
        "the apiserver answered a write without a numeric resourceVersion; not waiting for the cache");
    WriteEffect::Unversioned
}

/// A 404 from a write names the object, as a read's does.
fn write_error(e: kube::Error, kind: Kind, namespace: &str, name: &str) -> DaoError {
    match e {
        kube::Error::Api(status) if status.code == 404 => DaoError::NotFound {
            kind: kind.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
        },
        other => other.into(),
    }
}

impl LiveSource {
    pub(crate) async fn scale(
        &self,
        namespace: &str,
        name: &str,
        replicas: i32,
    ) -> Result<WriteEffect, DaoError> {
        let patch = serde_json::json!({"spec": {"replicas": replicas}});
        let scale = self
            .api::<Deployment>(Some(namespace))
            .patch_scale(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| write_error(e, Kind::Deployment, namespace, name))?;
        Ok(written(Kind::Deployment, &scale.metadata))
    }

    pub(crate) async fn create(
        &self,
        namespace: &str,
        new: &NewDeployment,
    ) -> Result<(Arc<DeploymentRecord>, WriteEffect), DaoError> {
        let created = self
            .api::<Deployment>(Some(namespace))
            .create(&PostParams::default(), &deployment_object(namespace, new))
            .await?;
        Ok((
            DeploymentRecord::from_deployment(&created),
            written(Kind::Deployment, &created.metadata),
        ))
    }

    /// A Pod on a node stays, Terminating, until its kubelet confirms; others go at once.
    pub(crate) async fn delete<R: Typed<Object: Namespaced>>(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<WriteEffect, DaoError> {
        let kind = R::KIND;
        let remaining = self
            .api::<R::Object>(Some(namespace))
            .delete(name, &DeleteParams::background())
            .await
            .map(|r| r.left().map(|o| kube::Resource::meta(&o).clone()))
            .map_err(|e| write_error(e, kind, namespace, name))?;
        Ok(match remaining {
            Some(meta) if meta.deletion_timestamp.is_some() => match version_of(&meta) {
                Some(rv) => WriteEffect::Deleting(rv),
                None => unversioned(kind, &meta),
            },
            _ => WriteEffect::Gone,
        })
    }
}

#[cfg(test)]
mod tests {
    use http::{Request, Response};
    use kube::Client;
    use kube::client::Body;
    use serde_json::{Value, json};
    use tower_test::mock;

    use super::*;
    use model::PodRecord;

    #[tokio::test]
    async fn writes_send_what_kubectl_would_and_name_a_missing_object() {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let server = tokio::spawn(async move {
            // Create: labels, selector and template labels are app=<name>.
            let (request, send) = handle.next_request().await.unwrap();
            assert_eq!(request.method(), "POST");
            assert_eq!(
                request.uri().path(),
                "/apis/apps/v1/namespaces/ns/deployments"
            );
            let body = request.into_body().collect_bytes().await.unwrap();
            let sent: Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(sent["metadata"]["labels"], json!({"app": "web"}));
            assert_eq!(
                sent["spec"]["selector"]["matchLabels"],
                json!({"app": "web"})
            );
            assert_eq!(
                sent["spec"]["template"]["metadata"]["labels"],
                json!({"app": "web"})
            );
            assert_eq!(sent["spec"]["replicas"], 2);
            let container = &sent["spec"]["template"]["spec"]["containers"][0];
            assert_eq!(container["name"], "nginx");
            assert_eq!(
                container["ports"],
                json!([{"containerPort": 80, "protocol": "TCP"}])
            );
            let mut stored = sent.clone();
            stored["metadata"]["resourceVersion"] = json!("41");
            send.send_response(Response::new(Body::from(
                serde_json::to_vec(&stored).unwrap(),
            )));
            // Scale: a merge patch of the scale subresource.
            let (request, send) = handle.next_request().await.unwrap();
            assert_eq!(request.method(), "PATCH");
            assert_eq!(
                request.uri().path(),
                "/apis/apps/v1/namespaces/ns/deployments/web/scale"
            );
            let body = request.into_body().collect_bytes().await.unwrap();
            assert_eq!(
                serde_json::from_slice::<Value>(&body).unwrap(),
                json!({"spec": {"replicas": 5}})
            );
            let scale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                "metadata": {"name": "web", "namespace": "ns", "resourceVersion": "42"}, "spec": {"replicas": 5}});
            send.send_response(Response::new(Body::from(
                serde_json::to_vec(&scale).unwrap(),
            )));
            // Delete of a missing Pod.
            let (request, send) = handle.next_request().await.unwrap();
            assert_eq!(request.method(), "DELETE");
            let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                                "code": 404, "message": "pods \"gone\" not found"});
            send.send_response(
                Response::builder()
                    .status(404)
                    .body(Body::from(serde_json::to_vec(&status).unwrap()))
                    .unwrap(),
            );
        });
        let source = LiveSource::new(Client::new(service, "default"));
        let new = NewDeployment {
            name: "web".into(),
            replicas: 2,
            containers: vec![model::NewContainer {
                name: "nginx".into(),
                image: "nginx:1.27".into(),
                ports: vec![80],
            }],
        };
        let (record, effect) = source.create("ns", &new).await.unwrap();
        assert_eq!(
            (record.key.name.as_str(), effect),
            ("web", WriteEffect::Version(41))
        );
        assert_eq!(
            source.scale("ns", "web", 5).await.unwrap(),
            WriteEffect::Version(42)
        );
        let err = source.delete::<PodRecord>("ns", "gone").await.unwrap_err();
        assert!(
            matches!(&err, DaoError::NotFound { kind, .. } if *kind == Kind::Pod.to_string()),
            "{err}"
        );
        server.await.unwrap();
    }

    #[test]
    fn a_write_answered_without_a_numeric_version_says_so() {
        let meta = |rv: Option<&str>| kube::api::ObjectMeta {
            resource_version: rv.map(str::to_string),
            ..Default::default()
        };
        assert_eq!(
            written(Kind::Deployment, &meta(Some("42"))),
            WriteEffect::Version(42)
        );
        assert_eq!(
            written(Kind::Deployment, &meta(Some("opaque"))),
            WriteEffect::Unversioned
        );
        assert_eq!(
            written(Kind::Deployment, &meta(None)),
            WriteEffect::Unversioned
        );
    }
}
