//! What `#[ferry::interface(grpc)]` generates for `ferry-grpc`: the
//! [`Interface`] descriptor (service name, version hash, `.proto` text)
//! and one [`Method`] per op with the conversions between a call's local
//! bytes (postcard, as the interface's client and server encode them) and
//! its protobuf messages.
//!
//! This module owns those types only; it must not carry a call.

use crate::wire::Bad;

/// A conversion between a call's local bytes and a protobuf message.
pub type Convert = fn(&[u8]) -> Result<Vec<u8>, Bad>;

/// One method of an interface, as gRPC sees it.
#[derive(Debug, Clone, Copy)]
pub struct Method {
    /// The rpc's name in the service (`UpperCamel` of the method's).
    pub name: &'static str,
    /// The op number of the local wire.
    pub op: u32,
    /// The arguments (a postcard tuple) as the request message.
    pub args_to_proto: Convert,
    /// The request message as the arguments.
    pub args_from_proto: Convert,
    /// The result (postcard) as the reply message.
    pub result_to_proto: Convert,
    /// The reply message as the result.
    pub result_from_proto: Convert,
}

/// An interface reachable over gRPC: implemented by the `<Trait>Grpc` type
/// `#[ferry::interface(grpc)]` generates.
pub trait Interface: 'static {
    /// The gRPC service's full name (`ferry.<Trait>`).
    const SERVICE: &'static str;
    /// The interface's version hash (the local binding's).
    const VERSION: u64;
    /// The `.proto` text of the service and its messages.
    const PROTO: &'static str;
    /// The methods, in op order.
    const METHODS: &'static [Method];
}

/// The method of op `op`.
pub(crate) fn by_op<I: Interface>(op: u32) -> Option<&'static Method> {
    I::METHODS.get(op as usize).filter(|m| m.op == op)
}

/// The method a request path (`/service/Method`) names.
pub(crate) fn by_path<I: Interface>(path: &str) -> Option<&'static Method> {
    let rest = path.strip_prefix('/')?.strip_prefix(I::SERVICE)?;
    let name = rest.strip_prefix('/')?;
    I::METHODS.iter().find(|m| m.name == name)
}

/// The request path of `m`.
pub(crate) fn path<I: Interface>(m: &Method) -> String {
    format!("/{}/{}", I::SERVICE, m.name)
}
