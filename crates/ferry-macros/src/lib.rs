//! `#[ferry::interface]`: typed calls into another process over
//! `ferry::rpc`.
//!
//! This crate owns the attribute macro only: it reads a trait, refuses what
//! cannot cross between processes (with errors at the offending tokens), and
//! generates a client stub and a server dispatch over ferry's raw call API
//! (`ferry::rpc::Client::call`, `ferry::rpc::Handler`). It holds no runtime
//! code; use it through the `ferry` crate, which re-exports it as
//! `ferry::interface`.
//!
//! # What `#[interface]` generates
//!
//! For `pub trait Calc { .. }` (the trait itself is kept as written):
//!
//! - `pub const CALC_VERSION: u64`: the interface version hash (below).
//! - `CalcClient` (`Clone`), holding a `ferry::rpc::Client`:
//!   `CalcClient::connect(name)` / `connect_in(dir, name)` bind at
//!   `CalcClient::VERSION`; `from_client(client)` and `client()` go to and
//!   from the raw client; and one method per trait method, with the same
//!   arguments, returning `ferry::rpc::Result<Ret>`.
//!   `client.with(&opts)` gives a `CalcClientWith` whose methods are the
//!   same calls made with `ferry::rpc::CallOptions` (a deadline, urgency).
//! - `CalcServer<T: Calc + Send + Sync + 'static>`, a `ferry::rpc::Handler`:
//!   `CalcServer::serve(name, imp)` / `serve_in(dir, name, imp)` return the
//!   `ferry::rpc::Server`; `CalcServer::new(imp)` is the bare handler and
//!   `dispatch(op, args)` answers one call.
//!
//! # The wire
//!
//! The methods are ops `0, 1, 2, ..` in declaration order. A call's
//! arguments are encoded with postcard as one tuple `(a, b, ..)` of the
//! arguments after `&self` (`()` for none, `(a,)` for one); its result is
//! the return value encoded with postcard (`()` when there is none), so any
//! serde type works, `Result<T, E>` included. An argument or result written
//! `Vec<u8>` or `&[u8]` is encoded as postcard's byte string: the same
//! bytes as serde's sequence of `u8`, written and read in one copy instead
//! of one serializer call per byte (that cost about 0.8 us per KiB encoded
//! and decoded). The server answers arguments that do not decode, or
//! leave bytes over, with `Fault::BadArgs` (the client sees
//! `Error::BadArgs`), an op past the last method with `Fault::UnknownOp`
//! (`Error::UnknownOp { op }`), and a result that cannot be encoded with
//! `Fault::Panicked` (`Error::ServerPanicked`). A client
//! whose arguments cannot be encoded gets `Error::BadArgs` without calling;
//! a reply that does not decode, or leaves bytes over, is
//! `Error::BadReply`.
//!
//! # The version hash
//!
//! `CALC_VERSION` is the 64-bit FNV-1a hash, computed at expansion, of this
//! text (each line ending in `\n`):
//!
//! ```text
//! ferry-interface 1
//! trait Calc
//! fn add(a: i64, b: i64) -> i64
//! fn greet(name: String) -> Result < String , MyErr >
//! ```
//!
//! that is: the trait's name, then per method in order its name, each
//! argument's name and type, and its return type (`()` if none), each type
//! written as its tokens separated by single spaces (so source spacing does
//! not matter, and the text does not depend on the compiler that built the
//! process). Changing the trait's name, a method's name or position, an
//! argument's name or type, or a return type changes the hash, and a client
//! and server whose hashes differ are refused at connect with
//! `Error::VersionMismatch`. Types are compared as written: `String` and
//! `std::string::String` differ, and a change inside a named type (a new
//! field of an argument's struct) does not change the hash. Doc comments
//! and default method bodies are not part of it.
//!
//! # Refused
//!
//! Generic traits or methods; receivers other than `&self`; `async`,
//! `const`, `unsafe` or `extern` methods; associated types, consts or
//! macros; arguments that are patterns rather than names; `impl Trait`,
//! `Self`, named lifetimes or `&mut` in types; references in return types
//! (results are decoded into owned values); method names the client has of
//! its own (`connect`, `connect_in`, `from_client`, `client`, `with`,
//! `VERSION`); attribute arguments.
//!
//! # Example
//!
//! (Shown here without running: it runs, over a runtime directory of its
//! own, as the example of `ferry::interface`.)
//!
//! ```ignore
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Debug, Serialize, Deserialize)]
//! pub struct MyErr(String);
//!
//! #[ferry::interface]
//! pub trait Calc {
//!     /// Adds two numbers.
//!     fn add(&self, a: i64, b: i64) -> i64;
//!     fn greet(&self, name: String) -> Result<String, MyErr>;
//! }
//!
//! struct Impl;
//! impl Calc for Impl {
//!     fn add(&self, a: i64, b: i64) -> i64 { a + b }
//!     fn greet(&self, name: String) -> Result<String, MyErr> { Ok(format!("hello {name}")) }
//! }
//!
//! ferry::run(|| {
//!     let _server = CalcServer::serve("calc", Impl).unwrap();
//!     let calc = CalcClient::connect("calc").unwrap();
//!     assert_eq!(calc.add(2, 3).unwrap(), 5);
//!     let opts = ferry::rpc::CallOptions::timeout(std::time::Duration::from_secs(1));
//!     assert_eq!(calc.with(&opts).greet("ferry".into()).unwrap().unwrap(), "hello ferry");
//! })
//! .unwrap();
//! ```

mod expand;
mod grpc;
mod model;
mod version;

#[cfg(test)]
mod tests;

use proc_macro::TokenStream;

/// Makes a trait an interface callable from another process: generates
/// `<Trait>Client`, `<Trait>ClientWith`, `<Trait>Server` and
/// `<TRAIT>_VERSION` beside it. See the crate docs for what each does, the
/// wire format, exactly what the version hash covers, and what is refused.
#[proc_macro_attribute]
pub fn interface(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item = proc_macro2::TokenStream::from(item);
    match expand::expand(attr.into(), item.clone()) {
        Ok(tokens) => tokens.into(),
        // The trait is kept, so that its users see only these errors.
        Err(e) => {
            let mut out = e.to_compile_error();
            out.extend(item);
            out.into()
        }
    }
}
