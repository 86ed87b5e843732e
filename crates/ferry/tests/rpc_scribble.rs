//! A hostile peer on a live channel: while calls run, random words are
//! written over every part of one client's channel memory (header, queues,
//! doorbells, liveness words, slots and extents: the peer may write any
//! byte at any time). Both ends of that channel must answer with errors or
//! results, never panic, hang or touch memory out of bounds; the server
//! goes on serving another client on a clean channel, every reply right.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ferry::rpc::{CallOptions, Client, Fault, RuntimeDir, Server};

/// The channel mappings (start, end) of this process now.
fn channel_maps() -> Vec<(usize, usize)> {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter(|l| l.contains("memfd:ferry-rpc"))
        .map(|l| {
            let range = l.split(' ').next().unwrap();
            let (a, b) = range.split_once('-').unwrap();
            (
                usize::from_str_radix(a, 16).unwrap(),
                usize::from_str_radix(b, 16).unwrap(),
            )
        })
        .collect()
}

/// A small xorshift generator (deterministic per seed).
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

#[test]
fn scribbling_over_a_live_channel_gives_errors_never_crashes_and_spares_other_clients() {
    let path = std::env::temp_dir().join(format!("ferry-rpc-scribble-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    let dir = RuntimeDir::open(&path, rustix::process::getuid().as_raw()).unwrap();
    let mut b = ferry::Runtime::builder();
    b.processors(2);
    let (calls_a, calls_b) = b
        .run(move || {
            let _server = Server::serve_in(
                &dir,
                "scribbled",
                1,
                |_op: u32, a: &[u8]| -> Result<Vec<u8>, Fault> { Ok(a.to_vec()) },
            )
            .unwrap();
            let before = channel_maps();
            let victim = Client::connect_in(&dir, "scribbled", 1).unwrap();
            let victim_maps: Vec<(usize, usize)> = channel_maps()
                .into_iter()
                .filter(|m| !before.contains(m))
                .collect();
            assert!(!victim_maps.is_empty());
            let clean = Client::connect_in(&dir, "scribbled", 1).unwrap();
            assert_eq!(victim.call(0, b"before").unwrap(), b"before");

            let stop = Arc::new(AtomicBool::new(false));
            // The scribbler: a kernel thread writing random words at random
            // places of the victim's channel (most often in its first 64 KiB,
            // where the header, queues, doorbells and slots are).
            let scribbler = {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 0x9e37_79b9_7f4a_7c15u64;
                    let mut writes = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        for &(start, end) in &victim_maps {
                            let len = end - start;
                            let span = if next(&mut x).is_multiple_of(4) {
                                len
                            } else {
                                len.min(1 << 16)
                            };
                            let at = start + (next(&mut x) as usize % span) / 8 * 8;
                            // SAFETY: `at` is 8-aligned inside a live shared
                            // mapping that ferry only accesses atomically;
                            // the mapping outlives this thread (joined below
                            // before the client is dropped).
                            let word = unsafe { &*(at as *const AtomicU64) };
                            word.store(next(&mut x), Ordering::Relaxed);
                            writes += 1;
                        }
                        if writes.is_multiple_of(64) {
                            std::thread::yield_now();
                        }
                    }
                    writes
                })
            };
            let done_a = Arc::new(AtomicUsize::new(0));
            let callers: Vec<_> = (0..4)
                .map(|t| {
                    let (victim, done_a) = (victim.clone(), done_a.clone());
                    ferry::spawn(move || {
                        let end = Instant::now() + Duration::from_millis(500);
                        while Instant::now() < end {
                            let arg = [t as u8; 24];
                            let start = Instant::now();
                            let opts = CallOptions::timeout(Duration::from_millis(20));
                            // Any answer or error will do; it must come.
                            let _ = victim.call_with(0, &arg, &opts);
                            assert!(start.elapsed() < Duration::from_secs(5), "a call hung");
                            done_a.fetch_add(1, Ordering::Relaxed);
                        }
                    })
                })
                .collect();
            let mut calls_b = 0usize;
            let end = Instant::now() + Duration::from_millis(500);
            while Instant::now() < end {
                let arg = (calls_b as u64).to_le_bytes();
                assert_eq!(
                    clean.call(0, &arg).unwrap(),
                    arg,
                    "the clean client's reply"
                );
                calls_b += 1;
            }
            for c in callers {
                c.join().unwrap();
            }
            stop.store(true, Ordering::Relaxed);
            assert!(scribbler.join().unwrap() > 0);
            // The server still binds and serves new clients.
            let fresh = Client::connect_in(&dir, "scribbled", 1).unwrap();
            assert_eq!(fresh.call(0, b"after").unwrap(), b"after");
            assert_eq!(clean.call(0, b"after").unwrap(), b"after");
            (done_a.load(Ordering::Relaxed), calls_b)
        })
        .unwrap();
    assert!(calls_a > 0 && calls_b > 0);
    std::fs::remove_dir_all(&path).unwrap();
}
