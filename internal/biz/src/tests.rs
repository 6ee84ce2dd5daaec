use super::*;
use k8sdao::Source;
use k8sdao::fake::{FakeSource, small_cluster};
use model::fixtures::mk_pod;

/// The rules over a source of records given by hand (no cache, informer or apiserver).
fn workloads(scope: Option<&str>) -> Workloads<Source> {
    Workloads::new(Source::fake(small_cluster(), scope.map(str::to_string)))
}

fn list(ns: Option<&str>, selector: Option<&str>) -> ListRequest {
    ListRequest {
        namespace: ns.map(str::to_string),
        label_selector: selector.map(str::to_string),
        ..Default::default()
    }
}

/// An answer as the client reads it.
fn json_of<T: JsonAnswer>(answer: &T) -> serde_json::Value {
    let mut out = Vec::new();
    answer.write_json(&mut out);
    serde_json::from_slice(&out)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out)))
}

fn names<T: JsonAnswer>(items: &Vec<T>) -> Vec<String> {
    json_of(items)
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn absent_or_empty_namespace_lists_all_namespaces() {
    let w = workloads(None);
    for ns in [None, Some("")] {
        let page = w
            .list::<DeploymentRecord>(DeploymentRecord::resource(), &list(ns, None))
            .await
            .unwrap();
        assert_eq!(names(&page.items), ["web", "api"], "namespace {ns:?}");
    }
    let page = w
        .list::<DeploymentRecord>(DeploymentRecord::resource(), &list(Some("ns-b"), None))
        .await
        .unwrap();
    assert_eq!(names(&page.items), ["api"]);
}

#[tokio::test]
async fn a_namespace_without_objects_is_an_empty_list_like_the_apiserver() {
    let page = workloads(None)
        .list_pods(&list(Some("empty"), None))
        .await
        .unwrap();
    assert!(page.items.is_empty());
}

#[tokio::test]
async fn invalid_namespaces_and_names_are_rejected_with_the_rule() {
    let w = workloads(None);
    for bad in ["Upper", "under_score", "-x", &"a".repeat(64)] {
        let err = w.list_pods(&list(Some(bad), None)).await.unwrap_err();
        assert!(
            matches!(
                err,
                BizError::Invalid {
                    what: "namespace",
                    ..
                }
            ),
            "{bad}: {err}"
        );
        assert!(err.to_string().contains("DNS-1123 label"), "{err}");
    }
    let err = w
        .get::<DeploymentRecord>(DeploymentRecord::resource(), Some("ns-a"), "No_Such")
        .await
        .unwrap_err();
    assert!(
        matches!(err, BizError::Invalid { what: "name", .. }),
        "{err}"
    );
}

#[tokio::test]
async fn label_selectors_filter_and_bad_ones_say_why() {
    let w = workloads(None);
    let page = w.list_pods(&list(None, Some("app=web"))).await.unwrap();
    assert_eq!(names(&page.items), ["web-1a2b-x", "web-1a2b-y"]);
    let page = w
        .list::<DeploymentRecord>(
            DeploymentRecord::resource(),
            &list(None, Some("tier notin (frontend)")),
        )
        .await
        .unwrap();
    assert_eq!(names(&page.items), ["api"]);
    let err = w
        .list_pods(&list(None, Some("app in (web")))
        .await
        .unwrap_err();
    assert!(matches!(err, BizError::Selector(_)), "{err}");
}

#[tokio::test]
async fn single_objects_default_to_the_default_namespace_and_404_when_absent() {
    let w = workloads(None);
    let err = w
        .get::<DeploymentRecord>(DeploymentRecord::resource(), None, "web")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, BizError::Source(DaoError::NotFound { namespace, .. }) if namespace == "default"),
        "{err}"
    );
    let d = w
        .get::<DeploymentRecord>(DeploymentRecord::resource(), Some("ns-a"), "web")
        .await
        .unwrap();
    assert_eq!(json_of(&d)["ready"], "2/3");
}

#[tokio::test]
async fn pods_name_their_deployment() {
    let w = workloads(None);
    let pod = json_of(&w.get_pod(Some("ns-a"), "web-1a2b-x").await.unwrap());
    assert_eq!(pod["deployment"], "web");
    assert_eq!(pod["podIp"], "10.2.0.1");
    let bare = json_of(&w.get_pod(Some("ns-a"), "bare").await.unwrap());
    assert_eq!(bare["deployment"], serde_json::Value::Null);
    let of = w.pods_of_deployment(Some("ns-a"), "web").await.unwrap();
    assert_eq!(names(&of), ["web-1a2b-x", "web-1a2b-y"]);
    let err = w
        .pods_of_deployment(Some("ns-a"), "nope")
        .await
        .unwrap_err();
    assert!(
        matches!(err, BizError::Source(DaoError::NotFound { .. })),
        "{err}"
    );
}

#[tokio::test]
async fn output_prints_like_kubectl() {
    let w = workloads(None);
    let (format, json) = w.pod_output(Some("ns-a"), "bare", None).await.unwrap();
    assert_eq!(format, OutputFormat::Json);
    assert!(
        json.starts_with("{\n    \"apiVersion\": \"v1\",\n    \"kind\": \"Pod\",\n"),
        "{json}"
    );
    let (_, yaml) = w
        .pod_output(Some("ns-a"), "bare", Some("yaml"))
        .await
        .unwrap();
    assert!(
        yaml.starts_with("apiVersion: v1\nkind: Pod\nmetadata:\n"),
        "{yaml}"
    );
    assert!(yaml.contains("  name: bare\n"), "{yaml}");
    let err = w
        .pod_output(Some("ns-a"), "bare", Some("xml"))
        .await
        .unwrap_err();
    assert!(matches!(err, BizError::OutputFormat(_)), "{err}");
}

#[tokio::test]
async fn a_namespace_scoped_source_refuses_other_namespaces() {
    let w = workloads(Some("ns-a"));
    let page = w
        .list::<DeploymentRecord>(DeploymentRecord::resource(), &list(None, None))
        .await
        .unwrap();
    assert_eq!(names(&page.items), ["web"]);
    let err = w
        .list::<DeploymentRecord>(DeploymentRecord::resource(), &list(Some("ns-b"), None))
        .await
        .unwrap_err();
    assert!(
        matches!(err, BizError::Source(DaoError::NamespaceNotServed { .. })),
        "{err}"
    );
}

#[tokio::test]
async fn field_selectors_select_on_the_apiserver_fields_and_reject_others() {
    let w = workloads(None);
    let req = |fields: &str| ListRequest {
        field_selector: Some(fields.to_string()),
        ..Default::default()
    };
    let page = w
        .list_pods(&req("spec.nodeName=node-1,metadata.name!=bare"))
        .await
        .unwrap();
    assert_eq!(names(&page.items), ["web-1a2b-x", "web-1a2b-y"]);
    let page = w.list_pods(&req("status.phase=Pending")).await.unwrap();
    assert!(page.items.is_empty());
    let page = w
        .list_pods(&req("spec.hostNetwork=false,metadata.namespace=ns-a"))
        .await
        .unwrap();
    assert_eq!(page.items.len(), 3);
    let page = w
        .list::<DeploymentRecord>(DeploymentRecord::resource(), &req("metadata.name=api"))
        .await
        .unwrap();
    assert_eq!(names(&page.items), ["api"]);
    for bad in ["spec.containers=x", "metadata.labels=a"] {
        let err = w.list_pods(&req(bad)).await.unwrap_err();
        assert!(
            err.to_string().contains("field label not supported"),
            "{err}"
        );
    }
    let err = w
        .list::<DeploymentRecord>(DeploymentRecord::resource(), &req("spec.nodeName=x"))
        .await
        .unwrap_err();
    assert!(matches!(err, BizError::FieldSelector(_)), "{err}");
    let err = w.list_pods(&req("nooperator")).await.unwrap_err();
    assert!(matches!(err, BizError::FieldSelector(_)), "{err}");
}

/// ns-a, ns-b and ns-c with pods p0, p1 and p2 each, for filtering.
fn spread_workloads() -> Workloads<Source> {
    let pods = ["ns-a", "ns-b", "ns-c"].into_iter().flat_map(|ns| {
        (0..3).map(move |i| {
            PodRecord::from_object(&mk_pod(ns, &format!("p{i}"), None, &[("app", "x")]))
        })
    });
    Workloads::new(Source::fake(FakeSource::default().with(pods), None))
}

fn seen_by(namespaces: &[&str]) -> Visibility {
    Visibility {
        namespaces: NamespaceFilter::only(namespaces.iter().map(|s| s.to_string())),
    }
}

fn keys(page: &Page<PodView>) -> Vec<String> {
    page.items
        .iter()
        .map(|p| p.record.key.to_string())
        .collect()
}

#[tokio::test]
async fn a_filtered_list_counts_and_pages_only_what_the_caller_may_see() {
    let w = spread_workloads();
    let req = |continue_token: Option<String>, selector: Option<&str>| ListRequest {
        label_selector: selector.map(str::to_string),
        limit: Some(2),
        continue_token,
        sort: Some("-name".into()),
        visibility: seen_by(&["ns-a", "ns-c"]),
        ..Default::default()
    };
    // Index path (an equality selector) and scan path alike.
    for selector in [None, Some("app=x")] {
        let first = w.list_pods(&req(None, selector)).await.unwrap();
        assert!(first.access_filtered);
        assert_eq!(keys(&first), ["ns-a/p2", "ns-c/p2"]);
        assert_eq!(first.remaining, Some(4), "ns-b's three are not counted");
        let mut seen = keys(&first);
        let mut token = first.continue_token;
        while let Some(t) = token {
            let page = w.list_pods(&req(Some(t), selector)).await.unwrap();
            seen.extend(keys(&page));
            token = page.continue_token;
        }
        assert_eq!(seen.len(), 6);
        assert!(seen.iter().all(|k| !k.starts_with("ns-b/")), "{seen:?}");
    }
    // Without access to any namespace: an empty list, not an error.
    let none = w
        .list_pods(&ListRequest {
            visibility: seen_by(&[]),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(none.items.is_empty() && none.access_filtered);
    // Unfiltered lists say nothing of it.
    let all = w.list_pods(&ListRequest::default()).await.unwrap();
    assert_eq!((all.items.len(), all.access_filtered), (9, false));
}

#[tokio::test]
async fn a_continue_token_gives_another_caller_only_what_it_may_see() {
    let w = spread_workloads();
    let req = |visibility: Visibility, continue_token: Option<String>| ListRequest {
        limit: Some(1),
        continue_token,
        visibility,
        ..Default::default()
    };
    let alice = w.list_pods(&req(seen_by(&["ns-b"]), None)).await.unwrap();
    assert_eq!(keys(&alice), ["ns-b/p0"]);
    let token = alice.continue_token.unwrap();
    // A token says where the next page starts, not what Alice saw: another caller's page
    // is cut from its own list, so it holds nothing that caller could not list itself.
    for (other, expected) in [
        (seen_by(&["ns-a"]), vec![]),
        (seen_by(&["ns-c"]), vec!["ns-c/p0"]),
        (Visibility::default(), vec!["ns-b/p1"]),
    ] {
        let page = w.list_pods(&req(other, Some(token.clone()))).await.unwrap();
        assert_eq!(keys(&page), expected);
    }
    let next = w
        .list_pods(&req(seen_by(&["ns-b"]), Some(token)))
        .await
        .unwrap();
    assert_eq!(keys(&next), ["ns-b/p1"]);
}

#[tokio::test]
async fn selectors_with_more_requirements_than_the_limit_are_refused() {
    let w = workloads(None);
    let many = |n: usize| {
        (0..n)
            .map(|i| format!("k{i}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let at_limit = ListRequest {
        label_selector: Some(many(MAX_SELECTOR_REQUIREMENTS)),
        ..Default::default()
    };
    assert!(w.list_pods(&at_limit).await.is_ok());
    let over = ListRequest {
        label_selector: Some(many(MAX_SELECTOR_REQUIREMENTS + 1)),
        ..Default::default()
    };
    let e = w.list_pods(&over).await.unwrap_err();
    assert_eq!(e.failure(), Failure::Invalid);
    assert_eq!(
        e.to_string(),
        "invalid labelSelector: 33 requirements, over the limit of 32"
    );
    let fields = (0..=MAX_SELECTOR_REQUIREMENTS)
        .map(|_| "status.phase!=x")
        .collect::<Vec<_>>()
        .join(",");
    let over = ListRequest {
        field_selector: Some(fields),
        ..Default::default()
    };
    assert!(matches!(
        w.list_pods(&over).await.unwrap_err(),
        BizError::TooLarge {
            what: "fieldSelector",
            ..
        }
    ));
}

#[tokio::test]
async fn services_and_ingresses_lead_to_a_deployments_pods() {
    let w = workloads(None);
    let pods = w.pods_of_service(Some("ns-a"), "web").await.unwrap();
    let names: Vec<&str> = pods.iter().map(|p| p.record.key.name.as_str()).collect();
    assert_eq!(names, ["web-1a2b-x", "web-1a2b-y"]);
    assert_eq!(pods[0].deployment.as_deref(), Some("web"));
    assert!(
        w.pods_of_service(Some("ns-a"), "lonely")
            .await
            .unwrap()
            .is_empty(),
        "a Service without a selector selects no pod"
    );
    let services = w.services_of_deployment(Some("ns-a"), "web").await.unwrap();
    let names: Vec<&str> = services.iter().map(|s| s.0.key.name.as_str()).collect();
    assert_eq!(names, ["web"]);
    let ingresses = w
        .ingresses_of_deployment(Some("ns-a"), "web")
        .await
        .unwrap();
    let names: Vec<&str> = ingresses.iter().map(|i| i.0.key.name.as_str()).collect();
    assert_eq!(names, ["site"]);
    assert!(
        w.services_of_deployment(Some("ns-b"), "api")
            .await
            .unwrap()
            .is_empty()
    );
    let err = w.pods_of_service(Some("ns-a"), "nope").await.unwrap_err();
    assert_eq!(err.failure(), Failure::NotFound);
}

#[test]
fn the_apiservers_refusals_map_to_what_they_mean_for_the_caller() {
    let api = |code: u16| {
        BizError::Source(DaoError::Api {
            code,
            message: "refused".into(),
        })
        .failure()
    };
    for (code, want) in [
        (400, Failure::Invalid),
        (422, Failure::Invalid),
        (403, Failure::Forbidden),
        (404, Failure::NotFound),
        (409, Failure::Conflict),
        (410, Failure::Gone),
        (500, Failure::Upstream),
        (429, Failure::Upstream),
    ] {
        assert_eq!(api(code), want, "{code}");
    }
    let malformed = BizError::Source(DaoError::Malformed {
        object: "Pod a/b".into(),
        field: "metadata.resourceVersion",
    });
    assert_eq!(malformed.failure(), Failure::Upstream);
}

#[tokio::test]
async fn a_list_with_a_resource_version_is_refused_it_belongs_to_watches() {
    let req = ListRequest {
        resource_version: Some("5".into()),
        ..Default::default()
    };
    let e = workloads(None)
        .list::<DeploymentRecord>(DeploymentRecord::resource(), &req)
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.failure(), Failure::Invalid);
    assert!(
        e.to_string()
            .contains("resourceVersion applies to watch=true"),
        "{e}"
    );
}
