//! The `gravity` command as a job: its JSON line carries the run's numbers,
//! both kinds of threads give the same energies, and bad options fail with
//! a message and a non-zero status.

use std::process::{Command, Output};

/// Runs the command with `args`.
fn gravity(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gravity"))
        .args(args)
        .output()
        .expect("cannot start gravity")
}

/// The JSON line of a successful run with `args` (and `--json`).
fn json(args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = gravity(&all);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    serde_json::from_str(&text).unwrap()
}

#[test]
fn json_line_carries_the_run() {
    let common = ["--bodies", "300", "--steps", "3", "--workers", "3"];
    let ferry = json(&[&common[..], &["--threads", "ferry", "--processors", "2"]].concat());
    let std = json(&[&common[..], &["--threads", "std"]].concat());
    for (v, kind) in [(&ferry, "ferry"), (&std, "std")] {
        assert_eq!(v["bodies"], 300);
        assert_eq!(v["steps"], 3);
        assert_eq!(v["workers"], 3);
        assert_eq!(v["threads"], kind);
        assert!(v["elapsed_s"].as_f64().unwrap() > 0.0);
        let (e0, e1) = (
            v["energy_start"].as_f64().unwrap(),
            v["energy_end"].as_f64().unwrap(),
        );
        assert!(e0 < 0.0 && e1 < 0.0, "a bound sphere: {e0} {e1}");
        let drift = v["drift"].as_f64().unwrap();
        assert_eq!(drift, ((e1 - e0) / e0).abs());
        let phases: Vec<f64> = v["phase_s"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_f64().unwrap())
            .collect();
        assert_eq!(phases.len(), 5);
        assert!(phases.iter().all(|&p| p > 0.0), "{phases:?}");
        assert!(phases.iter().sum::<f64>() <= v["elapsed_s"].as_f64().unwrap());
    }
    assert_eq!(ferry["energy_start"], std["energy_start"]);
    assert_eq!(ferry["energy_end"], std["energy_end"]);
}

#[test]
fn text_output_names_the_run() {
    let out = gravity(&[
        "--bodies",
        "64",
        "--steps",
        "1",
        "--workers",
        "1",
        "--threads",
        "std",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("gravity: 64 bodies, 1 steps, 1 std workers"),
        "{text}"
    );
    assert!(text.contains("drift"), "{text}");
}

#[test]
fn bad_options_fail_with_a_message() {
    for (args, says) in [
        (&["--bodies", "1"][..], "1 bodies"),
        (&["--workers", "0"][..], "worker"),
        (&["--theta=-1"][..], "opening angle"),
        (&["--dt", "0"][..], "time step"),
        (&["--threads", "green"][..], "green"),
        (&["--steps", "many"][..], "many"),
    ] {
        let out = gravity(args);
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
