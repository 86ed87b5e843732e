//! The scene runs as three processes and prints one timeline line per call.

use std::process::Command;

#[test]
fn the_scene_runs_three_processes_and_lists_every_call() {
    let out = Command::new(env!("CARGO_BIN_EXE_urpc-scene"))
        .args(["--threads", "3", "--rounds", "2"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every call checked its reply (else the exit is a failure), and each
    // has its line: 3 threads × 2 rounds × 2 servers.
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with('T')).collect();
    assert_eq!(lines.len(), 12, "{text}");
    for (thread, server) in [("T1", "wm"), ("T3", "file-cache")] {
        let n = lines
            .iter()
            .filter(|l| l.split_whitespace().take(2).eq([thread, server]))
            .count();
        assert_eq!(n, 2, "{thread} {server}: {text}");
    }
    assert!(text.contains("12 calls; "), "{text}");
}

#[test]
fn bad_arguments_are_refused_with_a_message() {
    let out = Command::new(env!("CARGO_BIN_EXE_urpc-scene"))
        .args(["--threads", "many"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--threads"));
}
