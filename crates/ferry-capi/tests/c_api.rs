//! The C tests: every program under `tests/c/` is compiled with the system
//! `cc` (`c++` for `.cpp`) against `libferry.so` and against `libferry.a`,
//! run, and must print `ok` (or, for `unwind.cpp`, abort with ferry's
//! message).
//!
//! `cargo test` does not build a crate's `cdylib`/`staticlib` for its
//! integration tests, so the harness runs `cargo build -p ferry-capi` (same
//! profile, same target directory) once first; the libraries land beside
//! the test binary's `deps/` directory.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The libraries a Rust static library needs from the system.
const STATIC_DEPS: &[&str] = &[
    "-lgcc_s",
    "-lutil",
    "-lrt",
    "-lpthread",
    "-lm",
    "-ldl",
    "-lc",
];

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `target/<profile>`, where cargo puts `libferry.so` and `libferry.a`,
/// after building them (once per test process).
fn lib_dir() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(build_libraries).clone()
}

fn build_libraries() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
    let target = dir.parent().unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-p", "ferry-capi"])
        .env("CARGO_TARGET_DIR", target)
        .current_dir(crate_dir());
    if dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let out = cmd.output().expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo build -p ferry-capi failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for lib in ["libferry.so", "libferry.a"] {
        assert!(
            dir.join(lib).exists(),
            "{} is missing: build it with `cargo build -p ferry-capi` (cargo test does)",
            dir.join(lib).display()
        );
    }
    dir
}

#[derive(Clone, Copy, Debug)]
enum Link {
    Shared,
    Static,
}

fn compile(source: &Path, link: Link) -> PathBuf {
    let libs = lib_dir();
    let out_dir = libs.join("ferry-capi-ctests");
    std::fs::create_dir_all(&out_dir).unwrap();
    let stem = source.file_stem().unwrap().to_string_lossy();
    let exe = out_dir.join(format!("{stem}-{link:?}").to_lowercase());
    let cpp = source.extension().is_some_and(|e| e == "cpp");
    let mut cmd = Command::new(if cpp { "c++" } else { "cc" });
    if !cpp {
        cmd.arg("-std=c11").arg("-D_GNU_SOURCE");
    }
    cmd.args(["-O2", "-g", "-Wall", "-Wextra", "-Werror", "-pthread"])
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg(source)
        .arg("-o")
        .arg(&exe);
    match link {
        Link::Shared => {
            cmd.arg("-L").arg(&libs).arg("-lferry");
            cmd.arg(format!("-Wl,-rpath,{}", libs.display()));
        }
        Link::Static => {
            cmd.arg(libs.join("libferry.a")).args(STATIC_DEPS);
        }
    }
    let out = cmd.output().expect("the system C compiler (cc) runs");
    assert!(
        out.status.success(),
        "compiling {} ({link:?}) failed:\n{}",
        source.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

fn run(name: &str, env: &[(&str, &str)]) {
    let source = crate_dir().join("tests/c").join(name);
    for link in [Link::Shared, Link::Static] {
        let exe = compile(&source, link);
        let out = Command::new(&exe)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.lines().any(|l| l == "ok"),
            "{name} ({link:?}) failed: {:?}\nstdout:\n{stdout}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn fork_join_ten_thousand() {
    run("fork_join.c", &[]);
}

#[test]
fn mutex_hundred_threads_ten_thousand_increments() {
    run("mutex_counter.c", &[("FERRY_PROCESSORS", "2")]);
}

#[test]
fn bounded_buffer_with_two_conditions() {
    run("bounded_buffer.c", &[("FERRY_PROCESSORS", "2")]);
}

#[test]
fn exit_from_a_nested_call_and_name_data_round_trips() {
    run("exit_and_data.c", &[("FERRY_PROCESSORS", "1")]);
}

#[test]
fn p_v_semaphore_of_003_under_contention() {
    run("pv_semaphore.c", &[("FERRY_PROCESSORS", "2")]);
}

#[test]
fn thread_control_misuse_is_refused() {
    run("misuse.c", &[("FERRY_PROCESSORS", "2")]);
}

#[test]
fn join_detach_and_terminate_paths_of_the_join_right() {
    run("join_paths.c", &[("FERRY_PROCESSORS", "2")]);
}

#[test]
fn a_terminated_waiter_passes_its_wakeup_on() {
    run("terminate_waiters.c", &[("FERRY_PROCESSORS", "1")]);
}

#[test]
fn suspend_wait_resume_and_info_on_another_thread() {
    run("control.c", &[("FERRY_PROCESSORS", "2")]);
}

#[test]
fn errno_is_per_cthread_across_yields_and_moves() {
    run("errno_moves.c", &[("FERRY_PROCESSORS", "2")]);
}

#[test]
fn fork_keeps_only_the_calling_thread_and_ferry_works_in_the_child() {
    run("fork_child.c", &[("FERRY_PROCESSORS", "2")]);
}

#[test]
fn signals_arrive_as_messages_to_the_waiting_thread() {
    run("signal_wait.c", &[("FERRY_PROCESSORS", "2")]);
}

#[test]
fn blocking_calls_keep_the_one_processor_running() {
    run("blocking_pipe.c", &[]);
}

#[test]
fn a_cpp_exception_out_of_a_cthread_aborts_with_a_message() {
    let source = crate_dir().join("tests/c/unwind.cpp");
    for link in [Link::Shared, Link::Static] {
        let exe = compile(&source, link);
        let out = Command::new(&exe).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGABRT),
            "{link:?}: {stderr}"
        );
        assert!(stderr.contains("unwound"), "{link:?}: {stderr}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("not reached"));
    }
}

/// The README's example, built the documented way: `pkg-config --cflags
/// --libs ferry` with the `ferry.pc` cargo's build wrote.
#[test]
fn the_example_builds_with_pkg_config_and_runs() {
    let libs = lib_dir();
    let pc_dir = libs.join("pkgconfig");
    let flags = Command::new("pkg-config")
        .args(["--cflags", "--libs", "ferry"])
        .env("PKG_CONFIG_PATH", &pc_dir)
        .output()
        .expect("pkg-config runs");
    assert!(
        flags.status.success(),
        "pkg-config found no ferry.pc in {}: {}",
        pc_dir.display(),
        String::from_utf8_lossy(&flags.stderr)
    );
    let flags = String::from_utf8(flags.stdout).unwrap();
    let exe = libs.join("ferry-capi-ctests").join("hello_cthreads");
    std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
    let source = crate_dir().join("../../examples/c/hello_cthreads.c");
    let out = Command::new("cc")
        .args(["-O2", "-Wall", "-Werror"])
        .arg(&source)
        .args(flags.split_whitespace())
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(&exe).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("reader got 5 bytes: hello"), "{stdout}");
    assert!(
        stdout.contains("total 3199960000 (expected 3199960000)"),
        "{stdout}"
    );
}
