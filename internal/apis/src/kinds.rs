//! The reads every served kind has: `GET /{resource}` (the list query of every kind, paging,
//! sorting, `watch=true`), `GET /{resource}/{name}` and `GET /{resource}/{name}/output`,
//! generic over the kind. Their routes, OpenAPI description and access rules are all read
//! from the kind, so serving one more is one line in [`SERVED`] and [`routes`].

use axum::Extension;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::get;
use serde::Serialize;
use utoipa::openapi::path::{
    HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn, PathItem, Paths,
};
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Schema, Type};
use utoipa::openapi::{
    Content, Ref, RefOr, Required, ResponseBuilder, Responses, ResponsesBuilder,
};
use utoipa::{IntoParams, PartialSchema, ToSchema};
use utoipa_axum::router::UtoipaMethodRouter;

use super::AppState;
use super::dispatch::Declared;
use super::envelope::{ApiError, ApiPath, ApiQuery, ok, ok_json, ok_page_json};
use super::routes::{
    ListParams, ObjectParams, OutputParams, list_request, off_the_workers, printed,
};
use super::watch;
use biz::{
    GenericRecord, IngressRecord, Kind, NamespaceRecord, Registry, ReplicaSetRecord, Resource,
    Served, ServiceRecord, Typed, Visibility,
};
use k8sdao::Namespaced;

/// The kinds served by the generic routes below, beside Deployments and Pods (whose routes
/// add relations and writes, in routes.rs, and share these handlers).
pub(super) const SERVED: &[Kind] = &[
    Kind::ReplicaSet,
    Kind::Service,
    Kind::Ingress,
    Kind::Namespace,
];

/// The generic routes of every kind in [`SERVED`].
pub(super) fn routes(mount: &str) -> Declared<AppState> {
    Declared::new()
        .merge(kind_routes::<ReplicaSetRecord>(mount))
        .merge(kind_routes::<ServiceRecord>(mount))
        .merge(kind_routes::<IngressRecord>(mount))
        .merge(kind_routes::<NamespaceRecord>(mount))
}

/// The routes of every resource served by a generic record: looked up in the registry on
/// each request, so a resource added while the server runs is served at once and a removed
/// one is 404.
pub(super) fn resource_routes(mount: &str) -> Declared<AppState> {
    Declared::new()
        .route(&format!("{mount}/resources"), get(resources))
        .route(
            &format!("{mount}/{{resource}}"),
            get(
                |State(s): State<AppState>,
                 ApiPath(resource): ApiPath<String>,
                 headers: HeaderMap,
                 visibility: Option<Extension<Visibility>>,
                 ApiQuery(q): ApiQuery<ListParams>| async move {
                    let resource = served(&s, &resource)?;
                    list::<GenericRecord>(s, resource, headers, visibility, q).await
                },
            ),
        )
        .route_answering_once(
            &format!("{mount}/{{resource}}/{{name}}"),
            get(
                |State(s): State<AppState>,
                 ApiPath((resource, name)): ApiPath<(String, String)>,
                 ApiQuery(q): ApiQuery<ObjectParams>| async move {
                    let resource = served(&s, &resource)?;
                    get_one::<GenericRecord>(s, &resource, name, q).await
                },
            ),
        )
        .route_answering_once(
            &format!("{mount}/{{resource}}/{{name}}/output"),
            get(
                |State(s): State<AppState>,
                 ApiPath((resource, name)): ApiPath<(String, String)>,
                 ApiQuery(q): ApiQuery<OutputParams>| async move {
                    let resource = served(&s, &resource)?;
                    let (format, body, metadata_only) = s
                        .workloads
                        .resource_output(
                            &resource,
                            q.namespace.as_deref(),
                            &name,
                            q.output_format.as_deref(),
                        )
                        .await?;
                    let mut response = printed((format, body));
                    if metadata_only {
                        response.headers_mut().insert(
                            header::WARNING,
                            HeaderValue::from_static(METADATA_ONLY_WARNING),
                        );
                    }
                    Ok::<_, ApiError>(response)
                },
            ),
        )
}

/// What `/output` of a resource kept as metadata alone says beside it.
const METADATA_ONLY_WARNING: &str =
    "299 - \"kept as metadata only: k8sailor never reads this object's values\"";

/// The resource served by a generic record that requests name `name`, or the 404 naming it
/// and the closest served names.
fn served(s: &AppState, name: &str) -> Result<Resource, ApiError> {
    let registry = s.workloads.source().registry();
    registry
        .resource(name)
        .filter(|r| r.typed().is_none())
        .ok_or_else(|| not_served(registry, name))
}

/// How many names an unknown resource's 404 suggests.
const SUGGESTIONS: usize = 3;

pub(super) fn not_served(registry: &Registry, name: &str) -> ApiError {
    let mut names: Vec<(usize, String)> = registry
        .resources()
        .iter()
        .map(|r| (strsim::levenshtein(name, &r.name), r.name.to_string()))
        .collect();
    names.sort();
    let closest: Vec<String> = names
        .into_iter()
        .take(SUGGESTIONS)
        .map(|(_, name)| name)
        .collect();
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!(
            "resource {name:?} is not served; the closest served: {} (GET /resources lists them all)",
            closest.join(", ")
        ),
    )
}

/// One served resource, as `/resources` lists it.
#[derive(Serialize)]
struct ServedResource<'a, Column> {
    /// As requests name it (`kubectl get <name>`).
    name: &'a str,
    /// As the apiserver's paths name it (`/apis/{group}/{version}/{plural}`).
    plural: &'a str,
    /// A built-in kind's, not a custom resource's (both may be named with their group:
    /// `events.events.k8s.io`, `widgets.example.com`).
    #[serde(rename = "builtIn")]
    built_in: bool,
    kind: &'a str,
    group: &'a str,
    version: &'a str,
    namespaced: bool,
    /// kubectl's columns; a generic resource's answers hold one cell per column.
    columns: &'a [Column],
}

/// What is served.
async fn resources(State(s): State<AppState>) -> Response {
    let resources = s.workloads.source().registry().resources();
    let listed: Vec<ServedResource<'_, _>> = resources
        .iter()
        .map(|r| ServedResource {
            name: &r.name,
            plural: &r.plural,
            built_in: k8sdao::built_in(&r.name).is_some(),
            kind: &r.kind,
            group: &r.group,
            version: &r.version,
            namespaced: r.namespaced,
            columns: r.printer.columns(),
        })
        .collect();
    ok(listed)
}

/// Which of a kind's generic routes a route template is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum KindRoute {
    List,
    Object,
    Output,
}

/// The resource whose generic route serves `route` (a template), and which route it is:
/// a typed kind's own route, or, for the `{resource}` routes, `requested` (the registry's
/// resource the request names, if it is served).
pub(super) fn served_by(
    route: &str,
    requested: Option<&Resource>,
) -> Option<(Resource, KindRoute)> {
    let path = route.strip_prefix('/')?;
    let (resource, rest) = path.split_once('/').unwrap_or((path, ""));
    let resource = if resource == "{resource}" {
        requested.filter(|r| r.typed().is_none())?.clone()
    } else {
        let kind = SERVED.iter().copied().find(|k| k.resource() == resource)?;
        biz::typed_resource(kind).clone()
    };
    match rest {
        "" => Some((resource, KindRoute::List)),
        "{name}" => Some((resource, KindRoute::Object)),
        "{name}/output" => Some((resource, KindRoute::Output)),
        _ => None,
    }
}

/// A list, or with `watch=true` a watch, of `resource` (records `R`).
pub(super) async fn list<R: Served>(
    s: AppState,
    resource: Resource,
    headers: HeaderMap,
    visibility: Option<Extension<Visibility>>,
    q: ListParams,
) -> Result<Response, ApiError> {
    let is_watch = watch::is_watch(q.watch.as_deref())?;
    let req = list_request(q, visibility, &headers)?;
    if is_watch {
        let frames = s.workloads.watch::<R>(&resource, &req).await?;
        let guard = s.metrics.watch_opened(resource.kind.clone());
        return Ok(watch::respond(frames, &headers, &s, guard));
    }
    off_the_workers(s, move |s| async move {
        Ok(ok_page_json(s.workloads.list::<R>(&resource, &req).await?))
    })
    .await
}

/// One object of `resource` (records `R`).
pub(super) async fn get_one<R: Served>(
    s: AppState,
    resource: &Resource,
    name: String,
    q: ObjectParams,
) -> Result<Response, ApiError> {
    Ok(ok_json(
        &s.workloads
            .get::<R>(resource, q.namespace.as_deref(), &name)
            .await?,
    ))
}

/// The object as kubectl prints it with `-o json|yaml`, read live.
async fn output<R: Typed<Object: Serialize + Namespaced> + Served>(
    s: AppState,
    name: String,
    q: OutputParams,
) -> Result<Response, ApiError> {
    let output = s
        .workloads
        .object_output::<R>(q.namespace.as_deref(), &name, q.output_format.as_deref())
        .await?;
    Ok(printed(output))
}

fn kind_routes<R>(mount: &str) -> Declared<AppState>
where
    R: Served + Typed<Dto: ToSchema, Object: Serialize + Namespaced>,
{
    let kind = R::KIND;
    let list_path = format!("{mount}/{}", kind.resource());
    let get_path = format!("{mount}/{}/{{name}}", kind.resource());
    let output_path = format!("{get_path}/output");
    let list_route = get(
        |State(s): State<AppState>,
         headers: HeaderMap,
         visibility: Option<Extension<Visibility>>,
         ApiQuery(q): ApiQuery<ListParams>| {
            list::<R>(s, R::resource().clone(), headers, visibility, q)
        },
    );
    let get_route = get(
        |State(s): State<AppState>,
         ApiPath(name): ApiPath<String>,
         ApiQuery(q): ApiQuery<ObjectParams>| get_one::<R>(s, R::resource(), name, q),
    );
    let output_route = get(
        |State(s): State<AppState>,
         ApiPath(name): ApiPath<String>,
         ApiQuery(q): ApiQuery<OutputParams>| output::<R>(s, name, q),
    );
    let schemas = {
        let mut schemas = vec![(R::Dto::name().into_owned(), R::Dto::schema())];
        R::Dto::schemas(&mut schemas);
        schemas
    };
    let list_doc: UtoipaMethodRouter<AppState> = (
        schemas,
        paths(&list_path, list_operation::<R>()),
        list_route,
    );
    let get_doc: UtoipaMethodRouter<AppState> = (
        Vec::new(),
        paths(&get_path, get_operation::<R>()),
        get_route,
    );
    let output_doc: UtoipaMethodRouter<AppState> = (
        Vec::new(),
        paths(&output_path, output_operation::<R>()),
        output_route,
    );
    Declared::new()
        .routes(list_doc)
        .routes(get_doc)
        .routes(output_doc)
}

fn paths(path: &str, operation: OperationBuilder) -> Paths {
    let mut paths = Paths::new();
    paths
        .paths
        .insert(path.to_string(), PathItem::new(HttpMethod::Get, operation));
    paths
}

pub(super) fn error(description: &str) -> ResponseBuilder {
    ResponseBuilder::new().description(description).content(
        "application/json",
        Content::new(Some(Ref::from_schema_name("ErrorEnvelope"))),
    )
}

fn errors(responses: ResponsesBuilder, extra: &[(&str, &str)]) -> Responses {
    [
        (
            "400",
            "Invalid namespace, name, selector, sort or continue token",
        ),
        (
            "404",
            "Not found, or the namespace is not served by this k8sailor",
        ),
        (
            "503",
            "Caches not synced yet, or the apiserver unreachable (live source)",
        ),
    ]
    .iter()
    .chain(extra)
    .fold(responses, |r, (status, description)| {
        r.response(*status, error(description))
    })
    .build()
}

/// The schema of `Envelope<T>` (envelope.rs) around `data`: utoipa composes a generic
/// schema only for types it derived, and these DTOs reach apis through a trait.
fn envelope(data: RefOr<Schema>, list: bool) -> RefOr<Schema> {
    let mut object = ObjectBuilder::new()
        .property("code", ObjectBuilder::new().schema_type(Type::Integer))
        .required("code")
        .property("data", data)
        .required("data")
        .property("error", ObjectBuilder::new().schema_type(Type::String))
        .required("error");
    if list {
        object = object.property("metadata", Ref::from_schema_name("ListMeta"));
    }
    RefOr::T(Schema::Object(object.build()))
}

fn list_operation<R: Typed<Dto: ToSchema>>() -> OperationBuilder {
    let kind = R::KIND;
    let dto = RefOr::Ref(Ref::from_schema_name(R::Dto::name()));
    let items = envelope(ArrayBuilder::new().items(dto).into(), true);
    let ok = ResponseBuilder::new()
        .description(format!(
            "{}s, with list metadata; with `watch=true`, a stream of `{{\"type\":\"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR\",\"object\":{}}}` events",
            kind.name(),
            kind.name()
        ))
        .content("application/json", Content::new(Some(items)))
        .content("text/event-stream", Content::new(Some(String::schema())))
        .content("application/x-ndjson", Content::new(Some(String::schema())));
    OperationBuilder::new()
        .tag(kind.resource())
        .operation_id(Some(format!("list_{}", kind.resource())))
        .summary(Some(format!(
            "{}s selected by namespace, labels and fields (supported: {})",
            kind.name(),
            R::FIELDS.join(", ")
        )))
        .parameters(Some(ListParams::into_params(|| Some(ParameterIn::Query))))
        .responses(errors(
            ResponsesBuilder::new().response("200", ok),
            &[("410", "The continue token expired: restart the list")],
        ))
}

fn get_operation<R: Typed<Dto: ToSchema>>() -> OperationBuilder {
    let kind = R::KIND;
    let ok = ResponseBuilder::new()
        .description(format!("The {}", kind.name()))
        .content(
            "application/json",
            Content::new(Some(envelope(
                RefOr::Ref(Ref::from_schema_name(R::Dto::name())),
                false,
            ))),
        );
    let mut parameters = vec![name_parameter(kind)];
    parameters.extend(ObjectParams::into_params(|| Some(ParameterIn::Query)));
    OperationBuilder::new()
        .tag(kind.resource())
        .operation_id(Some(format!("get_{}", kind.resource())))
        .parameters(Some(parameters))
        .responses(errors(ResponsesBuilder::new().response("200", ok), &[]))
}

/// The `{name}` in an object's path.
fn name_parameter(kind: Kind) -> utoipa::openapi::path::Parameter {
    ParameterBuilder::new()
        .name("name")
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .description(Some(format!("{} name", kind.name())))
        .schema(Some(String::schema()))
        .build()
}

fn output_operation<R: Typed>() -> OperationBuilder {
    let kind = R::KIND;
    let ok = ResponseBuilder::new()
        .description(format!(
            "The {} as kubectl prints it (keys sorted, no managedFields), not enveloped",
            kind.name()
        ))
        .content(
            "application/json",
            Content::new(Some(ObjectBuilder::new().schema_type(Type::Object))),
        )
        .content("application/yaml", Content::new(Some(String::schema())));
    let mut parameters = vec![name_parameter(kind)];
    parameters.extend(OutputParams::into_params(|| Some(ParameterIn::Query)));
    OperationBuilder::new()
        .tag(kind.resource())
        .operation_id(Some(format!("output_{}", kind.resource())))
        .summary(Some(format!(
            "The {} object, read from the apiserver whatever the source",
            kind.name()
        )))
        .parameters(Some(parameters))
        .responses(errors(ResponsesBuilder::new().response("200", ok), &[]))
}
