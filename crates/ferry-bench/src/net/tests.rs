//! Tests of `net`'s logic and of its load generator against small servers
//! made here (std threads): one that echoes, one that changes a byte, one
//! that hangs up. The servers of the experiment themselves are run by
//! `tests/net.rs`, through the binary.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;

use super::conn::{MESSAGE, message};
use super::load::{self, Load};
use super::*;

fn args(extra: &[&str]) -> Args {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }
    let mut all = vec!["net"];
    all.extend_from_slice(extra);
    Cli::try_parse_from(all).unwrap().args
}

#[test]
fn plan_defaults_quick_and_bad_arguments() {
    let p = Plan::new(&args(&[])).unwrap();
    assert_eq!(p.runs, 3);
    assert_eq!(p.connections, CONNECTIONS);
    assert_eq!(p.systems, SYSTEMS);
    assert_eq!(
        (p.warmup, p.window),
        (Duration::from_secs(1), Duration::from_secs(2))
    );
    let q = Plan::new(&args(&[
        "--quick",
        "--connections",
        "2,20",
        "--systems",
        "go",
    ]))
    .unwrap();
    assert_eq!(q.connections, [2, 20]);
    assert_eq!(q.systems, [System::Go]);
    assert_eq!(q.window, Duration::from_millis(500));
    assert_eq!(
        q.limit(1000),
        Duration::from_millis(300 + 500 + 20_000 + 2_000)
    );
    assert!(Plan::new(&args(&["--runs", "1"])).is_err());
    assert!(Plan::new(&args(&["--window-ms", "10"])).is_err());
    assert!(Plan::new(&args(&["--connections", "0"])).is_err());
    assert!(Plan::new(&args(&["--connections", "20000"])).is_err());
    assert!(Plan::new(&args(&["--systems", "ferry,nginx"])).is_err());
}

#[test]
fn case_names() {
    assert_eq!(case(1), "C=1");
    assert_eq!(case(100), "C=100");
    assert_eq!(case(1000), "C=1k");
    assert_eq!(case(10_000), "C=10k");
    assert_eq!(case(1500), "C=1500");
}

#[test]
fn messages_differ_by_connection_and_number() {
    let m = message(7, 3);
    assert_eq!(m.len(), MESSAGE);
    assert_eq!(message(7, 3), m);
    assert_ne!(message(8, 3), m);
    assert_ne!(message(7, 4), m);
    // The pattern changes within the message, not only in its header.
    assert_ne!(message(7, 3)[12..], message(7, 4)[12..]);
}

fn outcome(requests: u64, p99_ns: u64, threads: u64) -> Outcome {
    Outcome {
        requests,
        window_ns: 1_000_000_000,
        p50_ns: p99_ns / 2,
        p99_ns,
        checked: requests + 10,
        server_cpu_ns: Some(requests * 5_000),
        server_threads: Some(threads),
    }
}

#[test]
fn the_load_outcome_is_parsed_or_its_failure_kept() {
    let o = outcome(100, 2000, 3);
    let line = serde_json::to_string(&Ok::<Outcome, String>(o.clone())).unwrap();
    assert_eq!(run::parse(&format!("{line}\n")), Ok(o));
    let line = serde_json::to_string(&Err::<Outcome, String>("refused".into())).unwrap();
    assert_eq!(run::parse(&line), Err("refused".into()));
    assert!(run::parse("").unwrap_err().contains("unexpected outcome"));
    assert!(
        run::parse("{\"Ok\":{}}")
            .unwrap_err()
            .contains("unexpected outcome")
    );
}

#[test]
fn report_has_rows_ratios_absent_reasons_goals_and_a_plot() {
    let plan = Plan {
        runs: 3,
        warmup: Duration::from_millis(1),
        window: Duration::from_millis(100),
        connections: vec![1, 10_000],
        systems: SYSTEMS.to_vec(),
    };
    let mut found: Found = HashMap::new();
    found.insert((1, System::Ferry), Ok(vec![outcome(200, 1000, 9); 3]));
    found.insert((1, System::Go), Ok(vec![outcome(100, 4000, 5); 3]));
    found.insert((1, System::Tokio), Ok(vec![outcome(400, 500, 3); 3]));
    found.insert((10_000, System::Ferry), Err("no first echo".into()));
    found.insert((10_000, System::Go), Ok(vec![outcome(100, 4000, 5); 3]));
    let dir = std::env::temp_dir().join(format!("ferry-bench-net-test-{}", std::process::id()));
    let r = report(&plan, &found, &dir);
    assert_eq!(r.doc, "net");
    assert_eq!(r.sections.len(), 4);
    let rates = &r.sections[0];
    assert_eq!(rates.rows.len(), 6);
    assert_eq!(rates.rows[0].median(), Some(200.0));
    assert_eq!(rates.rows[0].items, 200);
    assert_eq!(rates.rows[3].absent_reason(), Some("no first echo"));
    assert_eq!(rates.rows[5].absent_reason(), Some("not run"));
    let n = &rates.notes;
    assert!(n.contains("C=1: ferry P=2 >= go P=2: 2.00x (met)"), "{n}");
    assert!(
        n.contains("C=1: ferry P=2 >= tokio 2 workers: 0.50x (not met)"),
        "{n}"
    );
    assert!(
        n.contains("C=10k: ferry P=2 >= go P=2: not measured (not met)"),
        "{n}"
    );
    assert!(n.contains("net-requests.png"), "{n}");
    let latency = &r.sections[1];
    assert_eq!(latency.rows[0].extra, [("p50 ns", 500.0)]);
    let n = &latency.notes;
    assert!(
        n.contains("p99 latency, C=1: ferry P=2 <= go P=2: 0.25x (met)"),
        "{n}"
    );
    assert!(
        n.contains("C=1: ferry P=2 <= tokio 2 workers: 2.00x (not met)"),
        "{n}"
    );
    assert_eq!(r.sections[2].rows[0].median(), Some(5000.0));
    let threads = &r.sections[3];
    assert!(
        threads
            .notes
            .contains("C=1: ferry P=2 <= processors + 8 = 10: 9 (met)")
    );
    assert!(
        threads
            .notes
            .contains("C=10k: ferry P=2 <= processors + 8 = 10: not measured")
    );
    let text = r.text();
    assert!(
        text.contains("absent: C=10k / ferry P=2: no first echo"),
        "{text}"
    );
    assert!(
        text.contains("absent: p99 C=10k / ferry P=2: no first echo"),
        "{text}"
    );
    let cases: Vec<&str> = r.sections.iter().map(|s| s.rows[0].case.as_str()).collect();
    assert_eq!(cases, ["C=1", "p99 C=1", "CPU/request C=1", "threads C=1"]);
    assert!(dir.join("net-requests.png").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server on its own std threads that answers each read with `answer`
/// of what was read (`None`: hang up).
fn server(answer: fn(&mut [u8]) -> bool) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 || !answer(&mut buf[..n]) || s.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

fn small_load(addr: std::net::SocketAddr, connections: usize) -> Load {
    Load {
        addr,
        connections,
        warmup: Duration::from_millis(20),
        window: Duration::from_millis(150),
        server: Some(std::process::id()),
    }
}

#[test]
fn the_load_counts_checked_echoes_and_reads_the_server() {
    let addr = server(|_| true);
    let o = load::run(&small_load(addr, 3)).unwrap();
    assert!(o.requests > 0);
    assert!(o.checked >= o.requests + 3, "{o:?}");
    assert!(o.p50_ns > 0 && o.p50_ns <= o.p99_ns, "{o:?}");
    assert!(o.window_ns >= 150_000_000, "{o:?}");
    assert!(o.server_cpu_ns.is_some());
    assert!(o.server_threads.unwrap() >= 2, "{o:?}");
}

#[test]
fn a_changed_byte_fails_the_run() {
    let addr = server(|buf| {
        if let Some(b) = buf.get_mut(40) {
            *b ^= 1;
        }
        true
    });
    let e = load::run(&small_load(addr, 2)).unwrap_err();
    assert!(e.contains("differs at byte 40"), "{e}");
    // The first byte of the echo of request 1 of connection 0.
    assert!(e.contains("connection 0: echo of request 1"), "{e}");
}

#[test]
fn a_server_that_hangs_up_fails_the_run() {
    let addr = server(|_| false);
    let e = load::run(&small_load(addr, 2)).unwrap_err();
    assert!(e.contains("closed by the server"), "{e}");
    let refused = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let e = load::run(&small_load(refused, 1)).unwrap_err();
    assert!(e.contains("connect 1 of 1"), "{e}");
}

#[test]
fn the_listener_accepts_on_loopback() {
    let (fd, addr) = run::listener(BACKLOG).unwrap();
    assert!(addr.ip().is_loopback() && addr.port() != 0);
    let listener = TcpListener::from(fd);
    let _client = TcpStream::connect(addr).unwrap();
    listener.accept().unwrap();
}
