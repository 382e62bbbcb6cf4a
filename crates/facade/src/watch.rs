//! Watch streams: `?watch=true` answers a chunked stream of JSON lines
//! `{"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR","object":{...}}` read from the world's change
//! log, from the requested `resourceVersion` (or the current objects as ADDED when none is
//! given), with periodic bookmarks when asked, and a `410 Expired` ERROR event when the version
//! is older than the retained log.
//!
//! It decides what each watcher is sent and when its stream ends (client gone, `timeoutSeconds`,
//! shutdown, an injected cut). It never writes to the world and never holds its lock across an
//! await.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use autoscaler_world::{WatchEvent, WatchEventKind};
use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::SinkExt;
use futures::channel::mpsc;
use serde_json::{Value, json};

use crate::Shared;
use crate::faults::Chosen;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::server::{Target, selectors};
use crate::status::ApiError;

/// Longest a stream lives without `timeoutSeconds` (clients reconnect).
const MAX_STREAM: Duration = Duration::from_secs(30 * 60);

/// Starts a watch stream.
pub(crate) fn serve(
    sh: Arc<Shared>,
    t: Target,
    query: &BTreeMap<String, String>,
    chosen: Chosen,
) -> Response {
    let (ls, fs) = match selectors(query) {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let from = match query.get("resourceVersion").map(String::as_str) {
        None | Some("" | "0") => None,
        Some(v) => match v.parse::<u64>() {
            Ok(rv) => Some(rv),
            Err(_) => {
                return ApiError::bad_request(format!("invalid resourceVersion {v:?}"))
                    .into_response();
            }
        },
    };
    let bookmarks = query
        .get("allowWatchBookmarks")
        .is_some_and(|v| v == "true");
    let initial = match initial_events(query, bookmarks, sh.watch_list) {
        Ok(i) => i,
        Err(e) => return e.into_response(),
    };
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .map_or(MAX_STREAM, Duration::from_secs)
        .min(MAX_STREAM);
    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(16);
    let stream = Stream {
        sh,
        t,
        ls,
        fs,
        bookmarks,
        tx,
        sent: 0,
        chosen,
    };
    // A streaming list starts with the current objects whatever the version asked.
    let from = if initial { None } else { from };
    tokio::spawn(stream.run(from, initial, timeout));
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(rx),
    )
        .into_response()
}

/// Whether a watch asks for a streaming list (`sendInitialEvents=true`), validated as the API
/// server validates watch options: `sendInitialEvents` (either value) only where the `WatchList`
/// feature is on and with `resourceVersionMatch=NotOlderThan`; `resourceVersionMatch` only with
/// `sendInitialEvents` and only `NotOlderThan`; bookmarks required for a streaming list. A
/// refusal is `422`. The value is read as the API server converts a query boolean: only `0` and
/// `false` (any case) are false.
fn initial_events(
    query: &BTreeMap<String, String>,
    bookmarks: bool,
    watch_list: bool,
) -> Result<bool, ApiError> {
    let send = query
        .get("sendInitialEvents")
        .map(|v| !(v == "0" || v.eq_ignore_ascii_case("false")));
    let matching = query
        .get("resourceVersionMatch")
        .map(String::as_str)
        .filter(|m| !m.is_empty());
    let invalid = |m: String| Err(ApiError::invalid_params(m));
    if send.is_some() {
        if !watch_list {
            return invalid("sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled".into());
        }
        if matching != Some("NotOlderThan") {
            return invalid("resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan".into());
        }
    }
    if let Some(m) = matching {
        if send.is_none() {
            return invalid("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided".into());
        }
        if m != "NotOlderThan" {
            return invalid(format!(
                "resourceVersionMatch: Unsupported value: \"{m}\": supported values: \"NotOlderThan\""
            ));
        }
    }
    if send == Some(true) && !bookmarks {
        return invalid("allowWatchBookmarks: Required value: allowWatchBookmarks must be true when sendInitialEvents is true".into());
    }
    Ok(send == Some(true))
}

/// How many bytes of initial events are sent as one chunk.
const INITIAL_CHUNK: usize = 64 * 1024;

struct Stream {
    sh: Arc<Shared>,
    t: Target,
    ls: LabelSelector,
    fs: FieldSelector,
    bookmarks: bool,
    tx: mpsc::Sender<Result<Bytes, Infallible>>,
    /// Events sent (bookmarks excluded).
    sent: u64,
    chosen: Chosen,
}

/// Why a stream stops.
enum End {
    /// The client went away or the stream is over.
    Closed,
    /// An injected fault cut it.
    Cut,
}

fn kind_name(k: WatchEventKind) -> &'static str {
    match k {
        WatchEventKind::Added => "ADDED",
        WatchEventKind::Modified => "MODIFIED",
        WatchEventKind::Deleted => "DELETED",
    }
}

/// The object a watch event carries: a deleted object carries the `resourceVersion` of its
/// deletion, as an API server sends it, so that a client resuming from it does not see the
/// deletion again.
fn sent_object(e: &WatchEvent) -> Arc<Value> {
    if e.kind != WatchEventKind::Deleted {
        return e.object.clone();
    }
    let mut o = (*e.object).clone();
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("resourceVersion".into(), json!(e.rv.to_string()));
    }
    Arc::new(o)
}

impl Stream {
    async fn run(mut self, from: Option<u64>, initial: bool, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        let cut_at = self
            .chosen
            .drop_after
            .map(|d| tokio::time::Instant::now() + d);
        let end = self.pump(from, initial, deadline, cut_at).await;
        if matches!(end, End::Cut) {
            self.sh.faults().count_dropped_watch();
        }
    }

    async fn send(&mut self, kind: &str, object: &Value) -> Result<(), End> {
        let mut line = Vec::new();
        event_line(&mut line, kind, &self.sh.served(self.t.res.kind, object));
        self.tx
            .send(Ok(Bytes::from(line)))
            .await
            .map_err(|_| End::Closed)?;
        self.count(kind)
    }

    /// Counts a sent event; an injected cut after so many events ends the stream.
    fn count(&mut self, kind: &str) -> Result<(), End> {
        if kind != "BOOKMARK" {
            self.sent += 1;
            if self
                .chosen
                .drop_after_events
                .is_some_and(|n| self.sent >= n)
            {
                return Err(End::Cut);
            }
        }
        Ok(())
    }

    fn matches(&self, v: &Value) -> bool {
        self.ls.matches(v) && self.fs.matches(v)
    }

    /// The current objects as ADDED, in chunks of [`INITIAL_CHUNK`] bytes; for a streaming
    /// list (`end`) then the bookmark that marks their end, at the version they were read at.
    async fn send_initial(
        &mut self,
        objects: &[Arc<Value>],
        rv: u64,
        end: bool,
    ) -> Result<(), End> {
        let mut chunk = Vec::with_capacity(INITIAL_CHUNK + 4096);
        for obj in objects {
            event_line(&mut chunk, "ADDED", &self.sh.served(self.t.res.kind, obj));
            let counted = self.count("ADDED");
            if chunk.len() >= INITIAL_CHUNK || counted.is_err() {
                let full = std::mem::replace(&mut chunk, Vec::with_capacity(INITIAL_CHUNK + 4096));
                self.tx
                    .send(Ok(Bytes::from(full)))
                    .await
                    .map_err(|_| End::Closed)?;
            }
            counted?;
        }
        if end {
            let bookmark = json!({
                "kind": self.t.res.kind,
                "apiVersion": self.t.res.api_version(),
                "metadata": {"resourceVersion": rv.to_string(),
                    "annotations": {"k8s.io/initial-events-end": "true"}},
            });
            event_line(&mut chunk, "BOOKMARK", &bookmark);
        }
        if !chunk.is_empty() {
            self.tx
                .send(Ok(Bytes::from(chunk)))
                .await
                .map_err(|_| End::Closed)?;
        }
        Ok(())
    }

    async fn pump(
        &mut self,
        from: Option<u64>,
        initial: bool,
        deadline: tokio::time::Instant,
        cut_at: Option<tokio::time::Instant>,
    ) -> End {
        if self.chosen.drop_after_events == Some(0) {
            return End::Cut;
        }
        let mut changes = self.sh.changes.subscribe();
        let mut stop = self.sh.stop.subscribe();
        // Without a version the stream starts with the current objects, as ADDED.
        let mut last = match from {
            Some(rv) => rv,
            None => {
                // Shared objects, collected under the lock and written after it is released.
                let (objects, rv) = {
                    let w = self.sh.world();
                    let items: Vec<Arc<Value>> = w
                        .objects()
                        .list(self.t.res.group, self.t.res.kind)
                        .filter(|(k, v)| self.t.holds(k) && self.matches(v))
                        .map(|(_, v)| v.clone())
                        .collect();
                    (items, w.resource_version())
                };
                if let Err(e) = self.send_initial(&objects, rv, initial).await {
                    return e;
                }
                rv
            }
        };
        loop {
            // A group-version no longer served ends its streams, as deleting a CRD does.
            if !self
                .sh
                .surface()
                .serves(self.t.res.group, self.t.res.version)
            {
                return End::Closed;
            }
            // Marked before reading, so a write after the read still wakes the stream.
            changes.mark_unchanged();
            let batch = {
                let w = self.sh.world();
                let compacted = self.sh.compacted();
                if last < compacted {
                    Err(ApiError::gone(last, compacted))
                } else {
                    let events: Vec<(&'static str, Arc<Value>)> = w
                        .events_since(last)
                        .iter()
                        .filter(|e| self.t.holds(&e.key) && self.matches(&e.object))
                        .map(|e| (kind_name(e.kind), sent_object(e)))
                        .collect();
                    Ok((events, w.resource_version().max(last)))
                }
            };
            let (events, now_rv) = match batch {
                Ok(b) => b,
                Err(gone) => {
                    let _ = self.send("ERROR", &gone.body()).await;
                    return End::Closed;
                }
            };
            for (kind, obj) in &events {
                if let Err(e) = self.send(kind, obj).await {
                    return e;
                }
            }
            last = now_rv;
            let cut = async {
                match cut_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => futures::future::pending().await,
                }
            };
            tokio::select! {
                r = changes.changed() => if r.is_err() { return End::Closed },
                _ = tokio::time::sleep(self.sh.bookmark_interval) => {
                    if self.bookmarks {
                        let bookmark = json!({
                            "kind": self.t.res.kind,
                            "apiVersion": self.t.res.api_version(),
                            "metadata": {"resourceVersion": last.to_string()},
                        });
                        if let Err(e) = self.send("BOOKMARK", &bookmark).await {
                            return e;
                        }
                    }
                }
                _ = tokio::time::sleep_until(deadline) => return End::Closed,
                _ = cut => return End::Cut,
                _ = stop.changed() => return End::Closed,
            }
        }
    }
}

/// Appends one watch event line, `{"type":…,"object":…}` and a newline, serializing the object
/// in place (no copy of it).
fn event_line(out: &mut Vec<u8>, kind: &str, object: &Value) {
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    // A `Value` always serializes.
    let _ = serde_json::to_writer(&mut *out, object);
    out.extend_from_slice(b"}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streaming_lists_are_validated_as_the_api_server_does() {
        let q = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect()
        };
        let send = q(&[
            ("sendInitialEvents", "true"),
            ("resourceVersionMatch", "NotOlderThan"),
        ]);
        assert_eq!(initial_events(&send, true, true).ok(), Some(true));
        let code = |r: Result<bool, ApiError>| r.err().map(|e| e.into_response().status());
        let invalid = Some(StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            code(initial_events(&send, false, true)),
            invalid,
            "bookmarks required"
        );
        assert_eq!(
            code(initial_events(&send, true, false)),
            invalid,
            "feature off"
        );
        let unmatched = q(&[("sendInitialEvents", "true")]);
        assert_eq!(code(initial_events(&unmatched, true, true)), invalid);
        let matched_only = q(&[("resourceVersionMatch", "NotOlderThan")]);
        assert_eq!(code(initial_events(&matched_only, true, true)), invalid);
        assert_eq!(initial_events(&q(&[]), true, false).ok(), Some(false));
        // `false` is validated too, and any value but `0` or `false` reads as true.
        let off = q(&[("sendInitialEvents", "false")]);
        assert_eq!(code(initial_events(&off, true, true)), invalid);
        let off_matched = q(&[
            ("sendInitialEvents", "FALSE"),
            ("resourceVersionMatch", "NotOlderThan"),
        ]);
        assert_eq!(initial_events(&off_matched, false, true).ok(), Some(false));
        assert_eq!(code(initial_events(&off_matched, true, false)), invalid);
        let odd = q(&[
            ("sendInitialEvents", "yes"),
            ("resourceVersionMatch", "NotOlderThan"),
        ]);
        assert_eq!(initial_events(&odd, true, true).ok(), Some(true));
        let exact = q(&[
            ("sendInitialEvents", "false"),
            ("resourceVersionMatch", "Exact"),
        ]);
        assert_eq!(code(initial_events(&exact, true, true)), invalid);
    }

    #[test]
    fn event_lines_are_the_events_json() {
        let mut out = Vec::new();
        event_line(&mut out, "ADDED", &json!({"metadata": {"name": "a"}}));
        event_line(&mut out, "DELETED", &json!({"metadata": {"name": "b"}}));
        let text = String::from_utf8(out).expect("utf-8");
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("one JSON event a line"))
            .collect();
        assert_eq!(
            lines,
            [
                json!({"type": "ADDED", "object": {"metadata": {"name": "a"}}}),
                json!({"type": "DELETED", "object": {"metadata": {"name": "b"}}})
            ]
        );
    }

    #[test]
    fn a_deletion_carries_its_own_resource_version() {
        let store = |kind, rv| WatchEvent {
            rv,
            at: 0,
            kind,
            key: autoscaler_world::object_key("", "ConfigMap", "ns", "a"),
            object: Arc::new(json!({"metadata": {"name": "a", "resourceVersion": "7"}})),
        };
        let rv = |v: &Value| v["metadata"]["resourceVersion"].clone();
        assert_eq!(rv(&sent_object(&store(WatchEventKind::Deleted, 9))), "9");
        assert_eq!(rv(&sent_object(&store(WatchEventKind::Modified, 7))), "7");
    }
}
