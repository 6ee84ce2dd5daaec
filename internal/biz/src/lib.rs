//! The rules of k8sailor's API: what a valid request is, which defaults apply, how records
//! become answers. Reads go through the [`WorkloadSource`] trait only.

mod ingresses;
mod logs;
mod output;
mod paging;
mod relations;
mod services;
mod watch;
mod writes;

use std::borrow::Cow;
use std::sync::Arc;

use selector::validation::{is_dns1123_label, is_dns1123_subdomain};
use selector::{FieldSelector, LabelSelector};

pub use ingresses::{CreateIngress, IngressBackendRequest, IngressRuleRequest, IngressTlsRequest};
pub use k8sdao::Served;
pub use logs::{
    DEFAULT_MAX_LOG_STREAMS, LogRequest, MergedEvent, MergedLog, PodAllowed, PodGate, PodLog,
};
/// The answers' shapes, for whoever describes them (apis' OpenAPI).
pub use model::{
    DeploymentDto, EventDto, IngressDto, NamespaceDto, PodDto, ReplicaSetDto, ServiceDto,
};
/// The kinds' records, which name the kinds the generic reads take.
pub use model::{
    DeploymentRecord, IngressRecord, NamespaceRecord, PodRecord, Record, ReplicaSetRecord,
    ServiceRecord, Typed,
};
pub use output::OutputFormat;
pub use paging::{PageStore, SNAPSHOT_CAPACITY, SortSpec};
pub use services::{CreateService, PortValue, ServicePortRequest, ServiceType};
pub use watch::{WatchUpdate, WatchUpdates, WatchedView};
pub use writes::{ContainerRequest, CreateDeployment};

use k8sdao::{DaoError, HistoryError, ListQuery, WorkloadSource};
pub use k8sdao::{GenericRecord, Registry, Resource};
pub use model::{ServedBy, typed_resource};

pub use k8sdao::{Kind, NamespaceFilter, ReadAt};
use paging::PageStores;

/// Raw objects up to this size are rendered on the runtime's worker (well under a
/// millisecond); larger ones on the blocking pool.
const RENDER_INLINE_BYTES: usize = 64 * 1024;

/// An object as kubectl prints it. An object may be as large as etcd allows (1.5 MB):
/// rendering that takes tens of milliseconds, which must not hold a runtime worker.
async fn render_off_worker(format: OutputFormat, json: Vec<u8>) -> Result<String, BizError> {
    if json.len() <= RENDER_INLINE_BYTES {
        return format.render(&json);
    }
    tokio::task::spawn_blocking(move || format.render(&json))
        .await
        .map_err(|e| BizError::Internal(format!("rendering the object failed: {e}")))?
}

/// An object as the apiserver answered it (JSON, kubectl's noise left out), enveloped as is.
#[derive(Clone, Debug)]
pub struct RawObject(pub Vec<u8>);

impl JsonAnswer for RawObject {
    fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0);
    }

    fn json_len(&self) -> usize {
        self.0.len()
    }
}

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
    /// One entry of a request's list (a DSL entry, a structured port or rule), and why.
    #[error("invalid {what}: {reason}")]
    Entry { what: String, reason: String },
    /// A part of the request over one of the limits that bound what a request may cost.
    #[error("invalid {what}: {actual} {unit}, over the limit of {limit}")]
    TooLarge {
        what: &'static str,
        actual: usize,
        limit: usize,
        unit: &'static str,
    },
    #[error("invalid labelSelector: {0}")]
    Selector(selector::ParseError),
    #[error("invalid fieldSelector: {0}")]
    FieldSelector(String),
    #[error("{0}")]
    Query(String),
    #[error("the continue token has expired: restart the list without it")]
    Expired,
    #[error("invalid outputFormat {0:?}: expected json or yaml")]
    OutputFormat(String),
    #[error(transparent)]
    Source(#[from] DaoError),
    /// A fault of ours, never of the request.
    #[error("internal error: {0}")]
    Internal(String),
}

/// What kind of failure an error is, for whoever presents it (apis maps each to an HTTP
/// status): the request's fault, a missing object, or ours and the apiserver's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The request is malformed or over a limit.
    Invalid,
    /// The apiserver refuses the request for lack of permission (ours, so the caller's too).
    Forbidden,
    NotFound,
    /// The object exists already, or changed meanwhile.
    Conflict,
    /// What the request continues (a continue token, a watch) is gone: start again.
    Gone,
    /// Not ready yet, or the apiserver cannot be reached: try again later.
    Unavailable,
    /// The kind is served but its first list is not in yet: ask again in a moment (as the
    /// apiserver's watch cache answers while it initializes).
    Initializing,
    /// The apiserver failed in a way the request did not cause.
    Upstream,
    /// A fault of ours.
    Internal,
}

impl BizError {
    /// 4xx-kinds for the request's faults; the others only for ours or the apiserver's.
    pub fn failure(&self) -> Failure {
        match self {
            BizError::Invalid { .. }
            | BizError::Entry { .. }
            | BizError::TooLarge { .. }
            | BizError::Selector(_)
            | BizError::FieldSelector(_)
            | BizError::Query(_)
            | BizError::OutputFormat(_) => Failure::Invalid,
            BizError::Source(dao) => match dao {
                DaoError::NotFound { .. }
                | DaoError::NotServed { .. }
                | DaoError::NamespaceNotServed { .. } => Failure::NotFound,
                DaoError::NotSynced { .. } | DaoError::Unavailable(_) => Failure::Unavailable,
                DaoError::Initializing { .. } => Failure::Initializing,
                DaoError::WatchExpired(_) | DaoError::Version(HistoryError::Expired { .. }) => {
                    Failure::Gone
                }
                // Another replica is ahead of this one: moments later, this one will be too.
                DaoError::Version(HistoryError::Ahead { .. }) => Failure::Unavailable,
                // An answer without what every object carries: the apiserver's fault.
                DaoError::Malformed { .. } => Failure::Upstream,
                // The live source passes on what the apiserver says of the request; its refusal
                // of our own credentials is a gateway fault, not the caller's.
                DaoError::Api { code, .. } => match *code {
                    400 | 422 => Failure::Invalid,
                    // Our account may not do what was asked: the caller learns it may not either.
                    403 => Failure::Forbidden,
                    404 => Failure::NotFound,
                    409 => Failure::Conflict,
                    410 => Failure::Gone,
                    _ => Failure::Upstream,
                },
            },
            BizError::Expired => Failure::Gone,
            BizError::Internal(_) => Failure::Internal,
        }
    }
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

/// The namespace a single-object request is about: the one given (empty is none), else
/// kubectl's default. The one rule for the reads and writes here and for apis' access checks.
pub fn namespace_of_object(asked: Option<&str>) -> &str {
    asked
        .filter(|ns| !ns.is_empty())
        .unwrap_or(DEFAULT_NAMESPACE)
}

/// The namespace a list request is about: the one given (empty is none), else the one the
/// server is scoped to, else none (all). The one rule for the sources (which also refuse
/// another namespace than the scope) and for apis' access checks.
pub use k8sdao::namespace_of_list;

/// [`namespace_of_object`], checked.
fn object_namespace(asked: Option<&str>) -> Result<&str, BizError> {
    let ns = namespace_of_object(asked);
    check_namespace(ns)?;
    Ok(ns)
}

/// The namespace of a request about the object `name`, both checked.
fn object_namespace_of<'a>(asked: Option<&'a str>, name: &str) -> Result<&'a str, BizError> {
    let ns = object_namespace(asked)?;
    check_name(name)?;
    Ok(ns)
}

fn entry_error(what: String, reason: impl Into<String>) -> BizError {
    BizError::Entry {
        what,
        reason: reason.into(),
    }
}

/// A list of text entries within its bounds: `names.0` the list, `names.1` one entry, as
/// errors name them. Checked before any entry is parsed.
fn check_sizes_of(
    names: (&'static str, &'static str),
    entries: &[String],
    max_entries: usize,
    max_entry_bytes: usize,
) -> Result<(), BizError> {
    if entries.len() > max_entries {
        return Err(BizError::TooLarge {
            what: names.0,
            actual: entries.len(),
            limit: max_entries,
            unit: "entries",
        });
    }
    match entries.iter().find(|e| e.len() > max_entry_bytes) {
        Some(long) => Err(BizError::TooLarge {
            what: names.1,
            actual: long.len(),
            limit: max_entry_bytes,
            unit: "bytes",
        }),
        None => Ok(()),
    }
}

/// Requirements of one label or field selector; dashboards use a handful.
pub const MAX_SELECTOR_REQUIREMENTS: usize = 32;

/// What the caller of a list or watch may see, as the API layer decided from its rights.
#[derive(Clone, Debug, Default)]
pub struct Visibility {
    pub namespaces: NamespaceFilter,
}

/// The raw query parameters of a list request, and what its caller may see.
#[derive(Clone, Debug, Default)]
pub struct ListRequest {
    /// Absent or empty: all namespaces.
    pub namespace: Option<String>,
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    /// Page size; absent or 0: everything at once.
    pub limit: Option<usize>,
    /// The token of the previous page.
    pub continue_token: Option<String>,
    /// `name`, `namespace`, `creationTimestamp`, comma-separated, `-` for descending.
    pub sort: Option<String>,
    /// For a watch, the version the client has: only the changes after it are sent.
    pub resource_version: Option<String>,
    /// The state a list's first page is of, or where a watch starts, as the Kubernetes API's
    /// `resourceVersion` and `resourceVersionMatch` ask it (`resource_version` is
    /// /k8sailor/v0's: at most one of the two is given); a continue token carries its own.
    pub read_at: ReadAt,
    pub visibility: Visibility,
}

/// `resourceVersion` as the apiserver reads it for a watch: absent, empty or "0" is "from
/// the current state", a number is "after that version".
fn read_at(value: Option<&str>) -> Result<ReadAt, BizError> {
    match value {
        None | Some("" | "0") => Ok(ReadAt::Newest),
        Some(v) => v.parse().map(ReadAt::Version).map_err(|_| {
            BizError::Query(format!(
                "invalid resourceVersion {v:?}: expected a resourceVersion this server sent"
            ))
        }),
    }
}

impl ListRequest {
    /// `fields`: the field paths the listed kind supports, as the apiserver does.
    fn query(&self, fields: &[Cow<'static, str>]) -> Result<ListQuery, BizError> {
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
        // Every listed object is matched against every requirement: the cache's size times
        // this bounds a list's cost.
        for (what, count) in [
            ("labelSelector", labels.requirements().len()),
            ("fieldSelector", field_selector.terms().len()),
        ] {
            if count > MAX_SELECTOR_REQUIREMENTS {
                return Err(BizError::TooLarge {
                    what,
                    actual: count,
                    limit: MAX_SELECTOR_REQUIREMENTS,
                    unit: "requirements",
                });
            }
        }
        if let Some(term) = field_selector
            .terms()
            .iter()
            .find(|t| !fields.iter().any(|f| f == t.field()))
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
            visible: self.visibility.namespaces.clone(),
        })
    }
}

/// A list answer, the resourceVersion it reflects, and how to get the rest.
#[derive(Debug)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub resource_version: String,
    pub continue_token: Option<String>,
    pub remaining: Option<usize>,
    /// Objects in namespaces the caller may not see were left out (before paging and counting).
    pub access_filtered: bool,
}

/// An answer written by copying the JSON its records keep, never by serializing objects.
pub trait JsonAnswer {
    fn write_json(&self, out: &mut Vec<u8>);
    /// About how many bytes `write_json` writes, to size the buffer once.
    fn json_len(&self) -> usize;
}

/// A Pod as answered: its record plus the Deployment that controls it.
#[derive(Clone, Debug)]
pub struct PodView {
    pub record: Arc<PodRecord>,
    pub deployment: Option<Arc<str>>,
}

impl JsonAnswer for PodView {
    fn write_json(&self, out: &mut Vec<u8>) {
        // The record's object without its closing brace, then `deployment`, then the brace.
        let json = self.record.json.as_bytes();
        out.extend_from_slice(&json[..json.len().saturating_sub(1)]);
        out.extend_from_slice(b",\"deployment\":");
        match &self.deployment {
            Some(name) => write_json_string(out, name),
            None => out.extend_from_slice(b"null"),
        }
        out.push(b'}');
    }

    fn json_len(&self) -> usize {
        self.record.json.len() + 16 + self.deployment.as_ref().map_or(4, |d| d.len() + 2)
    }
}

/// An object answered as its record alone: its kind's DTO.
#[derive(Debug)]
pub struct RecordView<R>(pub Arc<R>);

impl<R: Record> JsonAnswer for RecordView<R> {
    fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.0.json().as_bytes());
    }

    fn json_len(&self) -> usize {
        self.0.json().len()
    }
}

/// A Deployment as answered.
pub type DeploymentView = RecordView<DeploymentRecord>;

impl<T: JsonAnswer> JsonAnswer for Vec<T> {
    fn write_json(&self, out: &mut Vec<u8>) {
        out.push(b'[');
        for (i, item) in self.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            item.write_json(out);
        }
        out.push(b']');
    }

    fn json_len(&self) -> usize {
        2 + self.iter().map(|i| i.json_len() + 1).sum::<usize>()
    }
}

fn write_json_string(out: &mut Vec<u8>, s: &str) {
    // Writing a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// The use cases of the API over any [`WorkloadSource`].
pub struct Workloads<S> {
    source: S,
    pages: PageStores,
}

impl<S: WorkloadSource> Workloads<S> {
    pub fn new(source: S) -> Self {
        Workloads {
            source,
            pages: PageStores::default(),
        }
    }

    /// Filters through the source, sorts, and cuts the page; a continue token's page is cut
    /// from the list at the token's version, kept or rebuilt.
    async fn paged<R: Served>(
        &self,
        resource: &Resource,
        req: &ListRequest,
    ) -> Result<paging::PageSlice<R>, BizError> {
        let query = req.query(&resource.fields)?;
        let sort = SortSpec::parse(req.sort.as_deref())?;
        let limit = req.limit.filter(|l| *l > 0);
        // Only a list cut into pages names its query: most lists are answered whole.
        let fingerprint = || {
            paging::fingerprint(
                resource,
                &[
                    query.namespace.as_deref().unwrap_or_default(),
                    &query.labels.to_string(),
                    &query.fields.to_string(),
                    &sort.canonical(),
                ],
            )
        };
        if read_at(req.resource_version.as_deref())? != ReadAt::Newest {
            return Err(BizError::Query(
                "resourceVersion applies to watch=true: a list is of the newest state, and its continue tokens carry their own version".into(),
            ));
        }
        if let Some(token) = req.continue_token.as_deref().filter(|t| !t.is_empty()) {
            if req.read_at != ReadAt::Newest {
                // The apiserver's wording: the token's version is the list's.
                return Err(BizError::Query(
                    "specifying resource version is not allowed when using continue".into(),
                ));
            }
            let store = self.pages.of::<R>(resource);
            let cursor = match store.continued(token, &fingerprint(), &query.visible)? {
                paging::Continued::Kept(cursor) => cursor,
                paging::Continued::Rebuild(cursor) => {
                    let items = self
                        .sorted::<R>(resource, &query, ReadAt::Version(cursor.version()), &sort)
                        .await
                        .map_err(|e| match e {
                            BizError::Source(DaoError::Version(HistoryError::Expired {
                                ..
                            })) => BizError::Expired,
                            other => other,
                        })?
                        .items;
                    store.keep(cursor, items, &query.visible)
                }
            };
            return Ok(cursor.next(&sort, limit));
        }
        let listing = self
            .sorted::<R>(resource, &query, req.read_at, &sort)
            .await?;
        // A list at a version is of that version, whatever the source has reached since.
        let version = match req.read_at {
            ReadAt::Version(version) => version.to_string(),
            ReadAt::Newest | ReadAt::NotOlderThan(_) => listing.resource_version,
        };
        if limit.is_none_or(|l| l >= listing.items.len()) {
            return Ok(paging::PageSlice::whole(listing.items, version));
        }
        self.pages.of::<R>(resource).first(
            listing.items,
            &version,
            fingerprint(),
            &query.visible,
            limit,
        )
    }

    /// The list at `at`, sorted.
    async fn sorted<R: Served>(
        &self,
        resource: &Resource,
        query: &ListQuery,
        at: ReadAt,
        sort: &SortSpec,
    ) -> Result<k8sdao::Listing<R>, BizError> {
        let mut listing = self.source.list::<R>(resource, query, at).await?;
        // Sources list in (namespace, name) order, the default: only another order sorts,
        // and the default list reads nothing of its items but their JSON.
        if !sort.is_default() {
            listing
                .items
                .sort_by(|a, b| sort.compare(a.as_ref(), b.as_ref()));
        }
        Ok(listing)
    }

    pub fn source(&self) -> &S {
        &self.source
    }

    /// The namespaces holding objects of `kind`: the only ones where an all-namespace list
    /// of it can find anything, so the only ones whose rights need deciding.
    pub async fn namespaces_holding(&self, resource: &Resource) -> Result<Vec<String>, BizError> {
        Ok(self.source.namespaces_holding(resource).await?)
    }

    /// The objects of `resource` (records `R`) the request selects, sorted and paged.
    pub async fn list<R: Served>(
        &self,
        resource: &Resource,
        req: &ListRequest,
    ) -> Result<Page<RecordView<R>>, BizError> {
        let page = self.paged::<R>(resource, req).await?;
        Ok(Page {
            items: page.items.into_iter().map(RecordView).collect(),
            resource_version: page.resource_version,
            continue_token: page.continue_token,
            remaining: page.remaining,
            access_filtered: req.visibility.namespaces.is_restricted(),
        })
    }

    pub async fn get<R: Served>(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<RecordView<R>, BizError> {
        let ns = object_namespace_of(namespace, name)?;
        Ok(RecordView(self.source.get::<R>(resource, ns, name).await?))
    }

    /// The object of a generic resource as kubectl prints it with `-o json|yaml`, from the
    /// cache (the object as the apiserver sent it, managedFields stripped); for a resource
    /// kept as metadata alone (Secrets), its metadata, and `true`.
    pub async fn resource_output(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        format: Option<&str>,
    ) -> Result<(OutputFormat, String, bool), BizError> {
        let format = OutputFormat::parse(format)?;
        let ns = object_namespace_of(namespace, name)?;
        let record = self.source.get::<GenericRecord>(resource, ns, name).await?;
        let json = record.raw_json().map_err(BizError::Internal)?;
        let printed = render_off_worker(format, json).await?;
        Ok((format, printed, record.is_metadata_only()))
    }

    pub async fn pods_of_deployment(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Vec<PodView>, BizError> {
        let ns = object_namespace_of(namespace, name)?;
        let pods = self.source.pods_of_deployment(ns, name).await?;
        let deployment: Arc<str> = Arc::from(name);
        Ok(pods
            .into_iter()
            .map(|record| PodView {
                record,
                deployment: Some(deployment.clone()),
            })
            .collect())
    }

    pub async fn list_pods(&self, req: &ListRequest) -> Result<Page<PodView>, BizError> {
        let page = self.paged::<PodRecord>(PodRecord::resource(), req).await?;
        Ok(Page {
            items: self.with_deployments(page.items).await?,
            resource_version: page.resource_version,
            continue_token: page.continue_token,
            remaining: page.remaining,
            access_filtered: req.visibility.namespaces.is_restricted(),
        })
    }

    pub async fn get_pod(&self, namespace: Option<&str>, name: &str) -> Result<PodView, BizError> {
        let record = self.pod_record(namespace, name).await?;
        self.pod_view(record).await
    }

    /// One pod as answered, its Deployment looked up.
    async fn pod_view(&self, record: Arc<PodRecord>) -> Result<PodView, BizError> {
        let deployment = self.source.deployment_of_pod(&record).await?;
        Ok(PodView { record, deployment })
    }

    /// The Pod's events, newest first.
    pub async fn pod_events(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Vec<EventDto>, BizError> {
        let ns = object_namespace_of(namespace, name)?;
        Ok(self.source.pod_events(ns, name).await?)
    }

    /// The Pod's newest event, as the original `/pods/{name}/event` answered: a Pod without
    /// events has one with empty `message` and `reason`, never null (the original client
    /// reads `data.message` unguarded).
    pub async fn latest_pod_event(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<EventDto, BizError> {
        let ns = object_namespace(namespace)?;
        let newest = self.pod_events(Some(ns), name).await?.into_iter().next();
        Ok(newest.unwrap_or_else(|| EventDto::none_about(ns, name)))
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
        let json = record.raw_json().map_err(BizError::Internal)?;
        Ok((format, render_off_worker(format, json).await?))
    }

    async fn pod_record(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Arc<PodRecord>, BizError> {
        Ok(self
            .get::<PodRecord>(PodRecord::resource(), namespace, name)
            .await?
            .0)
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
