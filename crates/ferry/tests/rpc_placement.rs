//! Where the processors of two one-processor processes that call each other
//! live. The kernel sometimes starts both on one CPU; each runtime counts
//! its processors' homes from the CPU it started on, and the two would
//! take turns on that CPU for good, each spinning for a peer that cannot
//! run. An idle processor whose longest spin for its channels does not pay
//! moves its home, with even odds, to a CPU no other processor of its
//! runtime lives on (`Processor::move_home_by_chance`), so the two come
//! apart.
//!
//! The test starts the server confined to one CPU, which widens its mask
//! just before its runtime starts, and starts its own runtime from a kernel
//! thread on that CPU too, so both count their homes from it. A setup
//! whose first call finds them apart already (the server's idle processor
//! moved before the call came) is started again; from a first call that
//! finds them together, the test calls until
//! the handler and the caller run on different CPUs call after call (the
//! watchdog fails it if they never do).

mod common;

use std::time::Duration;

use ferry::rpc::{Client, Fault, RuntimeDir, Server};
use rustix::thread::CpuSet;

/// The child's role: the runtime directory it serves in.
const ROLE: &str = "FERRY_PLACEMENT_DIR";
/// The CPUs the child widens its mask to.
const CPUS: &str = "FERRY_PLACEMENT_CPUS";
/// Consecutive calls that must find caller and handler apart.
const APART: usize = 200;
/// Setups tried until one starts with caller and handler together.
const SETUPS: usize = 10;

fn allowed() -> Vec<usize> {
    let set = rustix::thread::sched_getaffinity(None).unwrap();
    (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect()
}

fn confine(cpus: &[usize]) {
    let mut set = CpuSet::new();
    for &c in cpus {
        set.set(c);
    }
    rustix::thread::sched_setaffinity(None, &set).unwrap();
}

fn cpu() -> u64 {
    // SAFETY: `sched_getcpu` has no preconditions.
    u64::try_from(unsafe { libc::sched_getcpu() }).unwrap()
}

fn dir(path: &str) -> RuntimeDir {
    RuntimeDir::open(path, rustix::process::getuid().as_raw()).unwrap()
}

/// The server: started confined to its parent's CPU, it widens its mask
/// to [`CPUS`] just before its runtime starts (which counts its home from
/// the CPU it is on), and answers each call with the CPU its handler ran
/// on. It exits when its stdin closes (the test went).
#[test]
fn child() {
    let Ok(path) = std::env::var(ROLE) else {
        return;
    };
    let cpus: Vec<usize> = std::env::var(CPUS)
        .unwrap()
        .split(',')
        .map(|c| c.parse().unwrap())
        .collect();
    std::thread::spawn(|| {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        std::process::exit(0);
    });
    let d = dir(&path);
    confine(&cpus);
    ferry::Runtime::builder()
        .processors(1)
        .run(move || {
            let _s = Server::serve_in(&d, "placement", 1, |_op: u32, _a: &[u8]| {
                Ok::<_, Fault>(cpu().to_le_bytes().to_vec())
            })
            .unwrap();
            println!("ready");
            loop {
                ferry::sleep(Duration::from_secs(3600));
            }
        })
        .unwrap();
}

/// Starts the server from the calling kernel thread, confined for the
/// while to `cpus[0]`, and waits until it serves.
fn start_server(path: &str, cpus: &[usize]) -> std::process::Child {
    confine(&cpus[..1]);
    let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
    let mut server = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(ROLE, path)
        .env(CPUS, list.join(","))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_for(&mut server, "ready");
    server
}

fn call(c: &Client) -> u64 {
    u64::from_le_bytes(c.call(0, &[]).unwrap().try_into().unwrap())
}

#[test]
fn two_one_processor_processes_started_on_one_cpu_move_apart() {
    let cpus = allowed();
    if cpus.len() < 2 {
        eprintln!("one CPU: nothing to move to");
        return;
    }
    let path = std::env::temp_dir().join(format!("ferry-placement-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    let path = path.to_str().unwrap().to_owned();
    let p = path.clone();
    let outcome = common::within(common::WATCHDOG, "placement", move || {
        // The server's idle processor may move its home before the first
        // call comes (its spin for the new channel did not pay): then the
        // test would start apart, set up nothing, and starts again.
        for attempt in 1..=SETUPS {
            // Both runtimes start on the first CPU: the server's, confined
            // there, and this one, on the kernel thread that started it.
            let mut server = start_server(&p, &cpus);
            confine(&cpus);
            let d = dir(&p);
            let outcome = ferry::Runtime::builder()
                .processors(1)
                .run(move || {
                    let c = Client::connect_in(&d, "placement", 1).unwrap();
                    if call(&c) != cpu() {
                        return None;
                    }
                    let (mut calls, mut apart, mut together) = (1usize, 0usize, 0usize);
                    while apart < APART {
                        let there = call(&c);
                        calls += 1;
                        if there == cpu() {
                            apart = 0;
                            together += 1;
                        } else {
                            apart += 1;
                        }
                        if calls % 1000 == 0 {
                            common::step(
                                "placement",
                                format!("{calls} calls, {together} together"),
                            );
                        }
                    }
                    Some((calls, together))
                })
                .unwrap();
            let _ = server.kill();
            let _ = server.wait();
            match outcome {
                Some(found) => return Some((attempt, found)),
                None => common::step("placement", format!("setup {attempt} started apart")),
            }
        }
        None
    });
    let _ = std::fs::remove_dir_all(&path);
    let Some((attempt, (calls, together))) = outcome else {
        panic!("in {SETUPS} setups the first call never found caller and handler together");
    };
    eprintln!(
        "setup {attempt}: {calls} calls, {together} of them after the first on one CPU, \
         then {APART} apart"
    );
}
