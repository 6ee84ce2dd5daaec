//! Serving connections: HTTP/1.1 through hyper, each connection bounded in time and their
//! number bounded, so that clients that open connections and send nothing, send headers
//! byte by byte, or keep idle connections open cannot hold file descriptors and memory.
//!
//! A connection is always in one of three phases, and each but the busy one has a deadline:
//! - waiting for headers (from the connection's start, or from the first byte of a request
//!   after an idle time): closed `headerReadTimeout` after it began;
//! - idle between keep-alive requests: closed after `idleTimeout`;
//! - busy, a request in progress until its answer is sent: not closed for time while the
//!   client takes what is sent (the body has `bodyReadTimeout`, handlers `requestTimeout`,
//!   and streams are meant to last); a client that stops reading for `idleTimeout` is.
//!
//! hyper's own `header_read_timeout` runs from the end of the previous answer, so it would
//! close idle keep-alive connections at the header deadline too; it is off, and this module
//! keeps both deadlines (Go's `ReadHeaderTimeout` and `IdleTimeout` semantics).
//!
//! With `maxConnections` open, a new connection closes the one that has waited longest
//! without a request in progress (nginx reuses idle keep-alive connections the same way): a
//! flood of idle or slow connections cannot lock out clients that send requests. If every
//! connection has a request in progress, the new one is closed at once.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, HttpBody};
use axum::extract::ConnectInfo;
use bytes::Bytes;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// The bounds on connections, from the settings.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// `headerReadTimeout`: from a connection's start, or a request's first byte, until its
    /// headers are complete.
    pub header_read_timeout: Duration,
    /// `idleTimeout`: how long a keep-alive connection may wait for its next request.
    pub idle_timeout: Duration,
    /// `maxConnections`.
    pub max_connections: usize,
}

/// File descriptors the process may need besides its connections: the apiserver's, the
/// listener, the runtime's, logs.
const OWN_FILE_DESCRIPTORS: usize = 64;

/// Raises the soft limit on open files to what `max_connections` needs, up to the hard limit,
/// as Go programs do at start: many hosts default the soft limit to 1024, which the default
/// connection bound would exhaust before it takes effect.
#[cfg(unix)]
pub(crate) fn ensure_file_descriptors(max_connections: usize) {
    let wanted = max_connections.saturating_add(OWN_FILE_DESCRIPTORS) as libc::rlim_t;
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own; setrlimit only reads it.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return;
    }
    if limit.rlim_cur < wanted {
        let raised = libc::rlimit {
            rlim_cur: wanted.min(limit.rlim_max),
            rlim_max: limit.rlim_max,
        };
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit = raised;
        }
    }
    if limit.rlim_cur < wanted {
        tracing::warn!(
            open_files = limit.rlim_cur,
            max_connections,
            "the open-file limit is lower than maxConnections needs: lower maxConnections or raise the limit (ulimit -n)"
        );
    }
}

#[cfg(not(unix))]
pub(crate) fn ensure_file_descriptors(_max_connections: usize) {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Headers { since: Instant },
    Idle { since: Instant },
    Busy,
}

#[derive(Debug)]
struct Inner {
    phase: Phase,
    /// Requests whose answer is not sent yet; HTTP/1.1 serves one at a time, but an answer's
    /// end and the next request's start may overlap by a poll.
    in_flight: usize,
    /// Since when the client has not taken what we have to send (the socket's buffer is full).
    write_blocked_since: Option<Instant>,
}

/// One connection, as its task, the registry and the reads see it.
#[derive(Debug)]
struct Connection {
    inner: Mutex<Inner>,
    /// Cancelled to close the connection to make room for a new one.
    evict: CancellationToken,
}

impl Connection {
    fn new() -> Connection {
        Connection {
            inner: Mutex::new(Inner {
                phase: Phase::Headers {
                    since: Instant::now(),
                },
                in_flight: 0,
                write_blocked_since: None,
            }),
            evict: CancellationToken::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes arrived: after an idle time, they start a request, whose headers now have a
    /// deadline.
    fn received(&self) {
        let mut inner = self.lock();
        if let Phase::Idle { .. } = inner.phase {
            inner.phase = Phase::Headers {
                since: Instant::now(),
            };
        }
    }

    fn request_started(self: &Arc<Self>) -> InFlight {
        let mut inner = self.lock();
        inner.in_flight += 1;
        inner.phase = Phase::Busy;
        InFlight(self.clone())
    }

    /// A write made progress (true) or found the socket's buffer full (false). hyper takes
    /// an answer's body before it has written it all, so a connection is idle only once
    /// nothing moves: a slow reader still taking a large answer is not cut off.
    fn wrote(&self, progressed: bool) {
        let mut inner = self.lock();
        if progressed {
            inner.write_blocked_since = None;
            if let Phase::Idle { .. } = inner.phase {
                inner.phase = Phase::Idle {
                    since: Instant::now(),
                };
            }
        } else if inner.write_blocked_since.is_none() {
            inner.write_blocked_since = Some(Instant::now());
        }
    }

    /// When the connection is closed if nothing changes. A client that stops reading what
    /// it asked for is idle in the other direction: it gets `idleTimeout` too, so a busy
    /// connection is bounded by its reader, while a stream with nothing to send is not.
    fn deadline(&self, limits: &ConnectionLimits) -> Option<Instant> {
        let inner = self.lock();
        let phase = match inner.phase {
            Phase::Headers { since } => Some(since + limits.header_read_timeout),
            Phase::Idle { since } => Some(since + limits.idle_timeout),
            Phase::Busy => None,
        };
        let unread = inner.write_blocked_since.map(|t| t + limits.idle_timeout);
        match (phase, unread) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Since when it has waited without a request in progress; None while busy.
    fn waiting_since(&self) -> Option<Instant> {
        match self.lock().phase {
            Phase::Headers { since } | Phase::Idle { since } => Some(since),
            Phase::Busy => None,
        }
    }
}

/// A request in progress, until its answer is sent (or the connection drops it).
struct InFlight(Arc<Connection>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut inner = self.0.lock();
        inner.in_flight = inner.in_flight.saturating_sub(1);
        if inner.in_flight == 0 {
            inner.phase = Phase::Idle {
                since: Instant::now(),
            };
        }
    }
}

/// The answer's body, holding its request in flight until hyper has sent it all.
struct Answer {
    body: Body,
    _in_flight: InFlight,
}

impl HttpBody for Answer {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The socket, telling its connection when bytes arrive.
struct Watched {
    stream: TcpStream,
    connection: Arc<Connection>,
}

impl AsyncRead for Watched {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.connection.received();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.connection.wrote(polled.is_ready());
        polled
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.connection.wrote(polled.is_ready());
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// The open connections, to bound their number and to find one to close.
#[derive(Default)]
struct Registry {
    open: Mutex<HashMap<u64, Arc<Connection>>>,
    next_id: AtomicU64,
    /// Told each time a connection ends, for shutdown to wait until none is left.
    closed: Notify,
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Arc<Connection>>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for a new connection, made by closing the longest-waiting connection without a
    /// request in progress if the bound is reached; None if every connection is busy.
    fn admit(&self, max: usize) -> Option<(u64, Arc<Connection>)> {
        let mut open = self.lock();
        if open.len() >= max && !Self::evict_one(&mut open) {
            return None;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let connection = Arc::new(Connection::new());
        open.insert(id, connection.clone());
        Some((id, connection))
    }

    /// Closes the connection that has waited longest without a request; false if none has.
    /// Linear in the open connections, and only run when the bound is reached.
    fn evict_one(open: &mut HashMap<u64, Arc<Connection>>) -> bool {
        let oldest = open
            .iter()
            .filter_map(|(id, c)| c.waiting_since().map(|since| (since, *id)))
            .min();
        match oldest.and_then(|(_, id)| open.remove(&id)) {
            Some(connection) => {
                connection.evict.cancel();
                true
            }
            None => false,
        }
    }

    fn remove(&self, id: u64) {
        self.lock().remove(&id);
        self.closed.notify_one();
    }

    fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

/// Serves `app` on `listener` until `drain` completes; then stops accepting, lets each
/// connection finish the request it is serving (idle ones close at once), and returns when
/// every connection has closed.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    drain: impl Future<Output = ()>,
) {
    let registry = Arc::new(Registry::default());
    let stop = CancellationToken::new();
    let mut drain = pin!(drain);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors, typically: closing a waiting connection frees
                    // one; the pause keeps a persistent failure from spinning.
                    tracing::debug!(error = %e, "accepting a connection failed");
                    Registry::evict_one(&mut registry.lock());
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = &mut drain => break,
        };
        let Some((id, connection)) = registry.admit(limits.max_connections) else {
            tracing::debug!(
                max = limits.max_connections,
                "connection refused: every connection has a request in progress"
            );
            drop(stream);
            continue;
        };
        // Answers are written whole or streamed as events: no reason to hold small writes.
        let _ = stream.set_nodelay(true);
        let (app, registry, stop) = (app.clone(), registry.clone(), stop.clone());
        tokio::spawn(async move {
            run_connection(stream, connection, app, limits, stop).await;
            registry.remove(id);
        });
    }
    drop(listener);
    stop.cancel();
    while !registry.is_empty() {
        registry.closed.notified().await;
    }
}

async fn run_connection(
    stream: TcpStream,
    connection: Arc<Connection>,
    app: Router,
    limits: ConnectionLimits,
    stop: CancellationToken,
) {
    // The client's address, as axum's ConnectInfo: what limits per client are keyed by.
    let peer = stream
        .peer_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let service = {
        let connection = connection.clone();
        hyper::service::service_fn(move |request: http::Request<Incoming>| {
            let in_flight = connection.request_started();
            let mut request = request.map(Body::new);
            request.extensions_mut().insert(ConnectInfo(peer));
            let answer = app.clone().oneshot(request);
            async move {
                let response = match answer.await {
                    Ok(response) => response,
                    Err(never) => match never {},
                };
                Ok::<_, Infallible>(response.map(|body| Answer {
                    body,
                    _in_flight: in_flight,
                }))
            }
        })
    };
    let io = TokioIo::new(Watched {
        stream,
        connection: connection.clone(),
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(None);
    let mut served = pin!(builder.serve_connection(io, service));
    let mut deadline = pin!(tokio::time::sleep(limits.header_read_timeout));
    let mut armed = None;
    let mut evicted = pin!(connection.evict.cancelled());
    let mut stopping = pin!(stop.cancelled());
    let mut stopped = false;
    poll_fn(|cx| {
        if !stopped && stopping.as_mut().poll(cx).is_ready() {
            stopped = true;
            served.as_mut().graceful_shutdown();
        }
        if let Poll::Ready(result) = served.as_mut().poll(cx) {
            if let Err(e) = result {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            return Poll::Ready(());
        }
        if evicted.as_mut().poll(cx).is_ready() {
            tracing::debug!("connection closed to make room for a new one");
            return Poll::Ready(());
        }
        // Phases change only while the connection is polled, just above.
        match connection.deadline(&limits) {
            Some(at) => {
                if armed != Some(at) {
                    deadline.as_mut().reset(at);
                    armed = Some(at);
                }
                if deadline.as_mut().poll(cx).is_ready() {
                    tracing::debug!(phase = ?connection.lock().phase, "connection timed out");
                    return Poll::Ready(());
                }
            }
            None => armed = None,
        }
        Poll::Pending
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: ConnectionLimits = ConnectionLimits {
        header_read_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(90),
        max_connections: 2,
    };

    #[tokio::test(start_paused = true)]
    async fn each_phase_has_its_own_deadline() {
        let c = Arc::new(Connection::new());
        let opened = Instant::now();
        assert_eq!(
            c.deadline(&LIMITS),
            Some(opened + LIMITS.header_read_timeout)
        );
        let request = c.request_started();
        assert_eq!(c.deadline(&LIMITS), None, "busy: never timed out here");
        c.received();
        assert_eq!(c.deadline(&LIMITS), None, "body bytes keep it busy");
        tokio::time::advance(Duration::from_secs(60)).await;
        drop(request);
        let idle = Instant::now();
        assert_eq!(c.deadline(&LIMITS), Some(idle + LIMITS.idle_timeout));
        tokio::time::advance(Duration::from_secs(5)).await;
        c.received();
        let first_byte = Instant::now();
        assert_eq!(
            c.deadline(&LIMITS),
            Some(first_byte + LIMITS.header_read_timeout),
            "the next request's first byte starts its header deadline"
        );
        c.received();
        assert_eq!(
            c.deadline(&LIMITS),
            Some(first_byte + LIMITS.header_read_timeout),
            "more header bytes do not extend it"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_stops_reading_gets_the_idle_timeout() {
        let c = Arc::new(Connection::new());
        let _request = c.request_started();
        c.wrote(true);
        assert_eq!(c.deadline(&LIMITS), None);
        c.wrote(false);
        let blocked = Instant::now();
        tokio::time::advance(Duration::from_secs(1)).await;
        c.wrote(false);
        assert_eq!(c.deadline(&LIMITS), Some(blocked + LIMITS.idle_timeout));
        c.wrote(true);
        assert_eq!(c.deadline(&LIMITS), None, "progress clears it");
        drop(_request);
        tokio::time::advance(Duration::from_secs(80)).await;
        c.wrote(true);
        assert_eq!(
            c.deadline(&LIMITS),
            Some(Instant::now() + LIMITS.idle_timeout),
            "an answer still being written keeps the connection from idling out"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_bound_the_longest_waiting_connection_makes_room() {
        let registry = Registry::default();
        let (_, busy) = registry.admit(LIMITS.max_connections).unwrap();
        let _request = busy.request_started();
        tokio::time::advance(Duration::from_secs(1)).await;
        let (_, waiting) = registry.admit(LIMITS.max_connections).unwrap();
        tokio::time::advance(Duration::from_secs(1)).await;
        let (_, newest) = registry.admit(LIMITS.max_connections).unwrap();
        assert!(waiting.evict.is_cancelled(), "the waiting one made room");
        assert!(
            !busy.evict.is_cancelled(),
            "a request in progress is never cut"
        );
        let _request = newest.request_started();
        assert!(
            registry.admit(LIMITS.max_connections).is_none(),
            "all busy: the new connection is refused"
        );
        assert_eq!(registry.lock().len(), 2);
    }
}
