//! Objects to create, as biz validated them: plain types, free of kube's, so that the rules
//! (biz) never see a Kubernetes type and the dao alone builds one from them.

/// A port given by number or by the name of a container's (or a Service's) port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortRef {
    Number(i32),
    Name(String),
}

impl std::fmt::Display for PortRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PortRef::Number(n) => write!(f, "{n}"),
            PortRef::Name(name) => f.write_str(name),
        }
    }
}

/// A Service to create: its selector is `app: <name>`, the label of the Pods of a Deployment
/// created through k8sailor (or `kubectl create deployment`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewService {
    pub name: String,
    pub shape: ServiceShape,
}

/// What the Service is: the type and what only that type has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServiceShape {
    /// A virtual IP the cluster chooses.
    ClusterIp(Vec<NewServicePort>),
    /// `clusterIP: None`: DNS answers the Pods' own addresses.
    Headless(Vec<NewServicePort>),
    /// A ClusterIP plus a port on every node; each port's node port fixed or chosen.
    NodePort(Vec<NodeServicePort>),
    /// A DNS CNAME to this host; no ports, no proxying.
    ExternalName(String),
}

/// One TCP port of a Service, named `<port>-<target>` unless given a name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewServicePort {
    pub name: String,
    pub port: i32,
    pub target_port: PortRef,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeServicePort {
    pub port: NewServicePort,
    /// None: the cluster chooses one from its node port range.
    pub node_port: Option<i32>,
}

/// An Ingress to create, one rule (one host, one path) per entry, without an ingress class:
/// the cluster's default class takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewIngress {
    pub name: String,
    pub rules: Vec<NewIngressRule>,
    pub tls: Vec<NewIngressTls>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewIngressRule {
    /// None: the rule matches every host.
    pub host: Option<String>,
    pub path: String,
    pub path_type: PathType,
    pub service: String,
    pub port: PortRef,
}

/// networking.k8s.io/v1 `pathType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathType {
    Exact,
    Prefix,
    ImplementationSpecific,
}

impl PathType {
    pub fn as_str(self) -> &'static str {
        match self {
            PathType::Exact => "Exact",
            PathType::Prefix => "Prefix",
            PathType::ImplementationSpecific => "ImplementationSpecific",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewIngressTls {
    pub hosts: Vec<String>,
    pub secret_name: String,
}

/// A Deployment to create, as biz validated it: one label `app: <name>` selects its Pods, as
/// `kubectl create deployment` makes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewDeployment {
    pub name: String,
    pub replicas: i32,
    pub containers: Vec<NewContainer>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewContainer {
    pub name: String,
    pub image: String,
    /// TCP container ports.
    pub ports: Vec<i32>,
}
