//! The hidden `ferry serve`: a real second process that answers the echo
//! interface over `ferry::rpc` and the same echo over a Unix socket.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ferry::rpc::{Client, Error, RuntimeDir};

/// The echo interface's version hash (`ferry serve`'s `ECHO_VERSION`).
const ECHO_VERSION: u64 = 0x6665_7272_7945_6301;

struct Served {
    child: Child,
    dir: PathBuf,
}

impl Served {
    /// Starts `ferry serve` in a fresh directory (`--parent` this process)
    /// and waits for its `ready` line.
    fn start(tag: &str) -> Served {
        let dir =
            std::env::temp_dir().join(format!("ferry-cli-serve-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut child = Command::new(env!("CARGO_BIN_EXE_ferry"))
            .arg("serve")
            .arg("--dir")
            .arg(&dir)
            .args(["--name", "echo-test", "--parent"])
            .arg(std::process::id().to_string())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), format!("ready {}", child.id()));
        Served { child, dir }
    }

    fn runtime_dir(&self) -> RuntimeDir {
        RuntimeDir::open(&self.dir, rustix::process::getuid().as_raw()).unwrap()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn serve_answers_echo_calls_from_another_process_until_killed() {
    let mut served = Served::start("echo");
    let dir = served.runtime_dir();
    let pid = served.child.id() as i32;
    let client = ferry::Runtime::builder()
        .processors(1)
        .run(move || {
            let client = Client::connect_in(&dir, "echo-test", ECHO_VERSION).unwrap();
            assert_eq!(client.peer().pid, pid);
            for i in 0..2000u32 {
                let args = i.to_le_bytes().repeat(i as usize % 300);
                assert_eq!(client.call(0, &args).unwrap(), args);
            }
            assert!(matches!(
                client.call(1, b""),
                Err(Error::UnknownOp { op: 1 })
            ));
            assert!(matches!(
                Client::connect_in(&dir, "echo-test", ECHO_VERSION + 1),
                Err(Error::VersionMismatch { .. })
            ));
            client
        })
        .unwrap();
    drop(client);
    served.child.kill().unwrap();
    served.child.wait().unwrap();
}

#[test]
fn serve_echoes_length_prefixed_frames_on_its_unix_socket() {
    let served = Served::start("unix");
    let mut s = UnixStream::connect(served.dir.join("echo-test.unix")).unwrap();
    for payload in [&b""[..], b"hello", &[9u8; 70_000][..]] {
        let mut frame = (payload.len() as u32).to_le_bytes().to_vec();
        frame.extend_from_slice(payload);
        s.write_all(&frame).unwrap();
        let mut back = vec![0; frame.len()];
        s.read_exact(&mut back).unwrap();
        assert_eq!(back, frame);
    }
    // A length over the maximum: the server hangs up rather than allocate.
    s.write_all(&u32::MAX.to_le_bytes()).unwrap();
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
}

#[test]
fn serve_refuses_to_start_when_its_parent_is_not_the_one_named() {
    let dir = std::env::temp_dir().join(format!("ferry-cli-serve-orphan-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .arg("serve")
        .arg("--dir")
        .arg(&dir)
        .args(["--parent", "1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("parent 1 is gone"));
    assert!(!dir.exists(), "it refused before making its directory");
}

/// Whether process `pid` is gone or a zombie (dead, not yet reaped).
fn dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

#[test]
fn serve_dies_with_its_parent() {
    // A shell is the parent: it starts `ferry serve --parent $$` in the
    // background, says its pid, and waits; killing the shell must kill it.
    let dir = std::env::temp_dir().join(format!("ferry-cli-serve-pdeath-{}", std::process::id()));
    let script = format!(
        "{} serve --dir {} --parent $$ & echo child $!; wait",
        env!("CARGO_BIN_EXE_ferry"),
        dir.display()
    );
    let mut shell = Command::new("sh")
        .args(["-c", &script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(shell.stdout.take().unwrap());
    let (mut pid, mut ready) = (None, false);
    let mut line = String::new();
    while pid.is_none() || !ready {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the shell ended early"
        );
        if let Some(p) = line.trim().strip_prefix("child ") {
            pid = Some(p.parse::<u32>().unwrap());
        }
        ready |= line.starts_with("ready");
    }
    let pid = pid.unwrap();
    assert!(!dead(pid));
    shell.kill().unwrap();
    shell.wait().unwrap();
    // Not a timing assertion: a bound so that a failure is a failure, not
    // a hang.
    let give_up = Instant::now() + Duration::from_secs(30);
    while !dead(pid) {
        assert!(Instant::now() < give_up, "ferry serve outlived its parent");
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
