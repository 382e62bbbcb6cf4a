//! A mock Kubernetes API for the shell's tests: a kube `Client` over a `tower-test` service, the
//! next request taken with its JSON body (and checked against the declared API calls, so every
//! test also checks the RBAC list), and replies.

use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use serde_json::Value;
use tower_test::mock::{Handle, SendResponse, pair};

/// The server side of the mock.
pub(crate) type Mock = Handle<Request<Body>, Response<Body>>;

/// Where a reply goes.
pub(crate) type Reply = SendResponse<Response<Body>>;

/// A request as the server saw it.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub(crate) method: Method,
    /// Path and query.
    pub(crate) uri: String,
    /// JSON body (`Null` when empty or not JSON).
    pub(crate) body: Value,
}

/// A client and the server side of its mock API.
pub(crate) fn client() -> (kube::Client, Mock) {
    let (svc, handle) = pair::<Request<Body>, Response<Body>>();
    (kube::Client::new(svc, "default"), handle)
}

/// The next request (`None` once the client is gone); panics on a call `API_CALLS` lacks.
pub(crate) async fn next(h: &mut Mock) -> Option<(Seen, Reply)> {
    let (req, send) = h.next_request().await?;
    let method = req.method().clone();
    let uri = req.uri().to_string();
    assert!(
        crate::api_calls::is_declared(&method, &uri),
        "undeclared API call {method} {uri}"
    );
    let bytes = req.into_body().collect_bytes().await.expect("body");
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Some((Seen { method, uri, body }, send))
}

/// Answers with `code` and a JSON body.
pub(crate) fn respond(send: Reply, code: u16, body: &Value) {
    let resp = Response::builder()
        .status(StatusCode::from_u16(code).expect("status"))
        .body(Body::from(serde_json::to_vec(body).expect("json")))
        .expect("response");
    send.send_response(resp);
}
