//! The serving side: an interface's local server made reachable over gRPC
//! ([`Server`]), every request run as a local call on the server's
//! activations, as the logical thread that sent it.
//!
//! A request, on the tokio runtime: its chain is read from the metadata
//! and its deadline from `grpc-timeout`; the request message becomes the
//! call's arguments; a ferry thread of the server's runtime (a bridge)
//! makes the local call inside [`remote::serve_as`], so the activation
//! that serves it sees the remote caller's chain with this process added,
//! runs at its priority and inherits its deadline; its run time (the
//! bridge's, which the activation's is charged to) goes back in the
//! reply's trailers (`ferry-cpu-ns`, added to the trailers tonic writes by
//! [`WithCpu`], since it is known only once the call is over). If the client cancels (or its deadline
//! passes), tonic drops the request's future, which alerts the bridge, and
//! the alert goes down the chain to the activation.
//!
//! This module owns the service, the listener and shutdown; it must not
//! serve anything but what the interface's local server answers (a
//! request for a method the interface lacks is `Unimplemented`, a message
//! that does not decode `InvalidArgument`).

use std::convert::Infallible;
use std::future::Future;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::Frame;

use ferry::rpc::remote;
use ferry::rpc::{CallOptions, Client, Error, Result};
use tonic::body::Body;
use tonic::server::{NamedService, UnaryService};
use tonic::transport::{Identity, ServerTlsConfig};
use tonic::{Request, Response, Status};

use crate::codec::Raw;
use crate::describe::{self, Interface, Method};
use crate::meta;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What every request of one served interface shares.
struct Shared {
    /// The local server, bound as a client.
    client: Client,
    /// The runtime whose ferry threads make the local calls.
    runtime: ferry::Handle,
}

/// The tower service of interface `I`.
struct Bridge<I> {
    shared: Arc<Shared>,
    _interface: PhantomData<fn() -> I>,
}

impl<I> Clone for Bridge<I> {
    fn clone(&self) -> Self {
        Bridge {
            shared: Arc::clone(&self.shared),
            _interface: PhantomData,
        }
    }
}

impl<I: Interface> NamedService for Bridge<I> {
    const NAME: &'static str = I::SERVICE;
}

impl<I: Interface> tower_service::Service<http::Request<Body>> for Bridge<I> {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<std::result::Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<std::result::Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let Some(method) = describe::by_path::<I>(req.uri().path()) else {
            let status = Status::unimplemented(format!(
                "{} has no method at {}",
                I::SERVICE,
                req.uri().path()
            ));
            return Box::pin(async move { Ok(status.into_http()) });
        };
        let cpu = Arc::new(AtomicU64::new(NO_CPU));
        let unary = Unary {
            shared: Arc::clone(&self.shared),
            method,
            cpu: Arc::clone(&cpu),
        };
        Box::pin(async move {
            let response = tonic::server::Grpc::new(Raw).unary(unary, req).await;
            Ok(response.map(|inner| Body::new(WithCpu { inner, cpu })))
        })
    }
}

/// One method's requests.
struct Unary {
    shared: Arc<Shared>,
    method: &'static Method,
    /// The call's run time in ns, once known ([`NO_CPU`] until then, or
    /// without accounting).
    cpu: Arc<AtomicU64>,
}

/// No run time known.
const NO_CPU: u64 = u64::MAX;

/// A reply's body with the call's run time added to its trailers.
struct WithCpu {
    inner: Body,
    cpu: Arc<AtomicU64>,
}

impl http_body::Body for WithCpu {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<std::result::Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => match frame.into_trailers() {
                Ok(mut trailers) => {
                    let cpu = this.cpu.load(Ordering::Acquire);
                    if cpu != NO_CPU
                        && let Ok(v) = http::HeaderValue::from_str(&cpu.to_string())
                    {
                        trailers.insert(meta::CPU, v);
                    }
                    Poll::Ready(Some(Ok(Frame::trailers(trailers))))
                }
                Err(frame) => Poll::Ready(Some(Ok(frame))),
            },
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        http_body::Body::is_end_stream(&self.inner)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::Body::size_hint(&self.inner)
    }
}

/// Alerts a bridge thread if the request's future is dropped before it
/// answered (the client cancelled, or its deadline passed).
struct AlertOnDrop(Option<ferry::Thread>);

impl Drop for AlertOnDrop {
    fn drop(&mut self) {
        if let Some(t) = self.0.take() {
            t.alert();
        }
    }
}

impl UnaryService<Vec<u8>> for Unary {
    type Response = Vec<u8>;
    type Future = BoxFuture<std::result::Result<Response<Vec<u8>>, Status>>;

    fn call(&mut self, request: Request<Vec<u8>>) -> Self::Future {
        let (shared, method, cpu_slot) =
            (Arc::clone(&self.shared), self.method, Arc::clone(&self.cpu));
        Box::pin(async move {
            let deadline = meta::read_timeout(request.metadata());
            let chain =
                meta::read_chain(request.metadata(), deadline).map_err(|e| meta::status_of(&e))?;
            let args = (method.args_from_proto)(request.get_ref())
                .map_err(|_| meta::status_of(&Error::BadArgs))?;
            let (tx, rx) = tokio::sync::oneshot::channel();
            let client = shared.client.clone();
            let op = method.op;
            let bridge = shared
                .runtime
                .spawn(move || {
                    let opts = CallOptions {
                        deadline,
                        urgent: false,
                    };
                    let before = ferry::thread::cpu_time();
                    let result = match &chain {
                        Some(c) => remote::serve_as(c, || client.call_with(op, &args, &opts))
                            .and_then(|r| r),
                        None => client.call_with(op, &args, &opts),
                    };
                    let cpu = ferry::thread::cpu_time()
                        .zip(before)
                        .map(|(after, before)| after.saturating_sub(before));
                    let _ = tx.send((result, cpu));
                })
                .map_err(|e| Status::unavailable(format!("the server's runtime: {e}")))?;
            let mut guard = AlertOnDrop(Some(bridge.thread()));
            let answer = rx.await;
            guard.0 = None;
            let (result, cpu) = answer
                .map_err(|_| Status::internal("the call's thread ended without answering"))?;
            let bytes = result.map_err(|e| meta::status_of(&e))?;
            let reply = (method.result_to_proto)(&bytes)
                .map_err(|_| meta::status_of(&Error::ServerPanicked))?;
            if let Some(cpu) = cpu {
                cpu_slot.store(
                    u64::try_from(cpu.as_nanos()).unwrap_or(NO_CPU - 1),
                    Ordering::Release,
                );
            }
            Ok(Response::new(reply))
        })
    }
}

/// How to serve: TLS, if any.
#[derive(Debug, Clone, Default)]
pub struct ServerBuilder {
    tls: Option<(Vec<u8>, Vec<u8>)>,
    dir: Option<ferry::rpc::RuntimeDir>,
}

impl ServerBuilder {
    /// Serves over TLS with the certificate chain `cert_pem` and private
    /// key `key_pem` (PEM); clients connect with `grpcs://`.
    pub fn tls(mut self, cert_pem: impl Into<Vec<u8>>, key_pem: impl Into<Vec<u8>>) -> Self {
        self.tls = Some((cert_pem.into(), key_pem.into()));
        self
    }

    /// Finds the local server in runtime directory `dir` instead of the
    /// user's.
    pub fn dir(mut self, dir: ferry::rpc::RuntimeDir) -> Self {
        self.dir = Some(dir);
        self
    }

    /// Serves interface `I` over gRPC at `addr` (port 0: one the kernel
    /// picks, see [`Server::local_addr`]) by calling the local server of
    /// `name` (served already, with `<Trait>Server::serve`). Must be called
    /// on a ferry thread: the requests' calls run on this runtime.
    ///
    /// # Errors
    /// Binding to the local server ([`Client::connect`]'s errors);
    /// [`Error::Io`] if `addr` cannot be bound; [`Error::Transport`] for a
    /// TLS identity that cannot be used.
    pub fn serve<I: Interface>(self, addr: SocketAddr, name: &str) -> Result<Server> {
        let runtime = ferry::Handle::try_current().ok_or(Error::NoRuntime)?;
        let client = match &self.dir {
            Some(dir) => Client::connect_in(dir, name, I::VERSION)?,
            None => Client::connect(name, I::VERSION)?,
        };
        let bridge = Bridge::<I> {
            shared: Arc::new(Shared { client, runtime }),
            _interface: PhantomData,
        };
        let listener = ferry::blocking(|| std::net::TcpListener::bind(addr)).map_err(Error::Io)?;
        listener.set_nonblocking(true).map_err(Error::Io)?;
        let local_addr = listener.local_addr().map_err(Error::Io)?;
        let mut builder = tonic::transport::Server::builder();
        if let Some((cert, key)) = self.tls {
            builder = builder
                .tls_config(ServerTlsConfig::new().identity(Identity::from_pem(cert, key)))
                .map_err(|e| Error::Transport(format!("TLS: {e}")))?;
        }
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let rt = crate::runtime::tokio();
        let incoming = crate::runtime::in_tokio(|| {
            tokio::net::TcpListener::from_std(listener)
                .map(|l| tonic::transport::server::TcpIncoming::from(l).with_nodelay(Some(true)))
        })
        .map_err(Error::Io)?;
        let router = builder.add_service(bridge);
        let task = rt.spawn(async move {
            let _ = router
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(Server {
            local_addr,
            stop: Some(stop),
            task: Some(task),
        })
    }
}

/// An interface served over gRPC; serving stops when it is dropped (or
/// [`Server::close`]d): the listener closes and calls in progress are
/// cancelled.
#[derive(Debug)]
pub struct Server {
    local_addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Server {
    /// A builder (TLS).
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    /// [`ServerBuilder::serve`] without TLS.
    ///
    /// # Errors
    /// As [`ServerBuilder::serve`].
    pub fn serve<I: Interface>(addr: SocketAddr, name: &str) -> Result<Server> {
        ServerBuilder::default().serve::<I>(addr, name)
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops serving.
    pub fn close(self) {}
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
