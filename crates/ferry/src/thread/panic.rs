//! The panic message of a ferry thread: a panic hook that names the
//! user-level thread that panicked (its ferry id and name) rather than the
//! kernel thread it happened to run on (`ferry-activation-2`), which is
//! all std's default hook knows. This room owns only that hook; it must
//! not change what a panic does (unwinding, `join` returning `Err`), and
//! must leave every panic off a ferry thread to the hook it replaced.
//!
//! The hook is installed once per process, when the first runtime starts,
//! on top of whatever hook was in place then:
//!
//! - on a ferry thread it prints, as std's default hook would but for the
//!   thread's identity,
//!   `thread '<name>' (ferry thread <id>) panicked at <file>:<line>:<col>:`,
//!   the message, and a backtrace or the note about `RUST_BACKTRACE`;
//! - anywhere else it calls the hook it replaced.
//!
//! A hook the program sets after the runtime started replaces ferry's and
//! wins everywhere, as any later `std::panic::set_hook` does. One set
//! before the first runtime started still runs for panics off ferry
//! threads, but not for those on them: a program with its own panic hook
//! sets it inside the runtime (or after starting it).

use std::backtrace::Backtrace;
use std::panic::PanicHookInfo;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

/// Installs ferry's panic hook, once per process; later calls do nothing.
pub(crate) fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| match super::try_current() {
            Some(me) => report(me.id().as_u64(), me.name(), info),
            None => previous(info),
        }));
    });
}

/// Prints a ferry thread's panic to stderr in one write.
fn report(id: u64, name: Option<&str>, info: &PanicHookInfo<'_>) {
    let mut text = message(id, name, info);
    match std::env::var_os("RUST_BACKTRACE") {
        Some(v) if v != "0" => {
            text.push_str(&format!(
                "stack backtrace:\n{}\n",
                Backtrace::force_capture()
            ));
        }
        _ => {
            // As std does: the note once per process.
            static NOTED: AtomicBool = AtomicBool::new(false);
            if !NOTED.swap(true, Ordering::Relaxed) {
                text.push_str(
                    "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n",
                );
            }
        }
    }
    eprint!("{text}");
}

/// The first lines of the report: who panicked, where, and the message.
fn message(id: u64, name: Option<&str>, info: &PanicHookInfo<'_>) -> String {
    let payload = info.payload();
    let msg = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("Box<dyn Any>");
    let at = info
        .location()
        .map(|l| format!(" at {}:{}:{}", l.file(), l.line(), l.column()))
        .unwrap_or_default();
    format!(
        "thread '{}' (ferry thread {id}) panicked{at}:\n{msg}\n",
        name.unwrap_or("<unnamed>")
    )
}
