//! What a hub lets this credential do with the worker's `Cluster`, as the hub's own authorizer
//! answers a `SelfSubjectAccessReview` (what `kubectl auth can-i` asks). Every authenticated
//! client may ask it of itself (the `system:basic-user` role), so no permission beyond the
//! sidecar's own is needed. `get` reads the claim; `list` and `watch` are what the watch needs.

use http::header::{ACCEPT, CONTENT_TYPE};
use http::StatusCode;
use http_body_util::{BodyExt, Limited};
use kube::client::Body;
use serde::Serialize;
use serde_json::{json, Value};

use super::errors::{body_error, classify, status_error, truncate};
use super::HubClient;
use crate::verdict::{ErrorReason, ProbeError};

const REVIEWS: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
/// A review's answer is a few hundred bytes.
const MAX_REVIEW: usize = 64 * 1024;

/// The verbs asked about, in the order they are reported.
pub const VERBS: [&str; 3] = ["get", "list", "watch"];

/// The hub's answer for each of `VERBS` on this worker's `Cluster`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Access {
    pub get: bool,
    pub list: bool,
    pub watch: bool,
}

impl Access {
    /// The verbs the hub refuses, in `VERBS` order.
    pub fn denied(&self) -> Vec<&'static str> {
        VERBS
            .into_iter()
            .zip([self.get, self.list, self.watch])
            .filter(|(_, allowed)| !allowed)
            .map(|(verb, _)| verb)
            .collect()
    }
}

impl HubClient {
    /// What this credential may do with `cluster` in `namespace`, under the probe timeout for
    /// each review; an error when the hub would not say. Call after a probe: it uses the client
    /// and token the probe set up.
    pub async fn access(&mut self, namespace: &str, cluster: &str) -> Result<Access, ProbeError> {
        let mut allowed = [false; 3];
        for (slot, verb) in allowed.iter_mut().zip(VERBS) {
            let review = review(namespace, cluster, verb);
            let timeout = self.timeout;
            *slot = match tokio::time::timeout(timeout, self.ask(&review)).await {
                Ok(answer) => answer?,
                Err(_) => {
                    return Err(ProbeError::new(
                        ErrorReason::Timeout,
                        format!(
                            "no answer to a SelfSubjectAccessReview within {}",
                            humantime::format_duration(timeout)
                        ),
                    ))
                }
            };
        }
        let [get, list, watch] = allowed;
        Ok(Access { get, list, watch })
    }

    async fn ask(&mut self, review: &Value) -> Result<bool, ProbeError> {
        self.refresh_token()?;
        let client = self.client()?;
        let request = http::Request::post(REVIEWS)
            .header(ACCEPT, "application/json")
            .header(CONTENT_TYPE, "application/json")
            .body(Body::from(review.to_string().into_bytes()))
            .map_err(|e| ProbeError::new(ErrorReason::BadResponse, e.to_string()))?;
        let response = client.send(request).await.map_err(classify)?;
        let status = response.status();
        let body = Limited::new(response.into_body(), MAX_REVIEW)
            .collect()
            .await
            .map_err(|e| body_error(e.as_ref()))?
            .to_bytes();
        // A review is created: 201, though some servers answer 200.
        if status != StatusCode::CREATED && status != StatusCode::OK {
            return Err(status_error(status, &body));
        }
        let answer: Value = serde_json::from_slice(&body)
            .map_err(|e| ProbeError::new(ErrorReason::BadResponse, e.to_string()))?;
        allowed(&answer).ok_or_else(|| {
            ProbeError::new(
                ErrorReason::BadResponse,
                format!(
                    "a SelfSubjectAccessReview answered without status.allowed: {}",
                    truncate(&String::from_utf8_lossy(&body), 200)
                ),
            )
        })
    }
}

/// The review of one verb on the one `Cluster` object: the name is part of the question, so a
/// Role that names only this worker's `Cluster` (`resourceNames`) is answered as it applies.
fn review(namespace: &str, cluster: &str, verb: &str) -> Value {
    json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {
            "namespace": namespace,
            "verb": verb,
            "group": "controller.kubeslice.io",
            "resource": "clusters",
            "name": cluster,
        }},
    })
}

fn allowed(answer: &Value) -> Option<bool> {
    answer["status"]["allowed"].as_bool()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_review_asks_of_the_one_cluster_in_the_project_namespace() {
        let r = review("kubeslice-acme", "worker-1", "watch");
        let attributes = &r["spec"]["resourceAttributes"];
        assert_eq!(r["kind"], "SelfSubjectAccessReview");
        assert_eq!(attributes["namespace"], "kubeslice-acme");
        assert_eq!(attributes["name"], "worker-1");
        assert_eq!(attributes["verb"], "watch");
        assert_eq!(attributes["group"], "controller.kubeslice.io");
        assert_eq!(attributes["resource"], "clusters");
    }

    #[test]
    fn an_answer_says_allowed_or_is_not_an_answer() {
        assert_eq!(allowed(&json!({"status": {"allowed": true}})), Some(true));
        assert_eq!(
            allowed(&json!({"status": {"allowed": false, "reason": "no RBAC policy matched"}})),
            Some(false)
        );
        // An answer without a verdict is not read as a refusal.
        assert_eq!(allowed(&json!({"status": {}})), None);
        assert_eq!(allowed(&json!({"kind": "Status"})), None);
    }

    #[test]
    fn the_denied_verbs_are_said_in_order() {
        let all = Access {
            get: true,
            list: true,
            watch: true,
        };
        assert!(all.denied().is_empty());
        let read_only = Access {
            list: false,
            watch: false,
            ..all
        };
        assert_eq!(read_only.denied(), ["list", "watch"]);
        let none = Access {
            get: false,
            ..read_only
        };
        assert_eq!(none.denied(), VERBS);
    }
}
