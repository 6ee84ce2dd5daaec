//! A container's log through kube's `pods/log` request, as a stream of lines.

use jiff::{RoundMode, TimestampRound, Unit};
use k8s_openapi::api::core::v1::Pod;
use kube::api::LogParams;

use super::LiveSource;
use crate::DaoError;
use crate::logs::{LogLines, LogOptions, MAX_LOG_LINE_BYTES, lines};

impl LiveSource {
    pub(crate) async fn log_lines(
        &self,
        namespace: &str,
        pod: &str,
        options: &LogOptions,
    ) -> Result<LogLines, DaoError> {
        let params = LogParams {
            container: Some(options.container.clone()),
            follow: options.follow,
            previous: options.previous,
            since_seconds: options.since_seconds,
            // kube rounds sinceTime to the nearest second, the apiserver (and kubectl) cut
            // the fraction off: rounded up, the lines of the rest of that second would be
            // skipped.
            since_time: options.since_time.map(|t| {
                t.round(
                    TimestampRound::new()
                        .smallest(Unit::Second)
                        .mode(RoundMode::Trunc),
                )
                .unwrap_or(t)
            }),
            tail_lines: options.tail_lines,
            timestamps: options.timestamps,
            ..LogParams::default()
        };
        let reader = self
            .api::<Pod>(Some(namespace))
            .log_stream(pod, &params)
            .await?;
        Ok(lines(Box::pin(reader), MAX_LOG_LINE_BYTES))
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use serde_json::json;

    use super::super::mock::{source_answering, source_with};
    use crate::DaoError;
    use crate::logs::LogOptions;

    /// The lines of web-1's log read with `options` from an apiserver that expects the
    /// request `path` (and query) and answers `body`.
    async fn lines_read(path: &str, body: &[u8], options: &LogOptions) -> Vec<bytes::Bytes> {
        let (source, server) = source_answering(vec![(path.into(), 200, body.to_vec())]);
        let lines = source
            .log_lines("shop", "web-1", options)
            .await
            .unwrap()
            .map(Result::unwrap)
            .collect()
            .await;
        server.await.unwrap();
        lines
    }

    #[tokio::test]
    async fn a_log_is_asked_for_with_every_option_and_read_as_lines() {
        let options = LogOptions {
            container: "app".into(),
            previous: true,
            tail_lines: Some(2),
            since_seconds: Some(60),
            timestamps: true,
            follow: true,
            ..LogOptions::default()
        };
        let lines = lines_read(
            "/api/v1/namespaces/shop/pods/web-1/log?&container=app&follow=true&previous=true&sinceSeconds=60&tailLines=2&timestamps=true",
            b"first\nsecond\n",
            &options,
        )
        .await;
        assert_eq!(lines, ["first", "second"]);
    }

    #[tokio::test]
    async fn since_time_is_sent_cut_to_its_second_as_the_apiserver_cuts_it() {
        // .9 s: rounded, it would be the next second, and that second's lines lost.
        let options = LogOptions {
            container: "app".into(),
            since_time: Some("2026-01-01T00:00:01.9Z".parse().unwrap()),
            ..LogOptions::default()
        };
        let lines = lines_read(
            "/api/v1/namespaces/shop/pods/web-1/log?&container=app&sinceTime=2026-01-01T00%3A00%3A01Z",
            b"first\n",
            &options,
        )
        .await;
        assert_eq!(lines, ["first"]);
    }

    #[tokio::test]
    async fn the_apiservers_refusal_is_an_error_before_any_line() {
        let (source, server) = source_with(vec![(
            "/api/v1/namespaces/shop/pods/gone/log",
            404,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "message": "pods \"gone\" not found", "reason": "NotFound", "code": 404}),
        )]);
        let options = LogOptions {
            container: "app".into(),
            ..LogOptions::default()
        };
        match source.log_lines("shop", "gone", &options).await {
            Err(DaoError::Api { code: 404, .. }) => {}
            Err(other) => panic!("expected the apiserver's 404, got {other}"),
            Ok(_) => panic!("expected the apiserver's 404, got a stream"),
        }
        server.await.unwrap();
    }
}
