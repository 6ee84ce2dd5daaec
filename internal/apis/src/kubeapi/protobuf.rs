//! The few protobuf messages a client sends k8sailor itself: client-go's typed clients send
//! built-in objects as `application/vnd.kubernetes.protobuf` (the `k8s\0` magic, then a
//! `runtime.Unknown` whose `raw` is the object), and k9s sends its SelfSubjectAccessReviews
//! so. The messages are declared with prost by the field numbers of the schema's
//! `generated.proto`, only the fields read; prost skips the others.

use prost::Message;
use thiserror::Error;

/// The four bytes before every protobuf object of the apiserver's.
const MAGIC: &[u8] = b"k8s\0";

#[derive(Debug, Error, PartialEq, Eq)]
pub(super) enum ProtoError {
    #[error("not a Kubernetes protobuf object (no k8s\\0 prefix)")]
    NoMagic,
    #[error("no object in the envelope")]
    NoObject,
    #[error(transparent)]
    Decode(#[from] prost::DecodeError),
}

/// `runtime.Unknown`, of which only `raw` (2) is read.
#[derive(Clone, PartialEq, Message)]
struct Unknown {
    #[prost(bytes = "vec", optional, tag = "2")]
    raw: Option<Vec<u8>>,
}

/// The object `body` holds in the apiserver's envelope, decoded as `M`.
pub(super) fn object<M: Message + Default>(body: &[u8]) -> Result<M, ProtoError> {
    let unknown = body.strip_prefix(MAGIC).ok_or(ProtoError::NoMagic)?;
    let raw = Unknown::decode(unknown)?.raw.ok_or(ProtoError::NoObject)?;
    Ok(M::decode(raw.as_slice())?)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(crate) use kubeproto::testing::message;

    /// `object` in the apiserver's envelope.
    pub(crate) fn enveloped(object: &[u8]) -> Vec<u8> {
        kubeproto::testing::enveloped("authorization.k8s.io/v1", "SelfSubjectAccessReview", object)
    }

    /// A message of one string field, 1.
    #[derive(Clone, PartialEq, Message)]
    struct Named {
        #[prost(string, tag = "1")]
        name: String,
    }

    #[test]
    fn the_object_is_the_envelopes_raw() {
        let named: Named = object(&enveloped(&message(&[(1, b"web")]))).unwrap();
        assert_eq!(named.name, "web");
        assert_eq!(object::<Named>(b"{\"kind\":1}"), Err(ProtoError::NoMagic));
        assert_eq!(object::<Named>(b"k8s\0"), Err(ProtoError::NoObject));
        assert!(matches!(
            object::<Named>(&enveloped(&[0x0a, 5, b'w'])),
            Err(ProtoError::Decode(_))
        ));
    }
}
