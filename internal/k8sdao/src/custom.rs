//! Custom resources, served while their CRDs say so: each [`Command`] of the CRD follower
//! (confk8s) adds a resource to the [`Registry`] with a watch of its own, or stops both, so
//! its cache is freed.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use confk8s::{Command, CustomResource, DynamicInformer, Handler, InformerFactory};
use k8scache::AsGeneric;
use kube::api::DynamicObject;
use kube::discovery::Scope;
use model::{Dictionary, METADATA_FIELDS, Resource, ResourceInfo, ServedBy};
use printers::Printer;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use crate::{Registry, ResourceSelection};

/// A custom resource as the registry serves it: named `{plural}.{group}` as kubectl names it,
/// its columns from the CRD's printer columns (NAME and AGE if they cannot be read), its
/// field selectors metadata.name (and namespace), and the CRD's selectable fields.
pub fn resource_of(custom: &CustomResource) -> Resource {
    let name = custom.name();
    let printer = Printer::custom(custom.printer_columns.as_ref()).unwrap_or_else(|error| {
        tracing::warn!(resource = %name, %error, "printer columns unusable; printing NAME and AGE");
        Printer::default_columns()
    });
    let namespaced = custom.scope == Scope::Namespaced;
    let metadata = if namespaced {
        METADATA_FIELDS
    } else {
        &METADATA_FIELDS[..1]
    };
    // A selectable field is a JSONPath (`.spec.color`); a field selector names it without
    // the dot, as the apiserver does.
    let fields = metadata
        .iter()
        .map(|f| Cow::Borrowed(*f))
        .chain(
            custom
                .selectable_fields
                .iter()
                .map(|f| Cow::Owned(f.trim_start_matches('.').to_string())),
        )
        .collect();
    Resource::new(ResourceInfo {
        name: name.into(),
        kind: custom.kind.clone().into(),
        group: custom.group.clone().into(),
        version: custom.version.clone().into(),
        plural: custom.plural.clone().into(),
        namespaced,
        fields,
        printer,
        served_by: ServedBy::Generic,
        dictionary: Dictionary::new(),
        short_names: custom.short_names.iter().cloned().map(Into::into).collect(),
        categories: custom.categories.iter().cloned().map(Into::into).collect(),
        // A deprecated version's `deprecationWarning` is not followed (yet): none is sent.
        warning: None,
    })
}

/// The custom resources served now, each with its watch.
struct Served {
    registry: Registry,
    /// `--resources`: which custom resources to serve.
    selection: ResourceSelection,
    factory: Arc<InformerFactory>,
    watches: HashMap<String, DynamicInformer>,
}

impl Served {
    async fn serve(&mut self, custom: &CustomResource) {
        let resource = resource_of(custom);
        let name = resource.name.to_string();
        if !self.selection.serves_custom(&name) {
            tracing::debug!(resource = %name, "custom resource not selected by --resources");
            return;
        }
        // A changed CRD is served anew: its old cache holds records printed the old way.
        self.stop(&name).await;
        let cache = self.registry.serve(&resource);
        let handler: Arc<dyn Handler<DynamicObject>> =
            AsGeneric::<DynamicObject>::new(resource, cache);
        let watch = self
            .factory
            .watch_dynamic(custom.api_resource(), custom.scope.clone(), handler)
            .await;
        if watch.status().is_refused() {
            // Not ours to list: reported by its status, not served.
            self.registry.stop(&name);
        } else {
            tracing::info!(resource = %name, version = %custom.version, "serving custom resource");
        }
        self.watches.insert(name, watch);
    }

    async fn stop(&mut self, name: &str) {
        if let Some(watch) = self.watches.remove(name) {
            watch.stop().await;
            self.registry.stop(name);
            tracing::info!(resource = %name, "custom resource no longer served");
        }
    }
}

/// Serves the custom resources `commands` name until `shutdown`. Commands queued together
/// are coalesced, last one per CRD winning: a CRD created and deleted before its turn costs
/// no watch.
pub(crate) async fn follow(
    registry: Registry,
    selection: ResourceSelection,
    factory: Arc<InformerFactory>,
    mut commands: UnboundedReceiver<Command>,
    shutdown: CancellationToken,
) {
    let mut served = Served {
        registry,
        selection,
        factory,
        watches: HashMap::new(),
    };
    loop {
        let first = tokio::select! {
            _ = shutdown.cancelled() => break,
            command = commands.recv() => match command {
                Some(command) => command,
                None => break,
            },
        };
        let mut latest: Vec<(String, Command)> = Vec::new();
        let mut queued = Some(first);
        while let Some(command) = queued {
            let (Command::Serve(custom) | Command::Stop(custom)) = &command;
            let name = custom.name();
            latest.retain(|(n, _)| *n != name);
            latest.push((name, command));
            queued = commands.try_recv().ok();
        }
        for (name, command) in latest {
            if shutdown.is_cancelled() {
                break;
            }
            match command {
                Command::Serve(custom) => served.serve(&custom).await,
                Command::Stop(_) => served.stop(&name).await,
            }
        }
    }
    for (name, watch) in served.watches.drain() {
        watch.stop().await;
        served.registry.stop(&name);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn widgets(scope: Scope, selectable: &[&str]) -> CustomResource {
        CustomResource {
            group: "example.com".into(),
            version: "v1".into(),
            kind: "Widget".into(),
            plural: "widgets".into(),
            scope,
            printer_columns: Some(
                json!([{"name": "Color", "type": "string", "jsonPath": ".spec.color"}]),
            ),
            selectable_fields: selectable.iter().map(|s| s.to_string()).collect(),
            short_names: Vec::new(),
            categories: Vec::new(),
        }
    }

    #[test]
    fn a_custom_resource_is_named_as_kubectl_names_it_and_selects_its_fields() {
        let resource = resource_of(&widgets(Scope::Namespaced, &[".spec.color"]));
        assert_eq!(resource.name, "widgets.example.com");
        assert_eq!(resource.api_version(), "example.com/v1");
        assert!(resource.namespaced);
        assert_eq!(
            resource.fields,
            ["metadata.name", "metadata.namespace", "spec.color"]
        );
        assert_eq!(resource.served_by, ServedBy::Generic);
        let cluster = resource_of(&widgets(Scope::Cluster, &[]));
        assert!(!cluster.namespaced);
        assert_eq!(cluster.fields, ["metadata.name"]);
    }

    #[test]
    fn unusable_printer_columns_print_name_and_age() {
        let mut custom = widgets(Scope::Namespaced, &[]);
        custom.printer_columns = Some(json!({"not": "an array"}));
        assert_eq!(
            resource_of(&custom).printer.columns(),
            Printer::default_columns().columns()
        );
    }
}
