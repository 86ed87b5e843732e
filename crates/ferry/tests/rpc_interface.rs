//! Typed interfaces (`#[ferry::interface]`) over real channels: a server
//! and its clients on ferry threads of one runtime, bound through a runtime
//! directory of the test's own. Calls with results of any serde type, call
//! options, a client and a server of two traits of one name that differ in
//! a signature (refused at connect), unknown ops, bad arguments, replies
//! that do not decode, and a panicking implementation.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ferry::rpc::{CallOptions, Error, Fault, RuntimeDir, Server};
use serde::{Deserialize, Serialize};

fn uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// A fresh runtime directory of this test's own, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        TempDir(std::env::temp_dir().join(format!("ferry-rpc-iface-{}-{n}", std::process::id())))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `f` on a ferry thread of a fresh runtime, with a runtime directory
/// of its own.
fn in_runtime<T: Send + 'static>(f: impl FnOnce(&RuntimeDir) -> T + Send + 'static) -> T {
    let tmp = TempDir::new();
    let path = tmp.0.clone();
    let out = ferry::run(move || {
        let dir = RuntimeDir::open(&path, uid()).unwrap();
        f(&dir)
    })
    .unwrap();
    drop(tmp);
    out
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub struct MyErr {
    pub why: String,
}

#[ferry::interface]
pub trait Calc {
    /// Adds two numbers.
    fn add(&self, a: i64, b: i64) -> i64;
    fn greet(&self, name: String) -> Result<String, MyErr>;
    fn count(&self, text: &str, bytes: &[u8]) -> (usize, usize);
    fn echo(&self, bytes: Vec<u8>) -> Vec<u8>;
    fn nothing(&self);
    fn boom(&self) -> u8;
}

struct Impl;

impl Calc for Impl {
    fn add(&self, a: i64, b: i64) -> i64 {
        a + b
    }
    fn greet(&self, name: String) -> Result<String, MyErr> {
        if name.is_empty() {
            Err(MyErr {
                why: "no name".into(),
            })
        } else {
            Ok(format!("hello {name}"))
        }
    }
    fn count(&self, text: &str, bytes: &[u8]) -> (usize, usize) {
        (text.chars().count(), bytes.len())
    }
    fn echo(&self, mut bytes: Vec<u8>) -> Vec<u8> {
        bytes.reverse();
        bytes
    }
    fn nothing(&self) {}
    fn boom(&self) -> u8 {
        panic!("boom on purpose")
    }
}

/// The same trait name with `add` taking an `i32`: another interface.
mod changed {
    // Only its client and version are used here.
    #![allow(dead_code)]

    #[ferry::interface]
    pub trait Calc {
        fn add(&self, a: i64, b: i32) -> i64;
    }
}

#[test]
fn typed_calls_carry_arguments_and_results() {
    in_runtime(|dir| {
        let _server = CalcServer::serve_in(dir, "calc", Impl).unwrap();
        let calc = CalcClient::connect_in(dir, "calc").unwrap();
        assert_eq!(calc.add(40, 2).unwrap(), 42);
        assert_eq!(
            calc.greet("ferry".into()).unwrap(),
            Ok("hello ferry".into())
        );
        assert_eq!(
            calc.greet(String::new()).unwrap(),
            Err(MyErr {
                why: "no name".into()
            })
        );
        assert_eq!(calc.count("héllo", &[7; 9]).unwrap(), (5, 9));
        calc.nothing().unwrap();
        // Large arguments and results (beyond an inline slot).
        let big: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
        let mut want = big.clone();
        want.reverse();
        assert_eq!(calc.echo(big).unwrap(), want);
        // The same calls with options.
        let opts = CallOptions::timeout(Duration::from_secs(30));
        assert_eq!(calc.with(&opts).add(1, 2).unwrap(), 3);
        let urgent = CallOptions {
            urgent: true,
            ..CallOptions::default()
        };
        assert_eq!(calc.with(&urgent).count("", &[]).unwrap(), (0, 0));
    });
}

#[test]
fn many_threads_call_one_server_and_each_gets_its_own_answers() {
    in_runtime(|dir| {
        let _server = CalcServer::serve_in(dir, "calc", Impl).unwrap();
        let calc = CalcClient::connect_in(dir, "calc").unwrap();
        let threads: Vec<_> = (0..8i64)
            .map(|t| {
                let calc = calc.clone();
                ferry::spawn(move || {
                    for i in 0..200i64 {
                        assert_eq!(calc.add(t * 1000, i).unwrap(), t * 1000 + i);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    });
}

/// Connecting and dropping a client adds and removes a polled entry of the
/// runtime; here that happens while preemption comes every 50 µs and both
/// processors are kept busy, so some threads are stopped with the registry
/// in hand, and the preempting switch (which looks at the polled entries
/// on the same kernel thread) must not wait for it.
#[test]
fn clients_come_and_go_while_their_threads_are_preempted() {
    let tmp = TempDir::new();
    let path = tmp.0.clone();
    ferry::Runtime::builder()
        .processors(2)
        .time_slice(Some(Duration::from_micros(50)))
        .run(move || {
            let dir = RuntimeDir::open(&path, uid()).unwrap();
            let _server = CalcServer::serve_in(&dir, "calc", Impl).unwrap();
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
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
            let threads: Vec<_> = (0..4i64)
                .map(|t| {
                    let dir = dir.clone();
                    ferry::spawn(move || {
                        for i in 0..100i64 {
                            let calc = CalcClient::connect_in(&dir, "calc").unwrap();
                            assert_eq!(calc.add(t, i).unwrap(), t + i);
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            stop.store(true, Ordering::Relaxed);
            for s in spinners {
                s.join().unwrap();
            }
        })
        .unwrap();
}

#[test]
fn a_trait_of_the_same_name_with_another_signature_is_refused_at_connect() {
    assert_ne!(CALC_VERSION, changed::CALC_VERSION);
    in_runtime(|dir| {
        let _server = CalcServer::serve_in(dir, "calc", Impl).unwrap();
        match changed::CalcClient::connect_in(dir, "calc") {
            Err(Error::VersionMismatch { ours, theirs }) => {
                assert_eq!((ours, theirs), (changed::CALC_VERSION, CALC_VERSION));
            }
            other => panic!("{:?}", other.map(|_| ())),
        }
        // The right version still binds.
        assert_eq!(
            CalcClient::connect_in(dir, "calc")
                .unwrap()
                .add(1, 1)
                .unwrap(),
            2
        );
    });
}

#[test]
fn an_unknown_op_and_bad_arguments_are_typed_errors() {
    in_runtime(|dir| {
        let _server = CalcServer::serve_in(dir, "calc", Impl).unwrap();
        let calc = CalcClient::connect_in(dir, "calc").unwrap();
        let raw = calc.client();
        assert!(matches!(raw.call(6, &[]), Err(Error::UnknownOp { op: 6 })));
        assert!(matches!(
            raw.call(u32::MAX, &[1, 2]),
            Err(Error::UnknownOp { op: u32::MAX })
        ));
        // `add` wants two varint i64s: one is too few, three too many.
        assert!(matches!(raw.call(0, &[2]), Err(Error::BadArgs)));
        assert!(matches!(raw.call(0, &[2, 4, 6]), Err(Error::BadArgs)));
        // `greet`'s string: a length past the end, and bytes not UTF-8.
        assert!(matches!(raw.call(1, &[9, b'a']), Err(Error::BadArgs)));
        assert!(matches!(raw.call(1, &[2, 0xff, 0xfe]), Err(Error::BadArgs)));
        // The channel still serves good calls.
        assert_eq!(calc.add(2, 2).unwrap(), 4);
    });
}

#[test]
fn a_reply_that_does_not_decode_is_bad_reply() {
    in_runtime(|dir| {
        // A raw server at Calc's version that answers `add` with three
        // bytes where one varint belongs, and `greet` with a bad tag.
        let handler = |op: u32, _args: &[u8]| -> Result<Vec<u8>, Fault> {
            match op {
                0 => Ok(vec![2, 2, 2]),
                1 => Ok(vec![7]),
                _ => Ok(vec![]),
            }
        };
        let _server = Server::serve_in(dir, "liar", CALC_VERSION, handler).unwrap();
        let calc = CalcClient::connect_in(dir, "liar").unwrap();
        assert!(matches!(calc.add(1, 2), Err(Error::BadReply)));
        assert!(matches!(calc.greet("x".into()), Err(Error::BadReply)));
        assert!(matches!(calc.echo(vec![1]), Err(Error::BadReply)));
        calc.nothing().unwrap();
    });
}

#[test]
fn a_panicking_implementation_is_server_panicked_and_the_server_goes_on() {
    in_runtime(|dir| {
        let _server = CalcServer::serve_in(dir, "calc", Impl).unwrap();
        let calc = CalcClient::connect_in(dir, "calc").unwrap();
        assert!(matches!(calc.boom(), Err(Error::ServerPanicked)));
        assert_eq!(calc.add(3, 4).unwrap(), 7);
    });
}

#[test]
fn a_name_nobody_serves_is_unknown_name() {
    in_runtime(|dir| {
        assert!(matches!(
            CalcClient::connect_in(dir, "nobody").map(|_| ()),
            Err(Error::UnknownName)
        ));
    });
}
