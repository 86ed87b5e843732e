//! The async runtime gRPC runs on: one tokio runtime per process, on
//! kernel threads of its own (never a ferry processor), made on first use.
//!
//! Owns [`tokio`](fn@tokio); it must not run interface code: a call's own code runs
//! on ferry threads, which park (not their processors) while tokio moves
//! their bytes.
//!
//! tokio keeps its context (the runtime a thread has entered) in kernel
//! thread-locals, and a ferry thread may move to another kernel thread
//! at any preemption point. So whatever reads or sets that context from a
//! ferry thread (building the runtime, entering it) runs through
//! [`in_tokio`], inside [`ferry::blocking`]: there the ferry thread keeps
//! its kernel thread from the enter to the matching exit.

use std::sync::OnceLock;

/// The process's gRPC runtime.
pub(crate) fn tokio() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        // Building enters the runtime to start its workers.
        ferry::blocking(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("ferry-grpc")
                .enable_all()
                .build()
                .expect("ferry-grpc: cannot start the tokio runtime")
        })
    })
}

/// Runs `f` inside the gRPC runtime's context (what tokio's I/O types
/// need when they are made), on one kernel thread throughout.
pub(crate) fn in_tokio<R>(f: impl FnOnce() -> R) -> R {
    let rt = tokio();
    ferry::blocking(|| {
        let _in = rt.enter();
        f()
    })
}
