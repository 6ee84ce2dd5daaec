//! Containers' logs, relayed from the apiserver's `pods/log` whatever the read source: logs
//! are never cached, and the apiserver (through the node's kubelet) is the one place they are.
//!
//! A log is a stream of lines pulled from the apiserver's answer only as fast as the consumer
//! takes them: nothing is read ahead beyond one line (at most [`MAX_LOG_LINE_BYTES`]) and
//! the transport's own buffers, so a slow reader slows its own upstream read and nobody
//! else's, and dropping the stream closes the upstream request.

use bytes::{Bytes, BytesMut};
use futures::io::{AsyncBufRead, AsyncBufReadExt};
use futures::stream::BoxStream;

use super::{DaoError, LiveSource, Source};

/// Longer lines are cut here (the rest of the line is skipped): a line is the unit the
/// stream holds in memory.
pub const MAX_LOG_LINE_BYTES: usize = 64 * 1024;

/// What part of a container's log to read, as `pods/log` takes it (biz checks the values).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogOptions {
    pub container: String,
    /// The log of the container's previous run (before its last restart).
    pub previous: bool,
    /// Only the last this many lines.
    pub tail_lines: Option<i64>,
    /// Only lines newer than this many seconds.
    pub since_seconds: Option<i64>,
    /// Only lines of this second or later (the apiserver drops the fraction); never with
    /// `since_seconds`.
    pub since_time: Option<jiff::Timestamp>,
    /// Each line begins with its RFC 3339 timestamp.
    pub timestamps: bool,
    /// Keep the stream open and send lines as the container writes them.
    pub follow: bool,
}

/// One line of a log, without its line feed.
pub type LogLines = BoxStream<'static, Result<Bytes, DaoError>>;

/// Reads containers' logs.
pub trait LogSource: Send + Sync {
    /// The container's log lines; the request is made before this returns, so a refusal
    /// (no such pod: NotFound; an invalid container: the apiserver's 400) is an error here,
    /// not in the stream.
    fn container_log(
        &self,
        namespace: &str,
        pod: &str,
        options: &LogOptions,
    ) -> impl Future<Output = Result<LogLines, DaoError>> + Send;
}

impl LogSource for Source {
    async fn container_log(
        &self,
        namespace: &str,
        pod: &str,
        options: &LogOptions,
    ) -> Result<LogLines, DaoError> {
        self.scoped(Some(namespace))?;
        // Logs are read live whatever the source; the writer is that live client.
        match &self.writer {
            Some(live) => live.container_log(namespace, pod, options).await,
            None => Err(DaoError::Unavailable(
                "no Kubernetes client to read logs with".into(),
            )),
        }
    }
}

impl LogSource for LiveSource {
    async fn container_log(
        &self,
        namespace: &str,
        pod: &str,
        options: &LogOptions,
    ) -> Result<LogLines, DaoError> {
        self.log_lines(namespace, pod, options).await
    }
}

/// The lines of `reader`, each read only when the stream is polled for it.
pub(crate) fn lines<R>(reader: R, max_line: usize) -> LogLines
where
    R: AsyncBufRead + Unpin + Send + 'static,
{
    Box::pin(futures::stream::try_unfold(
        (reader, false),
        move |(mut reader, done)| async move {
            if done {
                return Ok(None);
            }
            let mut line = BytesMut::new();
            // Past `max_line`, the rest of the line is read and dropped.
            let mut cut = false;
            loop {
                let buf = reader
                    .fill_buf()
                    .await
                    .map_err(|e| DaoError::Unavailable(format!("the log stream broke: {e}")))?;
                if buf.is_empty() {
                    // The end: a last line without a line feed is still a line.
                    return Ok((!line.is_empty() || cut).then(|| (line.freeze(), (reader, true))));
                }
                let (taken, end) = match buf.iter().position(|&b| b == b'\n') {
                    Some(i) => (&buf[..i], Some(i + 1)),
                    None => (buf, None),
                };
                let room = max_line.saturating_sub(line.len());
                cut |= taken.len() > room;
                line.extend_from_slice(&taken[..taken.len().min(room)]);
                let consumed = end.unwrap_or(buf.len());
                reader.consume_unpin(consumed);
                if end.is_some() {
                    return Ok(Some((line.freeze(), (reader, false))));
                }
            }
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    async fn collect(input: &'static [u8], max: usize) -> Vec<String> {
        // A buffer of 3 bytes: lines arrive in pieces, as from the network.
        let reader = futures::io::BufReader::with_capacity(3, input);
        lines(reader, max)
            .map(|l| String::from_utf8(l.unwrap().to_vec()).unwrap())
            .collect()
            .await
    }

    #[tokio::test]
    async fn lines_are_split_at_line_feeds_whatever_the_pieces() {
        assert_eq!(
            collect(b"one\ntwo\n\nfour\n", 100).await,
            ["one", "two", "", "four"]
        );
        assert_eq!(collect(b"one\nlast", 100).await, ["one", "last"]);
        assert_eq!(collect(b"", 100).await, Vec::<String>::new());
    }

    #[tokio::test]
    async fn long_lines_are_cut_and_the_next_line_is_whole() {
        assert_eq!(collect(b"abcdefghij\nxy\n", 4).await, ["abcd", "xy"]);
        assert_eq!(collect(b"abcdefghij", 4).await, ["abcd"]);
    }
}
