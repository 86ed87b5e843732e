//! Migrating calls across processes: the logical thread's chain, priority,
//! run time, alerts and aborts follow a call from process to process, and
//! pools of activations grow, refuse and re-enter as documented. The test
//! binary runs itself again as a server process (the role in
//! `FERRY_MIG_ROLE`), so that each hop is its own process.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use ferry::rpc::{CallOptions, Client, Error, Fault, RuntimeDir, ServeMode, Server, WhenFull};
use ferry::thread::Priority;

const ROLE: &str = "FERRY_MIG_ROLE";

/// Ops of the test servers.
mod op {
    /// Echo.
    pub const ECHO: u32 = 0;
    /// The chain the handler runs in, as text.
    pub const CHAIN: u32 = 1;
    /// Burns the CPU milliseconds in the first byte; returns the ns burned
    /// by the kernel thread's CPU clock.
    pub const BURN: u32 = 2;
    /// Waits for an alert with alerts blocked, then allows them; returns
    /// what it saw.
    pub const WAIT_ALERT: u32 = 3;
    /// Forwards the rest of the arguments to the server named before `|`.
    pub const FORWARD: u32 = 4;
    /// Allows alerts and spins until alerted; counts it.
    pub const HOLD: u32 = 5;
    /// The server's counters: `live idle alerted held`.
    pub const STATS: u32 = 6;
    /// Re-entrant ping-pong: `n|name`: calls `name`'s PING with n - 1.
    pub const PING: u32 = 7;
    /// Burns about 2 ms of CPU and logs the tag in the arguments.
    pub const LOGGED: u32 = 8;
    /// The log, tags joined by spaces.
    pub const LOG: u32 = 9;
    /// Allows alerts and reads a pipe nobody writes, in `ferry::blocking`;
    /// returns how the read ended.
    pub const BLOCKED_READ: u32 = 10;
    /// Tries to raise, then to lower, its own priority; returns what each
    /// gave.
    pub const PRIORITY: u32 = 11;
    /// The run time this server charged to the caller's process, in ns.
    pub const CHARGED: u32 = 12;
    /// As `HOLD`, then waits for `RELEASE` before it answers.
    pub const HOLD_UNTIL_RELEASED: u32 = 13;
    /// Lets the `HOLD_UNTIL_RELEASED` calls answer.
    pub const RELEASE: u32 = 14;
    /// The server runtime's count of activations switched to straight
    /// from the poll (`UpcallStats::direct_calls`).
    pub const DIRECT: u32 = 15;
}

static DIR: OnceLock<String> = OnceLock::new();
static SERVER: OnceLock<Server> = OnceLock::new();
static PEERS: Mutex<Option<HashMap<String, Client>>> = Mutex::new(None);
static ALERTED: AtomicUsize = AtomicUsize::new(0);
static HELD: AtomicUsize = AtomicUsize::new(0);
static LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());
static RELEASED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn dir_at(path: &str) -> RuntimeDir {
    RuntimeDir::open(path, rustix::process::getuid().as_raw()).unwrap()
}

fn peer(name: &str) -> Client {
    let mut peers = PEERS.lock().unwrap();
    let peers = peers.get_or_insert_with(HashMap::new);
    peers
        .entry(name.to_owned())
        .or_insert_with(|| Client::connect_in(&dir_at(DIR.get().unwrap()), name, 1).unwrap())
        .clone()
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Burns `ms` of CPU time without switching on purpose; returns the ns
/// burned as kernel threads' CPU clocks ran. A thread preempted or handed
/// on may resume on another kernel thread, whose clock is another count:
/// only the stretches on one kernel thread between two readings add up.
fn burn(ms: u64) -> u64 {
    // SAFETY: gettid has no preconditions.
    let tid = || unsafe { libc::gettid() };
    // A clock reading with the kernel thread it was taken on, if the
    // thread stayed on one kernel thread across it.
    let read = || {
        let (before, now, after) = (tid(), thread_cpu_ns(), tid());
        (before == after).then_some((before, now))
    };
    let mut last = read();
    let mut burned = 0;
    while burned < ms * 1_000_000 {
        std::hint::spin_loop();
        let now = read();
        if let (Some((was_on, then)), Some((on, now))) = (last, now)
            && was_on == on
        {
            burned += now.saturating_sub(then);
        }
        last = now;
    }
    burned
}

fn chain_text() -> String {
    let c = ferry::rpc::chain().unwrap();
    let hops: Vec<String> = c.hops.iter().map(u32::to_string).collect();
    let a = ferry::rpc::Activation::current().expect("served on an activation");
    assert_eq!(a.chain(), &c);
    format!(
        "{} {} {} {:?} {} {} {}",
        c.id.pid,
        c.id.start,
        c.id.thread,
        c.priority,
        c.deadline.is_some(),
        hops.join(","),
        a.client().pid
    )
}

fn handler(op: u32, args: &[u8]) -> Result<Vec<u8>, Fault> {
    let text = || String::from_utf8(args.to_vec()).map_err(|_| Fault::BadArgs);
    match op {
        op::ECHO => Ok(args.to_vec()),
        op::CHAIN => Ok(chain_text().into_bytes()),
        op::BURN => Ok(burn(u64::from(args[0])).to_le_bytes().to_vec()),
        op::WAIT_ALERT => {
            let mut blocked_saw = false;
            while !ferry::current().is_alerted() {
                blocked_saw |= ferry::alerted();
                ferry::sleep(Duration::from_millis(1));
            }
            blocked_saw |= ferry::alerted();
            let was = ferry::thread::allow_alerts(true);
            Ok(format!(
                "blocked_saw={blocked_saw} was_allowed={was} now={}",
                ferry::alerted()
            )
            .into_bytes())
        }
        op::FORWARD => {
            let t = text()?;
            let (name, rest) = t.split_once('|').ok_or(Fault::BadArgs)?;
            let (op, rest) = rest.split_once('|').ok_or(Fault::BadArgs)?;
            let op: u32 = op.parse().map_err(|_| Fault::BadArgs)?;
            peer(name)
                .call(op, rest.as_bytes())
                .map_err(|_| Fault::BadArgs)
        }
        op::HOLD => {
            ferry::thread::allow_alerts(true);
            HELD.fetch_add(1, Ordering::SeqCst);
            while !ferry::alerted() {
                ferry::sleep(Duration::from_millis(1));
            }
            ALERTED.fetch_add(1, Ordering::SeqCst);
            Ok(b"late".to_vec())
        }
        op::HOLD_UNTIL_RELEASED => {
            ferry::thread::allow_alerts(true);
            HELD.fetch_add(1, Ordering::SeqCst);
            while !ferry::alerted() {
                ferry::sleep(Duration::from_millis(1));
            }
            ALERTED.fetch_add(1, Ordering::SeqCst);
            while !RELEASED.load(Ordering::SeqCst) {
                ferry::sleep(Duration::from_millis(1));
            }
            Ok(b"late".to_vec())
        }
        op::RELEASE => {
            RELEASED.store(true, Ordering::SeqCst);
            Ok(Vec::new())
        }
        op::STATS => {
            let s = SERVER.get().unwrap().activations();
            Ok(format!(
                "{} {} {} {}",
                s.live,
                s.idle,
                ALERTED.load(Ordering::SeqCst),
                HELD.load(Ordering::SeqCst)
            )
            .into_bytes())
        }
        op::PING => {
            let t = text()?;
            let (n, name) = t.split_once('|').ok_or(Fault::BadArgs)?;
            let n: u32 = n.parse().map_err(|_| Fault::BadArgs)?;
            if n == 0 {
                return Ok(format!("depth {}", ferry::rpc::chain().unwrap().depth()).into_bytes());
            }
            let me = std::env::var("FERRY_MIG_NAME").unwrap();
            Ok(peer(name)
                .call(op::PING, format!("{}|{me}", n - 1).as_bytes())
                .unwrap_or_else(|e| format!("error: {e}").into_bytes()))
        }
        op::LOGGED => {
            burn(2);
            LOG.lock()
                .unwrap()
                .push(format!("{}@{}", text()?, monotonic_ns()));
            Ok(Vec::new())
        }
        op::LOG => Ok(LOG.lock().unwrap().join(" ").into_bytes()),
        op::PRIORITY => {
            let raised = ferry::thread::set_priority(Priority::High);
            let lowered = ferry::thread::set_priority(Priority::Low);
            Ok(format!("{raised:?} {lowered:?}").into_bytes())
        }
        op::CHARGED => {
            let caller = ferry::rpc::Activation::current().unwrap().client().pid;
            let ns: u128 = SERVER
                .get()
                .unwrap()
                .cpu_by_client()
                .iter()
                .filter(|(pid, _)| *pid == caller)
                .map(|(_, d)| d.as_nanos())
                .sum();
            Ok((ns as u64).to_le_bytes().to_vec())
        }
        op::BLOCKED_READ => {
            use std::io::Read;
            let (mut r, _w) = std::io::pipe().unwrap();
            ferry::thread::allow_alerts(true);
            let mut byte = [0u8; 1];
            // (std's `read` does not retry EINTR.)
            let got = ferry::blocking(|| r.read(&mut byte));
            Ok(match got {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => b"interrupted".to_vec(),
                other => format!("{other:?}").into_bytes(),
            })
        }
        op::DIRECT => Ok(ferry::Handle::current()
            .upcall_stats()
            .direct_calls
            .to_le_bytes()
            .to_vec()),
        _ => Err(Fault::UnknownOp),
    }
}

fn mode_of(word: &str) -> ServeMode {
    match word {
        "static" => ServeMode::Static,
        _ => ServeMode::Migrating,
    }
}

/// The child processes' entry: does nothing unless the role is set.
/// Roles: `<dir> <name> <processors> <mode> <max activations>` (a server),
/// `caller <dir> <name>` (holds a call until killed).
#[test]
fn child() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let w: Vec<String> = role.split(' ').map(str::to_owned).collect();
    if w[0] == "caller" {
        let d = dir_at(&w[1]);
        let name = w[2].clone();
        runtime(1)
            .run(move || {
                let c = Client::connect_in(&d, &name, 1).unwrap();
                let _call = c.start(op::HOLD, &[], &CallOptions::default()).unwrap();
                println!("ready");
                loop {
                    ferry::sleep(Duration::from_secs(3600));
                }
            })
            .unwrap();
    }
    let (path, name, procs, mode, max) = (
        w[0].clone(),
        w[1].clone(),
        w[2].parse::<usize>().unwrap(),
        mode_of(&w[3]),
        w[4].parse::<usize>().unwrap(),
    );
    // SAFETY: set before any thread of this process reads the environment.
    unsafe { std::env::set_var("FERRY_MIG_NAME", &name) };
    let _ = DIR.set(path.clone());
    let mut b = ferry::Runtime::builder();
    b.processors(procs);
    b.run(move || {
        let server = Server::builder()
            .mode(mode)
            .activations(1, max)
            .serve_in(&dir_at(&path), &name, 1, handler)
            .unwrap();
        let _ = SERVER.set(server);
        println!("ready");
        loop {
            ferry::sleep(Duration::from_secs(3600));
        }
    })
    .unwrap();
    std::process::exit(0);
}

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(dir: &TempDir, name: &str, procs: usize, mode: &str, max: usize) -> Proc {
    spawn_role(&format!("{} {name} {procs} {mode} {max}", dir.path()), name)
}

fn spawn_role(role: &str, name: &str) -> Proc {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = child.stdout.as_mut().unwrap();
    let mut reader = BufReader::new(out);
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "{name} ended before it was ready"
        );
        if line.contains("ready") {
            break;
        }
    }
    Proc(child)
}

struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!("ferry-mig-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        dir_at(path.to_str().unwrap());
        TempDir(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }

    fn dir(&self) -> RuntimeDir {
        dir_at(self.path())
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The system's monotonic clock in ns: one clock for every process.
fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

fn runtime(processors: usize) -> ferry::Builder {
    let mut b = ferry::Runtime::builder();
    b.processors(processors);
    b
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap()
}

#[test]
fn the_chain_and_priority_travel_with_the_call_through_two_processes() {
    let dir = TempDir::new("chain");
    let _b = serve(&dir, "b", 1, "migrating", 8);
    let _c = serve(&dir, "c", 1, "migrating", 8);
    let d = dir.dir();
    runtime(1)
        .run(move || {
            let b = Client::connect_in(&d, "b", 1).unwrap();
            let me = std::process::id();
            let h = ferry::thread::Builder::new()
                .priority(Priority::High)
                .spawn(move || {
                    let opts = CallOptions::timeout(Duration::from_secs(60));
                    let direct = text(b.call_with(op::CHAIN, &[], &opts).unwrap());
                    let via = text(
                        b.call(op::FORWARD, format!("c|{}|", op::CHAIN).as_bytes())
                            .unwrap(),
                    );
                    (direct, via, ferry::current().id().as_u64())
                })
                .unwrap();
            let (direct, via, tid) = h.join().unwrap();
            let d: Vec<&str> = direct.split(' ').collect();
            assert_eq!(d[0], me.to_string(), "origin pid: {direct}");
            assert_eq!(d[2], tid.to_string(), "origin thread: {direct}");
            assert_eq!(d[3], "High", "the caller's priority: {direct}");
            assert_eq!(d[4], "true", "the deadline travels: {direct}");
            assert_eq!(d[5].split(',').count(), 2, "A, B: {direct}");
            assert_eq!(d[6], me.to_string(), "B serves A: {direct}");
            let v: Vec<&str> = via.split(' ').collect();
            assert_eq!(v[..4], d[..4], "one logical thread: {via} vs {direct}");
            assert_eq!(v[5].split(',').count(), 3, "A, B, C: {via}");
            assert_eq!(v[5].split(',').next().unwrap(), me.to_string());
            assert_ne!(v[6], me.to_string(), "C serves B: {via}");
            assert!(
                ferry::rpc::Activation::current().is_none(),
                "the origin is no activation"
            );
        })
        .unwrap();
}

/// The server's count of direct switches into activations.
fn direct_calls(b: &Client) -> u64 {
    u64::from_le_bytes(b.call(op::DIRECT, &[]).unwrap().try_into().unwrap())
}

#[test]
fn a_call_to_an_idle_migrating_server_runs_straight_from_the_poll() {
    const CALLS: u64 = 100;
    let dir = TempDir::new("direct");
    let _m = serve(&dir, "m", 1, "migrating", 8);
    let _s = serve(&dir, "s", 1, "static", 8);
    let d = dir.dir();
    runtime(1)
        .run(move || {
            for (name, migrating) in [("m", true), ("s", false)] {
                let b = Client::connect_in(&d, name, 1).unwrap();
                let before = direct_calls(&b);
                for i in 0..CALLS {
                    let arg = i.to_le_bytes();
                    assert_eq!(b.call(op::ECHO, &arg).unwrap(), arg);
                    // Calls apart, so that the activation that served one
                    // has parked before the next comes (a call that comes
                    // while it is still running is taken by it off the
                    // channel, with no switch at all).
                    ferry::sleep(Duration::from_millis(1));
                }
                let direct = direct_calls(&b) - before;
                if migrating {
                    // The one processor of an idle server has nothing else
                    // ready when a call comes: every call may run straight
                    // from the poll. Some may not, when the server's keeper
                    // or a timer is ready then.
                    assert!(
                        direct >= CALLS / 2,
                        "{direct} of {CALLS} calls ran straight from the poll"
                    );
                } else {
                    assert_eq!(direct, 0, "a static pool's threads take calls off a line");
                }
            }
        })
        .unwrap();
}

/// The time each kernel thread of process `pid` has run or waited to
/// run on a CPU, in ns, by thread id (the first two fields of each
/// `/proc/<pid>/task/*/schedstat`: time on a CPU, time runnable on a run
/// queue): what a run time read from the clock while a thread is not
/// blocked can add up to.
fn task_times(pid: u32) -> HashMap<u64, u64> {
    let mut times = HashMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let task = task.unwrap();
        let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        // A kernel thread may end between the listing and the read.
        if let Ok(text) = std::fs::read_to_string(task.path().join("schedstat")) {
            let ns = text
                .split_whitespace()
                .take(2)
                .filter_map(|ns| ns.parse::<u64>().ok())
                .sum::<u64>();
            times.insert(tid, ns);
        }
    }
    times
}

/// What the kernel threads of two [`task_times`] readings `wall` apart
/// ran or waited to run in between, at most: a thread in both, its
/// growth; a new one, all of its time; one that ended, the whole `wall`
/// (its last stretch is no longer readable).
fn ran_between(before: &HashMap<u64, u64>, after: &HashMap<u64, u64>, wall: Duration) -> Duration {
    let mut ns = 0u64;
    for (tid, &now) in after {
        ns += now - before.get(tid).copied().unwrap_or(0).min(now);
    }
    let ended = before.keys().filter(|tid| !after.contains_key(tid)).count();
    Duration::from_nanos(ns) + wall * u32::try_from(ended).unwrap()
}

#[test]
fn run_time_spent_in_a_server_is_charged_to_the_caller() {
    let dir = TempDir::new("cpu");
    let b_proc = serve(&dir, "b", 1, "migrating", 8);
    let b_pid = b_proc.0.id();
    let d = dir.dir();
    runtime(1)
        .run(move || {
            let b = Client::connect_in(&d, "b", 1).unwrap();
            let me = std::process::id();
            let before = ferry::thread::cpu_time().unwrap();
            let wall = Instant::now();
            let cpu_before = (task_times(me), task_times(b_pid));
            let burned = u64::from_le_bytes(b.call(op::BURN, &[30]).unwrap().try_into().unwrap());
            let cpu_after = (task_times(me), task_times(b_pid));
            let wall = wall.elapsed();
            let rise = ferry::thread::cpu_time().unwrap() - before;
            let burned = Duration::from_nanos(burned);
            // The tolerance, from the kernel's counters: the caller is
            // charged what the server's activation ran (at least what its
            // kernel thread's CPU clock burned) plus its own run time in
            // the call, both read from the clock while their kernel
            // threads ran or waited to run, so never more than both
            // processes' kernel threads ran and waited meanwhile (their
            // idle spins and this process's other tests included: the
            // bound is loose on that side only).
            let ran = ran_between(&cpu_before.0, &cpu_after.0, wall)
                + ran_between(&cpu_before.1, &cpu_after.1, wall);
            assert!(
                rise >= burned,
                "charged {rise:?}, the server burned {burned:?}"
            );
            assert!(
                rise <= ran,
                "charged {rise:?}, while both processes ran or waited to run {ran:?} in all"
            );
            // The server keeps the same books per client.
            let kept = u64::from_le_bytes(b.call(op::CHARGED, &[]).unwrap().try_into().unwrap());
            assert!(
                Duration::from_nanos(kept) >= burned,
                "kept {kept} ns for {burned:?}"
            );
        })
        .unwrap();
}

#[test]
fn an_alert_at_the_origin_reaches_the_far_end_of_a_chain_of_three_processes() {
    let dir = TempDir::new("alert");
    let _b = serve(&dir, "b", 1, "migrating", 8);
    let _c = serve(&dir, "c", 1, "migrating", 8);
    let d = dir.dir();
    runtime(2)
        .run(move || {
            let b = Client::connect_in(&d, "b", 1).unwrap();
            let caller = ferry::spawn(move || {
                b.call(op::FORWARD, format!("c|{}|", op::WAIT_ALERT).as_bytes())
                    .map(text)
            });
            let t = caller.thread();
            ferry::sleep(Duration::from_millis(50));
            t.alert();
            let got = caller.join().unwrap().unwrap();
            // C blocked alerts (the default of a new activation), saw none
            // until it allowed them, then saw the one from A.
            assert_eq!(got, "blocked_saw=false was_allowed=false now=true");
        })
        .unwrap();
}

#[test]
fn aborting_at_the_origin_returns_at_once_and_alerts_the_server_which_finishes() {
    let dir = TempDir::new("abort");
    let _b = serve(&dir, "b", 1, "migrating", 4);
    let d = dir.dir();
    runtime(2)
        .run(move || {
            let b = Client::connect_in(&d, "b", 1).unwrap();
            for round in 0..3usize {
                let call = b.start(op::HOLD, &[], &CallOptions::default()).unwrap();
                let abort = call.abort_handle();
                let held_before = round;
                // Wait until B holds the call, then abort from another thread.
                loop {
                    let s = text(b.call(op::STATS, &[]).unwrap());
                    let held: usize = s.split(' ').nth(3).unwrap().parse().unwrap();
                    if held > held_before {
                        break;
                    }
                    ferry::sleep(Duration::from_millis(1));
                }
                let aborter = ferry::spawn(move || abort.abort());
                assert!(matches!(call.wait(), Err(Error::Aborted)));
                aborter.join().unwrap();
                // B was alerted, finished, and its late reply went nowhere;
                // its activation is back in the pool.
                loop {
                    let s = text(b.call(op::STATS, &[]).unwrap());
                    let f: Vec<usize> = s.split(' ').map(|x| x.parse().unwrap()).collect();
                    // (live, idle, alerted, held): every activation idle but
                    // the one answering this STATS call.
                    if f[2] == round + 1 && f[1] + 1 == f[0] {
                        break;
                    }
                    ferry::sleep(Duration::from_millis(1));
                }
            }
            assert_eq!(
                b.refused_replies(),
                0,
                "late replies are claimed, not refused"
            );
            assert_eq!(b.call(op::ECHO, b"still").unwrap(), b"still");
        })
        .unwrap();
}

/// 000's termination split across three processes: A calls B, which
/// calls C; A aborts while C works. A's call returns at once (before C
/// may finish: C answers only once A, back from its abort, releases it),
/// the alert reaches C through B, C's late reply goes back up to B and
/// B's to nobody, and every activation of B and C is back in its pool.
#[test]
fn aborting_a_chain_of_three_returns_at_once_and_alerts_the_far_end_which_finishes() {
    let dir = TempDir::new("abort3");
    let _b = serve(&dir, "b", 1, "migrating", 4);
    let _c = serve(&dir, "c", 1, "migrating", 4);
    let d = dir.dir();
    runtime(2)
        .run(move || {
            let b = Client::connect_in(&d, "b", 1).unwrap();
            let c = Client::connect_in(&d, "c", 1).unwrap();
            let forward = format!("c|{}|", op::HOLD_UNTIL_RELEASED);
            let call = b
                .start(op::FORWARD, forward.as_bytes(), &CallOptions::default())
                .unwrap();
            let abort = call.abort_handle();
            until_stats(&c, |f| f[3] == 1);
            let aborter = ferry::spawn(move || abort.abort());
            // C cannot answer yet: only this thread releases it, below.
            assert!(matches!(call.wait(), Err(Error::Aborted)));
            aborter.join().unwrap();
            // The alert went down the chain: C saw it (and still holds).
            until_stats(&c, |f| f[2] == 1);
            c.call(op::RELEASE, &[]).unwrap();
            // C finished, B got C's late reply and answered nobody; both
            // pools are whole again (all idle but the STATS call's own).
            until_stats(&c, |f| f[1] + 1 == f[0]);
            until_stats(&b, |f| f[1] + 1 == f[0]);
            assert_eq!(b.refused_replies(), 0, "the late reply is claimed");
            assert_eq!(b.call(op::ECHO, b"still").unwrap(), b"still");
            assert_eq!(c.call(op::ECHO, b"still").unwrap(), b"still");
        })
        .unwrap();
}

#[test]
fn a_deadline_that_passes_alerts_the_server_and_fails_with_deadline_exceeded() {
    let dir = TempDir::new("deadline");
    let _b = serve(&dir, "b", 1, "migrating", 4);
    let d = dir.dir();
    runtime(1)
        .run(move || {
            let b = Client::connect_in(&d, "b", 1).unwrap();
            let r = b.call_with(
                op::HOLD,
                &[],
                &CallOptions::timeout(Duration::from_millis(30)),
            );
            assert!(matches!(r, Err(Error::DeadlineExceeded)), "{r:?}");
            loop {
                let s = text(b.call(op::STATS, &[]).unwrap());
                if s.split(' ').nth(2) == Some("1") {
                    break;
                }
                ferry::sleep(Duration::from_millis(1));
            }
        })
        .unwrap();
}

#[test]
fn a_thousand_calls_against_a_pool_of_eight_wait_in_line_or_are_refused_busy() {
    let dir = TempDir::new("pool");
    let _q = serve(&dir, "q", 2, "migrating", 8);
    let d = dir.dir();
    runtime(2)
        .run(move || {
            let q = Client::connect_in(&d, "q", 1).unwrap();
            let hs: Vec<_> = (0..1000u32)
                .map(|i| {
                    let q = q.clone();
                    ferry::spawn(move || {
                        q.call(op::ECHO, &i.to_le_bytes()).unwrap() == i.to_le_bytes()
                    })
                })
                .collect();
            assert!(hs.into_iter().all(|h| h.join().unwrap()));
            let s = text(q.call(op::STATS, &[]).unwrap());
            let live: usize = s.split(' ').next().unwrap().parse().unwrap();
            assert!(live <= 8, "the pool stays within its maximum: {s}");
        })
        .unwrap();
    // The Busy option, in this process: a server of at most 8 activations
    // whose calls hold them.
    let path = dir.path().to_owned();
    runtime(2)
        .run(move || {
            let d = dir_at(&path);
            let server = Server::builder()
                .mode(ServeMode::Migrating)
                .activations(1, 8)
                .when_full(WhenFull::Busy)
                .serve_in(
                    &d,
                    "busy",
                    1,
                    |_: u32, a: &[u8]| -> Result<Vec<u8>, Fault> {
                        ferry::sleep(Duration::from_millis(5));
                        Ok(a.to_vec())
                    },
                )
                .unwrap();
            let c = Client::connect_in(&d, "busy", 1).unwrap();
            let busy = Arc::new(AtomicU64::new(0));
            let hs: Vec<_> = (0..1000u32)
                .map(|i| {
                    let (c, busy) = (c.clone(), busy.clone());
                    ferry::spawn(move || match c.call(0, &i.to_le_bytes()) {
                        Ok(r) => assert_eq!(r, i.to_le_bytes()),
                        Err(Error::Busy) => {
                            busy.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => panic!("{e}"),
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            let refused = busy.load(Ordering::Relaxed);
            assert!(refused > 0, "64 slots of calls against 8 activations");
            assert_eq!(server.activations().refused, refused);
            assert!(server.activations().live <= 8);
        })
        .unwrap();
}

#[test]
fn re_entrant_chains_of_depth_eight_complete_with_pools_of_one() {
    let dir = TempDir::new("reenter");
    let _b = serve(&dir, "b", 1, "migrating", 1);
    let _c = serve(&dir, "c", 1, "migrating", 1);
    let d = dir.dir();
    runtime(2)
        .run(move || {
            let b = Client::connect_in(&d, "b", 1).unwrap();
            // A -> B -> C -> B -> C ... : each of B and C is visited four
            // times at once by one chain, with a pool of one.
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    let b = b.clone();
                    ferry::spawn(move || text(b.call(op::PING, b"7|c").unwrap()))
                })
                .collect();
            for h in hs {
                assert_eq!(h.join().unwrap(), "depth 9");
            }
        })
        .unwrap();
}

#[test]
fn a_high_priority_call_is_served_before_queued_low_priority_ones() {
    let dir = TempDir::new("prio");
    let _s = serve(&dir, "s", 1, "migrating", 64);
    let d = dir.dir();
    runtime(2)
        .run(move || {
            let s = Client::connect_in(&d, "s", 1).unwrap();
            let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
            // 16 low-priority callers keep the one-processor server saturated.
            let current: Arc<Vec<AtomicU64>> =
                Arc::new((0..16).map(|_| AtomicU64::new(0)).collect());
            let lows: Vec<_> = (0..16usize)
                .map(|t| {
                    let (s, stop, current) = (s.clone(), stop.clone(), current.clone());
                    ferry::thread::Builder::new()
                        .priority(Priority::Low)
                        .spawn(move || {
                            let mut i = 0u64;
                            while !stop.load(Ordering::Relaxed) {
                                i += 1;
                                current[t].store(i, Ordering::SeqCst);
                                s.call(op::LOGGED, format!("L{t}.{i}").as_bytes()).unwrap();
                            }
                        })
                        .unwrap()
                })
                .collect();
            ferry::sleep(Duration::from_millis(100));
            let hi = {
                let (s, current) = (s.clone(), current.clone());
                ferry::thread::Builder::new()
                    .priority(Priority::High)
                    .spawn(move || {
                        // The low calls in flight once H is on the channel
                        // (and the moment it was sent: one of them may have
                        // been served just before, its caller not yet back).
                        let sent = monotonic_ns();
                        let call = s.start(op::LOGGED, b"H", &CallOptions::default()).unwrap();
                        let in_flight: Vec<String> = (0..16)
                            .map(|t| format!("L{t}.{}", current[t].load(Ordering::SeqCst)))
                            .collect();
                        call.wait().unwrap();
                        (in_flight, sent)
                    })
                    .unwrap()
            };
            let (in_flight, sent) = hi.join().unwrap();
            stop.store(true, Ordering::Relaxed);
            for h in lows {
                h.join().unwrap();
            }
            // Each entry is `tag@ns`, the server's clock as it logged it.
            let log = text(s.call(op::LOG, &[]).unwrap());
            let log: Vec<(&str, u64)> = log
                .split(' ')
                .map(|e| {
                    let (tag, at) = e.split_once('@').unwrap();
                    (tag, at.parse().unwrap())
                })
                .collect();
            let h = log.iter().position(|(tag, _)| *tag == "H").unwrap();
            let served: Vec<(&str, u64)> = log[..h]
                .iter()
                .filter(|(tag, at)| *at >= sent && in_flight.iter().any(|f| f == tag))
                .copied()
                .collect();
            let before = served.len();
            // Of the 16 low calls in flight once H was sent, at most the one
            // running and the one its activation took off the channel by
            // itself as it finished are served before it.
            assert!(
                before <= 2,
                "{before} queued low calls were served before the high one: {served:?} \
                 (H sent at {sent}); the log up to it ends {:?}",
                &log[h.saturating_sub(20)..=h]
            );
        })
        .unwrap();
}

/// Waits until `b`'s counters (live idle alerted held) satisfy `ok`;
/// fails, with the last counters seen, if they have not within a minute
/// (a lost alert would otherwise hang the test).
fn until_stats(b: &Client, ok: impl Fn(&[usize]) -> bool) {
    let give_up = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let s = text(b.call(op::STATS, &[]).unwrap());
        let f: Vec<usize> = s.split(' ').map(|x| x.parse().unwrap()).collect();
        if ok(&f) {
            return;
        }
        assert!(
            std::time::Instant::now() < give_up,
            "the server's counters (live idle alerted held) stayed at {s}"
        );
        ferry::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_caller_terminated_in_a_call_aborts_it_and_gives_everything_back() {
    let dir = TempDir::new("terminate");
    let _b = serve(&dir, "b", 1, "migrating", 4);
    let d = dir.dir();
    runtime(2)
        .run(move || {
            let b = Client::connect_in(&d, "b", 1).unwrap();
            // More rounds than the channel has slots: each one comes back.
            for round in 0..70usize {
                let caller = {
                    let b = b.clone();
                    ferry::spawn(move || {
                        let _ = b.call(op::HOLD, &[]);
                    })
                };
                until_stats(&b, |f| f[3] > round);
                let t = caller.thread();
                // SAFETY: the caller's stack holds nothing that needs its
                // destructor (a cloned client, leaked by the termination).
                unsafe { t.terminate(()) }.unwrap();
                caller.join().unwrap();
                until_stats(&b, |f| f[2] > round);
            }
            assert_eq!(b.call(op::ECHO, b"after").unwrap(), b"after");
        })
        .unwrap();
}

#[test]
fn a_client_process_that_dies_has_its_calls_alerted() {
    let dir = TempDir::new("dies");
    let _b = serve(&dir, "b", 1, "migrating", 4);
    let mut caller = spawn_role(&format!("caller {} b", dir.path()), "caller");
    let d = dir.dir();
    runtime(1)
        .run(move || {
            let b = Client::connect_in(&d, "b", 1).unwrap();
            until_stats(&b, |f| f[3] >= 1);
            caller.0.kill().unwrap();
            caller.0.wait().unwrap();
            until_stats(&b, |f| f[2] >= 1);
        })
        .unwrap();
}

#[test]
fn a_chain_too_deep_fails_with_a_clear_error() {
    let dir = TempDir::new("deep");
    let _b = serve(&dir, "b", 1, "migrating", 2);
    let _c = serve(&dir, "c", 1, "migrating", 2);
    let d = dir.dir();
    runtime(1)
        .run(move || {
            let b = Client::connect_in(&d, "b", 1).unwrap();
            let got = text(b.call(op::PING, b"40|c").unwrap());
            let max = ferry::rpc::MAX_CHAIN_DEPTH;
            assert!(
                got.contains(&format!("chain {} processes deep", max + 1)),
                "{got}"
            );
        })
        .unwrap();
}

#[test]
fn a_pool_tells_its_server_when_it_runs_low_grows_and_decays() {
    let path = std::env::temp_dir().join(format!("ferry-mig-low-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    let p = path.clone();
    runtime(2)
        .run(move || {
            let d = dir_at(p.to_str().unwrap());
            let told = Arc::new(AtomicUsize::new(0));
            let t = told.clone();
            let server = Server::builder()
                .mode(ServeMode::Migrating)
                .activations(1, 6)
                .on_pool_low(move |low| {
                    assert!(low.idle == 0 && low.live < low.max, "{low:?}");
                    t.fetch_add(1, Ordering::SeqCst);
                    2
                })
                .serve_in(&d, "low", 1, |_: u32, a: &[u8]| -> Result<Vec<u8>, Fault> {
                    ferry::sleep(Duration::from_millis(20));
                    Ok(a.to_vec())
                })
                .unwrap();
            let c = Client::connect_in(&d, "low", 1).unwrap();
            let hs: Vec<_> = (0..12u8)
                .map(|i| {
                    let c = c.clone();
                    ferry::spawn(move || assert_eq!(c.call(0, &[i]).unwrap(), [i]))
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            assert!(told.load(Ordering::SeqCst) >= 1, "never told");
            let grown = server.activations();
            assert!(grown.live > 1 && grown.live <= 6, "{grown:?}");
            // Idle, the pool decays back to its minimum.
            while server.activations().live > 1 {
                ferry::sleep(Duration::from_millis(50));
            }
            assert!(server.activations().retired >= 1);
        })
        .unwrap();
    let _ = std::fs::remove_dir_all(path);
}

#[test]
fn an_alert_aborts_a_blocking_call_in_a_server_that_allows_alerts() {
    let dir = TempDir::new("blocked");
    let _b = serve(&dir, "b", 1, "migrating", 4);
    let d = dir.dir();
    runtime(2)
        .run(move || {
            let b = Client::connect_in(&d, "b", 1).unwrap();
            let caller = ferry::spawn(move || b.call(op::BLOCKED_READ, &[]).map(text));
            let t = caller.thread();
            ferry::sleep(Duration::from_millis(50));
            t.alert();
            assert_eq!(caller.join().unwrap().unwrap(), "interrupted");
        })
        .unwrap();
}

#[test]
fn a_server_may_lower_its_priority_for_its_part_but_never_raise_it_above_the_caller() {
    let dir = TempDir::new("ceiling");
    let _b = serve(&dir, "b", 1, "migrating", 4);
    let d = dir.dir();
    runtime(1)
        .run(move || {
            let b = Client::connect_in(&d, "b", 1).unwrap();
            let call = move |p: Priority| {
                let b = b.clone();
                ferry::thread::Builder::new()
                    .priority(p)
                    .spawn(move || text(b.call(op::PRIORITY, &[]).unwrap()))
                    .unwrap()
                    .join()
                    .unwrap()
            };
            assert_eq!(call(Priority::Normal), "Normal Low");
            assert_eq!(call(Priority::High), "High Low");
            assert_eq!(call(Priority::Low), "Low Low");
            // The caller's own priority is its own throughout.
            assert_eq!(ferry::current().priority(), Priority::Normal);
        })
        .unwrap();
}
