//! Safe to expose by default (issue 9): a web page open in the operator's browser cannot drive
//! k8sailor, neither across origins (CORS allows loopback pages only) nor through a name of its
//! own pointed at 127.0.0.1 (DNS rebinding: the Host check while auth is none); and k8sailor
//! will not serve without authentication on an address other hosts reach unless told so.

use std::process::Command;

use serde_json::Value;

use crate::support::{Server, cluster};

const EVIL: &str = "http://evil.example";

/// A browser's preflight for `method` on a write route from a page of `origin`.
async fn preflight(server: &Server, origin: &str, method: &str) -> reqwest::header::HeaderMap {
    let (_, headers, _) = server
        .request(
            "OPTIONS",
            "/k8sailor/v0/deployments/web?namespace=default",
            &[
                ("Origin", origin),
                ("Access-Control-Request-Method", method),
                ("Access-Control-Request-Headers", "content-type"),
            ],
        )
        .await;
    headers
}

fn header<'a>(headers: &'a reqwest::header::HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).map(|v| v.to_str().unwrap())
}

#[tokio::test]
async fn only_loopback_pages_may_call_it_from_a_browser_by_default() {
    let server = Server::start(&[]);

    // A page from elsewhere can neither read answers nor get a preflight for a write through.
    let (status, headers, _) = server
        .request("GET", "/k8sailor/v0/pods", &[("Origin", EVIL)])
        .await;
    assert_eq!(status, 200);
    assert_eq!(header(&headers, "access-control-allow-origin"), None);
    for method in ["DELETE", "PUT", "POST"] {
        let headers = preflight(&server, EVIL, method).await;
        assert_eq!(
            header(&headers, "access-control-allow-origin"),
            None,
            "{method}: {headers:?}"
        );
        assert_eq!(header(&headers, "access-control-allow-credentials"), None);
    }

    // The original web client, on another loopback port, keeps working, credentials included.
    for origin in [
        "http://127.0.0.1:8080",
        "http://localhost:8080",
        "http://localhost:5173",
        "http://[::1]:8080",
    ] {
        for method in ["DELETE", "PUT", "POST"] {
            let headers = preflight(&server, origin, method).await;
            assert_eq!(
                header(&headers, "access-control-allow-origin"),
                Some(origin),
                "{origin} {method}: {headers:?}"
            );
            assert_eq!(
                header(&headers, "access-control-allow-credentials"),
                Some("true")
            );
            let methods = header(&headers, "access-control-allow-methods").unwrap();
            assert!(methods.contains(method), "{methods}");
        }
        let (status, headers, _) = server
            .request("GET", "/k8sailor/v0/pods", &[("Origin", origin)])
            .await;
        assert_eq!(status, 200);
        assert_eq!(
            header(&headers, "access-control-allow-origin"),
            Some(origin)
        );
    }
}

#[tokio::test]
async fn cors_opens_to_configured_origins_and_to_any_only_without_credentials() {
    let named = Server::start(&["--cors-allowed-origins", "https://dash.example.com:*"]);
    let headers = preflight(&named, "https://dash.example.com:8443", "DELETE").await;
    assert_eq!(
        header(&headers, "access-control-allow-origin"),
        Some("https://dash.example.com:8443")
    );
    assert_eq!(
        header(&headers, "access-control-allow-credentials"),
        Some("true")
    );
    let headers = preflight(&named, "http://127.0.0.1:8080", "DELETE").await;
    assert_eq!(header(&headers, "access-control-allow-origin"), None);
    drop(named);

    let any = Server::start(&["--cors-allowed-origins", "*"]);
    let headers = preflight(&any, EVIL, "DELETE").await;
    assert_eq!(header(&headers, "access-control-allow-origin"), Some("*"));
    assert_eq!(header(&headers, "access-control-allow-credentials"), None);
}

#[tokio::test]
async fn without_auth_a_request_for_a_foreign_host_name_is_refused() {
    let server = Server::start(&[]);
    let port = server.root().rsplit(':').next().unwrap().to_string();

    let with_port = format!("evil.example:{port}");
    for host in ["evil.example", with_port.as_str()] {
        let (status, _, body) = server
            .request("GET", "/k8sailor/v0/pods", &[("Host", host)])
            .await;
        assert_eq!(status, 421, "{host}: {body}");
        let body: Value = serde_json::from_str(&body).expect("the envelope");
        assert_eq!(body["code"], 421);
        assert_eq!(body["data"], Value::Null);
        let error = body["error"].as_str().unwrap();
        assert!(
            error.contains("evil.example") && error.contains("allowedHosts"),
            "{error}"
        );
    }
    // A write from a rebound page is refused the same way, before it happens.
    let (status, _, body) = server
        .request(
            "DELETE",
            "/k8sailor/v0/pods/anything?namespace=default",
            &[("Host", "evil.example")],
        )
        .await;
    assert_eq!(status, 421, "{body}");
    let (status, _, _) = server
        .request("GET", "/metrics", &[("Host", "evil.example")])
        .await;
    assert_eq!(status, 421, "/metrics tells what is cached and asked");

    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("LocalHost.:{port}"),
        format!("[::1]:{port}"),
        "localhost".to_string(),
    ] {
        let (status, _, body) = server
            .request("GET", "/k8sailor/v0/pods", &[("Host", host.as_str())])
            .await;
        assert_eq!(status, 200, "{host}: {body}");
    }

    // Probes tell nothing and the kubelet's name the pod's IP (or whatever httpGet.host says).
    for path in ["/livez", "/readyz", "/livez?verbose"] {
        for host in ["evil.example", "10.244.3.7:8088"] {
            let (status, _, body) = server.request("GET", path, &[("Host", host)]).await;
            assert_eq!(status, 200, "{path} for {host}: {body}");
        }
    }
    // An address that is not where it listens (127.0.0.1 here) is refused like a name.
    let (status, _, _) = server
        .request("GET", "/metrics", &[("Host", "10.244.3.7:8088")])
        .await;
    assert_eq!(status, 421);
}

#[tokio::test]
async fn allowed_hosts_open_the_host_check() {
    let named = Server::start(&["--allowed-hosts", "evil.example,.corp.example"]);
    for (host, expected) in [
        ("evil.example", 200),
        ("k8sailor.team.corp.example:8088", 200),
        ("other.example", 421),
    ] {
        let (status, _, body) = named
            .request("GET", "/k8sailor/v0/ping", &[("Host", host)])
            .await;
        assert_eq!(status, expected, "{host}: {body}");
    }
    drop(named);

    let any = Server::start(&["--allowed-hosts", "*"]);
    let (status, _, body) = any
        .request("GET", "/k8sailor/v0/pods", &[("Host", "evil.example")])
        .await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn no_auth_on_a_reachable_address_needs_allow_unauthenticated() {
    let command = |extra: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_k8sailor"));
        command
            .args(["httpserver", "--kubeconfig"])
            .arg(&cluster().kubeconfig)
            // The one test that binds all addresses; traffic still goes to 127.0.0.1 only.
            .args(["--listen", "0.0.0.0:0", "--auth", "none"])
            .args(["--sync-timeout", "30s"])
            .args(extra)
            .env("RUST_LOG", "warn");
        command
    };

    let refused = Server::start_command(command(&[]))
        .err()
        .expect("k8sailor refuses to serve unauthenticated on 0.0.0.0");
    assert!(refused.contains("exit status: 1"), "{refused}");
    assert!(
        refused.contains("0.0.0.0:0") && refused.contains("--allow-unauthenticated"),
        "the error names the address and the flag: {refused}"
    );
    assert_eq!(refused.trim_end().lines().count(), 1, "one line: {refused}");

    let mut server = Server::start_command(command(&["--allow-unauthenticated"]))
        .unwrap_or_else(|e| panic!("with --allow-unauthenticated: {e}"));
    assert!(server.base.contains("//0.0.0.0:"), "{}", server.base);
    server.base = server.base.replace("//0.0.0.0:", "//127.0.0.1:");
    assert_eq!(server.get_text("/ping").await, (200, "pong".to_string()));
    // On 0.0.0.0 every address of the machine is its own: a pod's IP, as Prometheus scrapes.
    let (status, _, body) = server
        .request("GET", "/metrics", &[("Host", "10.244.3.7:8088")])
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, _, _) = server
        .request("GET", "/metrics", &[("Host", "evil.example")])
        .await;
    assert_eq!(status, 421);
}
