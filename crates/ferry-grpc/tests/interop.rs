//! ferry over gRPC with peers that are not ferry: a Go client built from
//! the `.proto` ferry-grpc emits (compiled at run time; skipped when Go is
//! not installed) calls a ferry server, and a ferry client calls a tonic
//! server written here by hand, which checks the metadata a ferry call
//! carries and answers with statuses, bad replies and hostile trailers.

use std::convert::Infallible;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut};
use ferry::rpc::{CallOptions, Error, RuntimeDir};
use prost::encoding::{self, DecodeContext};
use tonic::body::Body;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::metadata::MetadataMap;
use tonic::server::{NamedService, UnaryService};
use tonic::{Request, Response, Status};

/// How long anything that should happen may take before the test fails
/// (a hang guard, not a measurement).
const PATIENCE: Duration = Duration::from_secs(60);

#[ferry::interface(grpc)]
pub trait Calc {
    fn add(&self, a: i64, b: i64) -> i64;
    fn greet(&self, name: String) -> String;
    /// 1000 × the characters of `text` + the length of `bytes`.
    fn count(&self, text: &str, bytes: &[u8]) -> u64;
    /// The pid of the process the call's logical thread began in.
    fn origin_pid(&self) -> u32;
    fn has_deadline(&self) -> bool;
    /// Waits, alerts allowed, until alerted (or [`PATIENCE`]); says which.
    fn hold(&self) -> bool;
    /// How many `hold`s began.
    fn holds(&self) -> u32;
}

static HOLDS_BEGUN: AtomicUsize = AtomicUsize::new(0);
static HOLDS_ALERTED: AtomicUsize = AtomicUsize::new(0);

struct Impl;

impl Calc for Impl {
    fn add(&self, a: i64, b: i64) -> i64 {
        a + b
    }
    fn greet(&self, name: String) -> String {
        format!("hello {name}")
    }
    fn count(&self, text: &str, bytes: &[u8]) -> u64 {
        1000 * text.chars().count() as u64 + bytes.len() as u64
    }
    fn origin_pid(&self) -> u32 {
        ferry::rpc::chain().unwrap().id.pid
    }
    fn has_deadline(&self) -> bool {
        ferry::rpc::chain().unwrap().deadline.is_some()
    }
    fn hold(&self) -> bool {
        ferry::thread::allow_alerts(true);
        HOLDS_BEGUN.fetch_add(1, Ordering::SeqCst);
        let start = Instant::now();
        while !ferry::alerted() {
            if start.elapsed() > PATIENCE {
                return false;
            }
            ferry::sleep(Duration::from_millis(1));
        }
        HOLDS_ALERTED.fetch_add(1, Ordering::SeqCst);
        true
    }
    fn holds(&self) -> u32 {
        HOLDS_BEGUN.load(Ordering::SeqCst) as u32
    }
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let path =
            std::env::temp_dir().join(format!("ferry-grpc-interop-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Waits (ferry-sleeping) until `done`, failing after [`PATIENCE`].
fn wait_until(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < PATIENCE, "never happened: {what}");
        ferry::sleep(Duration::from_millis(1));
    }
}

/// Builds the Go client into `out`; `None` (with the reason printed) when
/// Go is not installed.
fn build_go_client(out: &Path) -> Option<PathBuf> {
    match Command::new("go").arg("version").output() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("SKIPPED: the Go client needs `go` on PATH, and there is none");
            return None;
        }
        other => assert!(other.unwrap().status.success(), "`go version` failed"),
    }
    let bin = out.join("interop");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go");
    let built = Command::new("go")
        .args(["build", "-buildvcs=false", "-o"])
        .arg(&bin)
        .arg(".")
        .current_dir(&src)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "building the Go client failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    Some(bin)
}

#[test]
fn a_go_client_built_from_the_emitted_proto_calls_a_ferry_server() {
    let tmp = TempDir::new("go");
    let Some(bin) = build_go_client(&tmp.0) else {
        return;
    };
    let proto = tmp.0.join("calc.proto");
    std::fs::write(&proto, CalcGrpc::PROTO).unwrap();
    let rt = tmp.0.join("rt");
    let uid = rustix::process::getuid().as_raw();
    ferry::run(move || {
        let dir = RuntimeDir::open(&rt, uid).unwrap();
        let _local = CalcServer::serve_in(&dir, "calc", Impl).unwrap();
        let grpc = ferry_grpc::Server::builder()
            .dir(dir)
            .serve::<CalcGrpc>("127.0.0.1:0".parse().unwrap(), "calc")
            .unwrap();
        let run = ferry::blocking(|| {
            Command::new(&bin)
                .arg("-proto")
                .arg(&proto)
                .args(["-addr", &grpc.local_addr().to_string()])
                .args(["-pid", &std::process::id().to_string()])
                .output()
        })
        .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr),
        );
        assert!(
            run.status.success(),
            "the Go client failed ({}):\n{stdout}{stderr}",
            run.status
        );
        assert!(stdout.contains("checks passed"), "{stdout}{stderr}");
        eprintln!("{stdout}");
        // Every Hold whose deadline passed at the Go client was alerted in
        // its activation: the cancellation crossed the wire.
        assert!(HOLDS_BEGUN.load(Ordering::SeqCst) > 0);
        wait_until("every Hold alerted", || {
            HOLDS_ALERTED.load(Ordering::SeqCst) == HOLDS_BEGUN.load(Ordering::SeqCst)
        });
    })
    .unwrap();
}

// ---- A tonic server written by hand, and a ferry client of it. ----

/// Message bytes in and out, as they are.
#[derive(Clone, Copy)]
struct Raw;

impl Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Vec<u8>;
    type Error = Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Vec<u8>;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
        let mut out = vec![0; src.remaining()];
        src.copy_to_slice(&mut out);
        Ok(Some(out))
    }
}

/// What the hand-written server saw and did.
#[derive(Default)]
struct Seen {
    /// Each `Add` request's metadata, in order.
    requests: Mutex<Vec<MetadataMap>>,
    /// A held request's future was dropped (the client cancelled).
    dropped: AtomicBool,
}

/// `a` values that make the hand-written `Add` misbehave.
const GIVE_INVALID: i64 = 1000;
const GIVE_UNAVAILABLE: i64 = 1001;
const GIVE_GARBAGE: i64 = 1002;
const GIVE_HUGE_CPU: i64 = 1003;
const HOLD: i64 = 1004;

/// `ferry.Calc` by hand: only `Add`, with hand-encoded protobuf.
#[derive(Clone)]
struct HandCalc(Arc<Seen>);

impl NamedService for HandCalc {
    const NAME: &'static str = "ferry.Calc";
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

impl tower_service::Service<http::Request<Body>> for HandCalc {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        if req.uri().path() != "/ferry.Calc/Add" {
            let status = Status::unimplemented(req.uri().path().to_owned());
            return Box::pin(async move { Ok(status.into_http()) });
        }
        let add = HandAdd(Arc::clone(&self.0));
        Box::pin(async move { Ok(tonic::server::Grpc::new(Raw).unary(add, req).await) })
    }
}

struct HandAdd(Arc<Seen>);

/// Sets `dropped` when the held request's future goes.
struct OnDrop(Arc<Seen>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.dropped.store(true, Ordering::SeqCst);
    }
}

/// `CalcAddRequest`'s fields `a` (1) and `b` (2).
fn decode_add(mut msg: &[u8]) -> Result<(i64, i64), prost::DecodeError> {
    let (mut a, mut b) = (0i64, 0i64);
    while !msg.is_empty() {
        let (tag, wire) = encoding::decode_key(&mut msg)?;
        let ctx = DecodeContext::default();
        match tag {
            1 => encoding::int64::merge(wire, &mut a, &mut msg, ctx)?,
            2 => encoding::int64::merge(wire, &mut b, &mut msg, ctx)?,
            _ => encoding::skip_field(wire, tag, &mut msg, ctx)?,
        }
    }
    Ok((a, b))
}

impl UnaryService<Vec<u8>> for HandAdd {
    type Response = Vec<u8>;
    type Future = BoxFuture<Result<Response<Vec<u8>>, Status>>;

    fn call(&mut self, request: Request<Vec<u8>>) -> Self::Future {
        let seen = Arc::clone(&self.0);
        Box::pin(async move {
            seen.requests
                .lock()
                .unwrap()
                .push(request.metadata().clone());
            let (a, b) = decode_add(request.get_ref())
                .map_err(|e| Status::invalid_argument(e.to_string()))?;
            let mut reply = Vec::new();
            match a {
                GIVE_INVALID => return Err(Status::invalid_argument("refused by hand")),
                GIVE_UNAVAILABLE => return Err(Status::unavailable("away by hand")),
                // A string where the reply's int64 belongs.
                GIVE_GARBAGE => encoding::string::encode(1, &"x".to_owned(), &mut reply),
                HOLD => {
                    let _guard = OnDrop(Arc::clone(&seen));
                    std::future::pending::<()>().await;
                }
                _ => encoding::int64::encode(1, &(a + b), &mut reply),
            }
            let mut response = Response::new(reply);
            if a == GIVE_HUGE_CPU {
                // Claims 1000 s of run time: more than the call took.
                response
                    .metadata_mut()
                    .insert("ferry-cpu-ns", "1000000000000".parse().unwrap());
            }
            Ok(response)
        })
    }
}

/// Serves [`HandCalc`] on loopback on a tokio runtime of its own; runs `f`
/// with the port and what the server sees.
fn with_hand_server(f: impl FnOnce(u16, Arc<Seen>)) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let seen = Arc::new(Seen::default());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let service = HandCalc(Arc::clone(&seen));
    let server = rt.spawn(async move {
        let incoming = tonic::transport::server::TcpIncoming::from(
            tokio::net::TcpListener::from_std(listener).unwrap(),
        );
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming_shutdown(incoming, async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    f(port, seen);
    let _ = stop.send(());
    rt.block_on(server).unwrap();
}

/// This process's start time, clock ticks since boot (`/proc/self/stat`
/// field 22), as a ferry logical id names it.
fn process_start() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    after_name.split(' ').nth(19).unwrap().parse().unwrap()
}

fn get<'a>(m: &'a MetadataMap, key: &str) -> Option<&'a str> {
    m.get(key).map(|v| v.to_str().unwrap())
}

/// A `grpc-timeout` value as a duration.
fn grpc_timeout(v: &str) -> Duration {
    let (n, unit) = v.split_at(v.len() - 1);
    let n: u64 = n.parse().unwrap();
    match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => panic!("grpc-timeout {v:?}"),
    }
}

#[test]
fn a_ferry_client_calls_a_tonic_server_written_by_hand() {
    with_hand_server(|port, seen| {
        ferry::Runtime::builder()
            .thread_cpu_time(true)
            .run(move || {
                let calc = CalcClient::connect(&format!("grpc://127.0.0.1:{port}/calc")).unwrap();
                let last = || seen.requests.lock().unwrap().last().unwrap().clone();
                let pid = std::process::id();

                // Results, and the identity the call carries.
                assert_eq!(calc.add(2, 40).unwrap(), 42);
                assert_eq!(calc.add(-7, 0).unwrap(), -7);
                let m = last();
                let me = ferry::current().id().as_u64();
                let logical = format!("{pid}.{}.{me}", process_start());
                assert_eq!(get(&m, "ferry-logical"), Some(logical.as_str()));
                assert_eq!(get(&m, "ferry-priority"), Some("normal"));
                assert_eq!(get(&m, "ferry-hops"), Some(pid.to_string().as_str()));
                assert!(get(&m, "ferry-cpu-ns").unwrap().parse::<u64>().is_ok());
                assert_eq!(get(&m, "grpc-timeout"), None);

                // A deadline travels as grpc-timeout: no later than the
                // caller's, and no earlier than what was left of it when
                // the call was sent (the wire keeps whole microseconds).
                let timeout = Duration::from_secs(30);
                let start = Instant::now();
                let opts = CallOptions::timeout(timeout);
                assert_eq!(calc.with(&opts).add(1, 2).unwrap(), 3);
                let took = start.elapsed();
                let sent = grpc_timeout(get(&last(), "grpc-timeout").unwrap());
                assert!(sent <= timeout, "{sent:?} > {timeout:?}");
                assert!(
                    sent + took + Duration::from_micros(1) >= timeout,
                    "{sent:?} + {took:?} < {timeout:?}"
                );

                // Another thread, at high priority: its own logical id.
                let calc2 = calc.clone();
                let high = ferry::thread::Builder::new()
                    .priority(ferry::thread::Priority::High)
                    .spawn(move || (calc2.add(5, 5), ferry::current().id().as_u64()))
                    .unwrap();
                let (sum, id) = high.join().unwrap();
                assert_eq!(sum.unwrap(), 10);
                let m = last();
                assert_eq!(get(&m, "ferry-priority"), Some("high"));
                let logical = format!("{pid}.{}.{id}", process_start());
                assert_eq!(get(&m, "ferry-logical"), Some(logical.as_str()));

                // Statuses the server returns, as ferry errors.
                assert!(matches!(calc.add(GIVE_INVALID, 0), Err(Error::BadArgs)));
                assert!(matches!(
                    calc.add(GIVE_UNAVAILABLE, 0),
                    Err(Error::PeerDied)
                ));
                assert!(matches!(
                    calc.greet("x".into()),
                    Err(Error::UnknownOp { op: 1 })
                ));
                assert!(matches!(calc.add(GIVE_GARBAGE, 0), Err(Error::BadReply)));

                // A server that claims more run time than the call took is
                // charged no more than the call took: the caller's run
                // time grows by at most its own (≤ the wall time) and the
                // call's.
                let (before, wall) = (ferry::thread::cpu_time().unwrap(), Instant::now());
                assert_eq!(calc.add(GIVE_HUGE_CPU, 1).unwrap(), GIVE_HUGE_CPU + 1);
                let (grew, wall) = (ferry::thread::cpu_time().unwrap() - before, wall.elapsed());
                assert!(grew <= 2 * wall, "charged {grew:?} in {wall:?}");

                // An alert of the caller cancels the request at the server.
                let held = seen.requests.lock().unwrap().len();
                let calc3 = calc.clone();
                let caller = ferry::spawn(move || calc3.add(HOLD, 0));
                wait_until("the held request reached the server", || {
                    seen.requests.lock().unwrap().len() > held
                });
                caller.thread().alert();
                assert!(matches!(caller.join().unwrap(), Err(Error::Aborted)));
                wait_until("the server's request was cancelled", || {
                    seen.dropped.load(Ordering::SeqCst)
                });

                // The connection still serves.
                assert_eq!(calc.add(20, 22).unwrap(), 42);
            })
            .unwrap();
    });
}
