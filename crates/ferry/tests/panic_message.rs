//! A ferry thread's panic message names the ferry thread (id and name), not
//! the kernel thread it ran on, and a hook the program sets later still
//! wins. Each case runs this test binary again as a child process (the
//! `FERRY_PANIC_TEST_CHILD` variable picks the role) and reads its stderr.

use std::env;
use std::process::Command;

const CHILD_ROLE: &str = "FERRY_PANIC_TEST_CHILD";

/// Runs this binary's test `name` alone with child role `role`; returns its
/// stderr after checking that it exited with status 0.
fn run_child(name: &str, role: &str) -> String {
    let out = Command::new(env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ROLE, role)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("run child");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "child {role}: {:?}\n{stderr}",
        out.status
    );
    stderr
}

/// In the child: a runtime whose thread named `name` panics with
/// "boom 42"; prints the thread's id and how the join ended.
fn panic_in_named_thread(set_user_hook: bool) {
    let r = ferry::Runtime::builder()
        .processors(2)
        .run(move || {
            if set_user_hook {
                std::panic::set_hook(Box::new(|_| eprintln!("child: the user's hook ran")));
            }
            let h = ferry::thread::Builder::new()
                .name("panicky-worker")
                .spawn(|| {
                    eprintln!("child: thread {}", ferry::current().id().as_u64());
                    panic!("boom {}", 42);
                })
                .unwrap();
            h.join().is_err()
        })
        .unwrap();
    eprintln!("child: join returned Err: {r}");
    std::process::exit(0);
}

fn thread_id(stderr: &str) -> &str {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("child: thread "))
        .unwrap_or_else(|| panic!("the child's thread ran:\n{stderr}"))
}

#[test]
fn a_ferry_threads_panic_names_the_ferry_thread() {
    const NAME: &str = "a_ferry_threads_panic_names_the_ferry_thread";
    if env::var(CHILD_ROLE).as_deref() == Ok("ferry") {
        panic_in_named_thread(false);
    }
    let stderr = run_child(NAME, "ferry");
    let id = thread_id(&stderr);
    let head = format!("thread 'panicky-worker' (ferry thread {id}) panicked at ");
    let line = stderr
        .lines()
        .find(|l| l.starts_with(&head))
        .unwrap_or_else(|| panic!("no line starting {head:?}:\n{stderr}"));
    assert!(line.contains("panic_message.rs:"), "{line}");
    assert!(stderr.contains(&format!("{line}\nboom 42\n")), "{stderr}");
    assert!(stderr.contains("RUST_BACKTRACE"), "{stderr}");
    assert!(!stderr.contains("ferry-activation"), "{stderr}");
    assert!(
        stderr.contains("child: join returned Err: true"),
        "{stderr}"
    );
}

#[test]
fn a_hook_set_after_the_runtime_started_wins() {
    const NAME: &str = "a_hook_set_after_the_runtime_started_wins";
    if env::var(CHILD_ROLE).as_deref() == Ok("user") {
        panic_in_named_thread(true);
    }
    let stderr = run_child(NAME, "user");
    thread_id(&stderr);
    assert!(stderr.contains("child: the user's hook ran"), "{stderr}");
    assert!(!stderr.contains("panicked at"), "{stderr}");
    assert!(
        stderr.contains("child: join returned Err: true"),
        "{stderr}"
    );
}
