//! Whether a hub's Cluster CRD declares `status.activeController`. An API server drops every
//! field that a structural schema does not declare, so with a CRD that lacks it (the one
//! worker-operator v1.6.4 ships) a controller's writes succeed and no read ever shows a
//! claim. Read from the hub's OpenAPI v3 document of the group, which Kubernetes serves to
//! every authenticated client (the `system:discovery` role): no permission beyond the
//! sidecar's own is needed.

use serde_json::Value;

use super::errors::{classify, truncate};
use super::{get_json_request, ok_body, HubClient};
use crate::verdict::{ErrorReason, ProbeError};

const GROUP_VERSION: &str = "apis/controller.kubeslice.io/v1alpha1";
/// A group's document holds every kind of the group: larger than one object, still bounded.
const MAX_DOCUMENT: usize = 16 * 1024 * 1024;

/// What a hub's schema says of the claim's field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimField {
    Declared,
    NotDeclared,
    /// The document could not be read, or does not describe the `Cluster` kind.
    Unknown(String),
}

impl ClaimField {
    pub fn as_str(&self) -> &'static str {
        match self {
            ClaimField::Declared => "declared",
            ClaimField::NotDeclared => "not_declared",
            ClaimField::Unknown(_) => "unknown",
        }
    }
}

impl HubClient {
    /// What this hub's Cluster CRD declares, under the probe timeout for each of the two
    /// requests. Call after a probe: it uses the client and token the probe set up.
    pub async fn claim_field(&mut self) -> ClaimField {
        let root = match self.document("/openapi/v3").await {
            Ok(root) => root,
            Err(e) => return ClaimField::Unknown(e.detail),
        };
        let Some(path) = group_document_path(&root) else {
            return ClaimField::Unknown(format!(
                "the hub's /openapi/v3 lists no {GROUP_VERSION}: the group is not served"
            ));
        };
        match self.document(&path).await {
            Ok(doc) => match declares_claim(&doc) {
                Some(true) => ClaimField::Declared,
                Some(false) => ClaimField::NotDeclared,
                None => ClaimField::Unknown(format!(
                    "the hub's OpenAPI document of {GROUP_VERSION} describes no Cluster kind"
                )),
            },
            Err(e) => ClaimField::Unknown(e.detail),
        }
    }

    async fn document(&mut self, path: &str) -> Result<Value, ProbeError> {
        let timeout = self.timeout;
        match tokio::time::timeout(timeout, self.get_json(path)).await {
            Ok(result) => result,
            Err(_) => Err(ProbeError::new(
                ErrorReason::Timeout,
                format!(
                    "no answer to {} within {}",
                    truncate(path, 200),
                    humantime::format_duration(timeout)
                ),
            )),
        }
    }

    async fn get_json(&mut self, path: &str) -> Result<Value, ProbeError> {
        self.refresh_token()?;
        let client = self.client()?;
        let response = client
            .send(get_json_request(path)?)
            .await
            .map_err(classify)?;
        let body = ok_body(response, MAX_DOCUMENT).await?;
        serde_json::from_slice(&body)
            .map_err(|e| ProbeError::new(ErrorReason::BadResponse, e.to_string()))
    }
}

/// The path of the group's document in the root `/openapi/v3` (with its hash, which lets the
/// API server answer from cache).
fn group_document_path(root: &Value) -> Option<String> {
    let url = root["paths"][GROUP_VERSION]["serverRelativeURL"].as_str()?;
    url.starts_with('/').then(|| url.to_string())
}

/// Whether the `Cluster` kind's `status` declares `activeController`, or keeps unknown fields;
/// None when the document has no `Cluster` kind of the group.
fn declares_claim(doc: &Value) -> Option<bool> {
    let schemas = doc["components"]["schemas"].as_object()?;
    let is_cluster = |s: &&Value| {
        s["x-kubernetes-group-version-kind"]
            .as_array()
            .is_some_and(|gvks| {
                gvks.iter().any(|g| {
                    g["group"] == "controller.kubeslice.io"
                        && g["version"] == "v1alpha1"
                        && g["kind"] == "Cluster"
                })
            })
    };
    let cluster = schemas.values().find(is_cluster)?;
    let status = resolved(&cluster["properties"]["status"], schemas);
    if status["x-kubernetes-preserve-unknown-fields"] == true {
        return Some(true);
    }
    Some(status["properties"].get("activeController").is_some())
}

/// `schema`, or what its `$ref` (alone, or as the one member of `allOf`) points at.
fn resolved<'a>(schema: &'a Value, schemas: &'a serde_json::Map<String, Value>) -> &'a Value {
    let reference = schema["$ref"]
        .as_str()
        .or_else(|| schema["allOf"][0]["$ref"].as_str());
    reference
        .and_then(|r| r.strip_prefix("#/components/schemas/"))
        .and_then(|name| schemas.get(name))
        .unwrap_or(schema)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn document(status: Value) -> Value {
        json!({"components": {"schemas": {
            "io.kubeslice.controller.v1alpha1.Project": {
                "x-kubernetes-group-version-kind": [{"group": "controller.kubeslice.io", "kind": "Project", "version": "v1alpha1"}],
                "properties": {"status": {"type": "object", "properties": {"activeController": {}}}},
            },
            "io.kubeslice.controller.v1alpha1.Cluster": {
                "x-kubernetes-group-version-kind": [{"group": "controller.kubeslice.io", "kind": "Cluster", "version": "v1alpha1"}],
                "properties": {"spec": {"type": "object"}, "status": status},
            },
        }}})
    }

    #[test]
    fn the_claim_field_is_read_from_the_cluster_kind_alone() {
        let declared = json!({"type": "object", "properties": {"activeController": {"type": "object"}, "namespaces": {}}});
        assert_eq!(declares_claim(&document(declared)), Some(true));
        // The CRD of worker-operator v1.6.4: status without the field (another kind has it).
        let upstream = json!({"type": "object", "properties": {"namespaces": {}, "nodeIPs": {}}});
        assert_eq!(declares_claim(&document(upstream)), Some(false));
        let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        assert_eq!(declares_claim(&document(open)), Some(true));
        assert_eq!(declares_claim(&document(json!(null))), Some(false));
        assert_eq!(
            declares_claim(&json!({"components": {"schemas": {}}})),
            None
        );
        assert_eq!(declares_claim(&json!("garbage")), None);
    }

    #[test]
    fn a_status_behind_a_reference_is_followed() {
        let mut doc = document(
            json!({"allOf": [{"$ref": "#/components/schemas/io.kubeslice.ClusterStatus"}]}),
        );
        doc["components"]["schemas"]["io.kubeslice.ClusterStatus"] =
            json!({"type": "object", "properties": {"activeController": {}}});
        assert_eq!(declares_claim(&doc), Some(true));
    }

    #[test]
    fn the_group_document_is_found_in_the_root() {
        let root = json!({"paths": {
            "api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=A"},
            "apis/controller.kubeslice.io/v1alpha1": {"serverRelativeURL": "/openapi/v3/apis/controller.kubeslice.io/v1alpha1?hash=B"},
        }});
        assert_eq!(
            group_document_path(&root).as_deref(),
            Some("/openapi/v3/apis/controller.kubeslice.io/v1alpha1?hash=B")
        );
        assert_eq!(group_document_path(&json!({"paths": {}})), None);
        let elsewhere = json!({"paths": {"apis/controller.kubeslice.io/v1alpha1": {"serverRelativeURL": "https://elsewhere/x"}}});
        assert_eq!(group_document_path(&elsewhere), None);
    }
}
