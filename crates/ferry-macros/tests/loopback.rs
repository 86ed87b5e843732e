//! The expansion compiled and run without processes: `::ferry` here is this
//! test crate itself, whose `rpc` module stands in for `ferry::rpc` with the
//! signatures of the raw call API, and whose client hands each call straight
//! to a generated server's `Handler` in the same process. The helpers are
//! ferry's own (`crates/ferry/src/rpc/private.rs`, included by path). So the
//! generated client's encoding, the op numbers, the server's decoding and
//! its faults meet each other here; `crates/ferry/tests/rpc_interface.rs`
//! runs the same over real channels between ferry threads.

extern crate self as ferry;

use std::sync::Arc;

use ferry_macros::interface;
use serde::{Deserialize, Serialize};

#[path = "../../ferry/src/rpc/private.rs"]
pub mod helpers;

/// The stand-in for `ferry::rpc`: the raw call API's signatures, over a
/// handler in this process.
pub mod rpc {
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    pub use crate::helpers as __private;

    #[derive(Debug, PartialEq)]
    pub enum Error {
        UnknownOp { op: u32 },
        BadArgs,
        ServerPanicked,
        BadReply,
        UnknownName,
    }
    pub type Result<T> = std::result::Result<T, Error>;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Fault {
        UnknownOp,
        BadArgs,
        Panicked,
    }

    pub trait Handler: Send + Sync + 'static {
        fn call(&self, op: u32, args: &[u8]) -> std::result::Result<Vec<u8>, Fault>;
    }

    #[derive(Clone, Copy, Debug, Default, PartialEq)]
    pub struct CallOptions {
        pub deadline: Option<Instant>,
        pub urgent: bool,
    }
    impl CallOptions {
        pub fn timeout(d: Duration) -> CallOptions {
            CallOptions {
                deadline: Some(Instant::now() + d),
                urgent: false,
            }
        }
    }

    pub struct RuntimeDir;

    /// What the test sees of the calls made.
    #[derive(Default)]
    pub struct Log {
        pub calls: Vec<(u32, Vec<u8>, Option<CallOptions>)>,
        /// A reply to give instead of the handler's.
        pub forged_reply: Option<Vec<u8>>,
    }

    #[derive(Clone)]
    pub struct Client {
        pub handler: Arc<dyn Handler>,
        pub version: u64,
        pub log: Arc<Mutex<Log>>,
    }

    thread_local! {
        /// The server `connect` binds to in this process.
        pub static SERVED: std::cell::RefCell<Option<(u64, Arc<dyn Handler>)>> = const { std::cell::RefCell::new(None) };
    }

    impl Client {
        pub fn connect(_name: &str, version: u64) -> Result<Client> {
            let (v, handler) = SERVED
                .with(|s| s.borrow().clone())
                .ok_or(Error::UnknownName)?;
            assert_eq!(v, version, "a stand-in server serves one version");
            Ok(Client {
                handler,
                version,
                log: Arc::default(),
            })
        }
        pub fn connect_in(_dir: &RuntimeDir, name: &str, version: u64) -> Result<Client> {
            Client::connect(name, version)
        }
        pub fn call(&self, op: u32, args: &[u8]) -> Result<Vec<u8>> {
            self.answer(op, args, None)
        }
        pub fn call_with(&self, op: u32, args: &[u8], opts: &CallOptions) -> Result<Vec<u8>> {
            self.answer(op, args, Some(*opts))
        }
        fn answer(&self, op: u32, args: &[u8], opts: Option<CallOptions>) -> Result<Vec<u8>> {
            let mut log = self.log.lock().unwrap();
            log.calls.push((op, args.to_vec(), opts));
            if let Some(r) = &log.forged_reply {
                return Ok(r.clone());
            }
            self.handler.call(op, args).map_err(|f| match f {
                Fault::UnknownOp => Error::UnknownOp { op },
                Fault::BadArgs => Error::BadArgs,
                Fault::Panicked => Error::ServerPanicked,
            })
        }
    }

    pub struct Server;
    impl Server {
        pub fn serve(_name: &str, version: u64, handler: impl Handler) -> Result<Server> {
            SERVED.with(|s| *s.borrow_mut() = Some((version, Arc::new(handler))));
            Ok(Server)
        }
        pub fn serve_in(
            dir: &RuntimeDir,
            name: &str,
            version: u64,
            handler: impl Handler,
        ) -> Result<Server> {
            let _ = dir;
            Server::serve(name, version, handler)
        }
    }
}

use rpc::{CallOptions, Error, Fault, Handler};

#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub struct MyErr {
    pub why: String,
}

#[interface]
pub trait Calc {
    /// Adds two numbers.
    fn add(&self, a: i64, b: i64) -> i64;
    fn greet(&self, name: String) -> Result<String, MyErr>;
    fn count(&self, text: &str, bytes: &[u8]) -> (usize, usize);
    fn nothing(&self);
    fn shout(&self, text: String) -> String {
        text.to_uppercase()
    }
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
    fn nothing(&self) {}
}

fn client() -> CalcClient {
    let _server = CalcServer::serve("calc", Impl).unwrap();
    CalcClient::connect("calc").unwrap()
}

#[test]
fn calls_carry_arguments_and_results_of_any_serde_type() {
    let calc = client();
    assert_eq!(calc.add(2, -5), Ok(-3));
    assert_eq!(calc.greet("ferry".into()), Ok(Ok("hello ferry".into())));
    assert_eq!(
        calc.greet(String::new()),
        Ok(Err(MyErr {
            why: "no name".into()
        }))
    );
    assert_eq!(calc.count("héllo", &[1, 2, 3]), Ok((5, 3)));
    assert_eq!(calc.nothing(), Ok(()));
    // A default body is what the server runs.
    assert_eq!(calc.shout("hi".into()), Ok("HI".into()));
    assert_eq!(calc.client().version, CALC_VERSION);
}

#[test]
fn ops_follow_declaration_order_and_arguments_are_a_postcard_tuple() {
    let calc = client();
    calc.add(2, 3).unwrap();
    calc.nothing().unwrap();
    calc.shout("x".into()).unwrap();
    let log = calc.client().log.lock().unwrap();
    let ops: Vec<u32> = log.calls.iter().map(|c| c.0).collect();
    assert_eq!(ops, [0, 3, 4]);
    assert_eq!(log.calls[0].1, postcard::to_stdvec(&(2i64, 3i64)).unwrap());
    assert!(log.calls[1].1.is_empty());
    assert_eq!(log.calls[2].1, postcard::to_stdvec(&("x",)).unwrap());
    assert!(log.calls.iter().all(|c| c.2.is_none()));
}

#[test]
fn with_passes_the_call_options() {
    let calc = client();
    let opts = CallOptions {
        deadline: None,
        urgent: true,
    };
    assert_eq!(calc.with(&opts).add(1, 1), Ok(2));
    let timeout = CallOptions::timeout(std::time::Duration::from_secs(5));
    assert_eq!(
        calc.with(&timeout).greet("x".into()),
        Ok(Ok("hello x".into()))
    );
    let log = calc.client().log.lock().unwrap();
    assert_eq!(log.calls[0].2, Some(opts));
    assert_eq!(log.calls[1].2, Some(timeout));
}

#[test]
fn the_server_refuses_unknown_ops_and_bad_arguments() {
    let server = CalcServer::new(Impl);
    assert_eq!(server.call(5, &[]), Err(Fault::UnknownOp));
    assert_eq!(server.call(u32::MAX, &[]), Err(Fault::UnknownOp));
    // Too short for two i64s, one byte left over, not UTF-8, a length past
    // the end.
    let add = postcard::to_stdvec(&(2i64, 3i64)).unwrap();
    assert_eq!(server.call(0, &add[..1]), Err(Fault::BadArgs));
    let mut long = add.clone();
    long.push(0);
    assert_eq!(server.call(0, &long), Err(Fault::BadArgs));
    assert_eq!(server.call(1, &[2, 0xff, 0xfe]), Err(Fault::BadArgs));
    assert_eq!(
        server.call(1, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        Err(Fault::BadArgs)
    );
    assert_eq!(server.call(3, &[0]), Err(Fault::BadArgs));
    // And answers the good ones.
    let reply = server.call(0, &add).unwrap();
    assert_eq!(postcard::from_bytes::<i64>(&reply).unwrap(), 5);
    assert!(server.call(3, &[]).unwrap().is_empty());
    assert_eq!(CalcServer::<Impl>::VERSION, CALC_VERSION);
}

#[test]
fn a_reply_that_does_not_decode_is_bad_reply() {
    let calc = client();
    // Short, with bytes left over, and a string that is not UTF-8.
    for forged in [vec![], vec![4, 0], vec![1, 0xff]] {
        calc.client().log.lock().unwrap().forged_reply = Some(forged.clone());
        let got = (calc.add(1, 2), calc.greet("x".into()));
        assert!(
            matches!(got, (Err(Error::BadReply), Err(Error::BadReply))),
            "{forged:?}: {got:?}"
        );
    }
    // `()` takes exactly nothing.
    calc.client().log.lock().unwrap().forged_reply = Some(vec![0]);
    assert_eq!(calc.nothing(), Err(Error::BadReply));
}

mod other {
    // Only its version constant is used here.
    #![allow(dead_code)]

    /// The same name as the other `Calc`, one argument type changed.
    #[ferry_macros::interface]
    pub trait Calc {
        fn add(&self, a: i64, b: i32) -> i64;
        fn greet(&self, name: String) -> Result<String, super::MyErr>;
        fn count(&self, text: &str, bytes: &[u8]) -> (usize, usize);
        fn nothing(&self);
        fn shout(&self, text: String) -> String;
    }
}

#[test]
fn the_version_is_one_constant_that_differs_between_signatures() {
    assert_eq!(CalcClient::VERSION, CALC_VERSION);
    assert_ne!(other::CALC_VERSION, CALC_VERSION);
    let _ = Arc::new(CalcServer::new(Impl)) as Arc<dyn Handler>;
}
