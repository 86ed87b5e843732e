//! The baseline of `grpc`: a plain tonic server and client on loopback,
//! no ferry anywhere. The service is written by hand as tonic's generated
//! code would be (a tower service dispatching on the path to unary
//! handlers), with prost messages the same as those of [`super::served::Bench`]'s
//! gRPC face (same service, paths, fields and tags), so both send the same
//! bytes. The client is a tokio task in a loop, one call at a time,
//! timed as [`crate::urpc::calls::time_calls`] times the ferry paths.
//!
//! Server and client share one tokio runtime of two worker threads, as
//! `ferry-grpc`'s runtime is. This module owns the messages, the service,
//! the runtime and the timed loop; it knows nothing of ferry.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use http::uri::PathAndQuery;
use tonic::body::Body;
use tonic::server::{NamedService, UnaryService};
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Response, Status};
use tonic_prost::ProstCodec;

use crate::error::Error;
use crate::urpc::calls::{Budget, Sample, check, enough, next_batch, stamp};

/// `ferry.Bench`'s `BenchNullRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BenchNullRequest {}

/// `ferry.Bench`'s `BenchNullReply`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BenchNullReply {}

/// `ferry.Bench`'s `BenchEchoRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BenchEchoRequest {
    /// The bytes to echo.
    #[prost(bytes = "vec", tag = "1")]
    pub data: Vec<u8>,
}

/// `ferry.Bench`'s `BenchEchoReply`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BenchEchoReply {
    /// The bytes echoed.
    #[prost(bytes = "vec", tag = "1")]
    pub value: Vec<u8>,
}

/// The service name, as the interface's gRPC face names it.
const SERVICE: &str = "ferry.Bench";
/// The null call's path.
const NULL_PATH: &str = "/ferry.Bench/Null";
/// The echo's path.
const ECHO_PATH: &str = "/ferry.Bench/Echo";

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// The hand-written service: dispatches on the path, as generated code does.
#[derive(Debug, Clone, Copy, Default)]
struct Service;

impl NamedService for Service {
    const NAME: &'static str = SERVICE;
}

impl tower_service::Service<http::Request<Body>> for Service {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        match req.uri().path() {
            NULL_PATH => Box::pin(async move {
                let mut grpc = tonic::server::Grpc::new(ProstCodec::default());
                Ok(grpc.unary(Null, req).await)
            }),
            ECHO_PATH => Box::pin(async move {
                let mut grpc = tonic::server::Grpc::new(ProstCodec::default());
                Ok(grpc.unary(Echo, req).await)
            }),
            path => {
                let status = Status::unimplemented(format!("{SERVICE} has no method at {path}"));
                Box::pin(async move { Ok(status.into_http()) })
            }
        }
    }
}

/// The null call's handler.
struct Null;

impl UnaryService<BenchNullRequest> for Null {
    type Response = BenchNullReply;
    type Future = BoxFuture<Result<Response<BenchNullReply>, Status>>;

    fn call(&mut self, _: Request<BenchNullRequest>) -> Self::Future {
        Box::pin(async { Ok(Response::new(BenchNullReply {})) })
    }
}

/// The echo's handler.
struct Echo;

impl UnaryService<BenchEchoRequest> for Echo {
    type Response = BenchEchoReply;
    type Future = BoxFuture<Result<Response<BenchEchoReply>, Status>>;

    fn call(&mut self, request: Request<BenchEchoRequest>) -> Self::Future {
        Box::pin(async move {
            Ok(Response::new(BenchEchoReply {
                value: request.into_inner().data,
            }))
        })
    }
}

/// The plain tonic server and a client connected to it, on a tokio
/// runtime of their own; serving stops when it is dropped.
pub struct Peer {
    rt: tokio::runtime::Runtime,
    client: Client,
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Peer {
    /// Starts the runtime and the server on loopback (a port the kernel
    /// picks) and connects the client.
    ///
    /// # Errors
    /// Any step that fails, saying which.
    pub fn start() -> Result<Peer, Error> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("plain-tonic")
            .enable_all()
            .build()
            .map_err(|e| Error(format!("the tokio runtime: {e}")))?;
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .map_err(|e| Error(format!("binding 127.0.0.1:0: {e}")))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| Error(format!("a non-blocking listener: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error(format!("the listener's address: {e}")))?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let incoming = {
            let _in = rt.enter();
            let listener = tokio::net::TcpListener::from_std(listener)
                .map_err(|e| Error(format!("the tokio listener: {e}")))?;
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true))
        };
        let router = tonic::transport::Server::builder().add_service(Service);
        rt.spawn(async move {
            let _ = router
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stopped.await;
                })
                .await;
        });
        let client = rt.block_on(Client::connect(addr))?;
        Ok(Peer {
            rt,
            client,
            addr,
            stop: Some(stop),
        })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Times calls of `size` bytes each way under `budget`, one at a time
    /// from a loop on the calling thread (`block_on`): as
    /// [`crate::urpc::calls::time_calls`], each call stamped with its
    /// number and its result checked.
    ///
    /// # Errors
    /// A call's status, or a result that fails the check.
    pub fn time_calls(&mut self, budget: &Budget, size: usize) -> Result<Sample, Error> {
        let client = &mut self.client;
        self.rt.block_on(async move {
            let mut args = vec![0xa5u8; size];
            let mut n = 0u64;
            let warm = Instant::now();
            while n == 0 || warm.elapsed() < budget.warmup {
                n += 1;
                client.one(&mut args, n).await?;
            }
            let start = Instant::now();
            let mut count = 0u64;
            while !enough(budget, count, start.elapsed()) {
                let batch = next_batch(count, budget.max_calls);
                for _ in 0..batch {
                    n += 1;
                    client.one(&mut args, n).await?;
                }
                count += batch;
            }
            Ok(Sample {
                ns_per_call: start.elapsed().as_nanos() as f64 / count as f64,
                calls: count,
            })
        })
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A tonic client of the service, as generated clients are made.
pub struct Client {
    grpc: tonic::client::Grpc<Channel>,
}

impl Client {
    /// Connects to the server at `addr`.
    ///
    /// # Errors
    /// If it cannot.
    pub async fn connect(addr: SocketAddr) -> Result<Client, Error> {
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| Error(format!("the endpoint http://{addr}: {e}")))?
            .tcp_nodelay(true)
            .connect()
            .await
            .map_err(|e| Error(format!("connecting to {addr}: {e}")))?;
        Ok(Client {
            grpc: tonic::client::Grpc::new(channel),
        })
    }

    /// The null call.
    ///
    /// # Errors
    /// Its status.
    pub async fn null(&mut self) -> Result<(), Status> {
        self.grpc
            .ready()
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        let path = PathAndQuery::from_static(NULL_PATH);
        self.grpc
            .unary(
                Request::new(BenchNullRequest {}),
                path,
                ProstCodec::default(),
            )
            .await
            .map(|r: Response<BenchNullReply>| {
                let BenchNullReply {} = r.into_inner();
            })
    }

    /// The echo of `data`.
    ///
    /// # Errors
    /// Its status.
    pub async fn echo(&mut self, data: Vec<u8>) -> Result<Vec<u8>, Status> {
        self.grpc
            .ready()
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        let path = PathAndQuery::from_static(ECHO_PATH);
        self.grpc
            .unary(
                Request::new(BenchEchoRequest { data }),
                path,
                ProstCodec::default(),
            )
            .await
            .map(|r: Response<BenchEchoReply>| r.into_inner().value)
    }

    /// Call `n` of `args.len()` bytes each way (the null call for none),
    /// stamped and checked.
    async fn one(&mut self, args: &mut [u8], n: u64) -> Result<(), Error> {
        stamp(args, n);
        let result = if args.is_empty() {
            self.null().await.map(|()| Vec::new())
        } else {
            self.echo(args.to_vec()).await
        };
        let result = result.map_err(|s| Error(format!("call {n}: {s}")))?;
        check(&result, args.len(), n)
    }
}
