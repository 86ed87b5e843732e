//! ferry's two paths of `grpc`: one `#[ferry::interface(grpc)]` interface,
//! [`Bench`], served once in a runtime directory of its own and reached
//! both ways with the same client type: bound by name (a local ferry call
//! over a shared-memory channel) and by URL (over gRPC on loopback,
//! through `ferry-grpc`'s server, which makes each request a local call to
//! the same server).
//!
//! This module owns the interface, its implementation and the setup of
//! both paths ([`Paths`]); it times nothing (the loop is
//! [`crate::urpc::calls::time_calls`]) and must be used on a ferry thread.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use ferry::rpc::{RuntimeDir, Server};

use crate::error::Error;

/// The benchmark's interface: the null call and an echo of bytes. Its
/// gRPC face is service `ferry.Bench` with messages `BenchNullRequest`,
/// `BenchNullReply`, `BenchEchoRequest { bytes data = 1 }` and
/// `BenchEchoReply { bytes value = 1 }` ([`BenchGrpc::PROTO`]); the plain
/// tonic peer uses the same ones ([`super::plain`]).
#[ferry::interface(grpc)]
pub trait Bench {
    /// No arguments, unit result.
    fn null(&self);
    /// The bytes back.
    fn echo(&self, data: Vec<u8>) -> Vec<u8>;
}

/// The implementation: nothing, and the arguments as the result.
#[derive(Debug, Clone, Copy, Default)]
pub struct Impl;

impl Bench for Impl {
    fn null(&self) {}

    fn echo(&self, data: Vec<u8>) -> Vec<u8> {
        data
    }
}

/// The interface name it is served under.
pub const NAME: &str = "grpc-bench";

/// A runtime directory of its own, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    /// `ferry-bench-grpc-<pid>-<n>` under the temp dir, opened as a
    /// runtime directory.
    pub fn new() -> Result<(TempDir, RuntimeDir), Error> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("ferry-bench-grpc-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        let uid = rustix::process::getuid().as_raw();
        let dir = RuntimeDir::open(&path, uid)
            .map_err(|e| Error(format!("runtime dir {}: {e}", path.display())))?;
        Ok((TempDir(path), dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// [`Impl`] served on both paths at once, and a client of each.
pub struct Paths {
    /// Bound by name in the runtime directory.
    pub local: BenchClient,
    /// Bound by `grpc://127.0.0.1:PORT/grpc-bench`.
    pub remote: BenchClient,
    /// The URL of the gRPC path.
    pub url: String,
    // Dropped in this order: the clients above, the gRPC server, the
    // local server, the directory.
    _grpc: ferry_grpc::Server,
    _local: Server,
    _dir: TempDir,
}

impl Paths {
    /// Serves [`Impl`] locally and over gRPC on loopback (a port the
    /// kernel picks) and binds a client to each. On a ferry thread.
    ///
    /// # Errors
    /// Any step that fails, saying which.
    pub fn start() -> Result<Paths, Error> {
        let (tmp, dir) = TempDir::new()?;
        let local = BenchServer::serve_in(&dir, NAME, Impl)
            .map_err(|e| Error(format!("serving {NAME} locally: {e}")))?;
        let addr = "127.0.0.1:0".parse().expect("a socket address");
        let grpc = ferry_grpc::Server::builder()
            .dir(dir.clone())
            .serve::<BenchGrpc>(addr, NAME)
            .map_err(|e| Error(format!("serving {NAME} over gRPC: {e}")))?;
        let url = format!("grpc://{}/{NAME}", grpc.local_addr());
        let local_client = BenchClient::connect_in(&dir, NAME)
            .map_err(|e| Error(format!("binding to {NAME}: {e}")))?;
        let remote =
            BenchClient::connect(&url).map_err(|e| Error(format!("connecting to {url}: {e}")))?;
        Ok(Paths {
            local: local_client,
            remote,
            url,
            _grpc: grpc,
            _local: local,
            _dir: tmp,
        })
    }
}

/// One call of `size` bytes each way through `client`: the null call for
/// 0 bytes, else the echo of `args`; the result is left in `result`.
///
/// # Errors
/// The call's error.
pub fn call(client: &BenchClient, args: &[u8], result: &mut Vec<u8>) -> Result<(), Error> {
    if args.is_empty() {
        client
            .null()
            .map_err(|e| Error(format!("null call: {e}")))?;
        result.clear();
    } else {
        *result = client
            .echo(args.to_vec())
            .map_err(|e| Error(format!("echo call: {e}")))?;
    }
    Ok(())
}
