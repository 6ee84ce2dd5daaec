//! Serving connections: HTTP/1.1 and HTTP/2 (h2 by ALPN over TLS, h2c with prior knowledge
//! on plain TCP; hyper-util's `auto` builder tells them apart by the client's first bytes),
//! each connection bounded in time and their number bounded, so that clients that open
//! connections and send nothing, send headers byte by byte, or keep idle connections open
//! cannot hold file descriptors and memory.
//!
//! A connection is always in one of three phases, and each but the busy one has a deadline:
//! - waiting for headers (from the connection's start, or the end of its TLS handshake, which
//!   has the same deadline of its own; for HTTP/1.1 also from the first byte of a request
//!   after an idle time): closed `headerReadTimeout` after it began; for HTTP/2 this is the
//!   preface and the first request's headers;
//! - idle, no request in progress: closed after `idleTimeout`. HTTP/1.1's idle time restarts
//!   while an answer is still being written; HTTP/2's runs from its last stream's end, and
//!   the frames that keep the connection alive (pings, window updates) do not restart it;
//! - busy, a request in progress (HTTP/2: any stream open, a watch among them) until its
//!   answer is sent: not closed for time while the client takes what is sent (the body has
//!   `bodyReadTimeout`, handlers `requestTimeout`, and streams are meant to last); a client
//!   that stops reading for `idleTimeout` is, and an HTTP/2 peer that does not answer our
//!   keep-alive ping within [`HTTP2_KEEP_ALIVE_TIMEOUT`] is taken for dead.
//!
//! A request that switches its HTTP/1.1 connection to another protocol (a relayed exec,
//! attach or port-forward) leaves the connection to its handler once the 101 is sent; the
//! connection stays busy, counted and open to eviction until the handler drops it, and is
//! closed (the handler told through [`apis::ConnectionEnd`]) when evicted or when its client
//! stops reading for `idleTimeout`.
//!
//! HTTP/2 streams per connection are bounded by `http2MaxConcurrentStreams`: watches are
//! bounded per client by the fairness shares, not by the connection they share, so the
//! default lets a thousand share one; each stream's unsent answer is bounded by
//! [`HTTP2_SEND_BUFFER`] and what all of them may send us by the connection's window.
//!
//! hyper's own `header_read_timeout` runs from the end of the previous answer, so it would
//! close idle keep-alive connections at the header deadline too; it is off, and this module
//! keeps both deadlines (Go's `ReadHeaderTimeout` and `IdleTimeout` semantics).
//!
//! With `maxConnections` open, connections are shared max-min fairly among client addresses:
//! a new connection from a client holding fewer than the client holding the most (by two or
//! more, so that two clients never trade one connection back and forth) closes one of that
//! client's, the one that has waited longest without a request in progress, else its oldest;
//! a client that already holds the most only takes the place of its own longest-waiting
//! connection (nginx reuses idle keep-alive connections the same way), and if every one of
//! its connections has a request in progress, its new one is closed at once. So neither a
//! flood of idle or slow connections nor a client holding every connection with watches
//! locks out another client, and a client under its share never loses a connection.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::poll_fn;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use futures::future::Either;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::{Service, ServiceExt};

use apis::{App, ConnectionCounts, ConnectionEnd, Holding};

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
    /// `http2MaxConcurrentStreams`: requests one HTTP/2 connection may have in progress.
    pub http2_max_concurrent_streams: u32,
}

/// How often an HTTP/2 connection with nothing arriving is pinged, so that a peer gone
/// without a word (a watch's client on a host that died) is found and its streams end.
pub const HTTP2_KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(30);
/// How long the ping's answer may take before the connection is closed.
pub const HTTP2_KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(20);
/// Bytes of one HTTP/2 stream's answer held while the client's window or the socket is
/// full (hyper's default is 400 KiB): a thousand watches on a connection hold 64 MiB at most.
pub const HTTP2_SEND_BUFFER: usize = 64 * 1024;

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

/// Where a connection is, and since when. A phase begun while the connection's task polls it
/// (`since: None`) is stamped when that poll ends, by [`Connection::deadline`]: a request on a
/// kept-alive connection begins two phases (its headers, then the idle time after its
/// answer) and reading the clock for each cost more than the rest of the bookkeeping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Headers { since: Option<Instant> },
    Idle { since: Option<Instant> },
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
    /// HTTP/2, known from its first request: bytes that arrive or leave while no stream is
    /// open are frames of the connection (pings, settings), not a request or an answer.
    multiplexed: bool,
    /// Switched to another protocol: hyper is done with it, a handler has it.
    switched: bool,
}

impl Inner {
    /// Since when the connection has waited without a request in progress, a phase begun in
    /// this poll stamped now; None while busy.
    fn waiting_since(&mut self) -> Option<Instant> {
        match &mut self.phase {
            Phase::Headers { since } | Phase::Idle { since } => {
                Some(*since.get_or_insert_with(Instant::now))
            }
            Phase::Busy => None,
        }
    }
}

/// One connection, as its task, the registry and the reads see it.
#[derive(Debug)]
struct Connection {
    inner: Mutex<Inner>,
    /// Cancelled to close the connection to make room for a new one (or, once switched to
    /// another protocol, for a client that stopped reading).
    evict: CancellationToken,
    /// Cancelled once its socket is dropped: by hyper, or by the handler of a switched
    /// connection.
    released: CancellationToken,
    /// The client's address, whose connections are counted together.
    peer: SocketAddr,
}

impl Connection {
    fn new(peer: SocketAddr) -> Connection {
        Connection {
            peer,
            inner: Mutex::new(Inner {
                phase: Phase::Headers {
                    since: Some(Instant::now()),
                },
                in_flight: 0,
                write_blocked_since: None,
                multiplexed: false,
                switched: false,
            }),
            evict: CancellationToken::new(),
            released: CancellationToken::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whose connections this one is counted with: an IPv4 client reaching an IPv6
    /// listener is the same client as over IPv4.
    fn client(&self) -> IpAddr {
        self.peer.ip().to_canonical()
    }

    /// Bytes arrived: after an idle time, on HTTP/1.1 they start a request, whose headers now
    /// have a deadline.
    fn received(&self) {
        let mut inner = self.lock();
        if let Phase::Idle { .. } = inner.phase
            && !inner.multiplexed
        {
            inner.phase = Phase::Headers { since: None };
        }
    }

    /// The TLS handshake is done: the request's headers get their own deadline from now.
    fn handshaken(&self) {
        self.lock().phase = Phase::Headers {
            since: Some(Instant::now()),
        };
    }

    fn request_started(self: &Arc<Self>, version: http::Version) -> InFlight {
        let mut inner = self.lock();
        inner.in_flight += 1;
        inner.phase = Phase::Busy;
        inner.multiplexed |= version == http::Version::HTTP_2;
        InFlight(self.clone())
    }

    /// The answer to a request was a 101: the connection is its handler's, a request in
    /// progress that no answer ends.
    fn switched(&self) {
        let mut inner = self.lock();
        inner.switched = true;
        inner.in_flight += 1;
        inner.phase = Phase::Busy;
    }

    fn is_switched(&self) -> bool {
        self.lock().switched
    }

    /// A write made progress (true) or found the socket's buffer full (false). hyper takes
    /// an answer's body before it has written it all, so a connection is idle only once
    /// nothing moves: a slow reader still taking a large answer is not cut off.
    fn wrote(&self, progressed: bool) {
        let mut inner = self.lock();
        if progressed {
            inner.write_blocked_since = None;
            if let Phase::Idle { .. } = inner.phase
                && !inner.multiplexed
            {
                inner.phase = Phase::Idle { since: None };
            }
        } else if inner.write_blocked_since.is_none() {
            inner.write_blocked_since = Some(Instant::now());
        }
    }

    /// When the connection is closed if nothing changes. A client that stops reading what
    /// it asked for is idle in the other direction: it gets `idleTimeout` too, so a busy
    /// connection is bounded by its reader, while a stream with nothing to send is not.
    fn deadline(&self, limits: &ConnectionLimits) -> Option<Instant> {
        let mut inner = self.lock();
        let timeout = match inner.phase {
            Phase::Headers { .. } => Some(limits.header_read_timeout),
            Phase::Idle { .. } => Some(limits.idle_timeout),
            Phase::Busy => None,
        };
        let phase = timeout
            .zip(inner.waiting_since())
            .map(|(timeout, since)| since + timeout);
        let unread = inner.write_blocked_since.map(|t| t + limits.idle_timeout);
        match (phase, unread) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Since when it has waited without a request in progress; None while busy.
    fn waiting_since(&self) -> Option<Instant> {
        self.lock().waiting_since()
    }
}

/// A request in progress, until its answer is sent (or the connection drops it).
struct InFlight(Arc<Connection>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut inner = self.0.lock();
        inner.in_flight = inner.in_flight.saturating_sub(1);
        if inner.in_flight == 0 {
            inner.phase = Phase::Idle { since: None };
        }
    }
}

/// The socket, telling its connection when bytes arrive.
struct Watched {
    stream: TcpStream,
    connection: Arc<Connection>,
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.connection.released.cancel();
    }
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

/// The open connections and how many each client address holds.
#[derive(Default)]
struct Open {
    connections: HashMap<u64, Arc<Connection>>,
    per_client: HashMap<IpAddr, usize>,
}

/// Why a connection was closed, or a new one refused, at the bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MadeRoom {
    /// A connection of the client holding the most was closed for one holding fewer.
    ClosedAnother,
    /// The newcomer's client holds the most: one of its own waiting connections was closed.
    ClosedOwn,
}

impl Open {
    fn insert(&mut self, id: u64, connection: Arc<Connection>) {
        *self.per_client.entry(connection.client()).or_default() += 1;
        self.connections.insert(id, connection);
    }

    fn remove(&mut self, id: u64) -> Option<Arc<Connection>> {
        let connection = self.connections.remove(&id)?;
        let client = connection.client();
        if let Some(held) = self.per_client.get_mut(&client) {
            *held -= 1;
            if *held == 0 {
                self.per_client.remove(&client);
            }
        }
        Some(connection)
    }

    /// The connection of `client` to close: the one waiting longest without a request in
    /// progress, else (`busy_too`) its oldest.
    fn victim_of(&self, client: IpAddr, busy_too: bool) -> Option<u64> {
        let mine = self
            .connections
            .iter()
            .filter(|(_, c)| c.client() == client);
        let waiting = mine
            .clone()
            .filter_map(|(id, c)| c.waiting_since().map(|since| (since, *id)))
            .min()
            .map(|(_, id)| id);
        waiting.or_else(|| busy_too.then(|| mine.map(|(id, _)| *id).min()).flatten())
    }

    fn longest_waiting(&self) -> Option<u64> {
        self.connections
            .iter()
            .filter_map(|(id, c)| c.waiting_since().map(|since| (since, *id)))
            .min()
            .map(|(_, id)| id)
    }

    /// Closes one connection to make room for one from `newcomer` (None: a client not known
    /// yet, as when accepting failed), by max-min fairness over client addresses; None if the
    /// newcomer's client holds the most and all of its connections are busy. Linear in the
    /// open connections, and only run when the bound is reached.
    fn make_room(&mut self, newcomer: Option<IpAddr>) -> Option<MadeRoom> {
        let mine = newcomer.map_or(0, |c| self.per_client.get(&c).copied().unwrap_or(0));
        // Ties go to the address that sorts last, so the choice does not depend on hashing.
        let (hog, most) = self
            .per_client
            .iter()
            .map(|(client, held)| (*held, *client))
            .max()
            .map(|(held, client)| (client, held))?;
        let (id, made) = match newcomer {
            Some(_) if most > mine + 1 => (self.victim_of(hog, true)?, MadeRoom::ClosedAnother),
            Some(own) => (self.victim_of(own, false)?, MadeRoom::ClosedOwn),
            // Accepting failed (out of file descriptors): whoever has waited longest.
            None => (self.longest_waiting()?, MadeRoom::ClosedOwn),
        };
        let connection = self.remove(id)?;
        connection.evict.cancel();
        Some(made)
    }
}

/// The open connections, to bound their number and to find one to close.
struct Registry {
    open: Mutex<Open>,
    next_id: AtomicU64,
    /// Told each time a connection ends, for shutdown to wait until none is left.
    closed: Notify,
    counts: Arc<ConnectionCounts>,
}

impl Registry {
    fn new(counts: Arc<ConnectionCounts>) -> Registry {
        Registry {
            open: Mutex::default(),
            next_id: AtomicU64::default(),
            closed: Notify::new(),
            counts,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for a new connection from `peer`, made at the bound by
    /// [`Open::make_room`]; None if its client already holds the most, all busy.
    fn admit(&self, max: usize, peer: SocketAddr) -> Option<(u64, Arc<Connection>)> {
        let mut open = self.lock();
        if open.connections.len() >= max {
            match open.make_room(Some(peer.ip().to_canonical())) {
                Some(MadeRoom::ClosedAnother) => {
                    self.counts
                        .closed_for_another
                        .fetch_add(1, Ordering::Relaxed);
                }
                Some(MadeRoom::ClosedOwn) => {}
                None => {
                    self.counts.refused.fetch_add(1, Ordering::Relaxed);
                    return None;
                }
            }
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let connection = Arc::new(Connection::new(peer));
        open.insert(id, connection.clone());
        Some((id, connection))
    }

    fn remove(&self, id: u64) {
        self.lock().remove(id);
        self.closed.notify_one();
    }

    fn is_empty(&self) -> bool {
        self.lock().connections.is_empty()
    }
}

/// A connection's place among the open ones, given back when its task drops it: when the
/// connection ends, and also when the task is cancelled or panics, which would otherwise
/// leave shutdown waiting for a connection that is gone.
struct Place {
    registry: Arc<Registry>,
    id: u64,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.registry.remove(self.id);
    }
}

/// Serves `app` on `listener` (through TLS with `tls`) until `drain` completes; then stops
/// accepting, lets each connection finish the requests it is serving (idle ones close at
/// once), and returns when every connection has closed. Each request carries its client's
/// address as `ConnectInfo<SocketAddr>`; what the bound does is counted in `counts`.
pub async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    app: App,
    limits: ConnectionLimits,
    counts: Arc<ConnectionCounts>,
    drain: impl Future<Output = ()>,
) {
    let registry = Arc::new(Registry::new(counts));
    let stop = CancellationToken::new();
    let mut drain = pin!(drain);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, typically: closing a waiting connection frees
                    // one; the pause keeps a persistent failure from spinning.
                    tracing::debug!(error = %e, "accepting a connection failed");
                    registry.lock().make_room(None);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = &mut drain => break,
        };
        let Some((id, connection)) = registry.admit(limits.max_connections, peer) else {
            tracing::debug!(
                max = limits.max_connections,
                %peer,
                "connection refused: its client holds the most connections, each with a request in progress"
            );
            drop(stream);
            continue;
        };
        // Answers are written whole or streamed as events: no reason to hold small writes.
        let _ = stream.set_nodelay(true);
        let place = Place {
            registry: registry.clone(),
            id,
        };
        let (app, stop, tls) = (app.clone(), stop.clone(), tls.clone());
        let io = Watched {
            stream,
            connection: connection.clone(),
        };
        // A task type per transport: the plain one's poll, run for every request, carries
        // none of the TLS handshake's state in its frame.
        match tls {
            None => tokio::spawn(async move {
                let _place = place;
                run_connection(io, connection, app, limits, stop).await;
            }),
            Some(tls) => tokio::spawn(async move {
                let _place = place;
                if let Some(io) = handshake(&tls, io, &connection, &limits, &stop).await {
                    run_connection(io, connection, app, limits, stop).await;
                }
            }),
        };
    }
    drop(listener);
    stop.cancel();
    while !registry.is_empty() {
        registry.closed.notified().await;
    }
}

/// The TLS handshake, within `headerReadTimeout`; None when it failed, timed out, or the
/// connection was closed meanwhile (it holds its place among the connections throughout).
async fn handshake(
    tls: &TlsAcceptor,
    io: Watched,
    connection: &Connection,
    limits: &ConnectionLimits,
    stop: &CancellationToken,
) -> Option<tokio_rustls::server::TlsStream<Watched>> {
    let accepted = tokio::select! {
        accepted = tokio::time::timeout(limits.header_read_timeout, tls.accept(io)) => accepted,
        () = connection.evict.cancelled() => return None,
        () = stop.cancelled() => return None,
    };
    match accepted {
        Ok(Ok(io)) => {
            connection.handshaken();
            Some(io)
        }
        Ok(Err(e)) => {
            tracing::debug!(error = %e, peer = %connection.peer, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!(peer = %connection.peer, "TLS handshake timed out");
            None
        }
    }
}

async fn run_connection<I>(
    io: I,
    connection: Arc<Connection>,
    app: App,
    limits: ConnectionLimits,
    stop: CancellationToken,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = {
        let connection = connection.clone();
        // Requests reach the service one call at a time: the connection's own App is called
        // in place, not cloned (a box and reference counts, made and dropped) per request.
        let app = std::cell::RefCell::new(app);
        hyper::service::service_fn(move |request: http::Request<Incoming>| {
            let in_flight = connection.request_started(request.version());
            let mut request = request.map(Body::new);
            request
                .extensions_mut()
                .insert(ConnectInfo(connection.peer));
            if request
                .extensions()
                .get::<hyper::upgrade::OnUpgrade>()
                .is_some()
            {
                request
                    .extensions_mut()
                    .insert(ConnectionEnd(connection.evict.clone()));
            }
            let answer = {
                let mut app = app.borrow_mut();
                match app.poll_ready(&mut Context::from_waker(std::task::Waker::noop())) {
                    Poll::Ready(Ok(())) => Either::Left(app.call(request)),
                    Poll::Ready(Err(never)) => match never {},
                    // Boxed: an `App` is large, and hyper moves this future whole into its
                    // slot for each request's answer (never needed while the App is ready).
                    Poll::Pending => Either::Right(Box::pin(app.clone().oneshot(request))),
                }
            };
            let connection = connection.clone();
            async move {
                let response = match answer.await {
                    Ok(response) => response,
                    Err(never) => match never {},
                };
                if response.status() == http::StatusCode::SWITCHING_PROTOCOLS {
                    connection.switched();
                }
                // The request stays in flight until hyper has sent the whole answer.
                Ok::<_, Infallible>(response.map(|body| Holding::new(body, in_flight)))
            }
        })
    };
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(None);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.http2_max_concurrent_streams)
        .max_send_buf_size(HTTP2_SEND_BUFFER)
        .keep_alive_interval(HTTP2_KEEP_ALIVE_INTERVAL)
        .keep_alive_timeout(HTTP2_KEEP_ALIVE_TIMEOUT);
    let mut served = pin!(builder.serve_connection_with_upgrades(TokioIo::new(io), service));
    let mut deadline = pin!(tokio::time::sleep(limits.header_read_timeout));
    let mut armed = false;
    // How far ahead the timer is armed at most: no phase begun later can end sooner, so the
    // timer never has to be moved earlier (which takes the runtime's timer lock) as each
    // request on a kept-alive connection begins and ends; one that fires before the
    // deadline is armed again.
    let horizon = limits.header_read_timeout.min(limits.idle_timeout);
    let mut evicted = pin!(connection.evict.cancelled());
    let mut released = pin!(connection.released.cancelled());
    let mut stopping = pin!(stop.cancelled());
    // Each token's future is polled once, which gives it the task's waker; from then on a
    // cheaper look at the token tells whether it fired (a poll takes two locks, and the
    // connection is polled several times a request).
    let mut waiting = false;
    let mut stopped = false;
    // hyper is done with a switched connection: its handler has it (and ends it at shutdown).
    let mut switched = false;
    poll_fn(|cx| {
        if !waiting {
            let _ = evicted.as_mut().poll(cx);
            let _ = released.as_mut().poll(cx);
            let _ = stopping.as_mut().poll(cx);
            waiting = true;
        }
        if !switched {
            if !stopped && stop.is_cancelled() {
                stopped = true;
                served.as_mut().graceful_shutdown();
            }
            if let Poll::Ready(result) = served.as_mut().poll(cx) {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                if !connection.is_switched() {
                    return Poll::Ready(());
                }
                switched = true;
            }
        }
        if switched && connection.released.is_cancelled() {
            return Poll::Ready(());
        }
        if connection.evict.is_cancelled() {
            tracing::debug!("connection closed to make room for a new one");
            return Poll::Ready(());
        }
        // Phases change only while the connection is polled, just above.
        let due = connection.deadline(&limits);
        if !armed {
            let next = Instant::now() + horizon;
            deadline
                .as_mut()
                .reset(due.map_or(next, |due| due.min(next)));
            armed = true;
        }
        while deadline.as_mut().poll(cx).is_ready() {
            // The timer is never armed past the deadline: one that fired at it or after it
            // is the deadline's.
            if due.is_some_and(|due| due <= deadline.deadline()) {
                tracing::debug!(phase = ?connection.lock().phase, "connection timed out");
                // A switched connection's handler closes it.
                connection.evict.cancel();
                return Poll::Ready(());
            }
            let next = Instant::now() + horizon;
            deadline
                .as_mut()
                .reset(due.map_or(next, |due| due.min(next)));
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
        http2_max_concurrent_streams: 100,
    };

    #[tokio::test(start_paused = true)]
    async fn each_phase_has_its_own_deadline() {
        let c = Arc::new(Connection::new(client(1)));
        let opened = Instant::now();
        assert_eq!(
            c.deadline(&LIMITS),
            Some(opened + LIMITS.header_read_timeout)
        );
        let request = c.request_started(http::Version::HTTP_11);
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
        let c = Arc::new(Connection::new(client(1)));
        let _request = c.request_started(http::Version::HTTP_11);
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
        assert_eq!(
            c.deadline(&LIMITS),
            Some(Instant::now() + LIMITS.idle_timeout),
            "idle once the answer is sent, from the end of that poll"
        );
        tokio::time::advance(Duration::from_secs(80)).await;
        c.wrote(true);
        assert_eq!(
            c.deadline(&LIMITS),
            Some(Instant::now() + LIMITS.idle_timeout),
            "an answer still being written keeps the connection from idling out"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_http2_connection_idles_from_its_last_stream_whatever_frames_move() {
        let c = Arc::new(Connection::new(client(1)));
        tokio::time::advance(Duration::from_secs(3)).await;
        c.handshaken();
        assert_eq!(
            c.deadline(&LIMITS),
            Some(Instant::now() + LIMITS.header_read_timeout),
            "the preface and first headers get their own deadline after the handshake"
        );
        let watch = c.request_started(http::Version::HTTP_2);
        let other = c.request_started(http::Version::HTTP_2);
        drop(other);
        assert_eq!(
            c.deadline(&LIMITS),
            None,
            "a stream (a watch) is still open"
        );
        drop(watch);
        let idle = Instant::now();
        assert_eq!(c.deadline(&LIMITS), Some(idle + LIMITS.idle_timeout));
        tokio::time::advance(Duration::from_secs(30)).await;
        // A keep-alive ping and its answer.
        c.wrote(true);
        c.received();
        assert_eq!(
            c.deadline(&LIMITS),
            Some(idle + LIMITS.idle_timeout),
            "connection frames neither start a header deadline nor restart the idle time"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_switched_connection_stays_busy_after_its_answer() {
        let registry = registry();
        let (_, switched) = registry.admit(2, client(1)).unwrap();
        let request = switched.request_started(http::Version::HTTP_11);
        switched.switched();
        // hyper drops the 101's body once its head is written.
        drop(request);
        assert_eq!(switched.deadline(&LIMITS), None, "a session lasts");
        tokio::time::advance(LIMITS.idle_timeout * 2).await;
        let (_, _other) = registry.admit(2, client(1)).unwrap();
        registry.admit(2, client(1)).unwrap();
        assert!(
            !switched.evict.is_cancelled(),
            "a waiting connection of its client made room, not the session"
        );
        switched.wrote(false);
        assert_eq!(
            switched.deadline(&LIMITS),
            Some(Instant::now() + LIMITS.idle_timeout),
            "a client that stops reading its session still gets the idle timeout"
        );
    }

    fn client(n: u8) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, n], 40000))
    }

    fn registry() -> Registry {
        Registry::new(Arc::default())
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_bound_the_longest_waiting_connection_makes_room() {
        let registry = registry();
        let (_, busy) = registry.admit(LIMITS.max_connections, client(1)).unwrap();
        let _request = busy.request_started(http::Version::HTTP_11);
        tokio::time::advance(Duration::from_secs(1)).await;
        let (_, waiting) = registry.admit(LIMITS.max_connections, client(1)).unwrap();
        tokio::time::advance(Duration::from_secs(1)).await;
        let (_, newest) = registry.admit(LIMITS.max_connections, client(1)).unwrap();
        assert!(waiting.evict.is_cancelled(), "the waiting one made room");
        assert!(
            !busy.evict.is_cancelled(),
            "a request in progress is never cut for its own client"
        );
        let _request = newest.request_started(http::Version::HTTP_11);
        assert!(
            registry.admit(LIMITS.max_connections, client(1)).is_none(),
            "all busy: the new connection is refused"
        );
        assert_eq!(registry.lock().connections.len(), 2);
        assert_eq!(registry.counts.refused.load(Ordering::Relaxed), 1);
    }

    /// Holds `n` connections of `client`, each with a request in progress (a watch).
    fn hold_busy(
        registry: &Registry,
        max: usize,
        client: SocketAddr,
        n: usize,
    ) -> Vec<(Arc<Connection>, InFlight)> {
        (0..n)
            .map(|_| {
                let (_, c) = registry.admit(max, client).expect("admitted");
                let request = c.request_started(http::Version::HTTP_11);
                (c, request)
            })
            .collect()
    }

    fn held(registry: &Registry, n: u8) -> usize {
        registry
            .lock()
            .per_client
            .get(&client(n).ip())
            .copied()
            .unwrap_or(0)
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_bound_the_client_holding_the_most_loses_one() {
        let max = 6;
        let registry = registry();
        let hog = hold_busy(&registry, max, client(2), max);
        // Another client gets in, even though every connection is busy: the hog's oldest
        // connection makes room.
        let quiet = hold_busy(&registry, max, client(1), 1);
        assert!(hog[0].0.evict.is_cancelled(), "the hog's oldest is closed");
        assert!(hog[1..].iter().all(|(c, _)| !c.evict.is_cancelled()));
        assert_eq!((held(&registry, 2), held(&registry, 1)), (5, 1));
        // A third client too, again at the hog's expense.
        let third = hold_busy(&registry, max, client(3), 2);
        assert_eq!(
            (held(&registry, 2), held(&registry, 1), held(&registry, 3)),
            (3, 1, 2)
        );
        // The hog asking again only takes the place of its own waiting connections: all are
        // busy, so it is refused, and nobody else loses one.
        assert!(registry.admit(max, client(2)).is_none());
        assert!(
            quiet
                .iter()
                .chain(&third)
                .all(|(c, _)| !c.evict.is_cancelled())
        );
        // A client one connection under the most does not take from it: shares are equal
        // enough, and the two would only trade a connection back and forth.
        assert!(registry.admit(max, client(3)).is_none());
        assert_eq!(held(&registry, 2), 3);
        assert_eq!(
            registry.counts.closed_for_another.load(Ordering::Relaxed),
            3
        );
        assert_eq!(registry.counts.refused.load(Ordering::Relaxed), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn the_hogs_waiting_connections_go_before_its_busy_ones() {
        let max = 4;
        let registry = registry();
        let busy = hold_busy(&registry, max, client(2), 2);
        let (_, idle) = registry.admit(max, client(2)).unwrap();
        let _other = hold_busy(&registry, max, client(1), 1);
        registry.admit(max, client(3)).unwrap();
        assert!(
            idle.evict.is_cancelled(),
            "the hog's idle connection went first"
        );
        assert!(busy.iter().all(|(c, _)| !c.evict.is_cancelled()));
    }

    #[test]
    fn a_closed_connection_gives_its_place_back_to_its_client() {
        let registry = registry();
        let (a, _) = registry.admit(2, client(1)).unwrap();
        let (b, _) = registry.admit(2, client(1)).unwrap();
        registry.remove(a);
        assert_eq!(held(&registry, 1), 1);
        registry.remove(b);
        registry.remove(b);
        assert!(registry.lock().per_client.is_empty());
        assert!(registry.is_empty());
    }

    #[tokio::test]
    async fn a_connection_task_that_panics_gives_its_place_back() {
        let registry = Arc::new(registry());
        let (id, _) = registry.admit(2, client(1)).unwrap();
        let place = Place {
            registry: registry.clone(),
            id,
        };
        let task = tokio::spawn(async move {
            let _place = place;
            panic!("a fault in the connection's task");
        });
        assert!(task.await.unwrap_err().is_panic());
        assert!(registry.is_empty(), "shutdown would wait for it for ever");
    }
}
