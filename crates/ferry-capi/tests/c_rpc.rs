//! The C side of `ferry::rpc`, in plain C at -O2 with gcc and clang,
//! against `libferry.so` and `libferry.a`:
//!
//! - `tests/c/rpc_client.c` calls a server written in Rust in another
//!   process: this test binary itself, run again as [`rust_server_process`]
//!   with a runtime directory of its own;
//! - `tests/c/rpc_c_server.c` is a C server in a forked process answering
//!   a C client;
//! - `examples/c/urpc.c`, built with `pkg-config`, does the same.

mod support;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ferry_rt::rpc::{Fault, RuntimeDir, Server};
use support::*;

/// The interface `rpc_client.c` calls (see its opening comment).
const NAME: &str = "capi-echo";
const VERSION: u64 = 0x5eed_0001;
/// Where the server process finds its runtime directory.
const DIR_VAR: &str = "FERRY_CAPI_RPC_SERVER_DIR";

fn handler(op: u32, args: &[u8]) -> Result<Vec<u8>, Fault> {
    let word = || -> Result<u32, Fault> {
        let b: [u8; 4] = args.try_into().map_err(|_| Fault::BadArgs)?;
        Ok(u32::from_le_bytes(b))
    };
    match op {
        0 => Ok(args.to_vec()),
        1 => Ok((0..word()?).map(|i| (i * 7) as u8).collect()),
        2 => {
            ferry_rt::sleep(Duration::from_millis(u64::from(word()?)));
            Ok(b"late".to_vec())
        }
        3 => panic!("asked to panic"),
        4 => std::process::abort(),
        _ => Err(Fault::UnknownOp),
    }
}

/// The Rust server: serves [`NAME`] in the directory `DIR_VAR` names,
/// prints `ready`, and serves until its stdin closes (or a client asks it
/// to abort). Run only by the tests below, as another process.
#[test]
#[ignore = "the server process of the other tests; they run it"]
fn rust_server_process() {
    let Some(path) = std::env::var_os(DIR_VAR) else {
        return;
    };
    let mut b = ferry_rt::Runtime::builder();
    b.processors(2);
    b.run(move || {
        // SAFETY: a plain system call without arguments.
        let dir = RuntimeDir::open(PathBuf::from(path), unsafe { libc::getuid() }).unwrap();
        let server = Server::serve_in(&dir, NAME, VERSION, handler).unwrap();
        println!("ready");
        ferry_rt::blocking(|| {
            let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        });
        server.close();
    })
    .unwrap();
}

/// A fresh runtime directory path (not created) for one run.
fn fresh_dir() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let p = std::env::temp_dir().join(format!(
        "ferry-capi-rpc-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&p);
    p
}

/// Starts [`rust_server_process`] serving in `dir` and waits until it is.
fn start_server(dir: &std::path::Path) -> Child {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "rust_server_process", "--nocapture"])
        .env(DIR_VAR, dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the test binary runs again as the server");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    // Reads on after `ready` until the process ends, so that the test
    // harness's own lines in it never meet a closed pipe.
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line == "ready" {
                let _ = tx.send(true);
            }
        }
        let _ = tx.send(false);
    });
    if rx.recv_timeout(RUN_LIMIT) != Ok(true) {
        let _ = child.kill();
        panic!("the Rust server process did not start: {:?}", child.wait());
    }
    child
}

/// Waits for the server process to end (it aborts when asked to by the
/// client's last call), killing it after [`RUN_LIMIT`].
fn wait_for_end(mut child: Child) {
    drop(child.stdin.take());
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            panic!("the Rust server process did not end");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_c_client_calls_a_rust_server_in_another_process() {
    let source = crate_dir().join("tests/c/rpc_client.c");
    for_each_build(&source, |exe, build| {
        let dir = fresh_dir();
        let server = start_server(&dir);
        let dir_str = dir.to_str().unwrap();
        check_run(
            exe,
            &[("FERRY_RPC_DIR", dir_str), ("FERRY_PROCESSORS", "2")],
            &format!("rpc_client.c ({build})"),
        );
        wait_for_end(server);
        std::fs::remove_dir_all(&dir).unwrap();
    });
}

#[test]
fn a_c_server_answers_a_c_client_in_another_process() {
    for processors in ["1", "2"] {
        let dir = fresh_dir();
        run_with_each_compiler(
            "rpc_c_server.c",
            &[
                ("FERRY_RPC_DIR", dir.to_str().unwrap()),
                ("FERRY_PROCESSORS", processors),
            ],
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// `examples/c/urpc.c`, built the documented way (`pkg-config --cflags
/// --libs ferry`), run with a runtime directory of its own.
#[test]
fn the_urpc_example_builds_with_pkg_config_and_runs() {
    let exe = build_example("urpc");
    let dir = fresh_dir();
    let mut cmd = Command::new(&exe);
    cmd.arg(&dir);
    let out = run_command(cmd).expect("urpc hung");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for i in 0..4 {
        let line = format!("hello from cthread {i} -> HELLO FROM CTHREAD {i}");
        assert!(stdout.lines().any(|l| l == line), "{stdout}");
    }
    assert!(stdout.contains("20000 null calls: "), "{stdout}");
    assert!(
        stdout.contains("op 7: the server has no such operation"),
        "{stdout}"
    );
    assert!(stdout.contains("server exited with 0"), "{stdout}");
    std::fs::remove_dir_all(&dir).unwrap();
}
