//! The OpenAPI description: route docs come from each handler's `#[utoipa::path]`; these
//! types describe answers whose Rust types are not themselves schemas (views over cached
//! records). A test checks that real answers carry exactly the documented keys.

use serde::Serialize;
use utoipa::ToSchema;

use biz::{DeploymentDto, PodDto};

/// A Pod as answered: the Pod DTO plus the Deployment that controls it.
#[derive(Serialize, ToSchema)]
#[schema(as = Pod)]
pub struct PodDoc {
    #[serde(flatten)]
    pub pod: PodDto,
    /// The Deployment that controls the Pod through its ReplicaSet; null when none does.
    pub deployment: Option<String>,
}

/// A Deployment as answered.
pub type DeploymentDoc = DeploymentDto;

/// A Kubernetes object as the apiserver stored it, as `kubectl get -o json` prints it
/// (without managedFields): its fields are the kind's own (the Kubernetes API reference).
#[derive(Serialize, ToSchema)]
#[schema(as = KubernetesObject)]
pub struct KubernetesObjectDoc {
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    pub kind: String,
    #[schema(value_type = Object)]
    pub metadata: serde_json::Value,
    #[schema(value_type = Object)]
    pub spec: serde_json::Value,
    #[schema(value_type = Option<Object>)]
    pub status: Option<serde_json::Value>,
}

pub const OPENAPI_PATH: &str = "/openapi.json";

/// Title and version, and the description's own route.
pub fn describe(openapi: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::path::{HttpMethod, OperationBuilder, PathItem};
    use utoipa::openapi::response::ResponseBuilder;
    openapi.paths.paths.insert(
        OPENAPI_PATH.to_string(),
        PathItem::new(
            HttpMethod::Get,
            OperationBuilder::new()
                .tag("operations")
                .summary(Some("This OpenAPI description"))
                .response(
                    "200",
                    ResponseBuilder::new().description("OpenAPI 3.1 JSON"),
                ),
        ),
    );
    openapi.info.title = "k8sailor".into();
    openapi.info.version = env!("CARGO_PKG_VERSION").into();
    openapi.info.description = Some(
        "A read-cache HTTP API for Kubernetes Deployments, Pods, ReplicaSets, Services and \
         Ingresses. Every JSON answer is \
         {code, data, error}: code 0 on success, the HTTP status otherwise. A server started \
         with --auth delegated needs 'Authorization: Bearer <token>' on every API route but \
         /ping: 401 without a token the apiserver accepts, 403 when the token's owner may \
         not, under the cluster's RBAC, do what the route does. Without --auth, a request \
         whose Host is not localhost, *.localhost, an IP address or a name in allowedHosts is \
         a 421 (against DNS rebinding; /livez and /readyz answer any Host). A list or watch \
         without namespace shows the namespaces where the owner may list (watch) the kind, and \
         says metadata.accessFiltered (a watch: in its BOOKMARK) when some were left out."
            .into(),
    );
}
