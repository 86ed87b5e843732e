//! A logical thread across two hops and three processes: this process (A)
//! calls process B over gRPC, and B's activation calls process C's
//! interface on a local ferry call. The test binary runs itself again as B
//! and C (the role in `FERRY_GRPC_HOPS_ROLE`), each in a fresh runtime
//! directory, so that B can be killed with SIGKILL mid-call.
//!
//! What C's activation sees comes back as the call's result; whether it was
//! alerted, through files beside the runtime directory (C writes
//! `<tag>.waiting` when it starts to wait and `<tag>.alerted` when it sees
//! the alert).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ferry::rpc::{CallOptions, Error, RuntimeDir};
use serde::{Deserialize, Serialize};

const ROLE: &str = "FERRY_GRPC_HOPS_ROLE";

/// How long anything that should happen may take before the test fails
/// (a hang guard, not a measurement).
const PATIENCE: Duration = Duration::from_secs(60);

/// The chain as the innermost server sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct View {
    /// The logical thread: origin pid, origin start, thread id.
    pub origin: (u32, u64, u64),
    /// The processes visited, origin first.
    pub hops: Vec<u32>,
    /// The time left before the deadline when it looked, if one is set.
    pub left: Option<Duration>,
    pub priority: String,
}

/// Served by process C.
#[ferry::interface]
pub trait Back {
    fn view(&self) -> View;
    /// Waits, alerts allowed, until alerted; writes `<tag>.waiting` and
    /// `<tag>.alerted` beside the runtime directory.
    fn wait_for_alert(&self, tag: String) -> bool;
}

/// Served by process B, locally and over gRPC.
#[ferry::interface(grpc)]
pub trait Front {
    fn add(&self, a: i64, b: i64) -> i64;
    /// C's view, by a local call from this activation.
    fn view(&self) -> Result<View, String>;
    /// C's `wait_for_alert(tag)`, by a local call from this activation.
    fn relay(&self, tag: String) -> bool;
    /// Waits in B itself (writing `<tag>.waiting`) until alerted.
    fn hold(&self, tag: String) -> bool;
}

fn uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// Waits (ferry-sleeping) until `done`; `false` after [`PATIENCE`].
fn eventually(done: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > PATIENCE {
            return false;
        }
        ferry::sleep(Duration::from_millis(1));
    }
    true
}

/// Marks `<root>/<tag>.<what>`.
fn mark(root: &Path, tag: &str, what: &str) {
    std::fs::write(root.join(format!("{tag}.{what}")), b"").unwrap();
}

fn marked(root: &Path, tag: &str, what: &str) -> bool {
    root.join(format!("{tag}.{what}")).exists()
}

/// Waits, alerts allowed, until alerted, marking `tag` on the way.
fn wait_for_alert_marking(root: &Path, tag: &str) -> bool {
    ferry::thread::allow_alerts(true);
    mark(root, tag, "waiting");
    if !eventually(ferry::alerted) {
        return false;
    }
    mark(root, tag, "alerted");
    true
}

struct BackImpl {
    root: PathBuf,
}

impl Back for BackImpl {
    fn view(&self) -> View {
        let c = ferry::rpc::chain().unwrap();
        View {
            origin: (c.id.pid, c.id.start, c.id.thread),
            hops: c.hops,
            left: c
                .deadline
                .map(|d| d.saturating_duration_since(Instant::now())),
            priority: format!("{:?}", c.priority),
        }
    }
    fn wait_for_alert(&self, tag: String) -> bool {
        wait_for_alert_marking(&self.root, &tag)
    }
}

struct FrontImpl {
    root: PathBuf,
    dir: RuntimeDir,
}

impl FrontImpl {
    fn back(&self) -> BackClient {
        BackClient::connect_in(&self.dir, "back").unwrap()
    }
}

impl Front for FrontImpl {
    fn add(&self, a: i64, b: i64) -> i64 {
        a + b
    }
    fn view(&self) -> Result<View, String> {
        self.back().view().map_err(|e| e.to_string())
    }
    fn relay(&self, tag: String) -> bool {
        self.back().wait_for_alert(tag).unwrap_or(false)
    }
    fn hold(&self, tag: String) -> bool {
        wait_for_alert_marking(&self.root, &tag)
    }
}

fn runtime_dir(root: &Path) -> RuntimeDir {
    RuntimeDir::open(root.join("rt"), uid()).unwrap()
}

/// The child processes' entry: a test that does nothing unless the role is
/// set. Roles: `back <root>` serves `Back` as `back`; `front <root>` serves
/// `Front` as `front`, locally and over gRPC on a loopback port it prints.
#[test]
fn child() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    // Die with the test that started us, whatever happens to it.
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL)).unwrap();
    let (what, root) = role.split_once(' ').unwrap();
    let root = PathBuf::from(root);
    let mut b = ferry::Runtime::builder();
    b.processors(1);
    match what {
        "back" => b
            .run(move || {
                let dir = runtime_dir(&root);
                let _server = BackServer::serve_in(&dir, "back", BackImpl { root }).unwrap();
                println!("ready");
                loop {
                    ferry::sleep(Duration::from_secs(3600));
                }
            })
            .unwrap(),
        "front" => b
            .run(move || {
                let dir = runtime_dir(&root);
                let imp = FrontImpl {
                    root,
                    dir: dir.clone(),
                };
                let _local = FrontServer::serve_in(&dir, "front", imp).unwrap();
                let grpc = ferry_grpc::Server::builder()
                    .dir(dir)
                    .serve::<FrontGrpc>("127.0.0.1:0".parse().unwrap(), "front")
                    .unwrap();
                println!("ready {}", grpc.local_addr().port());
                loop {
                    ferry::sleep(Duration::from_secs(3600));
                }
            })
            .unwrap(),
        other => panic!("unknown role {other}"),
    }
}

/// A child process, killed (SIGKILL) and reaped when dropped; its output
/// stays open (a write to it never fails).
struct Kid {
    child: Child,
    _out: BufReader<ChildStdout>,
}

impl Kid {
    /// Runs this test binary again as `role`; returns it and the rest of
    /// the line on which it said `ready`.
    fn spawn(role: &str) -> (Kid, String) {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child", "--nocapture", "--test-threads=1"])
            .env(ROLE, role)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut reader = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        let rest = loop {
            line.clear();
            assert!(
                reader.read_line(&mut line).unwrap() > 0,
                "{role}: ended before it was ready"
            );
            if let Some(at) = line.find("ready") {
                break line[at + "ready".len()..].trim().to_owned();
            }
        };
        (
            Kid {
                child,
                _out: reader,
            },
            rest,
        )
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and wait for it to be gone.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Kid {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A fresh directory: `rt/` is the runtime directory, the marks beside it.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("ferry-grpc-hops-{}-{n}", std::process::id()));
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

/// The processes of one test: C (if `with_back`) and B, in a fresh
/// directory.
struct Scene {
    tmp: TempDir,
    back: Option<Kid>,
    front: Kid,
    port: u16,
}

impl Scene {
    fn new(with_back: bool) -> Scene {
        let tmp = TempDir::new();
        let root = tmp.0.to_str().unwrap().to_owned();
        runtime_dir(&tmp.0);
        let back = with_back.then(|| Kid::spawn(&format!("back {root}")).0);
        let (front, port) = Kid::spawn(&format!("front {root}"));
        Scene {
            tmp,
            back,
            front,
            port: port.parse().unwrap(),
        }
    }

    fn url(&self) -> String {
        format!("grpc://127.0.0.1:{}/front", self.port)
    }

    fn root(&self) -> PathBuf {
        self.tmp.0.clone()
    }
}

/// This process's start time, clock ticks since boot (`/proc/self/stat`
/// field 22), as a logical id names it.
fn process_start() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    after_name.split(' ').nth(19).unwrap().parse().unwrap()
}

#[test]
fn the_innermost_server_sees_the_clients_identity_chain_and_deadline() {
    let scene = Scene::new(true);
    let (b, c) = (scene.front.pid(), scene.back.as_ref().unwrap().pid());
    let url = scene.url();
    ferry::run(move || {
        let front = FrontClient::connect(&url).unwrap();
        let me = std::process::id();
        let origin = (me, process_start(), ferry::current().id().as_u64());

        let v = front.view().unwrap().unwrap();
        assert_eq!(v.origin, origin);
        assert_eq!(v.hops, vec![me, b, c]);
        assert_eq!(v.left, None);
        assert_eq!(v.priority, "Normal");

        // The deadline reaches C no later than the client's (the time it
        // has left is never more than the client gave), and it is the
        // client's: no earlier than what was left of it when the call
        // went out (gRPC carries whole microseconds).
        let timeout = Duration::from_secs(30);
        let start = Instant::now();
        let opts = CallOptions::timeout(timeout);
        let v = front.with(&opts).view().unwrap().unwrap();
        let took = start.elapsed();
        let left = v.left.expect("C sees no deadline");
        assert!(left <= timeout, "C has {left:?} left of {timeout:?}");
        assert!(
            left + took + Duration::from_micros(1) >= timeout,
            "C has {left:?} left of {timeout:?} after {took:?}"
        );
        assert_eq!(v.hops, vec![me, b, c]);

        // A thread at high priority: its own id, its priority.
        let front2 = front.clone();
        let high = ferry::thread::Builder::new()
            .priority(ferry::thread::Priority::High)
            .spawn(move || (front2.view(), ferry::current().id().as_u64()))
            .unwrap();
        let (v, id) = high.join().unwrap();
        let v = v.unwrap().unwrap();
        assert_eq!(v.origin, (me, process_start(), id));
        assert_eq!(v.priority, "High");
    })
    .unwrap();
}

/// Starts `relay(tag)` on a thread of its own with `opts`, waits until C
/// waits in it, then stops it with `stop` (given the calling thread) and
/// checks that the call ends with `want` and that C's activation was
/// alerted.
fn relay_stopped_by(
    front: &FrontClient,
    root: &Path,
    tag: &str,
    stop: impl FnOnce(&ferry::Thread),
    want: fn(&Error) -> bool,
) {
    let (f, t) = (front.clone(), tag.to_owned());
    let caller = ferry::spawn(move || f.relay(t));
    assert!(
        eventually(|| marked(root, tag, "waiting")),
        "{tag}: the call never reached C"
    );
    stop(&caller.thread());
    let got = caller.join().unwrap();
    assert!(got.as_ref().is_err_and(want), "{tag}: {got:?}");
    assert!(
        eventually(|| marked(root, tag, "alerted")),
        "{tag}: C's activation was never alerted"
    );
}

#[test]
fn an_alert_of_the_client_reaches_the_innermost_activation() {
    let scene = Scene::new(true);
    let (url, root) = (scene.url(), scene.root());
    ferry::run(move || {
        let front = FrontClient::connect(&url).unwrap();
        relay_stopped_by(
            &front,
            &root,
            "alert",
            |t| t.alert(),
            |e| matches!(e, Error::Aborted),
        );
        // The chain goes on serving.
        assert_eq!(front.add(2, 40).unwrap(), 42);
    })
    .unwrap();
}

#[test]
fn an_aborted_call_alerts_the_innermost_activation() {
    let scene = Scene::new(true);
    let (url, root) = (scene.url(), scene.root());
    ferry::run(move || {
        let front = FrontClient::connect(&url).unwrap();
        // `relay` is op 2; its arguments are the tuple `(tag,)`.
        let args = postcard::to_stdvec(&("abort",)).unwrap();
        let call = front
            .client()
            .start(2, &args, &CallOptions::default())
            .unwrap();
        assert!(
            eventually(|| marked(&root, "abort", "waiting")),
            "the call never reached C"
        );
        call.abort();
        assert!(matches!(call.wait(), Err(Error::Aborted)));
        assert!(
            eventually(|| marked(&root, "abort", "alerted")),
            "C's activation was never alerted"
        );
        assert_eq!(front.add(2, 40).unwrap(), 42);
    })
    .unwrap();
}

#[test]
fn a_deadline_that_passes_alerts_the_innermost_activation() {
    let scene = Scene::new(true);
    let (url, root) = (scene.url(), scene.root());
    ferry::run(move || {
        let front = FrontClient::connect(&url).unwrap();
        // On a busy machine a short deadline may pass before the call
        // reaches C at all: then a longer one is tried.
        let reached = [1, 4, 16, 60].into_iter().any(|secs| {
            let tag = format!("deadline-{secs}");
            let opts = CallOptions::timeout(Duration::from_secs(secs));
            let got = front.with(&opts).relay(tag.clone());
            assert!(matches!(got, Err(Error::DeadlineExceeded)), "{got:?}");
            if !marked(&root, &tag, "waiting") {
                return false;
            }
            assert!(
                eventually(|| marked(&root, &tag, "alerted")),
                "{tag}: C's activation was never alerted"
            );
            true
        });
        assert!(reached, "no call reached C before its deadline");
        assert_eq!(front.add(2, 40).unwrap(), 42);
    })
    .unwrap();
}

#[test]
fn killing_the_server_process_fails_pending_and_later_calls_with_peer_died() {
    let mut scene = Scene::new(false);
    let (url, root) = (scene.url(), scene.root());
    let ready = std::sync::mpsc::channel::<()>();
    let killed = std::sync::mpsc::channel::<()>();
    let (ready_tx, killed_rx) = (ready.0, killed.1);
    let calls = std::thread::spawn(move || {
        ferry::run(move || {
            let front = FrontClient::connect(&url).unwrap();
            assert_eq!(front.add(2, 40).unwrap(), 42);
            // Calls held in B, each with a deadline far beyond the test: a
            // call that hung on the dead peer would end DeadlineExceeded.
            let opts = CallOptions::timeout(10 * PATIENCE);
            let pending: Vec<_> = (0..3)
                .map(|i| {
                    let f = front.clone();
                    ferry::spawn(move || f.with(&opts).hold(format!("hold-{i}")))
                })
                .collect();
            for i in 0..3 {
                assert!(
                    eventually(|| marked(&root, &format!("hold-{i}"), "waiting")),
                    "hold-{i} never reached B"
                );
            }
            ready_tx.send(()).unwrap();
            ferry::blocking(|| killed_rx.recv()).unwrap();
            for (i, p) in pending.into_iter().enumerate() {
                let got = p.join().unwrap();
                assert!(matches!(got, Err(Error::PeerDied)), "hold-{i}: {got:?}");
            }
            // Later calls, on the same client and on a new one.
            for _ in 0..3 {
                let got = front.with(&opts).add(1, 1);
                assert!(matches!(got, Err(Error::PeerDied)), "{got:?}");
            }
            let fresh = FrontClient::connect(&url).unwrap();
            let got = fresh.with(&opts).add(1, 1);
            assert!(matches!(got, Err(Error::PeerDied)), "{got:?}");
        })
        .unwrap();
    });
    // Killed once its calls are held there (or the calling side failed).
    let _ = ready.1.recv();
    scene.front.kill();
    let _ = killed.0.send(());
    if let Err(panic) = calls.join() {
        std::panic::resume_unwind(panic);
    }
}
