//! `POST /ingresses/{name}`: the original's endpoint DSL (`{"endpoints":
//! ["http://host[:port]/path[*]?backend=svc[:port]&tls=secret"]}`) and the same as structured
//! JSON, both parsed into one [`NewIngress`].
//!
//! Each endpoint is one rule: its host (the URL's port says nothing to an Ingress and is
//! dropped, the host kept: the original lost the host then, matching every host), its path
//! (a trailing `*` makes it a Prefix, otherwise Exact), its backend (default
//! `<ingressName>:80`; a port that is not a number is a port's name) and, with `tls`, the
//! Secret holding the host's certificate.

use serde::Deserialize;
use url::{Host, Url};

use super::services::{PortValue, port_ref, port_value};
use super::{
    BizError, RawObject, Workloads, check_name, check_sizes_of, entry_error, object_namespace,
};
use k8sdao::WorkloadWriter;
use model::{NewIngress, NewIngressRule, NewIngressTls, PathType, PortRef};
use selector::validation::{is_dns1035_label, is_dns1123_subdomain};

/// The body of `POST /ingresses/{name}`: either `endpoints` (the original's DSL) or the
/// structured form (`rules`, `tls`), never both.
#[derive(Clone, Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateIngress {
    /// The original's entries, one rule each:
    /// `http://host[:port]/path[*]?backend=service[:port|portName]&tls=secretName`.
    #[schema(example = json!(["http://shop.example.com/api*?backend=api:8080&tls=shop-cert"]))]
    pub endpoints: Option<Vec<String>>,
    /// Structured form: one rule per entry.
    pub rules: Option<Vec<IngressRuleRequest>>,
    /// Structured form: the Secrets terminating TLS for these hosts.
    pub tls: Option<Vec<IngressTlsRequest>>,
}

#[derive(Clone, Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct IngressRuleRequest {
    /// A DNS name, or `*.` and one; absent: every host.
    pub host: Option<String>,
    /// Default `/`.
    pub path: Option<String>,
    /// Default `Exact`.
    pub path_type: Option<PathTypeRequest>,
    pub backend: IngressBackendRequest,
}

/// networking.k8s.io/v1 `pathType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[schema(as = PathType)]
pub enum PathTypeRequest {
    Exact,
    Prefix,
    ImplementationSpecific,
}

impl From<PathTypeRequest> for PathType {
    fn from(p: PathTypeRequest) -> Self {
        match p {
            PathTypeRequest::Exact => PathType::Exact,
            PathTypeRequest::Prefix => PathType::Prefix,
            PathTypeRequest::ImplementationSpecific => PathType::ImplementationSpecific,
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct IngressBackendRequest {
    /// The Service's name.
    pub service: String,
    /// Its port, by number or name; default 80.
    pub port: Option<PortValue>,
}

#[derive(Clone, Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct IngressTlsRequest {
    pub hosts: Vec<String>,
    pub secret_name: String,
}

/// Rules (endpoints) of one Ingress, and TLS entries: far more than anyone writes by hand.
pub const MAX_INGRESS_RULES: usize = 100;
/// Hosts of one TLS entry.
pub const MAX_TLS_HOSTS: usize = 100;
/// Bytes of one endpoint, and of any one field of the structured form: a 253-byte host, a
/// long path and a query, with room to spare.
pub const MAX_ENDPOINT_BYTES: usize = 2048;

/// The backend port when none is given, as in the original.
const DEFAULT_BACKEND_PORT: i32 = 80;

fn check_host(host: &str) -> Result<String, String> {
    let bare = host.strip_prefix("*.").unwrap_or(host);
    if is_dns1123_subdomain(bare) {
        Ok(host.to_string())
    } else {
        Err(format!(
            "host {host:?} is no DNS name (lowercase alphanumerics, '-' and '.', optionally after \"*.\")"
        ))
    }
}

fn check_service(service: &str) -> Result<String, String> {
    if is_dns1035_label(service) {
        Ok(service.to_string())
    } else {
        Err(format!(
            "service {service:?} is no Service name (a DNS-1035 label: lowercase alphanumerics or '-', starting with a letter)"
        ))
    }
}

fn check_secret(secret: &str) -> Result<String, String> {
    if is_dns1123_subdomain(secret) {
        Ok(secret.to_string())
    } else {
        Err(format!(
            "tls Secret {secret:?} is no Secret name (a DNS-1123 subdomain)"
        ))
    }
}

/// `service[:port]`: an empty port is 80, as in the original.
fn parse_backend(backend: &str) -> Result<(String, PortRef), String> {
    let (service, port) = match backend.split_once(':') {
        Some((service, port)) => (service, Some(port).filter(|p| !p.is_empty())),
        None => (backend, None),
    };
    let port = match port {
        Some(port) => port_ref(port)?,
        None => PortRef::Number(DEFAULT_BACKEND_PORT),
    };
    Ok((check_service(service)?, port))
}

/// One endpoint: its rule and, with `tls`, its TLS entry.
fn parse_endpoint(
    ingress: &str,
    endpoint: &str,
) -> Result<(NewIngressRule, Option<NewIngressTls>), String> {
    let url = Url::parse(endpoint).map_err(|e| format!("is no URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("scheme {:?} is not http or https", url.scheme()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("has user information, which an Ingress cannot match".into());
    }
    if url.fragment().is_some() {
        return Err("has a fragment, which an Ingress cannot match".into());
    }
    let host = match url.host() {
        Some(Host::Domain(host)) => check_host(host)?,
        Some(Host::Ipv4(_) | Host::Ipv6(_)) => {
            return Err("host is an IP address: an Ingress rule's host is a DNS name".into());
        }
        None => return Err("has no host".into()),
    };
    let (path, path_type) = match url.path().strip_suffix('*') {
        Some("") => ("/".to_string(), PathType::Prefix),
        Some(prefix) => (prefix.to_string(), PathType::Prefix),
        None => (url.path().to_string(), PathType::Exact),
    };
    let (mut backend, mut tls) = (None, None);
    for (key, value) in url.query_pairs() {
        let slot = match key.as_ref() {
            "backend" => &mut backend,
            "tls" => &mut tls,
            other => {
                return Err(format!(
                    "query parameter {other:?} is unknown (backend, tls)"
                ));
            }
        };
        if slot.replace(value.into_owned()).is_some() {
            return Err(format!("query parameter {key:?} is given twice"));
        }
    }
    let (service, port) = match backend.as_deref() {
        Some("") => return Err("backend is empty".into()),
        Some(backend) => parse_backend(backend)?,
        // The original's default: a Service named as the Ingress.
        None => (
            check_service(ingress).map_err(|e| {
                format!("has no backend, and the default (the Ingress's name): {e}")
            })?,
            PortRef::Number(DEFAULT_BACKEND_PORT),
        ),
    };
    let tls = match tls.as_deref() {
        Some(secret) => Some(NewIngressTls {
            hosts: vec![host.clone()],
            secret_name: check_secret(secret)?,
        }),
        None => None,
    };
    let rule = NewIngressRule {
        host: Some(host),
        path,
        path_type,
        service,
        port,
    };
    Ok((rule, tls))
}

fn from_endpoints(ingress: &str, endpoints: &[String]) -> Result<NewIngress, BizError> {
    if endpoints.is_empty() {
        return Err(entry_error(
            "endpoints".into(),
            "at least one endpoint is required",
        ));
    }
    let mut rules = Vec::with_capacity(endpoints.len());
    let mut tls = Vec::new();
    for endpoint in endpoints {
        let (rule, secret) = parse_endpoint(ingress, endpoint)
            .map_err(|r| entry_error(format!("endpoints entry {endpoint:?}"), r))?;
        rules.push(rule);
        tls.extend(secret);
    }
    Ok(NewIngress {
        name: ingress.to_string(),
        rules,
        tls,
    })
}

fn structured_rule(rule: &IngressRuleRequest) -> Result<NewIngressRule, String> {
    let host = rule.host.as_deref().map(check_host).transpose()?;
    let path_type = rule.path_type.map_or(PathType::Exact, PathType::from);
    let path = rule.path.clone().unwrap_or_else(|| "/".to_string());
    if path_type != PathType::ImplementationSpecific && !path.starts_with('/') {
        return Err(format!(
            "path {path:?} must start with '/' (pathType {})",
            path_type.as_str()
        ));
    }
    let port = match &rule.backend.port {
        None => PortRef::Number(DEFAULT_BACKEND_PORT),
        Some(port) => port_value("backend port", port)?,
    };
    Ok(NewIngressRule {
        host,
        path,
        path_type,
        service: check_service(&rule.backend.service)?,
        port,
    })
}

fn structured_tls(tls: &IngressTlsRequest) -> Result<NewIngressTls, String> {
    let hosts = tls
        .hosts
        .iter()
        .map(|h| check_host(h))
        .collect::<Result<_, _>>()?;
    Ok(NewIngressTls {
        hosts,
        secret_name: check_secret(&tls.secret_name)?,
    })
}

fn from_structured(
    ingress: &str,
    rules: &[IngressRuleRequest],
    tls: &[IngressTlsRequest],
) -> Result<NewIngress, BizError> {
    if rules.is_empty() {
        return Err(entry_error("rules".into(), "at least one rule is required"));
    }
    let rules = rules
        .iter()
        .enumerate()
        .map(|(i, r)| structured_rule(r).map_err(|e| entry_error(format!("rules[{i}]"), e)))
        .collect::<Result<_, _>>()?;
    let tls = tls
        .iter()
        .enumerate()
        .map(|(i, t)| structured_tls(t).map_err(|e| entry_error(format!("tls[{i}]"), e)))
        .collect::<Result<_, _>>()?;
    Ok(NewIngress {
        name: ingress.to_string(),
        rules,
        tls,
    })
}

fn too_large(what: &'static str, actual: usize, limit: usize, unit: &'static str) -> BizError {
    BizError::TooLarge {
        what,
        actual,
        limit,
        unit,
    }
}

fn check_sizes(body: &CreateIngress) -> Result<(), BizError> {
    if let Some(endpoints) = &body.endpoints {
        check_sizes_of(
            ("endpoints", "endpoints entry"),
            endpoints,
            MAX_INGRESS_RULES,
            MAX_ENDPOINT_BYTES,
        )?;
    }
    let rules = body.rules.as_deref().unwrap_or_default();
    let tls = body.tls.as_deref().unwrap_or_default();
    for (what, count) in [("rules", rules.len()), ("tls", tls.len())] {
        if count > MAX_INGRESS_RULES {
            return Err(too_large(what, count, MAX_INGRESS_RULES, "entries"));
        }
    }
    if let Some(t) = tls.iter().find(|t| t.hosts.len() > MAX_TLS_HOSTS) {
        return Err(too_large(
            "tls hosts",
            t.hosts.len(),
            MAX_TLS_HOSTS,
            "hosts",
        ));
    }
    let texts = rules
        .iter()
        .flat_map(|r| {
            let port = match &r.backend.port {
                Some(PortValue::Name(name)) => Some(name),
                _ => None,
            };
            r.host
                .iter()
                .chain(&r.path)
                .chain([&r.backend.service])
                .chain(port)
        })
        .chain(
            tls.iter()
                .flat_map(|t| t.hosts.iter().chain([&t.secret_name])),
        );
    for text in texts {
        if text.len() > MAX_ENDPOINT_BYTES {
            return Err(too_large(
                "ingress field",
                text.len(),
                MAX_ENDPOINT_BYTES,
                "bytes",
            ));
        }
    }
    Ok(())
}

/// The Ingress `POST /ingresses/{name}` asks for: sizes first, then the name, then the form.
pub(crate) fn new_ingress(name: &str, body: &CreateIngress) -> Result<NewIngress, BizError> {
    check_sizes(body)?;
    check_name(name)?;
    match (&body.endpoints, &body.rules, &body.tls) {
        (Some(endpoints), None, None) => from_endpoints(name, endpoints),
        (None, Some(rules), tls) => {
            from_structured(name, rules, tls.as_deref().unwrap_or_default())
        }
        (Some(_), _, _) => Err(entry_error(
            "body".into(),
            "give either \"endpoints\" (the DSL) or \"rules\" and \"tls\", not both",
        )),
        (None, None, _) => Err(entry_error(
            "body".into(),
            "\"endpoints\" or \"rules\" is required",
        )),
    }
}

impl<S: WorkloadWriter> Workloads<S> {
    /// Creates the Ingress; the answer is the object as the apiserver stored it.
    pub async fn create_ingress(
        &self,
        namespace: Option<&str>,
        name: &str,
        body: &CreateIngress,
    ) -> Result<RawObject, BizError> {
        let ns = object_namespace(namespace)?;
        let new = new_ingress(name, body)?;
        Ok(RawObject(self.source.create_ingress(ns, &new).await?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dsl(endpoints: &[&str]) -> Result<NewIngress, String> {
        let body = CreateIngress {
            endpoints: Some(endpoints.iter().map(|e| e.to_string()).collect()),
            ..Default::default()
        };
        new_ingress("shop", &body).map_err(|e| e.to_string())
    }

    fn rule(
        host: &str,
        path: &str,
        path_type: PathType,
        service: &str,
        port: PortRef,
    ) -> NewIngressRule {
        NewIngressRule {
            host: Some(host.into()),
            path: path.into(),
            path_type,
            service: service.into(),
            port,
        }
    }

    #[test]
    fn every_endpoint_form_makes_its_rule() {
        let n = PortRef::Number;
        let cases = [
            (
                "http://a.example.com/api*?backend=api:8080",
                rule("a.example.com", "/api", PathType::Prefix, "api", n(8080)),
            ),
            (
                "http://a.example.com/api?backend=api:http",
                rule(
                    "a.example.com",
                    "/api",
                    PathType::Exact,
                    "api",
                    PortRef::Name("http".into()),
                ),
            ),
            // Without a port the host stays (the original's bug made it every host).
            (
                "http://a.example.com",
                rule("a.example.com", "/", PathType::Exact, "shop", n(80)),
            ),
            (
                "http://a.example.com:8080/x",
                rule("a.example.com", "/x", PathType::Exact, "shop", n(80)),
            ),
            (
                "https://a.example.com/*?backend=api",
                rule("a.example.com", "/", PathType::Prefix, "api", n(80)),
            ),
            (
                "http://a.example.com/v1/?backend=api:",
                rule("a.example.com", "/v1/", PathType::Exact, "api", n(80)),
            ),
            (
                "http://A.Example.COM/",
                rule("a.example.com", "/", PathType::Exact, "shop", n(80)),
            ),
            (
                "http://*.example.com/*",
                rule("*.example.com", "/", PathType::Prefix, "shop", n(80)),
            ),
        ];
        for (endpoint, expected) in cases {
            let ingress = dsl(&[endpoint]).unwrap_or_else(|e| panic!("{endpoint}: {e}"));
            assert_eq!(ingress.rules, [expected], "{endpoint}");
            assert!(ingress.tls.is_empty());
        }
        let with_tls = dsl(&[
            "https://a.example.com/?tls=a-cert",
            "http://b.example.com/?backend=b&tls=b-cert",
            "http://c.example.com/",
        ])
        .unwrap();
        assert_eq!(with_tls.rules.len(), 3);
        assert_eq!(
            with_tls.tls,
            [
                NewIngressTls {
                    hosts: vec!["a.example.com".into()],
                    secret_name: "a-cert".into()
                },
                NewIngressTls {
                    hosts: vec!["b.example.com".into()],
                    secret_name: "b-cert".into()
                },
            ]
        );
    }

    #[test]
    fn every_endpoint_error_names_its_entry_and_why() {
        let cases: &[(&[&str], &str)] = &[
            (&[], "invalid endpoints: at least one endpoint is required"),
            (
                &["a.example.com/x"],
                "invalid endpoints entry \"a.example.com/x\": is no URL",
            ),
            (
                &["ftp://a.example.com/"],
                "scheme \"ftp\" is not http or https",
            ),
            (&["http://"], "is no URL: empty host"),
            (&["http://10.0.0.1/"], "host is an IP address"),
            (&["http://[::1]/"], "host is an IP address"),
            (&["http://u:p@a.example.com/"], "user information"),
            (&["http://a.example.com/#top"], "fragment"),
            (
                &["http://a_b.example.com/"],
                "host \"a_b.example.com\" is no DNS name",
            ),
            (
                &["http://a.example.com/?backend=api:0"],
                "invalid endpoints entry \"http://a.example.com/?backend=api:0\": port \"0\" must be a number from 1 to 65535",
            ),
            (
                &["http://a.example.com/?backend=api:99999"],
                "port \"99999\" must be",
            ),
            (
                &["http://a.example.com/?backend=api:Bad_Port"],
                "port \"Bad_Port\" is neither a number",
            ),
            (
                &["http://a.example.com/?backend=9api"],
                "service \"9api\" is no Service name",
            ),
            (&["http://a.example.com/?backend="], "backend is empty"),
            (
                &["http://a.example.com/?backend=a&backend=b"],
                "query parameter \"backend\" is given twice",
            ),
            (
                &["http://a.example.com/?svc=a"],
                "query parameter \"svc\" is unknown",
            ),
            (
                &["http://a.example.com/?tls=Bad_Secret"],
                "tls Secret \"Bad_Secret\" is no Secret name",
            ),
            (
                &[
                    "http://a.example.com/",
                    "http://b.example.com/?backend=api:x_y",
                ],
                "invalid endpoints entry \"http://b.example.com/?backend=api:x_y\"",
            ),
        ];
        for (endpoints, expected) in cases {
            let e = dsl(endpoints).unwrap_err();
            assert!(e.contains(expected), "{endpoints:?}: {expected:?} in {e:?}");
        }
    }

    #[test]
    fn the_structured_form_makes_the_same_ingress() {
        let parse = |json: serde_json::Value| {
            let body: CreateIngress = serde_json::from_value(json).unwrap();
            new_ingress("shop", &body).map_err(|e| e.to_string())
        };
        assert_eq!(
            parse(serde_json::json!({
                "rules": [{"host": "a.example.com", "path": "/api", "pathType": "Prefix",
                           "backend": {"service": "api", "port": 8080}},
                          {"host": "b.example.com", "backend": {"service": "shop"}}],
                "tls": [{"hosts": ["a.example.com"], "secretName": "a-cert"}]}))
            .unwrap(),
            dsl(&[
                "http://a.example.com/api*?backend=api:8080&tls=a-cert",
                "http://b.example.com"
            ])
            .unwrap()
        );
        let every_host =
            parse(serde_json::json!({"rules": [{"backend": {"service": "api", "port": "http"}}]}))
                .unwrap();
        assert_eq!(
            every_host.rules,
            [NewIngressRule {
                host: None,
                path: "/".into(),
                path_type: PathType::Exact,
                service: "api".into(),
                port: PortRef::Name("http".into())
            }]
        );
        let errors = [
            (
                serde_json::json!({}),
                "invalid body: \"endpoints\" or \"rules\" is required",
            ),
            (
                serde_json::json!({"tls": []}),
                "invalid body: \"endpoints\" or \"rules\"",
            ),
            (
                serde_json::json!({"endpoints": ["http://a.b/"], "rules": []}),
                "invalid body: give either",
            ),
            (
                serde_json::json!({"endpoints": ["http://a.b/"], "tls": []}),
                "invalid body: give either",
            ),
            (
                serde_json::json!({"rules": []}),
                "invalid rules: at least one rule",
            ),
            (
                serde_json::json!({"rules": [{"backend": {"service": "a"}}, {"path": "api", "backend": {"service": "a"}}]}),
                "invalid rules[1]: path \"api\" must start with '/'",
            ),
            (
                serde_json::json!({"rules": [{"backend": {"service": "a", "port": 0}}]}),
                "invalid rules[0]: backend port 0 must be",
            ),
            (
                serde_json::json!({"rules": [{"backend": {"service": "a", "port": "X"}}]}),
                "invalid rules[0]: port \"X\" is neither a number",
            ),
            (
                serde_json::json!({"rules": [{"host": "-a", "backend": {"service": "a"}}]}),
                "invalid rules[0]: host \"-a\" is no DNS name",
            ),
            (
                serde_json::json!({"rules": [{"backend": {"service": "A"}}]}),
                "service \"A\" is no Service name",
            ),
            (
                serde_json::json!({"rules": [{"backend": {"service": "a"}}], "tls": [{"hosts": ["a.b"], "secretName": ""}]}),
                "invalid tls[0]: tls Secret \"\"",
            ),
        ];
        for (json, expected) in errors {
            let e = parse(json.clone()).unwrap_err();
            assert!(e.contains(expected), "{json}: {expected:?} in {e:?}");
        }
        for unknown in [
            serde_json::json!({"rules": [{"backend": {"service": "a"}, "pathType": "Regex"}]}),
            serde_json::json!({"rules": [{"backend": {"service": "a"}, "class": "nginx"}]}),
        ] {
            assert!(serde_json::from_value::<CreateIngress>(unknown).is_err());
        }
    }

    #[test]
    fn names_and_sizes_are_checked_first() {
        let body = |n: usize, len: usize| CreateIngress {
            endpoints: Some(vec![format!("http://a.example.com/{}", "x".repeat(len)); n]),
            ..Default::default()
        };
        let e = new_ingress("Shop", &body(1, 1)).unwrap_err().to_string();
        assert!(e.contains("invalid name \"Shop\""), "{e}");
        let e = new_ingress("shop.v1", &body(1, 1)).unwrap_err().to_string();
        assert!(e.contains("has no backend, and the default (the Ingress's name): service \"shop.v1\" is no Service name"), "{e}");
        let named = CreateIngress {
            endpoints: Some(vec!["http://a.example.com/?backend=shop".into()]),
            ..Default::default()
        };
        assert!(new_ingress("shop.v1", &named).is_ok());
        let e = new_ingress("Shop", &body(101, 1)).unwrap_err().to_string();
        assert_eq!(e, "invalid endpoints: 101 entries, over the limit of 100");
        let e = new_ingress("shop", &body(1, 3000)).unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid endpoints entry: 3021 bytes, over the limit of 2048"
        );
        let hosts = CreateIngress {
            rules: Some(vec![]),
            tls: Some(vec![IngressTlsRequest {
                hosts: vec!["a".into(); 101],
                secret_name: "s".into(),
            }]),
            ..Default::default()
        };
        let e = new_ingress("shop", &hosts).unwrap_err().to_string();
        assert_eq!(e, "invalid tls hosts: 101 hosts, over the limit of 100");
        assert!(new_ingress("shop", &body(MAX_INGRESS_RULES, 100)).is_ok());
    }

    #[test]
    fn structured_rules_take_every_path_type_and_refuse_too_many_or_an_overlong_field() {
        let body = |path_type: &str, service: String| -> CreateIngress {
            serde_json::from_value(serde_json::json!({"rules": [{
                "host": "shop.example.com", "path": "/api", "pathType": path_type,
                "backend": {"service": service, "port": 80}
            }]}))
            .unwrap()
        };
        for (given, want) in [
            ("Exact", PathType::Exact),
            ("Prefix", PathType::Prefix),
            ("ImplementationSpecific", PathType::ImplementationSpecific),
        ] {
            let new = new_ingress("shop", &body(given, "api".into())).unwrap();
            assert_eq!(new.rules[0].path_type, want, "{given}");
        }
        let rules: Vec<_> = (0..=MAX_INGRESS_RULES)
            .map(|_| serde_json::json!({"backend": {"service": "api"}}))
            .collect();
        let many: CreateIngress =
            serde_json::from_value(serde_json::json!({"rules": rules})).unwrap();
        assert_eq!(
            new_ingress("shop", &many).unwrap_err().to_string(),
            format!(
                "invalid rules: {} entries, over the limit of {MAX_INGRESS_RULES}",
                MAX_INGRESS_RULES + 1
            )
        );
        let long = "a".repeat(MAX_ENDPOINT_BYTES + 1);
        let e = new_ingress("shop", &body("Exact", long))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            format!(
                "invalid ingress field: {} bytes, over the limit of {MAX_ENDPOINT_BYTES}",
                MAX_ENDPOINT_BYTES + 1
            )
        );
    }
}
