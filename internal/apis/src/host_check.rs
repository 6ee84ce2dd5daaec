//! Against DNS rebinding: while the API needs no token (`auth: none`), a request is served only
//! when its `Host` is a name that cannot be an attacker's. A page on `evil.example` whose name
//! the attacker then points at 127.0.0.1 reaches k8sailor from the operator's browser as
//! same-origin (CORS never applies) but still says `Host: evil.example`. Served: loopback names
//! (`localhost`, `*.localhost`, which browsers resolve to loopback themselves), loopback
//! addresses, the address k8sailor listens on (any of the machine's when that is 0.0.0.0, so
//! Prometheus may scrape a pod by its IP), and the names in `allowedHosts` (`*`: any). With `auth: delegated` a rebinding
//! page has no token to send, so the check is off. `/livez` and `/readyz` are never checked:
//! they tell nothing, and a probe may name any host.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use axum::extract::Request;
use axum::http::uri::Authority;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::AuthMode;
use super::envelope::ApiError;

/// Answered whatever the `Host`: a probe tells nothing.
const UNCHECKED_PATHS: [&str; 2] = ["/livez", "/readyz"];

/// The names `allowedHosts` adds to the loopback names and IP addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AllowedHosts {
    /// `*`: any `Host`, the check is off.
    Any,
    Listed(Vec<HostPattern>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostPattern {
    /// `k8sailor.example.com`: that name.
    Name(String),
    /// `.example.com`: `example.com` and every name under it.
    Domain(String),
    /// The address k8sailor listens on (every address when it is 0.0.0.0 or ::).
    Listen(IpAddr),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HostError {
    #[error(
        "{0:?} is not a host name like k8sailor.example.com or .example.com (itself and every name under it), without scheme or port"
    )]
    Malformed(String),
    #[error("\"*\" allows every host and cannot be combined with others")]
    WildcardAmongOthers,
}

impl Default for AllowedHosts {
    fn default() -> Self {
        AllowedHosts::Listed(Vec::new())
    }
}

impl AllowedHosts {
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<AllowedHosts, HostError> {
        if entries.iter().any(|e| e.as_ref().trim() == "*") {
            return match entries.len() {
                1 => Ok(AllowedHosts::Any),
                _ => Err(HostError::WildcardAmongOthers),
            };
        }
        entries
            .iter()
            .map(|e| HostPattern::parse(e.as_ref()))
            .collect::<Result<_, _>>()
            .map(AllowedHosts::Listed)
    }

    /// Also serves `Host` set to the address k8sailor listens on; on 0.0.0.0 or ::, any of the
    /// machine's addresses (a pod's IP, as Prometheus and the kubelet address it).
    pub fn serving(self, listen: IpAddr) -> AllowedHosts {
        match self {
            AllowedHosts::Any => AllowedHosts::Any,
            AllowedHosts::Listed(mut patterns) => {
                patterns.push(HostPattern::Listen(listen));
                AllowedHosts::Listed(patterns)
            }
        }
    }

    /// Whether a `Host` value (a name or address, with or without port) may be served.
    pub fn allows(&self, host: &str) -> bool {
        is_plain_loopback(host) || self.allows_parsed(host)
    }

    fn allows_parsed(&self, host: &str) -> bool {
        let Some((host, _)) = Host::parse_with_port(host) else {
            return false;
        };
        match host {
            // An address is never a rebound name; only ours are served, as the rule
            // says: loopback, or the one k8sailor listens on.
            Host::Ip(ip) => {
                ip.is_loopback()
                    || ip.to_canonical().is_loopback()
                    || match self {
                        AllowedHosts::Any => true,
                        AllowedHosts::Listed(patterns) => patterns.iter().any(|p| match p {
                            HostPattern::Listen(listen) => {
                                listen.is_unspecified() || *listen == ip.to_canonical()
                            }
                            _ => false,
                        }),
                    }
            }
            Host::Name(name) => {
                name == "localhost"
                    || name.ends_with(".localhost")
                    || match self {
                        AllowedHosts::Any => true,
                        AllowedHosts::Listed(patterns) => patterns.iter().any(|p| p.matches(&name)),
                    }
            }
        }
    }
}

impl HostPattern {
    fn parse(entry: &str) -> Result<HostPattern, HostError> {
        let malformed = || HostError::Malformed(entry.to_string());
        let entry = entry.trim();
        let (name, domain) = match entry.strip_prefix('.') {
            Some(name) => (name, true),
            None => (entry, false),
        };
        let name = normalize_name(name).ok_or_else(malformed)?;
        Ok(if domain {
            HostPattern::Domain(name)
        } else {
            HostPattern::Name(name)
        })
    }

    fn matches(&self, name: &str) -> bool {
        match self {
            HostPattern::Listen(_) => false,
            HostPattern::Name(n) => name == n,
            HostPattern::Domain(d) => {
                name == d
                    || name
                        .strip_suffix(d.as_str())
                        .is_some_and(|head| head.ends_with('.'))
            }
        }
    }
}

/// A host as a request or an origin names it: an address, or a name in lower case without
/// the trailing dot (`LocalHost.` is `localhost`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Host {
    Ip(IpAddr),
    Name(String),
}

impl Host {
    /// `name`, `1.2.3.4` or `[v6]`, with an optional `:port`; nothing else (no user, path,
    /// or port that is not a number).
    pub(super) fn parse_with_port(text: &str) -> Option<(Host, Option<u16>)> {
        let authority: Authority = text.parse().ok()?;
        if text.contains('@') {
            return None;
        }
        let host = authority.host();
        let port = match text.get(host.len()..)? {
            "" => None,
            rest => {
                let digits = rest.strip_prefix(':')?;
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                Some(digits.parse().ok()?)
            }
        };
        let host = if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            Host::Ip(v6.parse::<Ipv6Addr>().ok()?.into())
        } else if let Ok(v4) = host.parse::<Ipv4Addr>() {
            Host::Ip(v4.into())
        } else {
            Host::Name(normalize_name(host)?)
        };
        Some((host, port))
    }
}

/// `localhost` or `127.0.0.1`, alone or with a port: what local clients send, which every
/// rule serves, told without parsing (that allocates) on every request. Any other spelling
/// is parsed.
fn is_plain_loopback(text: &str) -> bool {
    let host = match text.split_once(':') {
        None => text,
        Some((host, port)) => {
            if port.is_empty()
                || !port.bytes().all(|b| b.is_ascii_digit())
                || port.parse::<u16>().is_err()
            {
                return false;
            }
            host
        }
    };
    host == "127.0.0.1" || host == "localhost"
}

fn normalize_name(name: &str) -> Option<String> {
    let name = name.strip_suffix('.').unwrap_or(name);
    let valid = !name.is_empty()
        && !name.starts_with('.')
        && !name.contains("..")
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_');
    valid.then(|| name.to_ascii_lowercase())
}

/// The names to check each request's `Host` against; None when auth makes the check
/// pointless or `allowedHosts` is `*`.
pub(super) fn enforced(allowed: &AllowedHosts, auth: AuthMode) -> Option<AllowedHosts> {
    match (auth, allowed) {
        (AuthMode::Delegated, _) | (_, AllowedHosts::Any) => None,
        (AuthMode::None, _) => Some(allowed.clone()),
    }
}

/// The `Host` a connection's requests were last allowed for: a client names the same host
/// on every request of a connection, which then is compared, not parsed and matched again.
/// A copy, not the request's own value: that would hold the connection's read buffer.
#[derive(Clone, Debug, Default)]
pub(super) struct LastAllowed(Option<HeaderValue>);

impl LastAllowed {
    /// [`refusal`], remembering the host it allowed.
    pub(super) fn refusal(
        &mut self,
        allowed: &AllowedHosts,
        request: &Request,
    ) -> Option<Response> {
        // Only the Host header `refusal` reads: a lone one, in an origin-form request.
        let lone = match request.uri().authority() {
            Some(_) => None,
            None => host_header(request).ok().flatten(),
        };
        if lone.is_some() && lone == self.0.as_ref() {
            return None;
        }
        let refusal = refusal(allowed, request);
        if refusal.is_none() && !UNCHECKED_PATHS.contains(&request.uri().path()) {
            self.0 = lone.and_then(|host| HeaderValue::from_bytes(host.as_bytes()).ok());
        }
        refusal
    }
}

/// A request with more than one Host header: [`refusal`]'s 400.
struct SeveralHosts;

/// The request's Host header, if it has one.
fn host_header(request: &Request) -> Result<Option<&HeaderValue>, SeveralHosts> {
    let mut hosts = request.headers().get_all(header::HOST).iter();
    let first = hosts.next();
    match hosts.next() {
        Some(_) => Err(SeveralHosts),
        None => Ok(first),
    }
}

/// The answer to a request whose `Host` is not allowed: 421 Misdirected Request (this server
/// does not answer for that name), in the envelope; None when it may be served.
fn refusal(allowed: &AllowedHosts, request: &Request) -> Option<Response> {
    if UNCHECKED_PATHS.contains(&request.uri().path()) {
        return None;
    }
    // HTTP/2 and absolute-form requests name the host in the target, which then wins over
    // any Host header (RFC 9112 3.2.2).
    let host = match request.uri().authority() {
        Some(authority) => Some(authority.as_str()),
        None => {
            let Ok(header) = host_header(request) else {
                return Some(
                    ApiError::new(StatusCode::BAD_REQUEST, "more than one Host header")
                        .into_response(),
                );
            };
            match header.map(|h| h.to_str()) {
                None => None,
                Some(Ok(host)) => Some(host),
                Some(Err(_)) => {
                    return Some(
                        ApiError::new(StatusCode::BAD_REQUEST, "the Host header is not text")
                            .into_response(),
                    );
                }
            }
        }
    };
    // No Host at all is an HTTP/1.0 client, never a browser, so never a rebound page.
    match host {
        Some(host) if !allowed.allows(host) => Some(
            ApiError::new(
                StatusCode::MISDIRECTED_REQUEST,
                format!(
                    "Host {host:?} is not a name this server answers to: without authentication it \
                     serves only loopback names and IP addresses, so that a web page cannot reach \
                     it through a name of its own (DNS rebinding); add the name to allowedHosts \
                     (--allowed-hosts) or use --auth delegated"
                ),
            )
            .into_response(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> AllowedHosts {
        AllowedHosts::default()
    }

    #[test]
    fn the_plain_loopback_shortcut_serves_only_what_parsing_serves() {
        for (host, plain) in [
            ("localhost", true),
            ("localhost:8088", true),
            ("127.0.0.1", true),
            ("127.0.0.1:65535", true),
            ("127.0.0.1:65536", false),
            ("localhost:", false),
            ("localhost:80a", false),
            ("localhost:+80", false),
            ("localhost:8088/x", false),
            ("user@localhost", false),
            ("127.0.0.1.evil.example:80", false),
            ("LocalHost", false),
        ] {
            assert_eq!(is_plain_loopback(host), plain, "{host}");
            if plain {
                assert!(defaults().allows_parsed(host), "{host}");
            }
        }
    }

    #[test]
    fn loopback_names_and_addresses_pass_by_default() {
        for host in [
            "localhost",
            "localhost:8088",
            "LOCALHOST:8088",
            "localhost.:8088",
            "localhost.",
            "app.localhost:5173",
            "127.0.0.1",
            "127.0.0.1:8088",
            "127.1.2.3:8088",
            "[::1]",
            "[::1]:8088",
            "[0:0:0:0:0:0:0:1]:8088",
            "[::ffff:127.0.0.1]:8088",
        ] {
            assert!(defaults().allows(host), "{host}");
        }
    }

    #[test]
    fn other_addresses_pass_only_where_k8sailor_listens_on_them() {
        let on_loopback = defaults().serving(Ipv4Addr::LOCALHOST.into());
        let on_pod_ip = defaults().serving("10.244.1.7".parse().unwrap());
        // In a pod (0.0.0.0), the kubelet and Prometheus address it by the pod's IP.
        let everywhere = defaults().serving(Ipv4Addr::UNSPECIFIED.into());
        for host in ["10.244.1.7:8088", "[fd00::7]:8088", "192.168.1.5"] {
            assert!(!on_loopback.allows(host), "{host}");
            assert!(everywhere.allows(host), "{host}");
        }
        assert!(on_pod_ip.allows("10.244.1.7:8088"));
        assert!(!on_pod_ip.allows("10.244.1.8:8088"));
        assert!(on_pod_ip.allows("127.0.0.1:8088"));
        assert!(!on_pod_ip.allows("evil.example"));
    }

    #[test]
    fn other_names_are_refused_by_default() {
        for host in [
            "evil.example",
            "evil.example:8088",
            "evil.example.",
            "localhost.evil.example",
            "127.0.0.1.evil.example",
            "localhostx",
            "xlocalhost",
            "k8sailor.k8sailor.svc",
            // Not canonical addresses, so names to a resolver, and not ours.
            "0x7f.0.0.1",
            "2130706433x",
            "",
            ":8088",
            "[::1",
            "::1",
            "[evil]:8088",
            "user@localhost",
            "localhost:",
            "local host",
            "localhost:8088/x",
            "..localhost",
        ] {
            assert!(!defaults().allows(host), "{host:?}");
        }
    }

    #[test]
    fn allowed_hosts_add_names_and_domains() {
        let allowed = AllowedHosts::parse(&["k8sailor.k8sailor.svc", ".Example.COM."]).unwrap();
        for host in [
            "k8sailor.k8sailor.svc",
            "K8sailor.K8sailor.Svc.:8088",
            "example.com",
            "dash.example.com:443",
            "a.b.example.com",
            "localhost",
        ] {
            assert!(allowed.allows(host), "{host}");
        }
        for host in [
            "k8sailor",
            "svc",
            "evil-example.com",
            "notexample.com",
            "example.com.evil",
        ] {
            assert!(!allowed.allows(host), "{host}");
        }
        assert!(
            AllowedHosts::parse(&["*"])
                .unwrap()
                .allows("evil.example:1")
        );
        assert!(!AllowedHosts::parse(&["*"]).unwrap().allows("local host"));
    }

    #[test]
    fn bad_entries_say_why() {
        assert_eq!(
            AllowedHosts::parse(&["*", "a"]),
            Err(HostError::WildcardAmongOthers)
        );
        for bad in [
            "",
            ".",
            "http://a.example",
            "a.example:8088",
            "a..example",
            "*.example.com",
            "a b",
        ] {
            assert!(
                matches!(AllowedHosts::parse(&[bad]), Err(HostError::Malformed(_))),
                "{bad:?}"
            );
        }
    }

    fn asking(path: &str, hosts: &[&str]) -> Request {
        let mut request = Request::builder().uri(path);
        for host in hosts {
            request = request.header(header::HOST, *host);
        }
        request.body(axum::body::Body::empty()).unwrap()
    }

    #[test]
    fn a_remembered_host_passes_and_nothing_else_passes_with_it() {
        let (allowed, mut last) = (defaults(), LastAllowed::default());
        let mut status = |path: &str, hosts: &[&str]| {
            last.refusal(&allowed, &asking(path, hosts))
                .map(|refusal| refusal.status())
        };
        // A probe is answered for any host, which is not remembered as allowed.
        assert_eq!(status("/livez", &["evil.example"]), None);
        assert_eq!(
            status("/api", &["evil.example"]),
            Some(StatusCode::MISDIRECTED_REQUEST)
        );
        assert_eq!(status("/api", &["localhost:8088"]), None);
        assert_eq!(status("/api", &["localhost:8088"]), None);
        assert_eq!(
            status("/api", &["evil.example"]),
            Some(StatusCode::MISDIRECTED_REQUEST)
        );
        // The remembered host first, another after it: refused as before.
        assert_eq!(
            status("/api", &["localhost:8088", "evil.example"]),
            Some(StatusCode::BAD_REQUEST)
        );
        assert_eq!(
            status("http://evil.example/api", &["localhost:8088"]),
            Some(StatusCode::MISDIRECTED_REQUEST),
            "the target's host wins"
        );
        assert_eq!(
            last.0.as_ref().map(HeaderValue::as_bytes),
            Some(&b"localhost:8088"[..])
        );
    }
}
