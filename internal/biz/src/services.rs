//! `POST /services/{name}`: the original's port DSL (`{"services": ["80:8080", ...]}`) and the
//! same as structured JSON, both parsed into one [`NewService`].
//!
//! DSL entries: `port` or `port:target` (ClusterIP), `!port:target` (NodePort, node port chosen
//! by the cluster), `!node:port:target` (that node port), `#port:target` (headless),
//! `@host` (ExternalName: the first such entry makes the Service, the others are dropped).
//! One `!` or `#` entry sets the type of the whole Service. A target is a number or the name
//! of a container port; ports are named `<port>-<target>`.

use std::collections::HashSet;

use serde::Deserialize;

use super::{BizError, RawObject, Workloads, check_sizes_of, entry_error, object_namespace};
use k8sdao::WorkloadWriter;
use model::{NewService, NewServicePort, NodeServicePort, PortRef, ServiceShape};
use selector::validation::{
    is_dns1035_label, is_dns1123_label, is_dns1123_subdomain, is_port_name,
};

/// The body of `POST /services/{name}`: either `services` (the original's DSL) or the
/// structured form (`type`, `ports`, `externalName`), never both.
#[derive(Clone, Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateService {
    /// The original's entries: `"80"`, `"80:8080"`, `"80:http"` (ClusterIP); `"!80:8080"`
    /// (NodePort), `"!30080:80:8080"` (NodePort 30080); `"#80:8080"` (headless);
    /// `"@db.example.com"` (ExternalName, drops every other entry).
    #[schema(example = json!(["80:8080", "!30080:443:8443"]))]
    pub services: Option<Vec<String>>,
    /// Structured form; default ClusterIP.
    #[serde(rename = "type")]
    pub service_type: Option<ServiceType>,
    /// Structured form: the ports (none only for Headless and ExternalName).
    pub ports: Option<Vec<ServicePortRequest>>,
    /// Structured form, ExternalName only: the DNS name the Service's name points to.
    pub external_name: Option<String>,
}

/// The kinds of Service the API creates. `Headless` is a ClusterIP Service with
/// `clusterIP: None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
pub enum ServiceType {
    #[serde(rename = "ClusterIP")]
    ClusterIp,
    NodePort,
    Headless,
    ExternalName,
}

/// One TCP port of a Service.
#[derive(Clone, Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ServicePortRequest {
    /// A number (a string of digits is read as one).
    pub port: PortValue,
    /// The Pods' port: a number or a container port's name; default `port`.
    pub target_port: Option<PortValue>,
    /// NodePort only: the port on every node, a number; default one the cluster chooses.
    pub node_port: Option<PortValue>,
    /// Default `<port>-<targetPort>`.
    pub name: Option<String>,
}

/// A port by number or by name.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum PortValue {
    Number(i64),
    Name(String),
}

/// Ports of one Service, DSL entries or structured; a Service with more is no service a
/// person writes by hand, and checking stays cheap.
pub const MAX_SERVICE_PORTS: usize = 100;
/// Bytes of one DSL entry: `@` and a 253-byte DNS name, with room to spare.
pub const MAX_SERVICE_ENTRY_BYTES: usize = 256;

const PORT_RULE: &str = "must be a number from 1 to 65535";

/// A port number written as text: digits only, so `+80` or `080x` are no ports.
fn number_in(what: &str, text: &str) -> Result<i32, String> {
    text.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| text.parse::<i32>().ok())
        .flatten()
        .filter(|p| (1..=65535).contains(p))
        .ok_or_else(|| format!("{what} {text:?} {PORT_RULE}"))
}

fn port_number(text: &str) -> Result<i32, String> {
    number_in("port", text)
}

fn port_in_range(what: &str, value: i64) -> Result<i32, String> {
    i32::try_from(value)
        .ok()
        .filter(|p| (1..=65535).contains(p))
        .ok_or_else(|| format!("{what} {value} {PORT_RULE}"))
}

/// A port that must be a number, given as one or as digits.
fn number_of(what: &str, value: &PortValue) -> Result<i32, String> {
    match value {
        PortValue::Number(n) => port_in_range(what, *n),
        PortValue::Name(text) => number_in(what, text),
    }
}

/// A port that may be named: digits are a number, anything else a port's name.
pub(crate) fn port_ref(text: &str) -> Result<PortRef, String> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return port_number(text).map(PortRef::Number);
    }
    port_name(text).map(PortRef::Name)
}

fn port_name(text: &str) -> Result<String, String> {
    if is_port_name(text) {
        Ok(text.to_string())
    } else {
        Err(format!(
            "port {text:?} is neither a number from 1 to 65535 nor a port name (at most 15 lowercase alphanumerics or '-', with a letter)"
        ))
    }
}

/// A port by number or name, as the structured forms give it (`what` names it in errors).
pub(crate) fn port_value(what: &str, value: &PortValue) -> Result<PortRef, String> {
    match value {
        PortValue::Number(n) => port_in_range(what, *n).map(PortRef::Number),
        PortValue::Name(text) => port_ref(text),
    }
}

fn service_port(port: i32, target_port: PortRef) -> NewServicePort {
    NewServicePort {
        name: format!("{port}-{target_port}"),
        port,
        target_port,
    }
}

/// The type one DSL entry asks the Service to have.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Marker {
    /// No prefix: whatever type another entry sets, ClusterIP if none does.
    Plain,
    NodePort,
    Headless,
}

/// What one DSL entry asks for.
enum Entry {
    Port(Marker, NodeServicePort),
    ExternalName(String),
}

fn external_name(host: &str) -> Result<String, String> {
    // A fully qualified name may end with the root's dot, as the apiserver allows.
    let bare = host.strip_suffix('.').unwrap_or(host);
    if is_dns1123_subdomain(bare) {
        Ok(host.to_string())
    } else {
        Err(format!(
            "{host:?} is no DNS name: lowercase alphanumerics, '-' and '.', at most 253"
        ))
    }
}

fn parse_entry(entry: &str) -> Result<Entry, String> {
    if let Some(host) = entry.strip_prefix('@') {
        return external_name(host).map(Entry::ExternalName);
    }
    let (marker, rest) = if let Some(rest) = entry.strip_prefix('!') {
        (Marker::NodePort, rest)
    } else if let Some(rest) = entry.strip_prefix('#') {
        (Marker::Headless, rest)
    } else if entry.is_empty() {
        return Err("is empty".into());
    } else {
        (Marker::Plain, entry)
    };
    if rest.starts_with(['!', '#', '@']) {
        return Err("takes one of '!' (NodePort), '#' (headless), '@' (ExternalName)".into());
    }
    let parts: Vec<&str> = rest.split(':').collect();
    let (node, port, target) = match parts.as_slice() {
        [port] => (None, *port, *port),
        [port, target] => (None, *port, *target),
        [node, port, target] if marker == Marker::NodePort => (Some(*node), *port, *target),
        [_, _, _] => {
            return Err(
                "node:port:target needs the '!' prefix: only a NodePort Service has node ports"
                    .into(),
            );
        }
        _ => return Err("has more than three ':'-separated parts".into()),
    };
    let port = service_port(port_number(port)?, port_ref(target)?);
    let node_port = node.map(port_number).transpose()?;
    Ok(Entry::Port(marker, NodeServicePort { port, node_port }))
}

/// The Service of these ports, by the type they share.
fn shape_of(marker: Marker, ports: Vec<NodeServicePort>) -> ServiceShape {
    let plain = || ports.iter().map(|p| p.port.clone()).collect();
    match marker {
        Marker::Plain => ServiceShape::ClusterIp(plain()),
        Marker::Headless => ServiceShape::Headless(plain()),
        Marker::NodePort => ServiceShape::NodePort(ports),
    }
}

/// The Service the DSL entries describe.
fn from_entries(entries: &[String]) -> Result<ServiceShape, BizError> {
    let what = |entry: &str| format!("services entry {entry:?}");
    if entries.is_empty() {
        return Err(entry_error(
            "services".into(),
            "at least one entry is required",
        ));
    }
    let mut ports = Vec::with_capacity(entries.len());
    let mut seen = PortSet::default();
    // One '!' or '#' entry sets the type of the whole Service, and both cannot.
    let mut typed: Option<(Marker, &str)> = None;
    for entry in entries {
        let (marker, port) = match parse_entry(entry).map_err(|r| entry_error(what(entry), r))? {
            // The original's rule: the first ExternalName entry is the whole Service.
            Entry::ExternalName(host) => return Ok(ServiceShape::ExternalName(host)),
            Entry::Port(marker, port) => (marker, port),
        };
        match typed {
            Some((set, by)) if marker != Marker::Plain && marker != set => {
                return Err(entry_error(
                    what(entry),
                    format!("a Service is NodePort or headless, not both ({by:?} set it)"),
                ));
            }
            None if marker != Marker::Plain => typed = Some((marker, entry)),
            _ => {}
        }
        seen.add(&port.port, port.node_port)
            .map_err(|r| entry_error(what(entry), r))?;
        ports.push(port);
    }
    let marker = typed.map_or(Marker::Plain, |(marker, _)| marker);
    Ok(shape_of(marker, ports))
}

/// The ports, names and node ports seen so far: each may appear once in a Service.
#[derive(Default)]
struct PortSet {
    ports: HashSet<i32>,
    names: HashSet<String>,
    node_ports: HashSet<i32>,
}

impl PortSet {
    fn add(&mut self, port: &NewServicePort, node_port: Option<i32>) -> Result<(), String> {
        if !self.ports.insert(port.port) {
            return Err(format!("port {} is given twice", port.port));
        }
        if !self.names.insert(port.name.clone()) {
            return Err(format!("port name {:?} is given twice", port.name));
        }
        if let Some(node) = node_port
            && !self.node_ports.insert(node)
        {
            return Err(format!("node port {node} is given twice"));
        }
        Ok(())
    }
}

fn external_name_only(
    body: &CreateService,
    ports: &[ServicePortRequest],
) -> Result<ServiceShape, BizError> {
    if !ports.is_empty() {
        return Err(entry_error(
            "ports".into(),
            "an ExternalName Service has no ports",
        ));
    }
    let host = body.external_name.as_deref().unwrap_or_default();
    external_name(host)
        .map(ServiceShape::ExternalName)
        .map_err(|r| entry_error("externalName".into(), r))
}

/// The Service the structured form describes.
fn from_structured(body: &CreateService) -> Result<ServiceShape, BizError> {
    let service_type = body.service_type.unwrap_or(ServiceType::ClusterIp);
    let ports = body.ports.as_deref().unwrap_or_default();
    let marker = match service_type {
        ServiceType::ClusterIp => Marker::Plain,
        ServiceType::Headless => Marker::Headless,
        ServiceType::NodePort => Marker::NodePort,
        ServiceType::ExternalName => return external_name_only(body, ports),
    };
    if body.external_name.is_some() {
        return Err(entry_error(
            "externalName".into(),
            "only an ExternalName Service has one",
        ));
    }
    if ports.is_empty() && marker != Marker::Headless {
        return Err(entry_error("ports".into(), "at least one port is required"));
    }
    let mut seen = PortSet::default();
    let mut out = Vec::with_capacity(ports.len());
    for (i, p) in ports.iter().enumerate() {
        let what = || format!("ports[{i}]");
        let checked = (|| {
            let port = number_of("port", &p.port)?;
            let target = match &p.target_port {
                Some(t) => port_value("targetPort", t)?,
                None => PortRef::Number(port),
            };
            let mut new = service_port(port, target);
            if let Some(name) = &p.name {
                if !is_dns1123_label(name) {
                    return Err(format!("name {name:?} must be a DNS-1123 label"));
                }
                new.name = name.clone();
            }
            let node_port = match &p.node_port {
                Some(_) if marker != Marker::NodePort => {
                    return Err("nodePort needs type NodePort".into());
                }
                Some(n) => Some(number_of("nodePort", n)?),
                None => None,
            };
            seen.add(&new, node_port)?;
            Ok(NodeServicePort {
                port: new,
                node_port,
            })
        })();
        out.push(checked.map_err(|r| entry_error(what(), r))?);
    }
    Ok(shape_of(marker, out))
}

fn check_sizes(body: &CreateService) -> Result<(), BizError> {
    if let Some(entries) = &body.services {
        check_sizes_of(
            ("services", "services entry"),
            entries,
            MAX_SERVICE_PORTS,
            MAX_SERVICE_ENTRY_BYTES,
        )?;
    }
    if let Some(ports) = &body.ports
        && ports.len() > MAX_SERVICE_PORTS
    {
        return Err(BizError::TooLarge {
            what: "ports",
            actual: ports.len(),
            limit: MAX_SERVICE_PORTS,
            unit: "ports",
        });
    }
    let ports = body.ports.iter().flatten();
    let names = ports.flat_map(|p| {
        let target = match &p.target_port {
            Some(PortValue::Name(name)) => Some(name),
            _ => None,
        };
        p.name.iter().chain(target)
    });
    if let Some(text) = body
        .external_name
        .iter()
        .chain(names)
        .find(|t| t.len() > MAX_SERVICE_ENTRY_BYTES)
    {
        return Err(BizError::TooLarge {
            what: "service field",
            actual: text.len(),
            limit: MAX_SERVICE_ENTRY_BYTES,
            unit: "bytes",
        });
    }
    Ok(())
}

/// The Service `POST /services/{name}` asks for: sizes first, then the name, then the form.
pub(crate) fn new_service(name: &str, body: &CreateService) -> Result<NewService, BizError> {
    check_sizes(body)?;
    if !is_dns1035_label(name) {
        return Err(BizError::Invalid {
            what: "name",
            value: name.to_string(),
            rule: "must be a DNS-1035 label: at most 63 lowercase alphanumerics or '-', starting with a letter and ending with an alphanumeric",
        });
    }
    let structured =
        body.service_type.is_some() || body.ports.is_some() || body.external_name.is_some();
    let shape = match (&body.services, structured) {
        (Some(_), true) => {
            return Err(entry_error(
                "body".into(),
                "give either \"services\" (the DSL) or \"type\", \"ports\" and \"externalName\", not both",
            ));
        }
        (Some(entries), false) => from_entries(entries)?,
        (None, true) => from_structured(body)?,
        (None, false) => {
            return Err(entry_error(
                "body".into(),
                "\"services\" or \"ports\" (or \"type\": \"ExternalName\") is required",
            ));
        }
    };
    Ok(NewService {
        name: name.to_string(),
        shape,
    })
}

impl<S: WorkloadWriter> Workloads<S> {
    /// Creates the Service; the answer is the object as the apiserver stored it.
    pub async fn create_service(
        &self,
        namespace: Option<&str>,
        name: &str,
        body: &CreateService,
    ) -> Result<RawObject, BizError> {
        let ns = object_namespace(namespace)?;
        let new = new_service(name, body)?;
        Ok(RawObject(self.source.create_service(ns, &new).await?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dsl(entries: &[&str]) -> Result<NewService, String> {
        let body = CreateService {
            services: Some(entries.iter().map(|e| e.to_string()).collect()),
            ..Default::default()
        };
        new_service("web", &body).map_err(|e| e.to_string())
    }

    fn port(port: i32, target: PortRef) -> NewServicePort {
        service_port(port, target)
    }

    #[test]
    fn every_dsl_form_makes_its_service() {
        let n = PortRef::Number;
        assert_eq!(
            dsl(&["80", "443:8443", "81:http"]).unwrap().shape,
            ServiceShape::ClusterIp(vec![
                port(80, n(80)),
                port(443, n(8443)),
                port(81, PortRef::Name("http".into())),
            ])
        );
        assert_eq!(
            dsl(&["80:8080"]).unwrap().shape,
            ServiceShape::ClusterIp(vec![port(80, n(8080))])
        );
        assert_eq!(
            dsl(&["81:8081", "!80:8080", "!30080:443:8443"])
                .unwrap()
                .shape,
            ServiceShape::NodePort(vec![
                NodeServicePort {
                    port: port(81, n(8081)),
                    node_port: None
                },
                NodeServicePort {
                    port: port(80, n(8080)),
                    node_port: None
                },
                NodeServicePort {
                    port: port(443, n(8443)),
                    node_port: Some(30080)
                },
            ])
        );
        assert_eq!(
            dsl(&["#80:8080", "81"]).unwrap().shape,
            ServiceShape::Headless(vec![port(80, n(8080)), port(81, n(81))])
        );
        // The first '@' entry is the whole Service, whatever comes before or after.
        assert_eq!(
            dsl(&["80:8080", "@db.example.com", "@other.example.com", "!x"])
                .unwrap()
                .shape,
            ServiceShape::ExternalName("db.example.com".into())
        );
        assert_eq!(
            dsl(&["@db.example.com."]).unwrap().shape,
            ServiceShape::ExternalName("db.example.com.".into())
        );
        assert_eq!(port(80, n(8080)).name, "80-8080");
    }

    #[test]
    fn every_dsl_error_names_its_entry_and_why() {
        let cases: &[(&[&str], &str)] = &[
            (&[], "invalid services: at least one entry is required"),
            (&[""], "invalid services entry \"\": is empty"),
            (
                &["http"],
                "invalid services entry \"http\": port \"http\" must be a number from 1 to 65535",
            ),
            (
                &["80:8080", "x80:80"],
                "invalid services entry \"x80:80\": port \"x80\" must be",
            ),
            (&["0:80"], "port \"0\" must be a number from 1 to 65535"),
            (&["65536"], "port \"65536\" must be"),
            (&["+80"], "port \"+80\" must be"),
            (
                &["80:"],
                "invalid services entry \"80:\": port \"\" is neither a number",
            ),
            (&["80:0"], "port \"0\" must be"),
            (&["80:Bad_Name"], "port \"Bad_Name\" is neither a number"),
            (
                &["!abc:80:8080"],
                "invalid services entry \"!abc:80:8080\": port \"abc\" must be",
            ),
            (
                &["30080:80:8080"],
                "invalid services entry \"30080:80:8080\": node:port:target needs the '!' prefix",
            ),
            (&["#30080:80:8080"], "needs the '!' prefix"),
            (&["!1:2:3:4"], "more than three"),
            (&["!#80"], "takes one of"),
            (&["#@x"], "takes one of"),
            (
                &["!80:8080", "#81:8081"],
                "invalid services entry \"#81:8081\": a Service is NodePort or headless, not both (\"!80:8080\" set it)",
            ),
            (
                &["80:8080", "80:9090"],
                "invalid services entry \"80:9090\": port 80 is given twice",
            ),
            (
                &["!30080:80:8080", "!30080:81:8081"],
                "node port 30080 is given twice",
            ),
            (
                &["@Not_A_Host"],
                "invalid services entry \"@Not_A_Host\": \"Not_A_Host\" is no DNS name",
            ),
            (&["@"], "\"\" is no DNS name"),
        ];
        for (entries, expected) in cases {
            let e = dsl(entries).unwrap_err();
            assert!(e.contains(expected), "{entries:?}: {expected:?} in {e:?}");
        }
    }

    #[test]
    fn the_structured_form_makes_the_same_services() {
        let parse = |json: serde_json::Value| {
            let body: CreateService = serde_json::from_value(json).unwrap();
            new_service("web", &body).map_err(|e| e.to_string())
        };
        let from_dsl = dsl(&["!30080:80:8080", "!443:https"]).unwrap();
        let from_json = parse(serde_json::json!({"type": "NodePort", "ports": [
            {"port": 80, "targetPort": 8080, "nodePort": 30080},
            {"port": 443, "targetPort": "https"}]}))
        .unwrap();
        assert_eq!(from_dsl, from_json);
        assert_eq!(
            parse(serde_json::json!({"ports": [{"port": 80}]})).unwrap(),
            dsl(&["80"]).unwrap()
        );
        assert_eq!(
            parse(
                serde_json::json!({"type": "Headless", "ports": [{"port": 80, "targetPort": 8080}]})
            )
            .unwrap(),
            dsl(&["#80:8080"]).unwrap()
        );
        assert_eq!(
            parse(serde_json::json!({"type": "ExternalName", "externalName": "db.example.com"}))
                .unwrap(),
            dsl(&["@db.example.com"]).unwrap()
        );
        assert_eq!(
            parse(serde_json::json!({"type": "Headless"}))
                .unwrap()
                .shape,
            ServiceShape::Headless(vec![])
        );
        let named = parse(serde_json::json!({"ports": [{"port": 80, "name": "web"}]})).unwrap();
        assert_eq!(
            named.shape,
            ServiceShape::ClusterIp(vec![NewServicePort {
                name: "web".into(),
                port: 80,
                target_port: PortRef::Number(80)
            }])
        );
        let errors = [
            (
                serde_json::json!({}),
                "invalid body: \"services\" or \"ports\"",
            ),
            (
                serde_json::json!({"services": ["80"], "ports": []}),
                "invalid body: give either",
            ),
            (
                serde_json::json!({"ports": []}),
                "invalid ports: at least one port",
            ),
            (
                serde_json::json!({"ports": [{"port": 80}, {"port": 0}]}),
                "invalid ports[1]: port 0 must be a number",
            ),
            (
                serde_json::json!({"ports": [{"port": 80, "targetPort": 70000}]}),
                "invalid ports[0]: targetPort 70000 must be",
            ),
            (
                serde_json::json!({"ports": [{"port": 80, "targetPort": "Bad"}]}),
                "invalid ports[0]: port \"Bad\" is neither",
            ),
            (
                serde_json::json!({"ports": [{"port": 80, "nodePort": 30080}]}),
                "invalid ports[0]: nodePort needs type NodePort",
            ),
            (
                serde_json::json!({"ports": [{"port": "http"}]}),
                "invalid ports[0]: port \"http\" must be a number from 1 to 65535",
            ),
            (
                serde_json::json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": "x"}]}),
                "invalid ports[0]: nodePort \"x\" must be a number",
            ),
            (
                serde_json::json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": -1}]}),
                "nodePort -1 must be",
            ),
            (
                serde_json::json!({"ports": [{"port": 80, "name": "a"}, {"port": 81, "name": "a"}]}),
                "invalid ports[1]: port name \"a\" is given twice",
            ),
            (
                serde_json::json!({"ports": [{"port": 80, "name": "A"}]}),
                "DNS-1123 label",
            ),
            (
                serde_json::json!({"type": "ExternalName"}),
                "invalid externalName: \"\" is no DNS name",
            ),
            (
                serde_json::json!({"type": "ExternalName", "externalName": "a.b", "ports": [{"port": 80}]}),
                "invalid ports: an ExternalName Service has no ports",
            ),
            (
                serde_json::json!({"ports": [{"port": 80}], "externalName": "a.b"}),
                "invalid externalName: only an ExternalName",
            ),
        ];
        for (json, expected) in errors {
            let e = parse(json.clone()).unwrap_err();
            assert!(e.contains(expected), "{json}: {expected:?} in {e:?}");
        }
        for unknown in [
            serde_json::json!({"type": "LoadBalancer", "ports": [{"port": 80}]}),
            serde_json::json!({"ports": [{"port": 80, "protocol": "UDP"}]}),
            serde_json::json!({"port": 80}),
        ] {
            assert!(serde_json::from_value::<CreateService>(unknown).is_err());
        }
    }

    #[test]
    fn names_and_sizes_are_checked_first() {
        let body = |n: usize| CreateService {
            services: Some(vec!["80".to_string(); n]),
            ..Default::default()
        };
        let e = new_service("Web", &body(1)).unwrap_err().to_string();
        assert!(e.contains("invalid name \"Web\""), "{e}");
        let e = new_service("1web", &body(1)).unwrap_err().to_string();
        assert!(e.contains("DNS-1035"), "{e}");
        let e = new_service("Web", &body(101)).unwrap_err().to_string();
        assert_eq!(e, "invalid services: 101 entries, over the limit of 100");
        let long = CreateService {
            services: Some(vec![format!("@{}", "a".repeat(300))]),
            ..Default::default()
        };
        let e = new_service("web", &long).unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid services entry: 301 bytes, over the limit of 256"
        );
        let long = CreateService {
            service_type: Some(ServiceType::ExternalName),
            external_name: Some("a".repeat(300)),
            ..Default::default()
        };
        let e = new_service("web", &long).unwrap_err().to_string();
        assert!(e.contains("300 bytes, over the limit of 256"), "{e}");
        // At the limits, the request is valid.
        let fullest = CreateService {
            services: Some((1..=MAX_SERVICE_PORTS).map(|p| p.to_string()).collect()),
            ..Default::default()
        };
        assert!(new_service("web", &fullest).is_ok());
    }

    #[test]
    fn structured_ports_over_the_limit_are_refused() {
        let ports: Vec<_> = (1..=MAX_SERVICE_PORTS + 1)
            .map(|p| serde_json::json!({"port": p}))
            .collect();
        let body: CreateService =
            serde_json::from_value(serde_json::json!({"ports": ports})).unwrap();
        assert_eq!(
            new_service("web", &body).unwrap_err().to_string(),
            format!(
                "invalid ports: {} ports, over the limit of {MAX_SERVICE_PORTS}",
                MAX_SERVICE_PORTS + 1
            )
        );
    }
}
