//! `ferry allocd` with real processes: the `ferry` binary as the daemon in
//! a fresh runtime directory (`XDG_RUNTIME_DIR` set to a new temporary
//! directory), and `ferry alloc-probe` processes, busy ferry runtimes that
//! print `processors N` whenever their processor count changes.
//!
//! Every wait polls the daemon's log or a probe's output with a generous
//! overall timeout; nothing is judged by how long it took. The tests run
//! one at a time: two threads of one process reaping children at once
//! (each test kills and waits for its processes) were seen to spin in the
//! kernel for good (`wait4` in `shrink_dcache_parent`, Linux 6.18).

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Held for the whole of each test (see the module docs).
static SERIAL: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How long any one condition may take to come true.
const PATIENCE: Duration = Duration::from_secs(60);

/// A fresh runtime directory's parent (`XDG_RUNTIME_DIR`), removed at drop.
struct TempRuntime(PathBuf);

impl TempRuntime {
    fn new(name: &str) -> TempRuntime {
        static N: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "ferry-allocd-{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
        TempRuntime(path)
    }

    /// The runtime directory itself (`$XDG_RUNTIME_DIR/ferry`).
    fn ferry_dir(&self) -> PathBuf {
        self.0.join("ferry")
    }
}

impl Drop for TempRuntime {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A child process whose output lines are collected as they come.
struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Proc {
    fn start(xdg: &Path, args: &[&str], log_stderr: bool) -> Proc {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferry"));
        cmd.args(args)
            .env("XDG_RUNTIME_DIR", xdg)
            .env_remove("FERRY_ALLOCD")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out: Box<dyn std::io::Read + Send> = if log_stderr {
            Box::new(child.stderr.take().unwrap())
        } else {
            Box::new(child.stdout.take().unwrap())
        };
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line);
            }
        });
        let stdin = child.stdin.take();
        Proc {
            child,
            stdin,
            lines,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Waits until `f` holds of the lines so far; panics with them after
    /// [`PATIENCE`].
    fn wait_for(&self, what: &str, f: impl Fn(&[String]) -> bool) {
        let start = Instant::now();
        loop {
            {
                let lines = self.lines.lock().unwrap();
                if f(&lines) {
                    return;
                }
                assert!(
                    start.elapsed() < PATIENCE,
                    "waited in vain for {what}; output:\n{}",
                    lines.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIGKILL; the process is reaped later (see [`stop_all`]).
    fn kill9(&mut self) {
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(self.pid() as i32).unwrap(),
            rustix::process::Signal::KILL,
        )
        .unwrap();
    }

    /// Waits (polling) for the process to end; whether it succeeded.
    fn reap(&mut self) -> bool {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.success();
            }
            if start.elapsed() > PATIENCE {
                let _ = self.child.kill();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // A probe ends at the end of its input; the daemon is killed.
        if self.stdin.take().is_none() || self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Ends every probe in `procs` by closing its input, and only then reaps
/// them: a busy ferry process reaped while others spin on every core was
/// seen to keep the reaper in the kernel for minutes (`wait4` in
/// `shrink_dcache_parent`, Linux 6.18, 2 cores). Whether each exited
/// with success.
fn stop_all(procs: &mut [&mut Proc]) -> Vec<bool> {
    for p in procs.iter_mut() {
        drop(p.stdin.take());
    }
    procs.iter_mut().map(|p| p.reap()).collect()
}

/// A probe's latest processor count in its output `lines`.
fn processors(lines: &[String]) -> Option<usize> {
    lines
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("processors ")?.parse().ok())
}

fn daemon(rt: &TempRuntime, extra: &[&str]) -> Proc {
    let mut args = vec!["allocd"];
    args.extend_from_slice(extra);
    let d = Proc::start(&rt.0, &args, true);
    d.wait_for("the daemon to listen", |l| {
        l.iter().any(|l| l.contains("listening at"))
    });
    d
}

fn probe(rt: &TempRuntime) -> Proc {
    Proc::start(&rt.0, &["alloc-probe", "--until-eof"], false)
}

/// The cores the daemon shares: its log's `cores=` on the listening line.
fn daemon_cores(d: &Proc) -> usize {
    let lines = d.lines();
    let line = lines.iter().find(|l| l.contains("listening at")).unwrap();
    let list = line.split("cores=").nth(1).unwrap();
    list.parse::<ferry::alloc::CoreSet>().unwrap().len()
}

/// The allocation lines of the log: pid to cores (`None` for fenced).
fn allocations(lines: &[String]) -> Vec<Vec<(u32, ferry::alloc::CoreSet, bool)>> {
    lines
        .iter()
        .filter_map(|l| l.split_once("INFO allocation").map(|(_, rest)| rest))
        .map(|rest| {
            rest.split_whitespace()
                .map(|entry| {
                    let (pid, cores) = entry.split_once('=').unwrap();
                    let fenced = cores.ends_with("(fenced)");
                    let cores = cores.trim_end_matches("(fenced)");
                    let set = if cores == "-" {
                        ferry::alloc::CoreSet::new()
                    } else {
                        cores.parse().unwrap()
                    };
                    (pid.parse().unwrap(), set, fenced)
                })
                .collect()
        })
        .collect()
}

fn registered(lines: &[String], pid: u32) -> usize {
    let needle = format!("registered pid={pid}");
    lines.iter().filter(|l| l.ends_with(&needle)).count()
}

#[test]
fn three_processes_share_the_cores_and_never_own_more_than_there_are() {
    let _serial = one_at_a_time();
    let rt = TempRuntime::new("three");
    let d = daemon(&rt, &[]);
    let cores = daemon_cores(&d);
    let probes: Vec<Proc> = (0..3).map(|_| probe(&rt)).collect();
    let pids: Vec<u32> = probes.iter().map(Proc::pid).collect();
    d.wait_for("three registrations", |l| {
        pids.iter().all(|&p| registered(l, p) == 1)
    });
    // Allocations with all three, until a few have been made.
    let all_three = |l: &[String]| {
        allocations(l)
            .into_iter()
            .filter(|a| a.len() == 3)
            .collect::<Vec<_>>()
    };
    d.wait_for("allocations among the three", |l| all_three(l).len() >= 3);
    for a in all_three(&d.lines()) {
        let mut union = ferry::alloc::CoreSet::new();
        let mut sum = 0;
        for (_, set, _) in &a {
            assert!(
                set.intersection(&union).is_empty(),
                "a core owned twice: {a:?}"
            );
            set.iter().for_each(|c| {
                union.insert(c);
            });
            sum += set.len();
        }
        assert!(sum <= cores, "more cores owned than there are: {a:?}");
    }
    // The last allocation gives out every core (each probe wants all).
    d.wait_for("every core owned", |l| {
        all_three(l)
            .last()
            .is_some_and(|a| a.iter().map(|(_, s, _)| s.len()).sum::<usize>() == cores)
    });
    // Each probe runs as many processors as it owns cores.
    for p in &probes {
        let pid = p.pid();
        let owned = |l: &[String]| {
            all_three(l)
                .last()
                .and_then(|a| a.iter().find(|e| e.0 == pid).map(|e| e.1.len()))
        };
        if cores >= 3 {
            // (The allocation may move with credit: compare with the
            // latest one each time.)
            p.wait_for("processors as cores owned", |l| {
                processors(l).is_some() && processors(l) == owned(&d.lines()).map(|n| n.max(1))
            });
        } else {
            // Rotation of whole cores: one processor in turn, none out of
            // turn (no processor on a core another process owns), never
            // two.
            p.wait_for("one processor in turn", |l| processors(l) == Some(1));
            p.wait_for("no processor out of turn", |l| processors(l) == Some(0));
            p.wait_for("one processor in turn again", |l| processors(l) == Some(1));
            // (It starts with a processor per core, before its first
            // order.)
            let lines = p.lines();
            let followed = lines.iter().skip_while(|l| *l != "processors 1");
            assert!(
                !followed.clone().any(|l| l == "processors 2"),
                "two processors on fewer than three cores: {lines:?}"
            );
        }
    }
    let mut probes = probes;
    let mut all: Vec<&mut Proc> = probes.iter_mut().collect();
    assert_eq!(stop_all(&mut all), vec![true; 3]);
}

#[test]
fn a_killed_process_cores_go_to_the_others() {
    let _serial = one_at_a_time();
    let rt = TempRuntime::new("kill");
    let d = daemon(&rt, &[]);
    let cores = daemon_cores(&d);
    if cores < 2 {
        eprintln!("one core: nothing to share");
        return;
    }
    let mut a = probe(&rt);
    let mut b = probe(&rt);
    let (pa, pb) = (a.pid(), b.pid());
    d.wait_for("both registered", |l| {
        registered(l, pa) == 1 && registered(l, pb) == 1
    });
    d.wait_for("both owning cores", |l| {
        allocations(l)
            .last()
            .is_some_and(|x| x.len() == 2 && x.iter().all(|e| !e.1.is_empty()))
    });
    a.wait_for("a sharing", |l| processors(l).is_some_and(|n| n < cores));
    b.kill9();
    d.wait_for("b's exit seen", |l| {
        l.iter()
            .any(|l| l.contains(&format!("gone pid={pb} (exited)")))
            || l.iter()
                .any(|l| l.contains(&format!("gone pid={pb} (closed")))
    });
    d.wait_for("every core a's", |l| {
        allocations(l)
            .last()
            .is_some_and(|x| x.len() == 1 && x[0].0 == pa && x[0].1.len() == cores)
    });
    a.wait_for("a running every core", |l| processors(l) == Some(cores));
    assert_eq!(stop_all(&mut [&mut a, &mut b]), vec![true, false]);
}

#[test]
fn a_terminated_daemon_removes_its_socket_and_a_new_one_starts() {
    let _serial = one_at_a_time();
    let rt = TempRuntime::new("term");
    let mut d = daemon(&rt, &[]);
    let socket = rt.0.join("ferry").join("allocd.sock");
    assert!(socket.exists());
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(d.pid() as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    assert!(d.reap(), "the daemon did not exit cleanly on SIGTERM");
    assert!(!socket.exists(), "SIGTERM left {}", socket.display());
    let again = daemon(&rt, &[]);
    drop(again);
}

#[test]
fn processes_outlive_the_daemon_and_register_again() {
    let _serial = one_at_a_time();
    let rt = TempRuntime::new("restart");
    let mut d = daemon(&rt, &["--policy", "equipartition"]);
    let mut a = probe(&rt);
    let mut b = probe(&rt);
    let (pa, pb) = (a.pid(), b.pid());
    d.wait_for("both registered", |l| {
        registered(l, pa) == 1 && registered(l, pb) == 1
    });
    d.kill9();
    // Without a daemon, a finishes its work.
    drop(a.stdin.take());
    a.wait_for("a done", |l| l.iter().any(|l| l == "done"));
    assert!(b.alive(), "b died with the daemon");
    // A new daemon replaces the stale socket and b registers again.
    let d2 = daemon(&rt, &["--policy", "equipartition"]);
    d2.wait_for("b registered again", |l| registered(l, pb) == 1);
    let cores = daemon_cores(&d2);
    d2.wait_for("b owning every core", |l| {
        allocations(l)
            .last()
            .is_some_and(|x| x.len() == 1 && x[0].1.len() == cores)
    });
    b.wait_for("b running every core", |l| processors(l) == Some(cores));
    drop(b.stdin.take());
    b.wait_for("b done", |l| l.iter().any(|l| l == "done"));
    assert_eq!(stop_all(&mut [&mut a, &mut b]), vec![true, true]);
    // A second daemon beside a live one refuses to start.
    let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .arg("allocd")
        .env("XDG_RUNTIME_DIR", &rt.0)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already answers"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Registers this test process by hand, as a runtime would, and returns
/// its binding (the page is its mapping).
fn register_by_hand(rt: &TempRuntime) -> ferry::rpc::Binding {
    let uid = rustix::process::getuid().as_raw();
    let dir = ferry::rpc::RuntimeDir::open(rt.ferry_dir(), uid).unwrap();
    ferry::rpc::connect_raw_in(&dir, ferry::alloc::SOCKET_NAME, ferry::alloc::PROTOCOL_HASH)
        .unwrap()
}

/// The page's 32-bit word at `offset` (the layout table of
/// `ferry::alloc::Page`).
fn word(b: &ferry::rpc::Binding, offset: usize) -> &std::sync::atomic::AtomicU32 {
    assert!(offset + 4 <= b.mapping().len());
    // SAFETY: in bounds and aligned (checked offsets below), mapped while
    // `b` lives; only accessed atomically.
    unsafe { &*b.mapping().as_ptr().add(offset).cast() }
}

const ORDER: usize = 16;
const ACKED: usize = 72;

#[test]
fn a_scribbled_page_is_fenced_and_the_others_are_still_served() {
    let _serial = one_at_a_time();
    let rt = TempRuntime::new("scribble");
    let mut d = daemon(&rt, &[]);
    let cores = daemon_cores(&d);
    let p = probe(&rt);
    let me = std::process::id();
    d.wait_for("the probe registered", |l| registered(l, p.pid()) == 1);
    let b = register_by_hand(&rt);
    d.wait_for("this process registered", |l| registered(l, me) == 1);
    // Garbage over every word: magic, desire, acknowledgement, willing words.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for off in (0..b.mapping().len()).step_by(4) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        word(&b, off).store(x as u32 | 2, Ordering::Relaxed);
    }
    d.wait_for("this process fenced", |l| {
        l.iter()
            .any(|l| l.contains(&format!("fenced pid={me}: malformed page")))
    });
    d.wait_for("every core the probe's", |l| {
        allocations(l).last().is_some_and(|x| {
            x.iter()
                .any(|e| e.0 == p.pid() && e.1.len() == cores && !e.2)
        })
    });
    p.wait_for("the probe running every core", |l| {
        processors(l) == Some(cores)
    });
    assert!(d.alive(), "the daemon died of a scribbled page");
    // And it still registers newcomers.
    let q = probe(&rt);
    d.wait_for("a newcomer registered", |l| registered(l, q.pid()) == 1);
    let (mut p, mut q) = (p, q);
    assert_eq!(stop_all(&mut [&mut p, &mut q]), vec![true, true]);
}

#[test]
fn a_process_that_ignores_orders_is_fenced_until_it_acknowledges() {
    let _serial = one_at_a_time();
    let rt = TempRuntime::new("ignore");
    let mut d = daemon(&rt, &[]);
    let me = std::process::id();
    let b = register_by_hand(&rt);
    d.wait_for("this process registered", |l| registered(l, me) == 1);
    d.wait_for("fenced for its silence", |l| {
        l.iter().any(|l| {
            l.contains(&format!("fenced pid={me}: order")) && l.contains("not acknowledged")
        })
    });
    // Acknowledge the current order (an even generation): let go.
    let wait_start = Instant::now();
    loop {
        let g = word(&b, ORDER).load(Ordering::Acquire);
        if g & 1 == 0 && g != 0 {
            word(&b, ACKED).store(g, Ordering::Release);
        }
        if d.lines()
            .iter()
            .any(|l| l.contains(&format!("pid={me} acknowledged order")))
        {
            break;
        }
        assert!(wait_start.elapsed() < PATIENCE, "{}", d.lines().join("\n"));
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(d.alive());
}
