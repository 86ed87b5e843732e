//! The runtime's side of processor allocation against a daemon played by
//! the test itself (`ferry::alloc::Registrar` in a fresh runtime
//! directory): a runtime started beside it registers, states its maximum
//! and desire, follows each order (as many processors as cores, none
//! while it owns no core) and acknowledges it, marks idle processors willing to yield, and
//! registers again after the daemon's end of the registration closes.
//!
//! One test in this file: it sets `XDG_RUNTIME_DIR` for the process.
//! Every wait polls with a generous overall timeout.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ferry::alloc::{Ack, CoreSet, OrderInfo, Registrar, Registration};
use ferry::rpc::RuntimeDir;

const PATIENCE: Duration = Duration::from_secs(60);

fn until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < PATIENCE, "waited in vain for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Orders `cores` after generation `prev` and waits for the runtime to
/// acknowledge; returns the generation.
fn order_and_wait(reg: &Registration, prev: u32, cores: &CoreSet) -> u32 {
    let g = reg.page().publish_order(prev, cores, OrderInfo::default());
    until("the acknowledgement", || {
        let words = reg.page().runtime_words();
        words.check(64, g, prev).map(|c| c.ack) == Ok(Ack::Current)
    });
    g
}

#[test]
fn a_runtime_registers_follows_orders_and_registers_again() {
    let xdg = std::env::temp_dir().join(format!("ferry-alloc-client-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&xdg);
    std::fs::create_dir(&xdg).unwrap();
    std::fs::set_permissions(&xdg, std::fs::Permissions::from_mode(0o700)).unwrap();
    // SAFETY: the only test of this binary, before any thread of its own
    // (nothing reads the environment meanwhile).
    unsafe {
        std::env::set_var("XDG_RUNTIME_DIR", &xdg);
        std::env::remove_var("FERRY_ALLOCD");
    }
    let registrar = Registrar::bind_in(&RuntimeDir::user().unwrap()).unwrap();

    let rt = ferry::Runtime::builder()
        .processors(2)
        .max_processors(2)
        .start()
        .unwrap();
    let reg = registrar.accept().unwrap();
    assert_eq!(reg.pid() as u32, std::process::id());
    until("max_processors", || {
        reg.page().runtime_words().max_processors == 2
    });

    let mask = rustix::thread::sched_getaffinity(None).unwrap();
    let cpus: Vec<usize> = (0..rustix::thread::CpuSet::MAX_CPU)
        .filter(|&c| mask.is_set(c))
        .collect();
    let one: CoreSet = cpus[..1].iter().copied().collect();
    let g = order_and_wait(&reg, 0, &one);
    until("one processor", || rt.processors() == 1);
    assert_eq!(reg.page().runtime_words().held, 1);

    // Two cores where there are two, and cores outside the mask skipped.
    let mut two: CoreSet = cpus.iter().take(2).copied().collect();
    two.insert(1023);
    let g = order_and_wait(&reg, g, &two);
    let usable = cpus.len().min(2);
    until("processors as usable cores", || rt.processors() == usable);
    assert_eq!(reg.page().runtime_words().held as usize, usable);

    // No core at all (out of turn): no processor runs, and a thread
    // spawned meanwhile waits until a core is ordered again.
    let g = order_and_wait(&reg, g, &CoreSet::new());
    until("no processor", || rt.processors() == 0);
    assert_eq!(reg.page().runtime_words().held, 0);
    let ran = Arc::new(AtomicBool::new(false));
    let waiting = {
        let ran = Arc::clone(&ran);
        rt.spawn(move || ran.store(true, Ordering::SeqCst)).unwrap()
    };
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        !ran.load(Ordering::SeqCst),
        "a thread ran while the process held no core"
    );
    let g = order_and_wait(&reg, g, &one);
    until("one processor again", || rt.processors() == 1);
    waiting.join().unwrap();
    assert!(ran.load(Ordering::SeqCst));

    // With nothing to run, the processor marks itself willing to yield.
    until("a willing processor", || {
        reg.page().runtime_words().willing[0] == 1
    });

    // Busy threads raise the desire (to the maximum of 2); then it falls.
    let stop = Arc::new(AtomicBool::new(false));
    let busy: Vec<_> = (0..3)
        .map(|_| {
            let stop = Arc::clone(&stop);
            rt.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
            .unwrap()
        })
        .collect();
    until("desired 2", || reg.page().runtime_words().desired == 2);
    until("not willing while busy", || {
        reg.page().runtime_words().willing[0] == 0
    });
    stop.store(true, Ordering::Relaxed);
    for t in busy {
        t.join().unwrap();
    }
    until("desired 1", || reg.page().runtime_words().desired == 1);

    // The daemon's end closes while the process is out of turn: it takes
    // a processor back at once, keeps running and comes back.
    order_and_wait(&reg, g, &CoreSet::new());
    until("no processor before the daemon goes", || {
        rt.processors() == 0
    });
    drop(reg);
    until("a processor without a daemon", || rt.processors() == 1);
    assert_eq!(rt.spawn(|| 6 * 7).unwrap().join().unwrap(), 42);
    let again = registrar.accept().unwrap();
    assert_eq!(again.pid() as u32, std::process::id());
    until("max_processors again", || {
        again.page().runtime_words().max_processors == 2
    });
    order_and_wait(&again, 0, &one);
    assert_eq!(rt.spawn(|| 6 * 7).unwrap().join().unwrap(), 42);
    drop(registrar);
    let _ = std::fs::remove_dir_all(&xdg);
}
