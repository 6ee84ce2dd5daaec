//! The original client's writes: scale, create and delete a Deployment, delete a Pod. Requests
//! are checked here; the apiserver's own refusals (conflicts, RBAC) come back as they are.

use selector::validation::is_dns1123_label;
use serde::Deserialize;

use super::{BizError, DeploymentView, Workloads, check_name, object_namespace};
use crate::k8sdao::WorkloadWriter;
use crate::model::{NewContainer, NewDeployment};

/// The body of `POST /deployments/{name}`, as the original client sends it.
#[derive(Clone, Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateDeployment {
    /// Default 1.
    pub replicas: Option<i32>,
    pub containers: Vec<ContainerRequest>,
}

#[derive(Clone, Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ContainerRequest {
    /// Default: the image's name without registry, tag or digest, as `kubectl create
    /// deployment` names it.
    pub name: Option<String>,
    pub image: String,
    /// TCP ports the container listens on.
    #[serde(default)]
    pub ports: Vec<i64>,
}

fn invalid(what: &'static str, value: impl ToString, rule: &'static str) -> BizError {
    BizError::Invalid {
        what,
        value: value.to_string(),
        rule,
    }
}

const REPLICAS_RULE: &str = "must be a whole number from 0 to 2147483647";

fn replicas(value: Option<&str>) -> Result<i32, BizError> {
    let value = value.ok_or_else(|| invalid("replicas", "", "is required"))?;
    value
        .parse::<i32>()
        .ok()
        .filter(|r| *r >= 0)
        .ok_or_else(|| invalid("replicas", value, REPLICAS_RULE))
}

/// `registry:5000/team/web-app:1.2@sha256:..` -> `web-app`; dots and underscores become dashes.
fn container_name_of(image: &str) -> String {
    let last = image.rsplit('/').next().unwrap_or(image);
    let bare = last.split(['@', ':']).next().unwrap_or(last);
    bare.replace(['_', '.'], "-")
}

fn new_deployment(name: &str, body: &CreateDeployment) -> Result<NewDeployment, BizError> {
    check_name(name)?;
    if name.len() > 63 {
        return Err(invalid(
            "name",
            name,
            "must be at most 63 characters: it becomes the value of the Pods' app label",
        ));
    }
    let replicas = body.replicas.unwrap_or(1);
    if replicas < 0 {
        return Err(invalid("replicas", replicas, REPLICAS_RULE));
    }
    if body.containers.is_empty() {
        return Err(invalid(
            "containers",
            "[]",
            "at least one container is required",
        ));
    }
    let mut containers: Vec<NewContainer> = Vec::with_capacity(body.containers.len());
    for c in &body.containers {
        if c.image.trim().is_empty() || c.image.chars().any(char::is_whitespace) {
            return Err(invalid(
                "image",
                &c.image,
                "must be a non-empty image reference without whitespace",
            ));
        }
        let mut name = match &c.name {
            Some(given) => given.clone(),
            None => container_name_of(&c.image),
        };
        if c.name.is_none() {
            // Several containers of one image: web, web-2, web-3, ...
            let base = name.clone();
            let mut n = 1;
            while containers.iter().any(|o| o.name == name) {
                n += 1;
                name = format!("{base}-{n}");
            }
        }
        if !is_dns1123_label(&name) {
            return Err(invalid(
                "container name",
                name,
                "must be a DNS-1123 label (give the container a \"name\")",
            ));
        }
        if containers.iter().any(|o| o.name == name) {
            return Err(invalid("container name", name, "must be unique in the Pod"));
        }
        let mut ports = Vec::with_capacity(c.ports.len());
        for &p in &c.ports {
            let port = i32::try_from(p)
                .ok()
                .filter(|p| (1..=65535).contains(p))
                .ok_or_else(|| invalid("port", p, "must be from 1 to 65535"))?;
            if ports.contains(&port) {
                return Err(invalid("port", p, "must be unique in the container"));
            }
            ports.push(port);
        }
        containers.push(NewContainer {
            name,
            image: c.image.clone(),
            ports,
        });
    }
    Ok(NewDeployment {
        name: name.to_string(),
        replicas,
        containers,
    })
}

impl<S: WorkloadWriter> Workloads<S> {
    /// Sets the Deployment's replicas; `replicas` is the raw query value.
    pub async fn scale_deployment(
        &self,
        namespace: Option<&str>,
        name: &str,
        replicas_value: Option<&str>,
    ) -> Result<bool, BizError> {
        let ns = object_namespace(namespace)?;
        check_name(name)?;
        let replicas = replicas(replicas_value)?;
        self.source.scale_deployment(ns, name, replicas).await?;
        Ok(true)
    }

    /// Creates a Deployment whose Pods carry `app: <name>`, as `kubectl create deployment` does.
    pub async fn create_deployment(
        &self,
        namespace: Option<&str>,
        name: &str,
        body: &CreateDeployment,
    ) -> Result<DeploymentView, BizError> {
        let ns = object_namespace(namespace)?;
        let new = new_deployment(name, body)?;
        Ok(DeploymentView(
            self.source.create_deployment(ns, &new).await?,
        ))
    }

    pub async fn delete_deployment(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<bool, BizError> {
        let ns = object_namespace(namespace)?;
        check_name(name)?;
        self.source.delete_deployment(ns, name).await?;
        Ok(true)
    }

    pub async fn delete_pod(&self, namespace: Option<&str>, name: &str) -> Result<bool, BizError> {
        let ns = object_namespace(namespace)?;
        check_name(name)?;
        self.source.delete_pod(ns, name).await?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(replicas: Option<i32>, images: &[&str]) -> CreateDeployment {
        CreateDeployment {
            replicas,
            containers: images
                .iter()
                .map(|i| ContainerRequest {
                    image: i.to_string(),
                    ports: vec![80],
                    ..Default::default()
                })
                .collect(),
        }
    }

    fn rule_of(e: BizError) -> String {
        e.to_string()
    }

    #[test]
    fn containers_are_named_after_their_images_like_kubectl_names_them() {
        let new = new_deployment(
            "web",
            &body(
                None,
                &[
                    "nginx:1.27",
                    "registry.local:5000/team/my_app@sha256:abc",
                    "nginx",
                ],
            ),
        )
        .unwrap();
        let names: Vec<_> = new.containers.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["nginx", "my-app", "nginx-2"]);
        assert_eq!(new.replicas, 1, "replicas default to 1");
        assert_eq!(new.containers[0].ports, [80]);
    }

    #[test]
    fn bad_bodies_are_refused_with_the_rule() {
        let cases: Vec<(CreateDeployment, &str)> = vec![
            (body(Some(-1), &["nginx"]), "invalid replicas \"-1\""),
            (body(None, &[]), "at least one container"),
            (body(None, &["bad image"]), "without whitespace"),
            (body(None, &[""]), "non-empty image"),
            (
                CreateDeployment {
                    replicas: None,
                    containers: vec![ContainerRequest {
                        image: "nginx".into(),
                        ports: vec![0],
                        ..Default::default()
                    }],
                },
                "invalid port \"0\"",
            ),
            (
                CreateDeployment {
                    replicas: None,
                    containers: vec![ContainerRequest {
                        image: "nginx".into(),
                        ports: vec![80, 80],
                        ..Default::default()
                    }],
                },
                "unique in the container",
            ),
            (
                CreateDeployment {
                    replicas: None,
                    containers: vec![
                        ContainerRequest {
                            name: Some("main".into()),
                            image: "a".into(),
                            ..Default::default()
                        },
                        ContainerRequest {
                            name: Some("main".into()),
                            image: "b".into(),
                            ..Default::default()
                        },
                    ],
                },
                "unique in the Pod",
            ),
            (
                CreateDeployment {
                    replicas: None,
                    containers: vec![ContainerRequest {
                        name: Some("Main".into()),
                        image: "a".into(),
                        ..Default::default()
                    }],
                },
                "DNS-1123 label",
            ),
        ];
        for (b, expected) in cases {
            let e = rule_of(new_deployment("web", &b).unwrap_err());
            assert!(e.contains(expected), "{expected:?} in {e:?}");
        }
        let e = rule_of(new_deployment("Web", &body(None, &["nginx"])).unwrap_err());
        assert!(e.contains("invalid name \"Web\""), "{e}");
        let long = "a".repeat(64);
        let e = rule_of(new_deployment(&long, &body(None, &["nginx"])).unwrap_err());
        assert!(e.contains("at most 63"), "{e}");
    }

    #[test]
    fn replicas_must_be_a_whole_number_of_zero_or_more() {
        assert_eq!(replicas(Some("0")).unwrap(), 0);
        assert_eq!(replicas(Some("12")).unwrap(), 12);
        for bad in ["-1", "1.5", "three", "", "99999999999"] {
            let e = replicas(Some(bad)).unwrap_err().to_string();
            assert!(e.contains("whole number"), "{bad}: {e}");
        }
        assert!(replicas(None).unwrap_err().to_string().contains("required"));
    }
}
