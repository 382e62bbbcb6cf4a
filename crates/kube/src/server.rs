//! The HTTP endpoint on `--address`: `GET /metrics` (Prometheus / OpenMetrics text),
//! `GET /health-check` (200 `OK`, or 500 with the reason, for the liveness probe) and, with
//! `--enable-explain-endpoint` (ours), `GET /explain`: the last loop's plan as one JSON
//! document, the one `plan --output json` prints.
//!
//! It only reads [`Metrics`], [`Health`] and [`LastPlan`]; it never changes the autoscaler's
//! state.

use std::future::Future;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::health::Health;
use crate::metrics::{CONTENT_TYPE, Metrics};

/// The last loop's plan document, as `/explain` serves it (set by the leader after each loop).
#[derive(Debug, Default)]
pub struct LastPlan(Mutex<Option<Arc<str>>>);

impl LastPlan {
    /// Replaces the document.
    pub fn set(&self, json: String) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(json.into());
    }

    /// The document, once a loop has run.
    pub fn get(&self) -> Option<Arc<str>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[derive(Clone)]
struct Shared {
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    explain: Option<Arc<LastPlan>>,
}

async fn metrics(State(s): State<Shared>) -> Response {
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], s.metrics.encode()).into_response()
}

async fn health_check(State(s): State<Shared>) -> Response {
    match s.health.check(tokio::time::Instant::now()) {
        Ok(()) => (StatusCode::OK, "OK").into_response(),
        Err(why) => (StatusCode::INTERNAL_SERVER_ERROR, format!("Error: {why}")).into_response(),
    }
}

async fn explain(State(s): State<Shared>) -> Response {
    match s.explain.as_ref().and_then(|e| e.get()) {
        Some(doc) => (
            [(header::CONTENT_TYPE, "application/json")],
            doc.to_string(),
        )
            .into_response(),
        // The route exists only with the flag; before the first loop of a leader there is
        // nothing to explain yet (a standby replica never has).
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            "no loop has run here yet (only the leader runs loops)\n",
        )
            .into_response(),
    }
}

/// The routes, for [`serve`] and tests: `/explain` only when `explain` is given.
pub fn router(
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    explain: Option<Arc<LastPlan>>,
) -> Router {
    let mut r = Router::new()
        .route("/metrics", get(self::metrics))
        .route("/health-check", get(health_check));
    if explain.is_some() {
        r = r.route("/explain", get(self::explain));
    }
    r.with_state(Shared {
        metrics,
        health,
        explain,
    })
}

/// Serves `/metrics`, `/health-check` and (when given) `/explain` on `listener` until
/// `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    explain: Option<Arc<LastPlan>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(metrics, health, explain))
        .with_graceful_shutdown(shutdown)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::net::{TcpListener, TcpStream};

    /// One HTTP/1.1 request over a fresh connection; returns (status, headers, body).
    async fn request(addr: std::net::SocketAddr, path: &str) -> (u16, String, String) {
        let s = TcpStream::connect(addr).await.expect("connect");
        let req = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
        // Plain readiness loops: the crate's tokio has no `io-util`.
        let mut out = req.as_bytes();
        while !out.is_empty() {
            s.writable().await.expect("writable");
            match s.try_write(out) {
                Ok(n) => out = &out[n..],
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("write: {e}"),
            }
        }
        let mut bytes = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            s.readable().await.expect("readable");
            match s.try_read(&mut buf) {
                Ok(0) => break,
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("read: {e}"),
            }
        }
        let raw = String::from_utf8(bytes).expect("utf-8 response");
        let (head, body) = raw.split_once("\r\n\r\n").expect("head and body");
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .expect("status code");
        (status, head.to_ascii_lowercase(), body.to_string())
    }

    async fn start(
        health: Arc<Health>,
    ) -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>) {
        start_with(health, None).await
    }

    async fn start_with(
        health: Arc<Health>,
        explain: Option<Arc<LastPlan>>,
    ) -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let metrics = Arc::new(Metrics::new());
        metrics.scaled_up(3);
        tokio::spawn(serve(listener, metrics, health, explain, async {
            let _ = rx.await;
        }));
        (addr, tx)
    }

    /// `/explain` exists only with the flag; it says so before the first loop, then serves
    /// the last document as JSON.
    #[tokio::test]
    async fn explain_is_served_only_when_enabled_and_after_a_loop() {
        let health = || {
            Arc::new(Health::new(
                Duration::from_secs(600),
                Duration::from_secs(900),
            ))
        };
        let (addr, _stop) = start(health()).await;
        assert_eq!(request(addr, "/explain").await.0, 404);

        let plan = Arc::new(LastPlan::default());
        let (addr, _stop2) = start_with(health(), Some(plan.clone())).await;
        let (status, _, body) = request(addr, "/explain").await;
        assert_eq!(status, 503);
        assert!(body.contains("no loop has run"), "{body}");
        plan.set("{\"now_ms\": 1}\n".into());
        let (status, head, body) = request(addr, "/explain").await;
        assert_eq!((status, body.as_str()), (200, "{\"now_ms\": 1}\n"));
        assert!(head.contains("content-type: application/json"), "{head}");
    }

    #[tokio::test]
    async fn metrics_are_served_as_openmetrics_text() {
        let (addr, _stop) = start(Arc::new(Health::new(
            Duration::from_secs(600),
            Duration::from_secs(900),
        )))
        .await;
        let (status, head, body) = request(addr, "/metrics").await;
        assert_eq!(status, 200);
        assert!(
            head.contains("content-type: application/openmetrics-text; version=1.0.0"),
            "{head}"
        );
        assert!(
            body.contains("cluster_autoscaler_scaled_up_nodes_total 3\n"),
            "{body}"
        );
        assert!(body.ends_with("# EOF\n"));
        let (status, _, _) = request(addr, "/nothing").await;
        assert_eq!(status, 404);
    }

    /// The health check flips when the loop stalls (paused clock: the server reads the same
    /// virtual time the test advances) and recovers when a loop succeeds.
    #[tokio::test(start_paused = true)]
    async fn the_health_check_flips_when_the_loop_stalls_and_recovers() {
        let health = Arc::new(Health::new(
            Duration::from_secs(600),
            Duration::from_secs(900),
        ));
        let (addr, stop) = start(health.clone()).await;
        health.start_monitoring(tokio::time::Instant::now());
        health.loop_succeeded(tokio::time::Instant::now());
        let (status, _, body) = request(addr, "/health-check").await;
        assert_eq!((status, body.as_str()), (200, "OK"));

        tokio::time::advance(Duration::from_secs(601)).await;
        let (status, _, body) = request(addr, "/health-check").await;
        assert_eq!(status, 500);
        assert!(body.starts_with("Error: last activity"), "{body}");

        health.loop_started(tokio::time::Instant::now());
        health.loop_succeeded(tokio::time::Instant::now());
        let (status, _, body) = request(addr, "/health-check").await;
        assert_eq!((status, body.as_str()), (200, "OK"));

        // Shutdown ends the server.
        let _ = stop.send(());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
