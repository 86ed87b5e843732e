//! Smoke test of `ferry-bench net` through the built binary: ferry's echo
//! server (`net-serve --system ferry`) in a process of its own under the
//! load process (`net-load`) at C=2 for a short window, every echoed byte
//! checked by the load; then the whole experiment, reduced to that case,
//! as `net --json` runs it.

use std::io::Read;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_ferry-bench");

#[test]
fn ferry_echoes_every_byte_of_a_small_load() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // The server process inherits the listener: clear close-on-exec (this
    // test binary starts no other process while it is clear).
    rustix::io::fcntl_setfd(&listener, rustix::io::FdFlags::empty()).unwrap();
    let mut server = Command::new(BIN)
        .args(["net-serve", "--system", "ferry", "--fd"])
        .arg(listener.as_raw_fd().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    drop(listener);
    let mut ready = [0u8; 1];
    server
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut ready)
        .unwrap();
    assert_eq!(&ready, b"R");
    let load = Command::new(BIN)
        .args([
            "net-load",
            "--addr",
            &addr.to_string(),
            "--connections",
            "2",
        ])
        .args(["--warmup-ms", "100", "--window-ms", "300"])
        .args(["--server-pid", &server.id().to_string()])
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(load.status.success(), "{load:?}");
    let line = String::from_utf8(load.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    let ok = &v["Ok"];
    assert!(ok.is_object(), "the load failed: {line}");
    let requests = ok["requests"].as_u64().unwrap();
    let checked = ok["checked"].as_u64().unwrap();
    assert!(requests > 0, "{line}");
    // Every echo of the window, of the warm-up and the two first round
    // trips was compared byte for byte with its request.
    assert!(checked >= requests + 2, "{line}");
    assert!(ok["server_threads"].as_u64().unwrap() >= 2, "{line}");
    assert!(ok["server_cpu_ns"].is_u64(), "{line}");
}

#[test]
fn the_experiment_reports_ferry_at_two_connections() {
    let out = Command::new(BIN)
        .args(["net", "--json", "--systems", "ferry", "--connections", "2"])
        .args(["--warmup-ms", "50", "--window-ms", "200"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let units: Vec<&str> = rows.iter().map(|r| r["unit"].as_str().unwrap()).collect();
    assert_eq!(units, ["requests/s", "ns", "ns", "count"], "{stdout}");
    let cases: Vec<&str> = rows.iter().map(|r| r["case"].as_str().unwrap()).collect();
    assert_eq!(cases, ["C=2", "p99 C=2", "CPU/request C=2", "threads C=2"]);
    for r in &rows {
        assert_eq!(r["experiment"], "net");
        assert_eq!(r["system"], "ferry P=2");
        assert_eq!(r["runs"], 3, "{r}");
        assert!(r.get("absent").is_none(), "{r}");
        assert!(r["value"].as_f64().unwrap() > 0.0, "{r}");
    }
}
