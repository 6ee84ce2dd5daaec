//! The listener's TLS (`--tls-cert-file`, `--tls-private-key-file`): rustls with ring (the
//! versions kube already uses), ALPN `h2` then `http/1.1`, and the certificate re-read when
//! its files change, as cert-manager rotates them in a mounted Secret: each handshake takes
//! the certificate current at that moment, so a connection keeps the one it began with.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_rustls::TlsAcceptor;

/// How often the files are read again. A kubelet updates a mounted Secret by swapping a
/// symlink, which file events on the path do not always report; reading two small files
/// every few seconds sees every way of replacing them.
const RELOAD_INTERVAL: Duration = Duration::from_secs(2);

/// The certificate chain and private key files, both PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} holds no PEM certificate", path.display())]
    NoCertificate { path: PathBuf },
    #[error("{} is not a PEM certificate chain", path.display())]
    Certificate {
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("{} holds no PEM private key", path.display())]
    Key {
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("the key {} does not serve the certificate {}", key.display(), cert.display())]
    Mismatch {
        cert: PathBuf,
        key: PathBuf,
        #[source]
        source: rustls::Error,
    },
    #[error("cannot set up TLS")]
    Config(#[source] rustls::Error),
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The files' contents, as last read: a rotation is a change of either.
#[derive(Clone, PartialEq, Eq)]
struct Contents {
    cert: Vec<u8>,
    key: Vec<u8>,
}

async fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    tokio::fs::read(path)
        .await
        .map_err(|source| TlsError::Read {
            path: path.to_path_buf(),
            source,
        })
}

impl TlsFiles {
    async fn read(&self) -> Result<Contents, TlsError> {
        Ok(Contents {
            cert: read(&self.cert).await?,
            key: read(&self.key).await?,
        })
    }

    /// The certificate the files hold: a chain, and the key of its first certificate.
    fn certified(
        &self,
        contents: &Contents,
        provider: &CryptoProvider,
    ) -> Result<CertifiedKey, TlsError> {
        let chain = CertificateDer::pem_slice_iter(&contents.cert)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| TlsError::Certificate {
                path: self.cert.clone(),
                source,
            })?;
        if chain.is_empty() {
            return Err(TlsError::NoCertificate {
                path: self.cert.clone(),
            });
        }
        let key = PrivateKeyDer::from_pem_slice(&contents.key).map_err(|source| TlsError::Key {
            path: self.key.clone(),
            source,
        })?;
        CertifiedKey::from_der(chain, key, provider).map_err(|source| TlsError::Mismatch {
            cert: self.cert.clone(),
            key: self.key.clone(),
            source,
        })
    }
}

/// The certificate handshakes get now.
#[derive(Debug)]
struct Current(RwLock<Arc<CertifiedKey>>);

impl Current {
    fn get(&self) -> Arc<CertifiedKey> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set(&self, certified: CertifiedKey) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(certified);
    }
}

impl ResolvesServerCert for Current {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.get())
    }
}

/// Reads the files (a bad one is an error naming it) and returns the acceptor of the
/// listener; a task re-reads them every [`RELOAD_INTERVAL`] for as long as the acceptor is
/// in use. A rotation to files that do not make a certificate keeps the old one and logs
/// why, once per content seen.
pub async fn acceptor(files: TlsFiles) -> Result<TlsAcceptor, TlsError> {
    let provider = provider();
    let mut seen = files.read().await?;
    let current = Arc::new(Current(RwLock::new(Arc::new(
        files.certified(&seen, &provider)?,
    ))));
    let mut config = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?
        .with_no_client_auth()
        .with_cert_resolver(current.clone());
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let watched: Weak<Current> = Arc::downgrade(&current);
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(RELOAD_INTERVAL);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        let mut failing = None;
        loop {
            ticks.tick().await;
            // The acceptor (its config) holds the only strong reference: served, we stop.
            let Some(current) = watched.upgrade() else {
                return;
            };
            let contents = match files.read().await {
                Ok(contents) if contents == seen => continue,
                Ok(contents) => contents,
                Err(e) => {
                    // Mid-rotation a file may be missing for a moment: said once, the next
                    // read tells whether it came back.
                    let why = error_chain(&e);
                    if failing.as_ref() != Some(&why) {
                        tracing::warn!(error = %why, "cannot read the TLS files; keeping the certificate served");
                        failing = Some(why);
                    }
                    continue;
                }
            };
            match files.certified(&contents, &provider) {
                Ok(certified) => {
                    current.set(certified);
                    failing = None;
                    tracing::info!(cert = %files.cert.display(), "TLS certificate reloaded: new connections get it");
                }
                Err(e) => tracing::warn!(
                    error = %error_chain(&e),
                    "the TLS files changed but do not make a certificate; keeping the one served"
                ),
            }
            seen = contents;
        }
    });
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// An error and its causes on one line, as the binary prints a fatal one.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut line = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        line.push_str(": ");
        line.push_str(&c.to_string());
        cause = c.source();
    }
    line
}
