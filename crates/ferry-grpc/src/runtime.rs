//! The async runtime gRPC runs on: one tokio runtime per process, on
//! kernel threads of its own (never a ferry processor), made on first use.
//!
//! Owns [`tokio`]; it must not run interface code: a call's own code runs
//! on ferry threads, which park (not their processors) while tokio moves
//! their bytes.

use std::sync::OnceLock;

/// The process's gRPC runtime.
pub(crate) fn tokio() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("ferry-grpc")
            .enable_all()
            .build()
            .expect("ferry-grpc: cannot start the tokio runtime")
    })
}
