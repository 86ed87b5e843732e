//! ferry's interfaces over gRPC: the same `#[ferry::interface]` reachable
//! from another machine, with the call's identity kept across the wire.
//!
//! An interface declared `#[ferry::interface(grpc)]` (this crate turns on
//! ferry's `grpc` feature) gets a gRPC descriptor, `<Trait>Grpc`, and its
//! client's `connect` takes a URL as well as a local name:
//!
//! ```ignore
//! // Local, over shared memory:
//! let calc = CalcClient::connect("calc")?;
//! // The same type, over gRPC on another machine:
//! let calc = CalcClient::connect("grpc://10.0.0.7:50051/calc")?;
//! ```
//!
//! and a server exposes its local interface on both paths at once:
//!
//! ```ignore
//! let local = CalcServer::serve("calc", Impl)?;
//! let remote = ferry_grpc::Server::serve::<CalcGrpc>("0.0.0.0:50051".parse()?, "calc")?;
//! ```
//!
//! # What crosses the wire
//!
//! Each method is a unary rpc of service `ferry.<Trait>` with protobuf
//! messages (`<Trait>Grpc::PROTO` is the `.proto`; no protoc is needed on
//! either side: the macro writes the conversions, with prost's encoding
//! functions). Protobuf rather than postcard in a bytes field, so that a
//! client that is not ferry, generated from that `.proto` in any language,
//! calls an interface of plain types with ordinary messages; types
//! protobuf has no counterpart for cross as postcard in a `bytes` field.
//!
//! The logical thread goes with the call: its deadline as `grpc-timeout`,
//! its identity, priority, chain and run time so far as metadata (see
//! [`meta`]); an alert of the caller, or an abort of its call, cancels the
//! request, which alerts the server's activation; the run time the server
//! spent comes back with the reply and is charged to the caller. A server
//! that cannot be reached or goes away fails the calls with
//! [`ferry::rpc::Error::PeerDied`], within the call's deadline.
//!
//! # Threads
//!
//! gRPC runs on a tokio runtime of its own kernel threads (two).
//! A calling ferry thread parks (its processor runs others) until its
//! reply arrives; a request's call runs on a ferry thread of the serving
//! runtime, as a local call on the interface's activations.
//!
//! This crate owns the bridge; the heavy dependencies (tonic, tokio,
//! rustls) stay here, out of `ferry`.

mod client;
mod codec;
mod describe;
pub mod meta;
mod runtime;
mod server;
mod wire;

pub use client::{CONNECT_TIMEOUT, Connector, GrpcRemote, connect, is_url};
pub use describe::{Convert, Interface, Method};
pub use server::{Server, ServerBuilder};
pub use wire::Bad;

/// The `.proto` of interface `I` (its service and messages), for clients
/// that are not ferry.
pub fn proto<I: Interface>() -> &'static str {
    I::PROTO
}

// The items the code `#[ferry::interface(grpc)]` generates names.
#[doc(hidden)]
pub mod __private {
    pub use crate::describe::{Interface, Method};
    pub use crate::wire::{
        Bad, Field, Native, Postcard, for_each_field, from_postcard, present, skip, to_postcard,
    };
}
