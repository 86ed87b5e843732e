//! gRPC servers and clients made by ferry threads that are preempted all
//! the while (a slice of 50 µs, both processors kept busy): tokio's
//! context lives in kernel thread-locals, and a ferry thread that moved
//! to another kernel thread between entering the runtime and using it
//! would find no runtime there. A process of its own, so that the gRPC
//! runtime is first made here, under preemption too.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ferry::rpc::RuntimeDir;

#[ferry::interface(grpc)]
pub trait Adder {
    /// Adds two numbers.
    fn add(&self, a: i64, b: i64) -> i64;
}

struct Impl;

impl Adder for Impl {
    fn add(&self, a: i64, b: i64) -> i64 {
        a + b
    }
}

const MAKERS: usize = 4;
const SERVERS: usize = 20;
const CLIENTS: usize = 300;

#[test]
fn servers_and_clients_are_made_while_their_threads_are_preempted() {
    let path = std::env::temp_dir().join(format!("ferry-grpc-preempted-{}", std::process::id()));
    let dir_path: PathBuf = path.clone();
    ferry::Runtime::builder()
        .processors(2)
        .time_slice(Some(Duration::from_micros(50)))
        .run(move || {
            let dir = RuntimeDir::open(&dir_path, rustix::process::getuid().as_raw()).unwrap();
            let _local = AdderServer::serve_in(&dir, "adder", Impl).unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let spinners: Vec<_> = (0..2)
                .map(|_| {
                    let stop = stop.clone();
                    ferry::spawn(move || {
                        let mut x = 0u64;
                        while !stop.load(Ordering::Relaxed) {
                            x = std::hint::black_box(x.wrapping_add(1));
                        }
                    })
                })
                .collect();
            let makers: Vec<_> = (0..MAKERS)
                .map(|m| {
                    let dir = dir.clone();
                    ferry::spawn(move || {
                        for i in 0..SERVERS {
                            let server = ferry_grpc::Server::builder()
                                .dir(dir.clone())
                                .serve::<AdderGrpc>("127.0.0.1:0".parse().unwrap(), "adder")
                                .unwrap();
                            let url = format!("grpc://{}/adder", server.local_addr());
                            for _ in 0..CLIENTS / SERVERS {
                                let client = AdderClient::connect(&url).unwrap();
                                assert!(client.client().is_remote());
                            }
                            let client = AdderClient::connect(&url).unwrap();
                            let (a, b) = (m as i64, i as i64);
                            assert_eq!(client.add(a, b).unwrap(), a + b);
                        }
                    })
                })
                .collect();
            for m in makers {
                m.join().unwrap();
            }
            stop.store(true, Ordering::Relaxed);
            for s in spinners {
                s.join().unwrap();
            }
        })
        .unwrap();
    let _ = std::fs::remove_dir_all(&path);
}
