//! The resource fixtures: static text and binary resources, a watched resource for the
//! subscription scenarios, and the `test://template/{id}/data` template.

use serde_json::json;

use super::TEST_IMAGE_BASE64;
use crate::catalog::{Resource, ResourceTemplate};
use crate::protocol::content::ResourceContents;
use crate::server::McpServer;

pub(super) fn install(server: &McpServer) {
    let text = "This is the content of the static text resource.";
    server.resources.add(titled(
        Resource::new("test://static-text", "static-text", move |uri| vec![ResourceContents::text(uri, "text/plain", text)])
            .description("A static text resource for testing")
            .mime_type("text/plain"),
        "Static Text Resource",
    ));
    server.resources.add(titled(
        Resource::new("test://static-binary", "static-binary", |uri| vec![ResourceContents::blob(uri, "image/png", TEST_IMAGE_BASE64)])
            .description("A static binary resource (image) for testing")
            .mime_type("image/png"),
        "Static Binary Resource",
    ));
    server.resources.add(titled(
        Resource::new("test://watched-resource", "watched-resource", |uri| {
            vec![ResourceContents::text(uri, "text/plain", "Watched resource content")]
        })
        .description("A resource clients may subscribe to")
        .mime_type("text/plain"),
        "Watched Resource",
    ));
    server.resources.add_template(
        ResourceTemplate::new("test://template/{id}/data", "template", |uri, vars| {
            let id = vars.get("id").map_or("", String::as_str);
            // Written out rather than built with `json!`, which would sort the keys: the
            // reference text has `id`, `templateTest`, `data` in this order.
            let text = format!("{{\"id\":{},\"templateTest\":true,\"data\":{}}}", json!(id), json!(format!("Data for ID: {id}")));
            vec![ResourceContents::text(uri, "application/json", text)]
        })
        .description("A resource template with parameter substitution")
        .mime_type("application/json"),
    );
}

/// `Resource` has no builder method for the display title.
fn titled(mut resource: Resource, title: &str) -> Resource {
    resource.title = Some(title.to_owned());
    resource
}
