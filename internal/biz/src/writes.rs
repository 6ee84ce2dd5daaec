//! The original client's writes: scale, create and delete a Deployment, delete a Pod. Requests
//! are checked here; the apiserver's own refusals (conflicts, RBAC) come back as they are.

use std::collections::{HashMap, HashSet};

use selector::validation::is_dns1123_label;
use serde::Deserialize;

use super::{
    BizError, DeploymentView, OutputFormat, RecordView, Workloads, check_name, object_namespace,
    object_namespace_of, render_off_worker,
};
use k8sdao::{Namespaced, Served, WorkloadWriter};
use model::Typed;
use model::{NewContainer, NewDeployment};

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

/// Containers in one Deployment's Pod: far more than Pods hold in practice, few enough that
/// checking and naming them stays cheap.
pub const MAX_CONTAINERS: usize = 100;
/// Ports listed for one container.
pub const MAX_PORTS_PER_CONTAINER: usize = 100;
/// Bytes of one image reference: distribution's grammar allows 255 for the name and 128 for
/// the tag, plus a digest; four times the longest real reference.
pub const MAX_IMAGE_BYTES: usize = 1024;
/// Bytes of a container name: a DNS-1123 label.
pub const MAX_CONTAINER_NAME_BYTES: usize = 63;

fn too_large(what: &'static str, actual: usize, limit: usize, unit: &'static str) -> BizError {
    BizError::TooLarge {
        what,
        actual,
        limit,
        unit,
    }
}

/// The sizes of a create request, checked before any other work so that what a request costs
/// is bounded by the limits, whatever it holds.
fn check_sizes(body: &CreateDeployment) -> Result<(), BizError> {
    if body.containers.len() > MAX_CONTAINERS {
        return Err(too_large(
            "containers",
            body.containers.len(),
            MAX_CONTAINERS,
            "containers",
        ));
    }
    for c in &body.containers {
        if c.image.len() > MAX_IMAGE_BYTES {
            return Err(too_large("image", c.image.len(), MAX_IMAGE_BYTES, "bytes"));
        }
        if let Some(name) = &c.name
            && name.len() > MAX_CONTAINER_NAME_BYTES
        {
            return Err(too_large(
                "container name",
                name.len(),
                MAX_CONTAINER_NAME_BYTES,
                "bytes",
            ));
        }
        if c.ports.len() > MAX_PORTS_PER_CONTAINER {
            return Err(too_large(
                "ports",
                c.ports.len(),
                MAX_PORTS_PER_CONTAINER,
                "ports in one container",
            ));
        }
    }
    Ok(())
}

/// Names of the containers so far, and where the search for a free `base-N` resumes for each
/// base, so that naming n containers of one image costs n lookups, not n squared.
#[derive(Default)]
struct ContainerNames {
    taken: HashSet<String>,
    next_suffix: HashMap<String, u32>,
}

impl ContainerNames {
    /// Several containers of one image: web, web-2, web-3, ...
    fn derive(&mut self, base: String) -> String {
        let mut n = self.next_suffix.get(&base).copied().unwrap_or(1);
        let name = loop {
            let candidate = if n == 1 {
                base.clone()
            } else {
                format!("{base}-{n}")
            };
            if !self.taken.contains(&candidate) {
                break candidate;
            }
            n += 1;
        };
        self.next_suffix.insert(base, n + 1);
        name
    }
}

fn new_deployment(name: &str, body: &CreateDeployment) -> Result<NewDeployment, BizError> {
    check_sizes(body)?;
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
    let mut names = ContainerNames::default();
    let mut containers: Vec<NewContainer> = Vec::with_capacity(body.containers.len());
    for c in &body.containers {
        if c.image.trim().is_empty() || c.image.chars().any(char::is_whitespace) {
            return Err(invalid(
                "image",
                &c.image,
                "must be a non-empty image reference without whitespace",
            ));
        }
        let name = match &c.name {
            Some(given) => given.clone(),
            None => names.derive(container_name_of(&c.image)),
        };
        if !is_dns1123_label(&name) {
            return Err(invalid(
                "container name",
                name,
                "must be a DNS-1123 label (give the container a \"name\")",
            ));
        }
        if !names.taken.insert(name.clone()) {
            return Err(invalid("container name", name, "must be unique in the Pod"));
        }
        let mut ports = Vec::with_capacity(c.ports.len());
        let mut seen = HashSet::with_capacity(c.ports.len());
        for &p in &c.ports {
            let port = i32::try_from(p)
                .ok()
                .filter(|p| (1..=65535).contains(p))
                .ok_or_else(|| invalid("port", p, "must be from 1 to 65535"))?;
            if !seen.insert(port) {
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
    /// The object as kubectl prints it with `-o json` or `-o yaml`, read live: what was just
    /// written is what it shows.
    pub async fn object_output<R: Served + Typed<Object: serde::Serialize + Namespaced>>(
        &self,
        namespace: Option<&str>,
        name: &str,
        format: Option<&str>,
    ) -> Result<(OutputFormat, String), BizError> {
        let format = OutputFormat::parse(format)?;
        let ns = object_namespace_of(namespace, name)?;
        let json = self.source.object_json::<R>(ns, name).await?;
        Ok((format, render_off_worker(format, json).await?))
    }

    /// Sets the Deployment's replicas; `replicas` is the raw query value.
    pub async fn scale_deployment(
        &self,
        namespace: Option<&str>,
        name: &str,
        replicas_value: Option<&str>,
    ) -> Result<bool, BizError> {
        let ns = object_namespace_of(namespace, name)?;
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
        Ok(RecordView(self.source.create_deployment(ns, &new).await?))
    }

    pub async fn delete_deployment(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<bool, BizError> {
        let ns = object_namespace_of(namespace, name)?;
        self.source.delete_deployment(ns, name).await?;
        Ok(true)
    }

    pub async fn delete_pod(&self, namespace: Option<&str>, name: &str) -> Result<bool, BizError> {
        let ns = object_namespace_of(namespace, name)?;
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
    fn containers_of_one_image_get_the_next_free_suffix() {
        let mut b = body(None, &["a"; MAX_CONTAINERS]);
        b.containers[1].name = Some("a-3".into());
        let new = new_deployment("web", &b).unwrap();
        let names: Vec<_> = new.containers.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(&names[..4], ["a", "a-3", "a-2", "a-4"]);
        assert_eq!(names.last(), Some(&"a-100"));
        let unique: HashSet<_> = names.iter().collect();
        assert_eq!(unique.len(), MAX_CONTAINERS);
    }

    #[test]
    fn sizes_over_the_limits_are_refused_before_any_other_check() {
        // An invalid name and 2,000 containers of one image (each needing a name of its own):
        // the size is what is refused, so nothing else was looked at. What refusing costs is
        // bench/run's figure.
        let many = body(None, &["a"; 2000]);
        let e = new_deployment("Bad Name", &many).unwrap_err();
        assert!(matches!(e, BizError::TooLarge { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            "invalid containers: 2000 containers, over the limit of 100"
        );
        let long_image = "a".repeat(1_900_000);
        let e = new_deployment("Bad Name", &body(None, &[long_image.as_str()])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid image: 1900000 bytes, over the limit of 1024"
        );
        let mut ports = body(None, &["a"]);
        ports.containers[0].ports = (1..=101).collect();
        let e = new_deployment("web", &ports).unwrap_err().to_string();
        assert!(e.contains("over the limit of 100"), "{e}");
        let mut named = body(None, &["a"]);
        named.containers[0].name = Some("n".repeat(64));
        let e = new_deployment("web", &named).unwrap_err().to_string();
        assert!(e.contains("invalid container name: 64 bytes"), "{e}");
        // At the limits, the request is valid.
        let mut fullest = body(None, &["a"; MAX_CONTAINERS]);
        for c in &mut fullest.containers {
            c.ports = (1..=MAX_PORTS_PER_CONTAINER as i64).collect();
        }
        assert!(new_deployment("web", &fullest).is_ok());
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
