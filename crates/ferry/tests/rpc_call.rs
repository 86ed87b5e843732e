//! Calls through `ferry::rpc` between a server and clients of one process
//! (the channel works the same across processes: see `rpc_process.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ferry::rpc::{CallOptions, Client, Error, Fault, RuntimeDir, Server};

fn temp_dir(tag: &str) -> (std::path::PathBuf, RuntimeDir) {
    let path = std::env::temp_dir().join(format!(
        "ferry-rpc-call-{tag}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&path);
    let dir = RuntimeDir::open(&path, rustix::process::getuid().as_raw()).unwrap();
    (path, dir)
}

/// op 0: echo; op 1: sum of bytes as u64 LE; op 2: panics; op 3: sleeps
/// for the milliseconds in the argument byte, then echoes.
fn handler(op: u32, args: &[u8]) -> Result<Vec<u8>, Fault> {
    match op {
        0 => Ok(args.to_vec()),
        1 => Ok(args
            .iter()
            .map(|&b| u64::from(b))
            .sum::<u64>()
            .to_le_bytes()
            .to_vec()),
        2 => panic!("asked to panic"),
        3 => {
            ferry::sleep(Duration::from_millis(u64::from(args[0])));
            Ok(args.to_vec())
        }
        _ => Err(Fault::UnknownOp),
    }
}

fn runtime(processors: usize) -> ferry::Builder {
    let mut b = ferry::Runtime::builder();
    b.processors(processors);
    b
}

#[test]
fn calls_round_trip_with_results_and_faults() {
    let (path, dir) = temp_dir("basic");
    runtime(2)
        .run(move || {
            let server = Server::serve_in(&dir, "calc", 7, handler).unwrap();
            let client = Client::connect_in(&dir, "calc", 7).unwrap();
            assert_eq!(client.call(0, b"hello").unwrap(), b"hello");
            assert_eq!(client.call(0, b"").unwrap(), b"");
            let sum = client.call(1, &[1, 2, 3, 250]).unwrap();
            assert_eq!(u64::from_le_bytes(sum.try_into().unwrap()), 256);
            assert!(matches!(
                client.call(9, b"x"),
                Err(Error::UnknownOp { op: 9 })
            ));
            assert!(matches!(client.call(2, b""), Err(Error::ServerPanicked)));
            // The server goes on after a panic.
            assert_eq!(client.call(0, b"again").unwrap(), b"again");
            assert!(matches!(
                Client::connect_in(&dir, "calc", 8),
                Err(Error::VersionMismatch { ours: 8, theirs: 7 })
            ));
            assert!(matches!(
                Client::connect_in(&dir, "nobody", 7),
                Err(Error::UnknownName)
            ));
            drop(client);
            let socket = server_socket(&dir, "calc");
            assert!(socket.exists());
            drop(server);
            assert!(!socket.exists(), "a closed server's name is gone at once");
        })
        .unwrap();
    std::fs::remove_dir_all(path).unwrap();
}

fn server_socket(dir: &RuntimeDir, name: &str) -> std::path::PathBuf {
    dir.path().join(format!("{name}.sock"))
}

#[test]
fn large_calls_go_out_of_line_up_to_the_maximum() {
    let (path, dir) = temp_dir("large");
    runtime(2)
        .run(move || {
            let _server = Server::serve_in(&dir, "big", 1, handler).unwrap();
            let client = Client::connect_in(&dir, "big", 1).unwrap();
            for len in [
                479,
                480,
                481,
                4096,
                32 * 1024,
                1_000_000,
                ferry::rpc::MAX_CALL_LEN,
            ] {
                let args: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
                assert_eq!(client.call(0, &args).unwrap(), args, "len {len}");
            }
            let too_big = vec![0u8; client.max_call_len() + 1];
            assert!(matches!(client.call(0, &too_big), Err(Error::TooLarge)));
            assert_eq!(client.call(0, b"small").unwrap(), b"small");
        })
        .unwrap();
    std::fs::remove_dir_all(path).unwrap();
}

#[test]
fn many_threads_call_at_once_and_every_reply_matches_its_call() {
    let (path, dir) = temp_dir("many");
    let threads = if cfg!(miri) { 4 } else { 64 };
    let calls = if cfg!(miri) { 10 } else { 300 };
    runtime(2)
        .run(move || {
            let _server = Server::serve_in(&dir, "many", 1, handler).unwrap();
            let client = Client::connect_in(&dir, "many", 1).unwrap();
            let done = Arc::new(AtomicUsize::new(0));
            let hs: Vec<_> = (0..threads)
                .map(|t| {
                    let (client, done) = (client.clone(), done.clone());
                    ferry::spawn(move || {
                        for i in 0..calls {
                            let arg = format!("{t}:{i}").into_bytes();
                            assert_eq!(client.call(0, &arg).unwrap(), arg);
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            assert_eq!(done.load(Ordering::Relaxed), threads * calls);
        })
        .unwrap();
    std::fs::remove_dir_all(path).unwrap();
}

#[test]
fn a_deadline_gives_timed_out_and_the_slot_is_reused_safely() {
    let (path, dir) = temp_dir("deadline");
    runtime(2)
        .run(move || {
            let _server = Server::serve_in(&dir, "slow", 1, handler).unwrap();
            let client = Client::connect_in(&dir, "slow", 1).unwrap();
            let start = Instant::now();
            let r = client.call_with(3, &[200], &CallOptions::timeout(Duration::from_millis(20)));
            assert!(matches!(r, Err(Error::DeadlineExceeded)), "{r:?}");
            assert!(start.elapsed() >= Duration::from_millis(20));
            // Every later call gets its own answer, never the late one.
            for i in 0..200u8 {
                assert_eq!(client.call(0, &[i]).unwrap(), [i]);
            }
            ferry::sleep(Duration::from_millis(250));
            for i in 0..200u8 {
                assert_eq!(client.call(0, &[i, 1]).unwrap(), [i, 1]);
            }
        })
        .unwrap();
    std::fs::remove_dir_all(path).unwrap();
}

#[test]
fn a_closed_server_fails_pending_and_later_calls_with_peer_died() {
    let (path, dir) = temp_dir("closed");
    runtime(2)
        .run(move || {
            let server = Server::serve_in(&dir, "gone", 1, handler).unwrap();
            let client = Client::connect_in(&dir, "gone", 1).unwrap();
            let c = client.clone();
            let pending = ferry::spawn(move || c.call(3, &[250]));
            ferry::sleep(Duration::from_millis(20));
            drop(server);
            assert!(matches!(pending.join().unwrap(), Err(Error::PeerDied)));
            assert!(matches!(client.call(0, b"x"), Err(Error::PeerDied)));
            assert!(client.is_dead());
        })
        .unwrap();
    std::fs::remove_dir_all(path).unwrap();
}

#[test]
fn off_a_ferry_thread_connecting_is_a_clear_error() {
    let (path, dir) = temp_dir("noruntime");
    assert!(matches!(
        Client::connect_in(&dir, "x", 1),
        Err(Error::NoRuntime)
    ));
    assert!(matches!(
        Server::serve_in(&dir, "x", 1, handler),
        Err(Error::NoRuntime)
    ));
    std::fs::remove_dir_all(path).unwrap();
}

#[test]
fn a_server_policy_that_refuses_the_client_gives_refused() {
    let (path, dir) = temp_dir("refused");
    runtime(1)
        .run(move || {
            let me = rustix::process::getuid().as_raw();
            // Simulates a client of another user: the policy sees this
            // client's real credentials and refuses everyone but uid 0 of
            // another machine's idea; here, everyone whose uid is ours.
            let _server = Server::builder()
                .allow(move |c| c.uid != me)
                .serve_in(&dir, "picky", 1, handler)
                .unwrap();
            assert!(matches!(
                Client::connect_in(&dir, "picky", 1),
                Err(Error::Refused)
            ));
            let _open = Server::builder()
                .allow(move |c| c.uid == me && c.pid == std::process::id() as i32)
                .serve_in(&dir, "open", 1, handler)
                .unwrap();
            let c = Client::connect_in(&dir, "open", 1).unwrap();
            assert_eq!(c.call(0, b"in").unwrap(), b"in");
        })
        .unwrap();
    std::fs::remove_dir_all(path).unwrap();
}

/// Mach's static model with a fixed pool: all `n` service threads are
/// there from serve time, twenty concurrent calls that each hold a thread
/// for a while never make more, and every call is answered.
#[test]
fn a_fixed_static_pool_serves_every_call_on_its_threads_alone() {
    let (path, dir) = temp_dir("fixed");
    runtime(2)
        .run(move || {
            let server = Server::builder()
                .static_threads(3)
                .serve_in(&dir, "fixed", 1, handler)
                .unwrap();
            assert_eq!(server.mode(), ferry::rpc::ServeMode::Static);
            assert_eq!(server.threads(), 3, "all started at serve time");
            let client = Client::connect_in(&dir, "fixed", 1).unwrap();
            let callers: Vec<_> = (0..20u8)
                .map(|i| {
                    let c = client.clone();
                    ferry::spawn(move || c.call(3, &[2, i]).unwrap())
                })
                .collect();
            for (i, h) in callers.into_iter().enumerate() {
                assert_eq!(h.join().unwrap(), [2, i as u8]);
            }
            assert_eq!(server.threads(), 3, "never more than the fixed pool");
        })
        .unwrap();
    std::fs::remove_dir_all(path).unwrap();
}
