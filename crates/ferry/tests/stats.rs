//! The stats page a runtime publishes (`ferry::stats`): it appears in the
//! runtime directory with the runtime's figures, follows its channels'
//! calls, and goes when `run` returns; `Builder::stats(false)` makes none.
//!
//! One test function: it points `XDG_RUNTIME_DIR` at a directory of its own,
//! which the process's other tests would share.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ferry::rpc::{Client, Fault, RuntimeDir, Server};
use ferry::stats::{ChannelKind, MappedPage, Snapshot};

/// Reads the page at `path` until `done` holds for it (the monitor writes
/// it every 100 ms while processors are busy, and before it parks).
fn read_until(path: &Path, done: impl Fn(&Snapshot) -> bool) -> Snapshot {
    let page = MappedPage::open(path).unwrap();
    loop {
        let s = page.read().unwrap();
        if done(&s) {
            return s;
        }
        ferry::sleep(std::time::Duration::from_millis(5));
    }
}

#[test]
fn a_runtime_publishes_its_page_while_it_runs() {
    let xdg = std::env::temp_dir().join(format!("ferry-stats-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&xdg);
    std::fs::create_dir(&xdg).unwrap();
    // SAFETY: set before any thread of this test binary reads the
    // environment (this is its only test).
    unsafe { std::env::set_var("XDG_RUNTIME_DIR", &xdg) };
    let pid = std::process::id();
    let page: PathBuf = xdg.join("ferry").join("top").join(pid.to_string());

    let p = page.clone();
    ferry::Runtime::builder()
        .processors(2)
        .run(move || {
            let first = MappedPage::open(&p).unwrap().read().unwrap();
            assert_eq!(first.pid, pid);
            assert_eq!(first.processors, 2);
            assert_eq!(first.cores.len(), 2);
            assert!(first.allocation.is_none());
            // A busy processor: the monitor writes again.
            let w = first.writes;
            let spin = ferry::spawn(move || {});
            read_until(&p, |s| s.writes > w);
            spin.join().unwrap();

            let dir = RuntimeDir::user().unwrap();
            let echo = |_op: u32, a: &[u8]| -> Result<Vec<u8>, Fault> { Ok(a.to_vec()) };
            let server = Server::serve_in(&dir, "stats-echo", 1, echo).unwrap();
            let client = Client::connect_in(&dir, "stats-echo", 1).unwrap();
            for i in 0..5u8 {
                assert_eq!(client.call(0, &[i]).unwrap(), [i]);
            }
            let s = read_until(&p, |s| {
                s.channels.iter().filter(|c| c.calls == 5).count() == 2
            });
            let server_end = s
                .channels
                .iter()
                .find(|c| c.kind == ChannelKind::Server)
                .unwrap();
            assert_eq!(
                (server_end.name.as_str(), server_end.peers),
                ("stats-echo", 1)
            );
            let client_end = s
                .channels
                .iter()
                .find(|c| c.kind == ChannelKind::Client)
                .unwrap();
            assert_eq!(client_end.peers, u64::from(pid), "the server's pid");
            drop((client, server));

            // A call held in its handler: its logical thread is listed with
            // its chain (this process twice: the origin and the server).
            let release = Arc::new(AtomicBool::new(false));
            let r = Arc::clone(&release);
            let hold = move |_op: u32, _a: &[u8]| -> Result<Vec<u8>, Fault> {
                while !r.load(Ordering::Acquire) {
                    ferry::sleep(std::time::Duration::from_millis(1));
                }
                Ok(Vec::new())
            };
            let server = Server::serve_in(&dir, "stats-hold", 1, hold).unwrap();
            let client = Client::connect_in(&dir, "stats-hold", 1).unwrap();
            let caller = ferry::spawn(move || client.call(0, &[]).map(drop));
            let s = read_until(&p, |s| !s.logical.is_empty());
            assert_eq!(s.logical.len(), 1);
            assert_eq!(s.logical[0].origin, pid);
            assert_eq!(s.logical[0].chain, [pid, pid]);
            release.store(true, Ordering::Release);
            caller.join().unwrap().unwrap();
            read_until(&p, |s| s.logical.is_empty());
            drop(server);
        })
        .unwrap();
    assert!(!page.exists(), "the page outlived its runtime");

    ferry::Runtime::builder()
        .stats(false)
        .processors(1)
        .run(move || assert!(!page.exists()))
        .unwrap();
    std::fs::remove_dir_all(&xdg).unwrap();
}
