//! Tool result content: the five content block kinds, their annotations, and
//! `CallToolResult`, plus the per-version degradation older clients need (L-04).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::ProtocolVersion;

/// Hints about who a block is for and how much it matters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Annotations {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audience: Option<Vec<Role>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

/// The body of an embedded resource: text or base64 blob.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceContents {
    pub uri: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
}

impl ResourceContents {
    pub fn text(uri: impl Into<String>, mime_type: impl Into<String>, text: impl Into<String>) -> Self {
        Self { uri: uri.into(), mime_type: Some(mime_type.into()), text: Some(text.into()), blob: None, meta: None }
    }

    pub fn blob(uri: impl Into<String>, mime_type: impl Into<String>, base64: impl Into<String>) -> Self {
        Self { uri: uri.into(), mime_type: Some(mime_type.into()), text: None, blob: Some(base64.into()), meta: None }
    }
}

/// One content block of a tool result or prompt message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    Text {
        text: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        annotations: Option<Annotations>,
    },
    Image {
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        annotations: Option<Annotations>,
    },
    Audio {
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        annotations: Option<Annotations>,
    },
    ResourceLink {
        uri: String,
        name: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        #[serde(rename = "mimeType", skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        annotations: Option<Annotations>,
    },
    Resource {
        resource: ResourceContents,
        #[serde(skip_serializing_if = "Option::is_none")]
        annotations: Option<Annotations>,
    },
    /// A block relayed from an upstream MCP server exactly as it sent it (its own `type`, any
    /// fields this server does not model, `_meta` included): forwarding never loses a field.
    #[serde(untagged)]
    Relayed(Map<String, Value>),
}

impl Content {
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into(), annotations: None }
    }

    pub fn image(base64: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Self::Image { data: base64.into(), mime_type: mime_type.into(), annotations: None }
    }

    pub fn audio(base64: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Self::Audio { data: base64.into(), mime_type: mime_type.into(), annotations: None }
    }

    pub fn resource(resource: ResourceContents) -> Self {
        Self::Resource { resource, annotations: None }
    }

    pub fn resource_link(uri: impl Into<String>, name: impl Into<String>) -> Self {
        Self::ResourceLink { uri: uri.into(), name: name.into(), title: None, description: None, mime_type: None, annotations: None }
    }

    /// Attaches annotations to any block kind.
    pub fn with_annotations(mut self, value: Annotations) -> Self {
        match &mut self {
            Self::Text { annotations, .. }
            | Self::Image { annotations, .. }
            | Self::Audio { annotations, .. }
            | Self::ResourceLink { annotations, .. }
            | Self::Resource { annotations, .. } => *annotations = Some(value),
            Self::Relayed(block) => {
                if let Ok(value) = serde_json::to_value(value) {
                    block.insert("annotations".into(), value);
                }
            }
        }
        self
    }

    /// A relayed block, degraded as its modelled twin would be for `version`.
    fn relayed_for(block: Map<String, Value>, version: ProtocolVersion) -> Self {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or_default();
        let field = |name: &str| block.get(name).and_then(Value::as_str).unwrap_or_default().to_owned();
        match kind {
            "audio" if !version.supports_audio() => {
                Self::Audio { data: String::new(), mime_type: field("mimeType"), annotations: None }.degrade_for(version)
            }
            "resource_link" if !version.supports_resource_links() => Self::text(format!("Resource: {} <{}>", field("name"), field("uri"))),
            _ => Self::Relayed(block),
        }
    }

    /// Rewrites a block the negotiated version cannot represent into a text block that says
    /// what it was, instead of sending a type the client does not know (L-04).
    fn degrade_for(self, version: ProtocolVersion) -> Self {
        match self {
            Self::Audio { mime_type, .. } if !version.supports_audio() => {
                Self::text(format!("[audio content ({mime_type}) omitted: not supported by protocol {version}]"))
            }
            Self::ResourceLink { uri, name, .. } if !version.supports_resource_links() => Self::text(format!("Resource: {name} <{uri}>")),
            Self::Relayed(block) => Self::relayed_for(block, version),
            other => other,
        }
    }
}

/// The result of `tools/call`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolResult {
    pub content: Vec<Content>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub is_error: bool,
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
}

impl CallToolResult {
    pub fn new(content: Vec<Content>) -> Self {
        Self { content, ..Self::default() }
    }

    pub fn text(text: impl Into<String>) -> Self {
        Self::new(vec![Content::text(text)])
    }

    /// A tool-execution error the model can read and act on (`isError: true`).
    pub fn error(text: impl Into<String>) -> Self {
        Self { content: vec![Content::text(text)], is_error: true, ..Self::default() }
    }

    /// Structured output plus its serialized JSON as a text block, for clients that only read
    /// text (TL-23).
    pub fn structured(value: Value) -> Self {
        let text = value.to_string();
        Self { content: vec![Content::text(text)], structured_content: Some(value), ..Self::default() }
    }

    /// Prepares the result for the negotiated version: unknown block kinds become text and
    /// `structuredContent` is dropped for clients that predate it.
    pub fn for_version(mut self, version: ProtocolVersion) -> Self {
        self.content = self.content.into_iter().map(|c| c.degrade_for(version)).collect();
        if !version.supports_resource_links() {
            self.structured_content = None;
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blocks_serialize_with_wire_names() {
        let v = serde_json::to_value(Content::image("AA==", "image/png")).ok();
        assert_eq!(v, Some(json!({"type":"image","data":"AA==","mimeType":"image/png"})));
        let v = serde_json::to_value(Content::resource_link("file:///a", "a")).ok();
        assert_eq!(v, Some(json!({"type":"resource_link","uri":"file:///a","name":"a"})));
    }

    #[test]
    fn structured_result_echoes_json_text() {
        let r = CallToolResult::structured(json!({"sum": 5}));
        let Content::Text { text, .. } = &r.content[0] else { panic!("text block expected") };
        assert_eq!(serde_json::from_str::<Value>(text).ok(), Some(json!({"sum": 5})));
    }

    #[test]
    fn old_clients_get_no_audio_or_structured_content() {
        let r = CallToolResult {
            content: vec![Content::audio("AA==", "audio/wav")],
            structured_content: Some(json!({})),
            ..Default::default()
        }
        .for_version(ProtocolVersion::V2024_11_05);
        assert!(matches!(r.content[0], Content::Text { .. }));
        assert!(r.structured_content.is_none());
    }
}
