//! Bounded reads of the live API: a [`tower`] layer on the client that cuts off a response
//! body past [`ReadLimits`] with an error naming the request path and the limit, so that a
//! server sending a watch line or a list without end costs an error and a retry (the watches
//! back off), never unbounded memory.
//!
//! A watch (`watch=true`) is bounded per line, since one line holds one event and the stream
//! itself runs for minutes; every other response (list pages, discovery, the objects read or
//! written) is bounded as a whole. It decides nothing and never looks at what the bytes say.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use tower::{BoxError, Layer, Service};

/// The largest response body read, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadLimits {
    /// The longest line of a watch (one event: one object).
    pub watch_line: u64,
    /// The largest other response (a list page, discovery, one object).
    pub response: u64,
}

impl Default for ReadLimits {
    /// 16 MiB per watch line: the API server refuses request bodies over 3 MiB and etcd
    /// stores at most 1.5 MiB per object by default, so one event is far below it even with
    /// server-set fields. 1 GiB per other response: the watches list in pages of 500 objects,
    /// about 25 MB for 500 Nodes with their 50 images each; even a server that ignores the page
    /// size returns 15,000 such Nodes in about 750 MB.
    fn default() -> Self {
        ReadLimits {
            watch_line: 16 << 20,
            response: 1 << 30,
        }
    }
}

/// Why a response body was cut off.
#[derive(Debug, thiserror::Error)]
#[error("{what} of {path} exceeds the limit of {limit} bytes; cut off (retried)")]
pub struct TooLarge {
    /// `a watch line` or `the response`.
    pub what: &'static str,
    /// The request path (names the kind: `/api/v1/nodes`).
    pub path: String,
    /// The limit.
    pub limit: u64,
}

/// The layer bounding every response body of the service it wraps.
#[derive(Clone, Copy, Debug, Default)]
pub struct BoundedReadsLayer {
    limits: ReadLimits,
}

impl BoundedReadsLayer {
    /// Bounds at `limits`.
    pub fn new(limits: ReadLimits) -> BoundedReadsLayer {
        BoundedReadsLayer { limits }
    }
}

impl<S> Layer<S> for BoundedReadsLayer {
    type Service = BoundedReads<S>;
    fn layer(&self, inner: S) -> BoundedReads<S> {
        BoundedReads {
            inner,
            limits: self.limits,
        }
    }
}

/// The service of [`BoundedReadsLayer`].
#[derive(Clone, Debug)]
pub struct BoundedReads<S> {
    inner: S,
    limits: ReadLimits,
}

impl<S, Q, B> Service<Request<Q>> for BoundedReads<S>
where
    S: Service<Request<Q>, Response = Response<B>>,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
{
    type Response = Response<BoundedBody<B>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<Q>) -> Self::Future {
        let watch = is_watch(req.uri().query().unwrap_or(""));
        let path = req.uri().path().to_string();
        let limit = if watch {
            Limit::Line(self.limits.watch_line)
        } else {
            Limit::Total(self.limits.response)
        };
        let fut = self.inner.call(req);
        Box::pin(async move {
            let res = fut.await.map_err(Into::into)?;
            Ok(res.map(|inner| BoundedBody {
                inner,
                limit,
                count: 0,
                path,
            }))
        })
    }
}

/// Whether the query asks for a watch (`watch=true`, `watch=1`).
fn is_watch(query: &str) -> bool {
    query
        .split('&')
        .any(|p| matches!(p, "watch=true" | "watch=1" | "watch=True"))
}

#[derive(Clone, Copy, Debug)]
enum Limit {
    /// Bytes since the last newline.
    Line(u64),
    /// Bytes in all.
    Total(u64),
}

/// A response body that fails once it passes its limit.
pub struct BoundedBody<B> {
    inner: B,
    limit: Limit,
    /// Bytes counted against the limit so far.
    count: u64,
    path: String,
}

impl<B> fmt::Debug for BoundedBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoundedBody")
            .field("limit", &self.limit)
            .field("count", &self.count)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl<B> BoundedBody<B> {
    /// Counts `data`; the error when it passes the limit.
    fn count(&mut self, data: &[u8]) -> Result<(), TooLarge> {
        let (what, limit) = match self.limit {
            Limit::Line(limit) => {
                // Every line ending in this chunk is checked (the first one continues the
                // count of the chunks before); the rest starts the next count.
                let mut start = 0;
                for end in newlines(data) {
                    let mut line = (end - start) as u64;
                    if start == 0 {
                        line = line.saturating_add(self.count);
                    }
                    if line > limit {
                        return Err(self.too_large("a watch line", limit));
                    }
                    start = end + 1;
                }
                let rest = (data.len() - start) as u64;
                self.count = if start == 0 {
                    self.count.saturating_add(rest)
                } else {
                    rest
                };
                ("a watch line", limit)
            }
            Limit::Total(limit) => {
                self.count = self.count.saturating_add(data.len() as u64);
                ("the response", limit)
            }
        };
        if self.count > limit {
            return Err(self.too_large(what, limit));
        }
        Ok(())
    }

    fn too_large(&self, what: &'static str, limit: u64) -> TooLarge {
        TooLarge {
            what,
            path: self.path.clone(),
            limit,
        }
    }
}

/// The positions of the newlines in `data`.
fn newlines(data: &[u8]) -> impl Iterator<Item = usize> + '_ {
    (data.iter().enumerate()).filter_map(|(i, b)| (*b == b'\n').then_some(i))
}

impl<B> Body for BoundedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref()
                    && let Err(e) = this.count(data.chunk())
                {
                    return Poll::Ready(Some(Err(Box::new(e))));
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The client of `config` with its reads bounded at `limits`.
pub fn client(config: kube::Config, limits: ReadLimits) -> Result<kube::Client, kube::Error> {
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&BoundedReadsLayer::new(limits))
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};

    type Chunks =
        StreamBody<futures::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, std::io::Error>>>>;

    fn body(chunks: Vec<&'static [u8]>, limit: Limit) -> BoundedBody<Chunks> {
        let frames: Vec<Result<Frame<Bytes>, std::io::Error>> = (chunks.into_iter())
            .map(|c| Ok(Frame::data(Bytes::from_static(c))))
            .collect();
        BoundedBody {
            inner: StreamBody::new(futures::stream::iter(frames)),
            limit,
            count: 0,
            path: "/api/v1/nodes".into(),
        }
    }

    #[tokio::test]
    async fn a_watch_line_without_end_is_cut_off_but_many_short_lines_are_not() {
        let ok = body(
            vec![b"{\"a\":1}\n{\"b\"", b":2}\n", b"{}\n"],
            Limit::Line(8),
        );
        let got = ok.collect().await.expect("short lines pass").to_bytes();
        assert_eq!(&got[..], b"{\"a\":1}\n{\"b\":2}\n{}\n");
        // A long line ending inside a chunk, after a short one (found by the fuzz suite).
        let inside = body(vec![b"{}\n{\"a\":\"xxxxxxxx\"}\n{}"], Limit::Line(8));
        assert!(inside.collect().await.is_err());
        let across = body(vec![b"{\"a\":\"xx", b"xxxxx\"}\n"], Limit::Line(8));
        assert!(across.collect().await.is_err());
        let endless = body(vec![b"{\"a\":", b"\"xxxx", b"xxxx"], Limit::Line(8));
        let e = endless.collect().await.expect_err("cut off");
        assert_eq!(
            e.to_string(),
            "a watch line of /api/v1/nodes exceeds the limit of 8 bytes; cut off (retried)"
        );
    }

    #[tokio::test]
    async fn a_response_is_bounded_as_a_whole() {
        let ok = body(vec![b"1234", b"5678"], Limit::Total(8));
        assert!(ok.collect().await.is_ok());
        let long = body(vec![b"1234\n", b"5678\n"], Limit::Total(8));
        let e = long.collect().await.expect_err("cut off");
        assert!(
            e.to_string()
                .starts_with("the response of /api/v1/nodes exceeds"),
            "{e}"
        );
    }

    #[test]
    fn watches_are_told_apart_by_their_query() {
        assert!(is_watch("watch=true&resourceVersion=5"));
        assert!(is_watch("labelSelector=a&watch=1"));
        assert!(!is_watch("limit=500"));
        assert!(!is_watch("watch=false"));
        assert!(!is_watch("fieldSelector=watch%3Dtrue"));
    }
}
