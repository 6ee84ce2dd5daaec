//! Read-your-writes for the Service and Ingress creates: both kinds are served from the cache,
//! and a create answers only once the cache shows it, so the very next list has it (no
//! waiting in this test: each read follows its write at once, many times over, since one
//! read may win the race with the watch by luck).

use serde_json::{Value, json};

use crate::support::{Server, TestNamespace, names};

/// Creates `name-00`.. through `route`, reading the list and the object right after each.
async fn each_create_shows_at_once(
    server: &Server,
    ns: &str,
    route: &str,
    body: fn(&str) -> Value,
) {
    let mut created = Vec::new();
    for i in 0..20 {
        let name = format!("web-{i:02}");
        let (status, answer) = server
            .send(
                "POST",
                &format!("/{route}/{name}?namespace={ns}"),
                Some(body(&name)),
            )
            .await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(
            answer["data"]["metadata"]["name"],
            name.as_str(),
            "{answer}"
        );
        created.push(name.clone());
        let (status, list) = server.get(&format!("/{route}?namespace={ns}")).await;
        assert_eq!(status, 200, "{list}");
        assert_eq!(
            names(&list),
            created,
            "/{route} right after creating {name}"
        );
        let (status, one) = server.get(&format!("/{route}/{name}?namespace={ns}")).await;
        assert_eq!((status, &one["data"]["name"]), (200, &json!(name)), "{one}");
    }
}

#[tokio::test]
async fn the_next_read_shows_each_created_service_and_ingress() {
    let ns = TestNamespace::new("cachedwrites").await;
    let server = Server::start(&["--namespace", &ns.name]);
    each_create_shows_at_once(
        &server,
        &ns.name,
        "services",
        |_| json!({"services": ["80:8080"]}),
    )
    .await;
    each_create_shows_at_once(
        &server,
        &ns.name,
        "ingresses",
        |name| json!({"endpoints": [format!("http://{name}.example.com/*")]}),
    )
    .await;
    assert!(
        !server.logs().contains("has not shown a write yet"),
        "{}",
        server.logs()
    );
}
