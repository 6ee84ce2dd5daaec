//! What routes to what: the pods a Service selects, and the Services and Ingresses that lead
//! to a Deployment's pods. Read through the same source as everything else, in the object's
//! namespace only.

use std::collections::BTreeSet;
use std::sync::Arc;

use selector::LabelSelector;

use super::{BizError, PodView, RecordView, Workloads, object_namespace_of};
use k8sdao::{ListQuery, ReadAt, WorkloadSource};
use model::{DeploymentRecord, IngressRecord, Labels, PodRecord, ServiceRecord, Typed};

/// An equality selector of `labels`, the form a Service's selector has.
fn equality_selector(labels: &Labels) -> Result<LabelSelector, BizError> {
    let text = labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    // The apiserver validated these keys and values, so they always parse.
    LabelSelector::parse(&text)
        .map_err(|e| BizError::Internal(format!("a stored selector does not parse ({text}): {e}")))
}

impl<S: WorkloadSource> Workloads<S> {
    /// The pods the Service selects (none for a Service without a selector), each with its
    /// Deployment.
    pub async fn pods_of_service(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Vec<PodView>, BizError> {
        let ns = object_namespace_of(namespace, name)?;
        let service = self
            .get::<ServiceRecord>(ServiceRecord::resource(), Some(ns), name)
            .await?
            .0;
        if service.selector.is_empty() {
            return Ok(Vec::new());
        }
        let query = ListQuery {
            namespace: Some(ns.to_string()),
            labels: equality_selector(&service.selector)?,
            ..Default::default()
        };
        let pods = self
            .source
            .list(PodRecord::resource(), &query, ReadAt::Newest)
            .await?
            .items;
        self.with_deployments(pods).await
    }

    /// The Services in the Deployment's namespace whose selector picks its pods (by the
    /// labels its pods are made with).
    pub async fn services_of_deployment(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Vec<RecordView<ServiceRecord>>, BizError> {
        let (_, services) = self.routes_to_deployment(namespace, name).await?;
        Ok(services.into_iter().map(RecordView).collect())
    }

    /// The Ingresses in the Deployment's namespace with a path or default backend leading to
    /// one of its Services.
    pub async fn ingresses_of_deployment(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Vec<RecordView<IngressRecord>>, BizError> {
        let (ns, services) = self.routes_to_deployment(namespace, name).await?;
        let names: BTreeSet<&str> = services.iter().map(|s| s.key.name.as_str()).collect();
        let query = ListQuery {
            namespace: Some(ns),
            ..Default::default()
        };
        let ingresses = self
            .source
            .list::<IngressRecord>(IngressRecord::resource(), &query, ReadAt::Newest)
            .await?
            .items;
        Ok(ingresses
            .into_iter()
            .filter(|i| i.services.iter().any(|s| names.contains(s.as_str())))
            .map(RecordView)
            .collect())
    }

    async fn routes_to_deployment(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(String, Vec<Arc<ServiceRecord>>), BizError> {
        let ns = object_namespace_of(namespace, name)?;
        let deployment = self
            .source
            .get::<DeploymentRecord>(DeploymentRecord::resource(), ns, name)
            .await?;
        let query = ListQuery {
            namespace: Some(ns.to_string()),
            ..Default::default()
        };
        let services = self
            .source
            .list::<ServiceRecord>(ServiceRecord::resource(), &query, ReadAt::Newest)
            .await?
            .items;
        Ok((
            ns.to_string(),
            services
                .into_iter()
                .filter(|s| s.selects(&deployment.template_labels))
                .collect(),
        ))
    }
}
