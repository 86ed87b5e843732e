//! `ferry top --once --json` against real ferry processes (`ferry serve`,
//! each a runtime with a chosen processor count), each test in a runtime
//! directory of its own (`XDG_RUNTIME_DIR` set for the children only): live
//! processes are listed with their pids and processor counts, the page of a
//! killed process is skipped and removed, and a page of garbage is reported
//! on its own line while the others are still read.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

/// A temp directory standing for `XDG_RUNTIME_DIR`, removed at the end.
struct Xdg(PathBuf);

impl Xdg {
    fn new(tag: &str) -> Xdg {
        let p = std::env::temp_dir().join(format!("ferry-top-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir(&p).unwrap();
        Xdg(p)
    }

    fn top(&self) -> PathBuf {
        self.0.join("ferry").join("top")
    }
}

impl Drop for Xdg {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A `ferry serve` child, killed when dropped.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `ferry serve` with `processors` processors, serving `name`, and
/// waits for its `ready <pid>` (its page is in place by then).
fn serve(xdg: &Xdg, name: &str, processors: usize) -> (Serve, u32) {
    serve_with(xdg, name, processors, None)
}

/// [`serve`], with `FERRY_STATS` set to `stats` if given.
fn serve_with(xdg: &Xdg, name: &str, processors: usize, stats: Option<&str>) -> (Serve, u32) {
    let mut cmd = Command::new(FERRY);
    if let Some(v) = stats {
        cmd.env("FERRY_STATS", v);
    }
    let mut child = cmd
        .args(["serve", "--name", name, "--processors"])
        .arg(processors.to_string())
        .arg("--dir")
        .arg(xdg.0.join("ferry"))
        .arg("--parent")
        .arg(std::process::id().to_string())
        .env("XDG_RUNTIME_DIR", &xdg.0)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pid = line
        .strip_prefix("ready ")
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("ferry serve said {line:?}"));
    assert_eq!(pid, child.id());
    (Serve(child), pid)
}

/// `ferry top --once --json` on `xdg`'s runtime directory.
fn top_json(xdg: &Xdg) -> Vec<Value> {
    let out = Command::new(FERRY)
        .args(["top", "--once", "--json", "--interval", "50"])
        .env("XDG_RUNTIME_DIR", &xdg.0)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ferry top failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    match serde_json::from_slice(&out.stdout).unwrap() {
        Value::Array(v) => v,
        other => panic!("not an array: {other}"),
    }
}

fn by_pid(doc: &[Value], pid: u32) -> Option<&Value> {
    doc.iter().find(|p| p["pid"] == pid)
}

#[test]
fn two_live_processes_are_listed_with_their_processors() {
    let xdg = Xdg::new("live");
    let (_a, a) = serve(&xdg, "top-a", 2);
    let (_b, b) = serve(&xdg, "top-b", 1);
    let doc = top_json(&xdg);
    assert_eq!(doc.len(), 2, "{doc:?}");
    for (pid, processors, name) in [(a, 2, "top-a"), (b, 1, "top-b")] {
        let p = by_pid(&doc, pid).unwrap_or_else(|| panic!("{pid} missing: {doc:?}"));
        assert_eq!(p["processors"], processors);
        assert_eq!(p["cores"].as_array().unwrap().len(), processors);
        assert_eq!(p["command"], "ferry");
        assert_eq!(p["allocation"], Value::Null);
        assert_eq!(p["channels"][0]["kind"], "server");
        assert_eq!(p["channels"][0]["name"], name);
        assert!(p["writes"].as_u64().unwrap() >= 1);
        assert!(p.get("error").is_none());
    }
}

#[test]
fn ferry_stats_off_publishes_no_page() {
    let xdg = Xdg::new("off");
    let (_on, on) = serve(&xdg, "top-on", 1);
    let (_off, off) = serve_with(&xdg, "top-off", 1, Some("off"));
    let doc = top_json(&xdg);
    assert!(by_pid(&doc, on).is_some(), "{doc:?}");
    assert!(by_pid(&doc, off).is_none(), "{doc:?}");
    assert!(!xdg.top().join(off.to_string()).exists());
}

#[test]
fn a_dead_process_page_is_skipped_and_removed() {
    let xdg = Xdg::new("dead");
    let (_live, live) = serve(&xdg, "top-live", 1);
    let (mut dead, gone) = serve(&xdg, "top-dead", 1);
    dead.0.kill().unwrap(); // SIGKILL: its runtime cannot remove its page
    dead.0.wait().unwrap();
    let page = xdg.top().join(gone.to_string());
    assert!(page.exists(), "a killed process left no page to clean");
    let doc = top_json(&xdg);
    assert!(
        by_pid(&doc, gone).is_none(),
        "a dead process listed: {doc:?}"
    );
    assert!(by_pid(&doc, live).is_some());
    assert!(!page.exists(), "the dead process's page was not removed");
}

/// Writes `bytes` as the page named `name`.
fn scribble(top: &Path, name: &str, bytes: &[u8]) {
    std::fs::write(top.join(name), bytes).unwrap();
}

#[test]
fn garbage_pages_are_reported_not_a_crash() {
    let xdg = Xdg::new("garbage");
    let (_live, live) = serve(&xdg, "top-ok", 1);
    let top = xdg.top();
    // Named after live pids that publish nothing (this test, its parent).
    let me = std::process::id().to_string();
    let parent = std::os::unix::process::parent_id().to_string();
    scribble(&top, &me, &[0xab; 8192]);
    scribble(&top, &parent, b"short");
    scribble(&top, "not-a-pid", &[0; 8192]);
    let doc = top_json(&xdg);
    assert!(by_pid(&doc, live).is_some(), "{doc:?}");
    let error_of = |page: &str| {
        doc.iter()
            .find(|e| e["page"] == page)
            .and_then(|e| e["error"].as_str())
            .unwrap_or_else(|| panic!("no error line for page {page}: {doc:?}"))
            .to_owned()
    };
    assert!(
        error_of(&me).contains("not a stats page"),
        "{}",
        error_of(&me)
    );
    assert!(error_of(&parent).contains("shorter than a page"));
    assert_eq!(doc.len(), 3, "{doc:?}");
    // Reported, never removed: nothing in it can be trusted to say whose it is.
    assert!(top.join(&me).exists());
}
