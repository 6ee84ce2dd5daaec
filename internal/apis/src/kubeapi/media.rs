//! `Accept` negotiated as the apiserver negotiates it: the first acceptable media range, by
//! quality then specificity, decides both the encoding and what is answered (the object, a
//! Table, or its metadata alone).

use axum::http::{HeaderMap, header};

use super::status::Status;

/// The encodings served: JSON, and YAML for answers that are not streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Encoding {
    Json,
    Yaml,
}

impl Encoding {
    pub(super) fn content_type(self) -> &'static str {
        match self {
            Encoding::Json => "application/json",
            Encoding::Yaml => "application/yaml",
        }
    }
}

/// The media types a 406 names, as the apiserver lists its serializers'.
const SERVED: [&str; 2] = ["application/json", "application/yaml"];
/// A watch is a stream: only JSON has a stream encoding.
const SERVED_STREAMS: [&str; 1] = ["application/json;stream=watch"];

/// What `as=` asks the answer to be (`g=meta.k8s.io`, `v=v1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Shape {
    /// The object or list itself.
    Plain,
    /// A `Table` of kubectl's columns.
    Table,
    /// `PartialObjectMetadata`: an object's metadata alone.
    Metadata,
    /// `PartialObjectMetadataList`: a list's objects' metadata alone.
    MetadataList,
}

/// The negotiated answer of a read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Media {
    pub(super) encoding: Encoding,
    pub(super) shape: Shape,
}

/// One media range of `Accept`.
struct Range<'a> {
    kind: &'a str,
    subtype: &'a str,
    quality: f32,
    params: Vec<(&'a str, &'a str)>,
}

fn ranges(accept: &str) -> Vec<Range<'_>> {
    let mut ranges: Vec<Range> = accept
        .split(',')
        .filter_map(|range| {
            let mut parts = range.split(';').map(str::trim);
            let (kind, subtype) = parts.next()?.split_once('/')?;
            let mut quality = 1.0;
            let mut params = Vec::new();
            for param in parts {
                let Some((name, value)) = param.split_once('=') else {
                    continue;
                };
                let (name, value) = (name.trim(), value.trim());
                if name == "q" {
                    quality = value.parse().unwrap_or(0.0);
                } else {
                    params.push((name, value));
                }
            }
            Some(Range {
                kind,
                subtype,
                quality,
                params,
            })
        })
        .collect();
    // goautoneg's order: quality, then a concrete type before a wildcard (stable otherwise).
    ranges.sort_by(|a, b| {
        b.quality
            .total_cmp(&a.quality)
            .then((a.kind == "*").cmp(&(b.kind == "*")))
            .then((a.subtype == "*").cmp(&(b.subtype == "*")))
    });
    ranges
}

/// The shape a range's `as`, `g` and `v` ask; None for one not served (the range is then
/// passed over, as the apiserver passes over a conversion it cannot make).
fn shape(params: &[(&str, &str)]) -> Option<Shape> {
    let get = |name: &str| params.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
    let (kind, group, version) = (get("as"), get("g"), get("v"));
    if kind.is_none() && group.is_none() && version.is_none() {
        return Some(Shape::Plain);
    }
    if group != Some("meta.k8s.io") || version != Some("v1") {
        return None;
    }
    match kind? {
        "Table" => Some(Shape::Table),
        "PartialObjectMetadata" => Some(Shape::Metadata),
        "PartialObjectMetadataList" => Some(Shape::MetadataList),
        _ => None,
    }
}

/// The answer `Accept` asks for: the first range served, by the apiserver's order; no
/// header is JSON. Refused as the apiserver refuses: no range of a type served (the route's
/// 406, naming the stream types too on a collection's path), a range of a served type only
/// with a conversion not served, or a watch whose first served range has no stream encoding.
pub(super) fn negotiate(
    headers: &HeaderMap,
    collection: bool,
    stream: bool,
) -> Result<Media, Status> {
    let accept: Vec<&str> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let accept = accept.join(",");
    if accept.trim().is_empty() {
        return Ok(Media {
            encoding: Encoding::Json,
            shape: Shape::Plain,
        });
    }
    let mut type_served = false;
    for range in ranges(&accept) {
        for encoding in [Encoding::Json, Encoding::Yaml] {
            let (kind, subtype) = encoding.content_type().split_once('/').unwrap_or_default();
            let matches = (range.kind == kind
                && (range.subtype == subtype || range.subtype == "*"))
                || (range.kind == "*" && range.subtype == "*");
            if !matches {
                continue;
            }
            type_served = true;
            if let Some(shape) = shape(&range.params) {
                if stream && encoding != Encoding::Json {
                    return Err(Status::not_acceptable(&SERVED_STREAMS));
                }
                return Ok(Media { encoding, shape });
            }
        }
    }
    if !type_served {
        let mut available = SERVED.to_vec();
        if collection {
            available.extend(SERVED_STREAMS);
        }
        return Err(Status::no_representation(&available));
    }
    Err(Status::not_acceptable(&SERVED))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn accepting(accept: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_str(accept).unwrap());
        headers
    }

    fn negotiated(accept: &str, stream: bool) -> Result<Media, u16> {
        negotiate(&accepting(accept), true, stream).map_err(|s| s.code.as_u16())
    }

    fn refusal(accept: &str, collection: bool, stream: bool) -> String {
        negotiate(&accepting(accept), collection, stream)
            .unwrap_err()
            .message
    }

    fn media(encoding: Encoding, shape: Shape) -> Result<Media, u16> {
        Ok(Media { encoding, shape })
    }

    #[test]
    fn accept_is_negotiated_as_the_apiserver_does() {
        use Encoding::*;
        // kubectl get.
        assert_eq!(
            negotiated(
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
                false
            ),
            media(Json, Shape::Table)
        );
        // client-go's typed clients: protobuf first, JSON served.
        assert_eq!(
            negotiated(
                "application/vnd.kubernetes.protobuf,application/json",
                false
            ),
            media(Json, Shape::Plain)
        );
        // client-go's metadata informers.
        assert_eq!(
            negotiated(
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
                false
            ),
            media(Json, Shape::MetadataList)
        );
        assert_eq!(
            negotiated(
                "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
                true
            ),
            media(Json, Shape::Metadata)
        );
        assert_eq!(
            negotiated("application/yaml", false),
            media(Yaml, Shape::Plain)
        );
        assert_eq!(negotiated("*/*", false), media(Json, Shape::Plain));
        assert_eq!(
            negotiated("application/*", false),
            media(Json, Shape::Plain)
        );
        assert_eq!(
            negotiated("application/yaml;q=0.5,application/json", false),
            media(Json, Shape::Plain)
        );
        assert_eq!(
            negotiated(
                "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
                false
            ),
            media(Json, Shape::Plain)
        );
        assert_eq!(
            negotiated("application/vnd.kubernetes.protobuf", false),
            Err(406)
        );
        assert_eq!(negotiated("text/html", false), Err(406));
        assert_eq!(negotiated("application/yaml", true), Err(406));
        assert_eq!(
            negotiated("application/json;as=Table;g=meta.k8s.io;v=v2", false),
            Err(406)
        );
        // The apiserver's words for each refusal.
        assert_eq!(
            refusal("text/html", false, false),
            "406: Not Acceptable\n\nAvailable representations: application/json, application/yaml"
        );
        assert_eq!(
            refusal("application/vnd.kubernetes.protobuf", true, true),
            "406: Not Acceptable\n\nAvailable representations: application/json, application/yaml, application/json;stream=watch"
        );
        assert_eq!(
            refusal("application/json;as=Foo;g=meta.k8s.io;v=v1", true, true),
            "only the following media types are accepted: application/json, application/yaml"
        );
        assert_eq!(
            refusal("application/yaml", true, true),
            "only the following media types are accepted: application/json;stream=watch"
        );
    }
}
