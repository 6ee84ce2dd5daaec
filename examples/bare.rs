//! The machine's limit for a GET (issue 22): an axum handler answering fixed bytes, with
//! k8sailor's allocator, runtime and socket options and nothing else. `bench/run` gives it
//! the exact bytes k8sailor answers a GET with and loads both side by side, so the ratio is
//! what k8sailor's own per-request work costs.
//!
//! ```text
//! bare --listen 127.0.0.1:0 --body FILE [--content-type TYPE]
//! ```
//! Once bound it prints `bare listening on http://ADDR` on stdout.

use std::path::PathBuf;

use axum::Router;
use axum::body::Bytes;
use axum::http::HeaderValue;
use axum::http::header::CONTENT_TYPE;
use axum::serve::ListenerExt;
use clap::Parser;

#[global_allocator]
static GLOBAL: allocator::Mimalloc = allocator::Mimalloc;

#[derive(Parser)]
struct Args {
    /// Address to serve on.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: std::net::SocketAddr,
    /// The answer's body, sent to every request.
    #[arg(long)]
    body: PathBuf,
    /// The answer's Content-Type.
    #[arg(long, default_value = "application/json")]
    content_type: String,
}

fn main() -> std::io::Result<()> {
    let args = Args::parse();
    let body = Bytes::from(std::fs::read(&args.body)?);
    let content_type = HeaderValue::try_from(args.content_type)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // The runtime k8sailor builds: multi-threaded, a worker per core.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let app = Router::new().fallback(move || {
            let (body, content_type) = (body.clone(), content_type.clone());
            async move { ([(CONTENT_TYPE, content_type)], body) }
        });
        let listener = tokio::net::TcpListener::bind(args.listen).await?;
        println!("bare listening on http://{}", listener.local_addr()?);
        // Sockets as k8sailor sets them: answers are not held back for a coalesced write.
        let listener = listener.tap_io(|stream| {
            let _ = stream.set_nodelay(true);
        });
        axum::serve(listener, app).await
    })
}
