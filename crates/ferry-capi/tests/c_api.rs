//! The C tests: every program under `tests/c/` is compiled with the system
//! `cc` (`c++` for `.cpp`) at -O2 against `libferry.so` and against
//! `libferry.a`, run, and must print `ok` (or, for `unwind.cpp`, abort with
//! ferry's message). The tests of what the compiler may do with the headers
//! (errno, every name at `-Wall -Werror`) build with gcc and, when it is
//! installed, clang; errno's also at -O3 and with -flto. A run that has not
//! ended after two minutes is killed and fails its test.
//!
//! `cargo test` does not build a crate's `cdylib`/`staticlib` for its
//! integration tests, so the harness runs `cargo build -p ferry-capi` (same
//! profile, same target directory) once first; the libraries land beside
//! the test binary's `deps/` directory.

mod support;

use std::path::PathBuf;
use std::process::Command;

use support::*;

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
fn mutex_and_condition_misuse_is_answered_through_errno() {
    run("mutex_misuse.c", &[("FERRY_PROCESSORS", "2")]);
}

#[test]
fn spin_locks_keep_a_counter_exact_under_preempted_holders() {
    run(
        "spin_locks.c",
        &[("FERRY_PROCESSORS", "2"), ("FERRY_TIME_SLICE", "200us")],
    );
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

/// errno in plain C, written and read around switches with no helper
/// functions, whatever the compiler, optimisation, LTO and include order.
#[test]
fn a_spinning_thread_is_stopped_resumed_and_terminated_without_a_time_slice() {
    run(
        "control_spin.c",
        &[("FERRY_PROCESSORS", "2"), ("FERRY_TIME_SLICE", "off")],
    );
}

#[test]
fn a_thread_in_a_blocking_read_is_stopped_terminated_and_aborted() {
    for processors in ["1", "2"] {
        run(
            "control_call.c",
            &[
                ("FERRY_PROCESSORS", processors),
                ("FERRY_TIME_SLICE", "off"),
            ],
        );
    }
}

#[test]
fn errno_is_per_cthread_across_yields_and_moves() {
    run_everywhere(
        "errno_moves.c",
        &["", "-DERRNO_FIRST"],
        &[("FERRY_PROCESSORS", "2")],
    );
}

/// errno stays per cthread when a short time slice preempts a thread
/// between its errno accesses, with no switching call in between.
#[test]
fn errno_is_per_cthread_under_preemption() {
    run_with_each_compiler(
        "errno_preempted.c",
        &[("FERRY_PROCESSORS", "2"), ("FERRY_TIME_SLICE", "50us")],
    );
}

/// A thread forking and joining without pause, terminated fifty times:
/// the C API's own locks are never left held by a stopped thread.
#[test]
fn terminating_a_forking_thread_leaves_no_lock_held() {
    for processors in ["1", "2"] {
        run(
            "terminate_forker.c",
            &[
                ("FERRY_PROCESSORS", processors),
                ("FERRY_TIME_SLICE", "off"),
            ],
        );
    }
}

/// Every name in the headers, in one program built with `-Wall -Wextra
/// -Werror` by gcc and clang.
#[test]
fn a_program_using_every_name_in_the_headers_builds_cleanly_and_runs() {
    run_with_each_compiler("every_name.c", &[]);
}

/// The replacement for `__thread` in a cthread: `cthread_set_data` /
/// `cthread_data` follow the cthread across yields and processors.
#[test]
fn per_cthread_data_follows_the_thread_across_processors() {
    run("thread_data.c", &[("FERRY_PROCESSORS", "2")]);
}

/// A pthread whose call is the program's first ferry call: the runtime
/// starts without adopting it, so it returns on its own kernel thread and
/// `pthread_join` in `main` returns. Twenty runs of each link: a hang in
/// any is killed and fails the test.
#[test]
fn a_first_call_from_a_pthread_never_hangs_its_join() {
    let source = crate_dir().join("tests/c/pthread_first.c");
    for link in [Link::Shared, Link::Static] {
        let exe = compile(&source, link);
        for i in 0..20 {
            check_run(
                &exe,
                &[("FERRY_PROCESSORS", "2")],
                &format!("pthread_first.c ({link:?}, run {i})"),
            );
        }
    }
}

#[test]
fn fork_keeps_only_the_calling_thread_and_ferry_works_in_the_child() {
    run("fork_child.c", &[("FERRY_PROCESSORS", "2")]);
}

#[test]
fn signals_arrive_as_messages_to_the_waiting_thread() {
    run("signal_wait.c", &[("FERRY_PROCESSORS", "2")]);
}

/// Alerts aborting `ferry_read` and `ferry_blocking` (during the call and
/// at its entry), blocked alerts, priorities and run time, built with gcc
/// and clang.
#[test]
fn alerts_abort_blocking_calls_and_priorities_order_threads() {
    run_with_each_compiler(
        "alerts.c",
        &[("FERRY_PROCESSORS", "1"), ("FERRY_TIME_SLICE", "off")],
    );
}

/// Streams: 002's write-then-read-back loops, two producers (one on a
/// cloned end) and a consumer, EAGAIN, EPIPE, end-of-file and bad
/// arguments, built with gcc and clang.
#[test]
fn streams_move_bytes_in_order_with_a_pipes_semantics() {
    run_with_each_compiler("streams.c", &[("FERRY_PROCESSORS", "2")]);
}

/// Streams between processes: a forked peer's numbers in order then
/// end-of-file and an answer back; a peer killed mid-stream is
/// ECONNRESET to a read and EPIPE to a write; ENOENT, EINVAL, EADDRINUSE
/// and EFAULT; built with gcc and clang.
#[test]
fn streams_between_processes_from_c() {
    run_with_each_compiler("stream_remote.c", &[("FERRY_PROCESSORS", "2")]);
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
        let out = run_exe(&exe, &[]).expect("unwind.cpp hung");
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

/// Two cthreads that each hold the mutex the other wants, and `main`
/// joining them: the process aborts with a report naming both cthreads and
/// the mutexes they wait on, instead of hanging.
#[test]
fn a_two_mutex_deadlock_is_reported_naming_both_cthreads() {
    use std::os::unix::process::ExitStatusExt;
    let source = crate_dir().join("tests/c/deadlock.c");
    for_each_build(&source, |exe, build| {
        for processors in ["1", "2"] {
            let what = format!("deadlock.c ({build}, {processors} processors)");
            let out = run_exe(exe, &[("FERRY_PROCESSORS", processors)])
                .unwrap_or_else(|| panic!("{what} hung instead of reporting the deadlock"));
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{what}: {stderr}");
            assert!(stderr.contains("deadlock"), "{what}: {stderr}");
            for name in ["\"alpha\": Mutex at", "\"beta\": Mutex at"] {
                assert!(stderr.contains(name), "{what}: no {name} in\n{stderr}");
            }
            assert!(!String::from_utf8_lossy(&out.stdout).contains("not reached"));
        }
    });
}

/// The README's example, built the documented way.
#[test]
fn the_example_builds_with_pkg_config_and_runs() {
    let exe = build_example("hello_cthreads");
    let out = run_exe(&exe, &[]).expect("hello_cthreads hung");
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

/// Programs 2-4 of the Synthesis paper's Appendix A (write then read back
/// 1, 1024 and 4096 bytes, 10,000 times) on a stream and on a pipe: every
/// byte read back is the byte written, and each program reports both.
#[test]
fn synthesis_programs_2_to_4_run_on_a_stream() {
    let exe = build_example("synthesis_pipe");
    let out = run_exe(&exe, &[]).expect("synthesis_pipe hung");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (program, n) in [(2, 1), (3, 1024), (4, 4096)] {
        let line = format!("program {program}, R/W pipe {n}: ferry stream ");
        assert!(stdout.contains(&line), "no `{line}` in\n{stdout}");
    }
    let bad = Command::new(&exe).arg("5000").output().unwrap();
    assert_eq!(bad.status.code(), Some(2), "N above 4096 is refused");
}

/// `stack_overflow.c` built with `cc` (gcc or clang) at -O2 and `flags`,
/// against `libferry.so`.
fn compile_overflow_test(cc: &str, tag: &str, flags: &[&str]) -> PathBuf {
    let libs = lib_dir();
    let out_dir = libs.join("ferry-capi-ctests");
    std::fs::create_dir_all(&out_dir).unwrap();
    let exe = out_dir.join(format!("stack_overflow-{cc}-{tag}"));
    let out = Command::new(cc)
        .args(["-std=c11", "-D_GNU_SOURCE", "-O2", "-g", "-Wall", "-Wextra"])
        .args(["-Werror", "-pthread"])
        .arg("-I")
        .arg(crate_dir().join("include"))
        .args(flags)
        .arg(crate_dir().join("tests/c/stack_overflow.c"))
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(&libs)
        .arg("-lferry")
        .arg(format!("-Wl,-rpath,{}", libs.display()))
        .output()
        .unwrap_or_else(|e| panic!("{cc} runs: {e}"));
    assert!(
        out.status.success(),
        "compiling stack_overflow.c with {cc} {flags:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// The `Cflags` of the `ferry.pc` cargo's build wrote.
fn pkg_config_cflags() -> Vec<String> {
    let out = Command::new("pkg-config")
        .args(["--cflags", "ferry"])
        .env("PKG_CONFIG_PATH", lib_dir().join("pkgconfig"))
        .output()
        .expect("pkg-config runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// A cthread recursing with 5,000-byte frames, built with gcc and (when it
/// is installed) clang,
/// without stack-clash probes and with `ferry.pc`'s flags: the process dies
/// by SIGSEGV with the overflow report naming the thread (ferry id and
/// cthread name), and the other thread's canary never changes.
#[test]
fn a_c_frame_larger_than_a_page_cannot_step_over_the_guard() {
    use std::os::unix::process::ExitStatusExt;
    let cflags = pkg_config_cflags();
    assert!(
        cflags.iter().any(|f| f == "-fstack-clash-protection"),
        "ferry.pc asks for stack-clash probes: {cflags:?}"
    );
    let pc_flags: Vec<&str> = cflags.iter().map(String::as_str).collect();
    let builds: [(&str, &[&str]); 2] = [
        ("no-probes", &["-fno-stack-clash-protection"]),
        ("pkg-config", &pc_flags),
    ];
    for cc in compilers() {
        for (tag, flags) in builds {
            let exe = compile_overflow_test(cc, tag, flags);
            let out = Command::new(&exe)
                .env("FERRY_PROCESSORS", "2")
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            let what = format!("{cc} {tag}: {:?}\nstderr:\n{stderr}", out.status);
            assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{what}");
            assert!(stderr.contains("deep: recursing"), "{what}");
            assert!(!stderr.contains("canary changed"), "{what}");
            assert!(!stderr.contains("recursion returned"), "{what}");
            let report = stderr
                .lines()
                .find(|l| l.starts_with("ferry: thread "))
                .unwrap_or_else(|| panic!("no overflow report: {what}"));
            let id = report["ferry: thread ".len()..].split(' ').next().unwrap();
            assert!(
                !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()),
                "{what}"
            );
            assert!(
                report.contains(r#" "deep-c-frames" overflowed its 256 KiB stack"#),
                "{what}"
            );
        }
    }
}

/// A process that chooses one-page stack guards from C
/// (`ferry_stack_guard_set`, before any other ferry call): the call's codes
/// (out of range, the same page again, a different size once chosen,
/// before and after the runtime starts), and a cthread recursing in
/// 5,000-byte frames built with `ferry.pc`'s flags (stack-clash probes),
/// with gcc and (when it is installed) clang at -O2: the probes touch the
/// guard page, so the process still dies by SIGSEGV with the overflow
/// report naming the thread.
#[test]
fn a_one_page_guard_chosen_from_c_still_stops_probed_frames() {
    use std::os::unix::process::ExitStatusExt;
    let cflags = pkg_config_cflags();
    assert!(cflags.iter().any(|f| f == "-fstack-clash-protection"));
    let mut flags = vec!["-O2"];
    flags.extend(cflags.iter().map(String::as_str));
    for cc in compilers() {
        let tag = format!("-{cc}");
        let exe = compile_with(
            &crate_dir().join("tests/c/stack_guard.c"),
            Link::Shared,
            &Cc {
                compiler: cc,
                flags: &flags,
                tag: &tag,
            },
        );
        let out = Command::new(&exe)
            .env("FERRY_PROCESSORS", "2")
            .env_remove("FERRY_STACK_GUARD")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let what = format!("{cc}: {:?}\nstderr:\n{stderr}", out.status);
        assert!(stderr.contains("codes: ok"), "{what}");
        assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{what}");
        assert!(stderr.contains("deep: recursing"), "{what}");
        assert!(!stderr.contains("recursion returned"), "{what}");
        assert!(
            stderr
                .lines()
                .any(|l| l.starts_with("ferry: thread ")
                    && l.contains(r#" "deep-probed" overflowed"#)),
            "{what}"
        );
    }
}
