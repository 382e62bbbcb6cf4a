//! Kubernetes `Status` bodies: every refusal the facade answers is a `meta/v1` Status with the
//! code, reason and message a real API server would send, so that clients classify it the same
//! way (kube-rs turns it into `Error::Api`). It never decides whether a request fails, only how
//! the failure is written.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A failed API request: HTTP code, `reason` and message, with optional `details`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// The HTTP status code.
    pub code: u16,
    /// The Status `reason` (`NotFound`, `AlreadyExists`, `Conflict`, ...).
    pub reason: &'static str,
    /// A human-readable message.
    pub message: String,
    /// The Status `details`, if any.
    pub details: Option<Value>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// 404: the object or resource does not exist.
    pub fn not_found(resource: &str, name: &str) -> ApiError {
        ApiError::new(404, "NotFound", format!("{resource} \"{name}\" not found"))
            .with_details(name, resource)
    }

    /// 403: the identity may not do this (RBAC), worded as the API server words it.
    pub fn forbidden(verb: &str, resource: &str, group: &str, scope: &str) -> ApiError {
        let qualified = if group.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}.{group}")
        };
        ApiError::new(
            403,
            "Forbidden",
            format!(
                "{qualified} is forbidden: User \"facade-view\" cannot {verb} resource \"{resource}\" in API group \"{group}\" {scope}"
            ),
        )
    }

    /// 404 for a path that names no resource.
    pub fn no_route(path: &str) -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    /// 409: creating an object that exists.
    pub fn already_exists(resource: &str, name: &str) -> ApiError {
        ApiError::new(
            409,
            "AlreadyExists",
            format!("{resource} \"{name}\" already exists"),
        )
        .with_details(name, resource)
    }

    /// 409: an update with a stale `resourceVersion`.
    pub fn conflict(resource: &str, name: &str, why: &str) -> ApiError {
        ApiError::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {resource} \"{name}\": {why}"),
        )
        .with_details(name, resource)
    }

    /// 400: the request body or parameters do not make sense.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    /// 422: the object is not acceptable.
    pub fn invalid(resource: &str, name: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(422, "Invalid", message).with_details(name, resource)
    }

    /// 422: the request's parameters are not acceptable (no object named).
    pub fn invalid_params(message: impl Into<String>) -> ApiError {
        ApiError::new(422, "Invalid", message)
    }

    /// 405: the verb is not supported on this resource.
    pub fn method_not_allowed(message: impl Into<String>) -> ApiError {
        ApiError::new(405, "MethodNotAllowed", message)
    }

    /// 415: an unknown patch type.
    pub fn unsupported_media_type(content_type: &str) -> ApiError {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {content_type:?})"
            ),
        )
    }

    /// 429: too many requests (an eviction a budget refuses, or an injected fault).
    pub fn too_many_requests(message: impl Into<String>) -> ApiError {
        ApiError::new(429, "TooManyRequests", message)
    }

    /// 500: an internal error (or an injected fault).
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(500, "InternalError", message)
    }

    /// 410: the requested resourceVersion is older than the retained change log.
    pub fn gone(rv: u64, oldest: u64) -> ApiError {
        ApiError::new(
            410,
            "Expired",
            format!("too old resource version: {rv} ({oldest})"),
        )
    }

    /// 410: a list's `continue` token is too old (its list is forgotten); clients relist.
    pub fn expired_continue(message: impl Into<String>) -> ApiError {
        ApiError::new(410, "Expired", message)
    }

    /// Sets `details` to name the object and its resource.
    pub fn with_details(mut self, name: &str, resource: &str) -> ApiError {
        self.details = Some(json!({"name": name, "kind": resource}));
        self
    }

    /// The Status object.
    pub fn body(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        json_response(code, &self.body())
    }
}

/// A JSON response with this status code.
pub fn json_response(code: StatusCode, body: &Value) -> Response {
    (
        code,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// A success Status (`{"status":"Success"}`) with this code.
pub fn success(code: u16) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code})
}
