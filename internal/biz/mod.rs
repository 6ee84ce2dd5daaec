//! The rules of k8sailor's API: what a valid request is, which defaults apply, how records
//! become answers. Reads go through the [`WorkloadSource`] trait only.

mod output;

use std::sync::Arc;

use selector::validation::{is_dns1123_label, is_dns1123_subdomain};
use selector::{FieldSelector, LabelSelector};
use serde::Serialize;

pub use output::OutputFormat;

use crate::k8sdao::{DaoError, ListQuery, WorkloadSource};
use crate::model::{DEPLOYMENT_FIELDS, DeploymentDto, POD_FIELDS, PodDto, PodRecord};

/// kubectl's namespace when none is given for a single object.
pub const DEFAULT_NAMESPACE: &str = "default";

#[derive(Debug, thiserror::Error)]
pub enum BizError {
    #[error("invalid {what} {value:?}: {rule}")]
    Invalid {
        what: &'static str,
        value: String,
        rule: &'static str,
    },
    #[error("invalid labelSelector: {0}")]
    Selector(selector::ParseError),
    #[error("invalid fieldSelector: {0}")]
    FieldSelector(String),
    #[error("invalid outputFormat {0:?}: expected json or yaml")]
    OutputFormat(String),
    #[error(transparent)]
    Source(#[from] DaoError),
    /// A fault of ours, never of the request.
    #[error("internal error: {0}")]
    Internal(String),
}

const LABEL_RULE: &str = "must be a DNS-1123 label: at most 63 lowercase alphanumerics or '-', starting and ending with an alphanumeric";
const SUBDOMAIN_RULE: &str = "must be a DNS-1123 subdomain: at most 253 lowercase alphanumerics, '-' or '.', each part starting and ending with an alphanumeric";

fn check_namespace(ns: &str) -> Result<(), BizError> {
    if is_dns1123_label(ns) {
        Ok(())
    } else {
        Err(BizError::Invalid {
            what: "namespace",
            value: ns.to_string(),
            rule: LABEL_RULE,
        })
    }
}

fn check_name(name: &str) -> Result<(), BizError> {
    if is_dns1123_subdomain(name) {
        Ok(())
    } else {
        Err(BizError::Invalid {
            what: "name",
            value: name.to_string(),
            rule: SUBDOMAIN_RULE,
        })
    }
}

/// The namespace of a single-object request: given, or kubectl's default.
fn object_namespace(ns: Option<&str>) -> Result<&str, BizError> {
    let ns = ns.filter(|ns| !ns.is_empty()).unwrap_or(DEFAULT_NAMESPACE);
    check_namespace(ns)?;
    Ok(ns)
}

/// The raw query parameters of a list request.
#[derive(Clone, Debug, Default)]
pub struct ListRequest {
    /// Absent or empty: all namespaces.
    pub namespace: Option<String>,
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
}

impl ListRequest {
    /// `fields`: the field paths the listed kind supports, as the apiserver does.
    fn query(&self, fields: &[&str]) -> Result<ListQuery, BizError> {
        let namespace = self.namespace.clone().filter(|ns| !ns.is_empty());
        if let Some(ns) = &namespace {
            check_namespace(ns)?;
        }
        let labels = match self.label_selector.as_deref() {
            Some(s) => LabelSelector::parse(s).map_err(BizError::Selector)?,
            None => LabelSelector::everything(),
        };
        let field_selector = match self.field_selector.as_deref() {
            Some(s) => {
                FieldSelector::parse(s).map_err(|e| BizError::FieldSelector(e.to_string()))?
            }
            None => FieldSelector::everything(),
        };
        if let Some(term) = field_selector
            .terms()
            .iter()
            .find(|t| !fields.contains(&t.field()))
        {
            // The apiserver's own wording, so scripts see the same message from both.
            return Err(BizError::FieldSelector(format!(
                "field label not supported: {} (supported: {})",
                term.field(),
                fields.join(", ")
            )));
        }
        Ok(ListQuery {
            namespace,
            labels,
            fields: field_selector,
        })
    }
}

/// A list answer and the resourceVersion it reflects.
#[derive(Debug, Serialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub resource_version: String,
}

/// A Pod as answered: its record plus the Deployment that controls it.
#[derive(Clone, Debug)]
pub struct PodView {
    pub record: Arc<PodRecord>,
    pub deployment: Option<String>,
}

impl Serialize for PodView {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Wire<'a> {
            #[serde(flatten)]
            dto: &'a PodDto,
            deployment: &'a Option<String>,
        }
        Wire {
            dto: &self.record.dto,
            deployment: &self.deployment,
        }
        .serialize(s)
    }
}

/// A Deployment as answered.
#[derive(Clone, Debug)]
pub struct DeploymentView(pub Arc<crate::model::DeploymentRecord>);

impl Serialize for DeploymentView {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        DeploymentDto::serialize(&self.0.dto, s)
    }
}

/// The use cases of the API over any [`WorkloadSource`].
pub struct Workloads<S> {
    source: S,
}

impl<S: WorkloadSource> Workloads<S> {
    pub fn new(source: S) -> Self {
        Workloads { source }
    }

    pub fn source(&self) -> &S {
        &self.source
    }

    pub async fn list_deployments(
        &self,
        req: &ListRequest,
    ) -> Result<Page<DeploymentView>, BizError> {
        let listing = self
            .source
            .list_deployments(&req.query(DEPLOYMENT_FIELDS)?)
            .await?;
        Ok(Page {
            items: listing.items.into_iter().map(DeploymentView).collect(),
            resource_version: listing.resource_version,
        })
    }

    pub async fn get_deployment(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<DeploymentView, BizError> {
        let ns = object_namespace(namespace)?;
        check_name(name)?;
        Ok(DeploymentView(self.source.get_deployment(ns, name).await?))
    }

    pub async fn pods_of_deployment(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Vec<PodView>, BizError> {
        let ns = object_namespace(namespace)?;
        check_name(name)?;
        let pods = self.source.pods_of_deployment(ns, name).await?;
        Ok(pods
            .into_iter()
            .map(|record| PodView {
                record,
                deployment: Some(name.to_string()),
            })
            .collect())
    }

    pub async fn list_pods(&self, req: &ListRequest) -> Result<Page<PodView>, BizError> {
        let listing = self.source.list_pods(&req.query(POD_FIELDS)?).await?;
        Ok(Page {
            items: self.with_deployments(listing.items).await?,
            resource_version: listing.resource_version,
        })
    }

    pub async fn get_pod(&self, namespace: Option<&str>, name: &str) -> Result<PodView, BizError> {
        let record = self.pod_record(namespace, name).await?;
        let mut views = self.with_deployments(vec![record]).await?;
        views
            .pop()
            .ok_or_else(|| BizError::Internal("deployment lookup lost the pod".into()))
    }

    /// The Pod as kubectl prints it with `-o json` or `-o yaml`.
    pub async fn pod_output(
        &self,
        namespace: Option<&str>,
        name: &str,
        format: Option<&str>,
    ) -> Result<(OutputFormat, String), BizError> {
        let format = OutputFormat::parse(format)?;
        let record = self.pod_record(namespace, name).await?;
        Ok((format, format.render(&record.raw)?))
    }

    async fn pod_record(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Arc<PodRecord>, BizError> {
        let ns = object_namespace(namespace)?;
        check_name(name)?;
        Ok(self.source.get_pod(ns, name).await?)
    }

    async fn with_deployments(&self, pods: Vec<Arc<PodRecord>>) -> Result<Vec<PodView>, BizError> {
        let deployments = self.source.deployments_of_pods(&pods).await?;
        Ok(pods
            .into_iter()
            .zip(deployments)
            .map(|(record, deployment)| PodView { record, deployment })
            .collect())
    }
}

#[cfg(test)]
pub(crate) mod tests;
