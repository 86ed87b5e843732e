//! `ferry serve --grpc`: the tour's typed interface served by another
//! process on both paths at once, called here by name and by the URL its
//! ready line gives, with a client generated from the same declaration.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use ferry::rpc::RuntimeDir;

/// The same declaration as the tour's (`src/greeter.rs`): the same version
/// hash and gRPC service.
#[ferry::interface(grpc)]
pub trait Greeter {
    fn greet(&self, name: String) -> String;
}

struct Served {
    child: Child,
    dir: std::path::PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn serve_grpc_answers_the_same_call_locally_and_over_grpc() {
    let dir = std::env::temp_dir().join(format!("ferry-cli-serve-grpc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .arg("serve")
        .arg("--dir")
        .arg(&dir)
        .args(["--name", "greet-test", "--grpc", "127.0.0.1:0", "--parent"])
        .arg(std::process::id().to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pid = child.id();
    let served = Served { child, dir };
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words.len(), 3, "{line:?}");
    assert_eq!(words[..2], ["ready".to_owned(), pid.to_string()]);
    let url = words[2].to_owned();
    assert!(
        url.starts_with("grpc://127.0.0.1:") && url.ends_with("/greet-test"),
        "{url}"
    );
    let rt_dir = RuntimeDir::open(&served.dir, rustix::process::getuid().as_raw()).unwrap();
    let (local, remote, thread) = ferry::Runtime::builder()
        .processors(1)
        .run(move || {
            let local = GreeterClient::connect_in(&rt_dir, "greet-test").unwrap();
            let remote = GreeterClient::connect(&url).unwrap();
            assert!(remote.client().is_remote() && !local.client().is_remote());
            (
                local.greet("test".into()).unwrap(),
                remote.greet("test".into()).unwrap(),
                ferry::current().id().as_u64(),
            )
        })
        .unwrap();
    let me = std::process::id();
    let expected = format!("hello test, from pid {pid}, for thread {thread} of pid {me}");
    assert_eq!(local, expected);
    assert_eq!(remote, expected);
}

#[test]
fn serve_refuses_grpc_with_chain_or_an_address_that_does_not_parse() {
    let dir = std::env::temp_dir().join(format!("ferry-cli-serve-grpc-bad-{}", std::process::id()));
    for (args, says) in [
        (
            &["--chain", "--grpc", "127.0.0.1:0"][..],
            "cannot be used with",
        ),
        (&["--grpc", "localhost"][..], "invalid value 'localhost'"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
            .arg("serve")
            .arg("--dir")
            .arg(&dir)
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!dir.exists(), "it refused before making its directory");
    }
}
