//! An interface served locally and over gRPC on loopback, called through
//! both paths with the same client type: results of every kind of type,
//! the chain, priority and deadline seen by the server, an alert that
//! cancels a call and reaches the server's activation, faults, a server
//! that goes away, a client that is not ferry, and TLS with a certificate
//! made here.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ferry::rpc::{CallOptions, Error, RuntimeDir};
use serde::{Deserialize, Serialize};

const PATIENCE: Duration = Duration::from_secs(60);

fn uid() -> u32 {
    rustix::process::getuid().as_raw()
}

struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        TempDir(std::env::temp_dir().join(format!("ferry-grpc-{}-{n}", std::process::id())))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub x: i32,
    pub label: Option<String>,
}

#[ferry::interface(grpc)]
pub trait Calc {
    /// Adds two numbers.
    fn add(&self, a: i64, b: i64) -> i64;
    fn greet(&self, name: String) -> Result<String, String>;
    fn count(&self, text: &str, bytes: &[u8]) -> (usize, usize);
    fn moved(&self, p: Point, by: i32) -> Point;
    fn nothing(&self);
    /// The chain's depth, priority and whether it has a deadline.
    fn who(&self) -> (usize, String, bool);
    /// Waits, alerts allowed, until alerted; says so (`key` names the
    /// test's own flags).
    fn wait_for_alert(&self, key: usize) -> bool;
    fn boom(&self) -> u32;
    /// The logical thread's origin: (pid, thread id).
    fn origin(&self) -> (u32, u64);
    /// Computes for about `ms` of run time; returns the run time it spent.
    fn burn(&self, ms: u64) -> u64;
}

/// Per test (`key`): the server waits for an alert, and saw it.
static WAITING: [AtomicBool; 3] = [const { AtomicBool::new(false) }; 3];
static SAW_ALERT: [AtomicBool; 3] = [const { AtomicBool::new(false) }; 3];

struct Impl;

impl Calc for Impl {
    fn add(&self, a: i64, b: i64) -> i64 {
        a + b
    }
    fn greet(&self, name: String) -> Result<String, String> {
        if name.is_empty() {
            Err("no name".into())
        } else {
            Ok(format!("hello {name}"))
        }
    }
    fn count(&self, text: &str, bytes: &[u8]) -> (usize, usize) {
        (text.chars().count(), bytes.len())
    }
    fn moved(&self, p: Point, by: i32) -> Point {
        Point { x: p.x + by, ..p }
    }
    fn nothing(&self) {}
    fn who(&self) -> (usize, String, bool) {
        let c = ferry::rpc::chain().unwrap();
        (c.depth(), format!("{:?}", c.priority), c.deadline.is_some())
    }
    fn wait_for_alert(&self, key: usize) -> bool {
        ferry::thread::allow_alerts(true);
        WAITING[key].store(true, Ordering::SeqCst);
        let start = Instant::now();
        while !ferry::alerted() {
            if start.elapsed() > PATIENCE {
                return false;
            }
            ferry::sleep(Duration::from_millis(1));
        }
        SAW_ALERT[key].store(true, Ordering::SeqCst);
        true
    }
    fn boom(&self) -> u32 {
        panic!("boom")
    }
    fn origin(&self) -> (u32, u64) {
        let c = ferry::rpc::chain().unwrap();
        (c.id.pid, c.id.thread)
    }
    fn burn(&self, ms: u64) -> u64 {
        let before = ferry::thread::cpu_time().unwrap();
        let mut x = 1u64;
        while ferry::thread::cpu_time().unwrap() - before < Duration::from_millis(ms) {
            for _ in 0..10_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
            std::hint::black_box(x);
        }
        (ferry::thread::cpu_time().unwrap() - before).as_nanos() as u64
    }
}

/// Waits (a ferry thread, polling) until `flag` is set; fails saying
/// `what` never happened after [`PATIENCE`].
fn until(flag: &AtomicBool, what: &str) {
    let start = Instant::now();
    while !flag.load(Ordering::SeqCst) {
        assert!(start.elapsed() < PATIENCE, "{what}");
        ferry::sleep(Duration::from_millis(1));
    }
}

/// Serves `Impl` locally as `calc` and over gRPC on loopback; runs `f`
/// with the local client, the gRPC client and the gRPC server.
fn both<T: Send + 'static>(
    f: impl FnOnce(CalcClient, CalcClient, ferry_grpc::Server) -> T + Send + 'static,
) -> T {
    let tmp = TempDir::new();
    let path = tmp.0.clone();
    let out = ferry::Runtime::builder()
        .thread_cpu_time(true)
        .run(move || {
            let dir = RuntimeDir::open(&path, uid()).unwrap();
            let _local = CalcServer::serve_in(&dir, "calc", Impl).unwrap();
            let grpc = ferry_grpc::Server::builder()
                .dir(dir.clone())
                .serve::<CalcGrpc>("127.0.0.1:0".parse().unwrap(), "calc")
                .unwrap();
            let local = CalcClient::connect_in(&dir, "calc").unwrap();
            let url = format!("grpc://{}/calc", grpc.local_addr());
            let remote = CalcClient::connect(&url).unwrap();
            assert!(remote.client().is_remote() && !local.client().is_remote());
            f(local, remote, grpc)
        })
        .unwrap();
    drop(tmp);
    out
}

#[test]
fn both_paths_give_the_same_results_for_every_kind_of_type() {
    both(|local, remote, _server| {
        for c in [&local, &remote] {
            assert_eq!(c.add(2, 40).unwrap(), 42);
            assert_eq!(c.add(-7, 0).unwrap(), -7);
            assert_eq!(c.greet("ferry".into()).unwrap(), Ok("hello ferry".into()));
            assert_eq!(c.greet(String::new()).unwrap(), Err("no name".into()));
            assert_eq!(c.count("héllo", &[1, 2, 3]).unwrap(), (5, 3));
            let p = Point {
                x: 1,
                label: Some("p".into()),
            };
            assert_eq!(c.moved(p.clone(), 2).unwrap(), Point { x: 3, ..p });
            c.nothing().unwrap();
        }
        assert!(matches!(remote.boom(), Err(Error::ServerPanicked)));
    });
}

#[test]
fn the_chain_priority_and_deadline_cross_the_wire() {
    both(|local, remote, _server| {
        // Local: this process, then the server (the same process again).
        let (depth, priority, deadline) = local.who().unwrap();
        assert_eq!((depth, priority.as_str(), deadline), (2, "Normal", false));
        // Over gRPC: the client's hop, and the server's.
        assert_eq!(remote.who().unwrap(), (2, "Normal".into(), false));
        let opts = CallOptions::timeout(Duration::from_secs(30));
        assert_eq!(
            remote.with(&opts).who().unwrap(),
            (2, "Normal".into(), true)
        );
        let high = ferry::thread::Builder::new()
            .priority(ferry::thread::Priority::High)
            .spawn(move || remote.who())
            .unwrap()
            .join()
            .unwrap()
            .unwrap();
        assert_eq!(high, (2, "High".into(), false));
    });
}

#[test]
fn the_server_sees_the_callers_logical_thread_and_charges_it_its_run_time() {
    both(|local, remote, _server| {
        let me = (std::process::id(), ferry::current().id().as_u64());
        assert_eq!(local.origin().unwrap(), me);
        assert_eq!(remote.origin().unwrap(), me);
        let before = ferry::thread::cpu_time().unwrap();
        let spent = Duration::from_nanos(remote.burn(20).unwrap());
        let charged = ferry::thread::cpu_time().unwrap() - before;
        assert!(spent >= Duration::from_millis(20));
        assert!(
            charged >= spent,
            "the caller's run time grew {charged:?}, the server spent {spent:?}"
        );
    });
}

#[test]
fn an_alert_cancels_a_remote_call_and_alerts_the_servers_activation() {
    both(|_local, remote, _server| {
        let caller = ferry::spawn(move || remote.wait_for_alert(0));
        until(&WAITING[0], "the call never reached the server");
        caller.thread().alert();
        assert!(matches!(caller.join().unwrap(), Err(Error::Aborted)));
        until(&SAW_ALERT[0], "the activation was never alerted");
    });
}

#[test]
fn a_caller_terminated_in_a_remote_call_cancels_it_and_alerts_the_servers_activation() {
    both(|_local, remote, _server| {
        let caller = ferry::spawn(move || {
            let _ = remote.wait_for_alert(2);
        });
        until(&WAITING[2], "the call never reached the server");
        // SAFETY: the caller's stack holds nothing that needs its
        // destructor (a client, leaked by the termination).
        unsafe { caller.thread().terminate(()) }.unwrap();
        caller.join().unwrap();
        until(&SAW_ALERT[2], "the activation was never alerted");
    });
}

#[test]
fn a_started_remote_call_is_waited_for_or_aborted() {
    both(|_local, remote, _server| {
        // op 0 is `add`; the arguments are the local wire's tuple.
        let args = ferry::rpc::__private::encode(&(&20i64, &22i64)).unwrap();
        let call = remote
            .client()
            .start(0, &args, &CallOptions::default())
            .unwrap();
        let reply = call.wait().unwrap();
        assert_eq!(ferry::rpc::__private::decode::<i64>(&reply), Some(42));
        // `wait_for_alert` (op 6) runs until alerted: abort it.
        let args = ferry::rpc::__private::encode(&(&1usize,)).unwrap();
        let call = remote
            .client()
            .start(6, &args, &CallOptions::default())
            .unwrap();
        until(&WAITING[1], "the call never reached the server");
        call.abort();
        assert!(matches!(call.wait(), Err(Error::Aborted)));
        until(&SAW_ALERT[1], "the activation was never alerted");
    });
}

#[test]
fn a_server_that_goes_away_fails_calls_with_peer_died() {
    both(|_local, remote, server| {
        assert_eq!(remote.add(1, 1).unwrap(), 2);
        server.close();
        let opts = CallOptions::timeout(Duration::from_secs(30));
        let start = Instant::now();
        loop {
            match remote.with(&opts).add(1, 1) {
                Err(Error::PeerDied) => break,
                // The connection may still take one call in flight.
                Ok(_) => {}
                other => panic!("{other:?}"),
            }
            assert!(start.elapsed() < PATIENCE);
        }
    });
}

#[test]
fn nobody_at_the_address_is_peer_died_and_bad_urls_are_refused() {
    ferry::run(|| {
        // A port nobody listens on: bind one, note it, close it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let c = CalcClient::connect(&format!("grpc://127.0.0.1:{port}/calc")).unwrap();
        assert!(
            matches!(c.add(1, 2), Err(Error::PeerDied)),
            "{:?}",
            c.add(1, 2)
        );
        assert!(matches!(
            CalcClient::connect("grpc://nohostport/calc"),
            Err(Error::BadName(_))
        ));
    })
    .unwrap();
}

#[test]
fn the_proto_names_every_method_and_message() {
    let proto = ferry_grpc::proto::<CalcGrpc>();
    for want in [
        "service Calc {",
        "rpc Add (CalcAddRequest) returns (CalcAddReply);",
        "message CalcAddRequest {\n  int64 a = 1;\n  int64 b = 2;\n}",
        "message CalcCountRequest {\n  string text = 1;\n  bytes bytes = 2;\n}",
        "message CalcMovedRequest {\n  bytes p = 1;\n  int32 by = 2;\n}",
        "message CalcNothingReply {\n}",
        "rpc WaitForAlert (CalcWaitForAlertRequest)",
    ] {
        assert!(proto.contains(want), "{want:?} not in\n{proto}");
    }
}

#[test]
fn tls_with_a_certificate_made_here() {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let (cert_pem, key_pem) = (cert.cert.pem(), cert.signing_key.serialize_pem());
    let tmp = TempDir::new();
    let path = tmp.0.clone();
    ferry::run(move || {
        let dir = RuntimeDir::open(&path, uid()).unwrap();
        let _local = CalcServer::serve_in(&dir, "calc", Impl).unwrap();
        let server = ferry_grpc::Server::builder()
            .dir(dir)
            .tls(cert_pem.clone(), key_pem)
            .serve::<CalcGrpc>("127.0.0.1:0".parse().unwrap(), "calc")
            .unwrap();
        let url = format!("grpcs://localhost:{}/calc", server.local_addr().port());
        let client = ferry_grpc::Connector::new()
            .ca_pem(cert_pem)
            .connect::<CalcGrpc>(&url)
            .unwrap();
        let calc = CalcClient::from_client(client);
        assert_eq!(calc.add(20, 22).unwrap(), 42);
        // Without trusting the certificate: refused.
        let untrusting = ferry_grpc::Connector::new()
            .ca_pem(
                rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
                    .unwrap()
                    .cert
                    .pem(),
            )
            .connect::<CalcGrpc>(&url)
            .unwrap();
        assert!(CalcClient::from_client(untrusting).add(1, 1).is_err());
    })
    .unwrap();
}
