//! The calling side: a [`ferry::rpc::Client`] whose calls go over gRPC
//! ([`GrpcRemote`], a [`Remote`]), found by URL.
//!
//! A call, on the calling ferry thread: the logical thread's chain
//! ([`remote::outgoing`]) goes into the request's metadata and its
//! deadline into `grpc-timeout`; the arguments become the method's request
//! message; the request is handed to the tokio runtime and the ferry thread
//! parks on a one-shot channel (its processor runs other threads). An alert of
//! the thread ([`remote::on_alert`]) aborts the request's task, which
//! cancels the stream (the server's side is alerted) and ends the wait
//! with [`Error::Aborted`]. The reply's `ferry-cpu-ns` trailer is charged
//! to the caller, never more than the call took.
//!
//! This module owns URLs, channels and the calling path; it must not trust
//! the peer: a reply that does not decode is [`Error::BadReply`], a peer
//! that does not answer is bounded by the call's deadline, and one that
//! cannot be reached is [`Error::PeerDied`].

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry::rpc::remote::{self, Remote};
use ferry::rpc::{CallOptions, Client, Error, Result};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use crate::codec::Raw;
use crate::describe::{self, Interface};
use crate::meta;

/// How long connecting to a peer may take before a call fails with
/// [`Error::PeerDied`] (a call's own deadline bounds it further).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether `name` is a gRPC URL (`grpc://` or `grpcs://`) rather than a
/// local interface name.
pub fn is_url(name: &str) -> bool {
    name.starts_with("grpc://") || name.starts_with("grpcs://")
}

/// A parsed `grpc[s]://host:port/name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Url {
    pub(crate) tls: bool,
    /// `host:port`.
    pub(crate) authority: String,
    /// The host alone (the TLS server name).
    pub(crate) host: String,
    /// The interface name (informational: the service is the interface's).
    pub(crate) name: String,
}

pub(crate) fn parse_url(url: &str) -> Result<Url> {
    let (tls, rest) = if let Some(r) = url.strip_prefix("grpcs://") {
        (true, r)
    } else if let Some(r) = url.strip_prefix("grpc://") {
        (false, r)
    } else {
        return Err(Error::BadName("not a grpc:// or grpcs:// URL"));
    };
    let (authority, name) = rest.split_once('/').unwrap_or((rest, ""));
    let host = match authority.rsplit_once(':') {
        Some((h, port)) if !h.is_empty() && port.parse::<u16>().is_ok() => h,
        _ => return Err(Error::BadName("a gRPC URL needs host:port")),
    };
    if name.contains('/') {
        return Err(Error::BadName("a gRPC URL's name has no '/'"));
    }
    Ok(Url {
        tls,
        authority: authority.to_owned(),
        host: host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned(),
        name: name.to_owned(),
    })
}

/// How to connect: TLS settings for `grpcs://`.
#[derive(Debug, Clone, Default)]
pub struct Connector {
    ca_pem: Option<Vec<u8>>,
    domain: Option<String>,
}

impl Connector {
    /// The defaults: for `grpcs://`, the certificate authority in the file
    /// named by `FERRY_GRPC_CA` if set, else the system's roots.
    pub fn new() -> Connector {
        Connector::default()
    }

    /// Trusts the certificate authority `pem` (PEM) for `grpcs://`.
    pub fn ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Connector {
        self.ca_pem = Some(pem.into());
        self
    }

    /// Checks the server's certificate for `domain` instead of the URL's
    /// host.
    pub fn domain(mut self, domain: impl Into<String>) -> Connector {
        self.domain = Some(domain.into());
        self
    }

    /// A client of interface `I` at `url` (`grpc://host:port/name` or
    /// `grpcs://`). Connecting is lazy: an unreachable peer fails the
    /// first call with [`Error::PeerDied`] (within [`CONNECT_TIMEOUT`] or
    /// the call's deadline), not this.
    ///
    /// # Errors
    /// [`Error::BadName`] for a malformed URL; [`Error::Io`] for a TLS
    /// setting that cannot be used (an unreadable `FERRY_GRPC_CA`).
    pub fn connect<I: Interface>(&self, url: &str) -> Result<Client> {
        let u = parse_url(url)?;
        let scheme = if u.tls { "https" } else { "http" };
        let mut endpoint = Endpoint::from_shared(format!("{scheme}://{}", u.authority))
            .map_err(|_| Error::BadName("a gRPC URL's host:port does not parse"))?
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true);
        if u.tls {
            let mut tls = ClientTlsConfig::new()
                .domain_name(self.domain.clone().unwrap_or_else(|| u.host.clone()));
            let ca = match &self.ca_pem {
                Some(pem) => Some(pem.clone()),
                None => match std::env::var_os("FERRY_GRPC_CA") {
                    Some(path) => Some(std::fs::read(path).map_err(Error::Io)?),
                    None => None,
                },
            };
            tls = match ca {
                Some(pem) => tls.ca_certificate(Certificate::from_pem(pem)),
                None => tls.with_native_roots(),
            };
            endpoint = endpoint
                .tls_config(tls)
                .map_err(|e| Error::Transport(format!("TLS: {e}")))?;
        }
        let channel = crate::runtime::in_tokio(|| endpoint.connect_lazy());
        Ok(Client::from_remote(Arc::new(GrpcRemote::<I> {
            channel,
            name: u.name,
            _interface: PhantomData,
        })))
    }
}

/// A client of interface `I` at `url`, with the default [`Connector`].
///
/// # Errors
/// As [`Connector::connect`].
pub fn connect<I: Interface>(url: &str) -> Result<Client> {
    Connector::new().connect::<I>(url)
}

/// Calls of interface `I` over one gRPC channel.
pub struct GrpcRemote<I> {
    channel: Channel,
    name: String,
    _interface: PhantomData<fn() -> I>,
}

impl<I: Interface> Remote for GrpcRemote<I> {
    fn call(&self, op: u32, args: &[u8], opts: &CallOptions) -> Result<Vec<u8>> {
        let method = describe::by_op::<I>(op).ok_or(Error::UnknownOp { op })?;
        let chain = remote::outgoing(opts.deadline)?;
        let body = (method.args_to_proto)(args).map_err(|_| Error::BadArgs)?;
        let mut request = tonic::Request::new(body);
        meta::write_chain(request.metadata_mut(), &chain);
        let deadline = chain.deadline;
        if let Some(d) = deadline {
            let left = d.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::DeadlineExceeded);
            }
            request.set_timeout(left);
        }
        let path = describe::path::<I>(method)
            .parse()
            .map_err(|_| Error::Transport("the method's path does not parse".into()))?;
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        let (tx, rx) = ferry::sync::oneshot::channel();
        let started = Instant::now();
        let task = crate::runtime::tokio().spawn(async move {
            let call = async {
                grpc.ready()
                    .await
                    .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
                grpc.unary(request, path, Raw).await
            };
            let outcome = match deadline {
                Some(d) => {
                    match tokio::time::timeout_at(tokio::time::Instant::from_std(d), call).await {
                        Ok(r) => r,
                        Err(_) => Err(tonic::Status::deadline_exceeded(
                            "the call's deadline passed",
                        )),
                    }
                }
                None => call.await,
            };
            let _ = tx.send(outcome);
        });
        let abort = task.abort_handle();
        let outcome = remote::on_alert(&move || abort.abort(), || rx.recv());
        let response = match outcome {
            Err(_) => return Err(Error::Aborted),
            // The server gives up at the deadline too: tonic answers
            // `Cancelled` when a request's `grpc-timeout` passes, which
            // may arrive before this side's own timer fires.
            Ok(Err(status))
                if status.code() == tonic::Code::Cancelled
                    && deadline.is_some_and(|d| Instant::now() >= d) =>
            {
                return Err(Error::DeadlineExceeded);
            }
            Ok(Err(status)) => return Err(meta::error_of(&status, op)),
            Ok(Ok(r)) => r,
        };
        let took = started.elapsed();
        let (metadata, body, _) = response.into_parts();
        if let Some(cpu) = meta::read_cpu(&metadata) {
            remote::charge(cpu.min(took));
        }
        (method.result_from_proto)(&body).map_err(|_| Error::BadReply)
    }

    fn name(&self) -> &str {
        &self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_and_bad_ones_are_refused() {
        let u = parse_url("grpc://127.0.0.1:50051/calc").unwrap();
        assert_eq!(
            (
                u.tls,
                u.authority.as_str(),
                u.host.as_str(),
                u.name.as_str()
            ),
            (false, "127.0.0.1:50051", "127.0.0.1", "calc")
        );
        let u = parse_url("grpcs://example.com:443/x").unwrap();
        assert!(u.tls);
        assert_eq!(u.host, "example.com");
        let u = parse_url("grpc://[::1]:7/").unwrap();
        assert_eq!(u.host, "::1");
        for bad in [
            "http://a:1/x",
            "grpc://a/x",
            "grpc://a:99999/x",
            "grpc://:5/x",
            "grpc://a:1/x/y",
        ] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
        assert!(is_url("grpc://a:1/b") && is_url("grpcs://a:1/b") && !is_url("calc"));
    }
}
