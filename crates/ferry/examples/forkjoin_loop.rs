//! A loop of 1-processor FORK;JOIN (spawn a null thread, join it), and of
//! the other hot rows, for `perf record`/`perf stat` and quick A/B looks:
//! `cargo run --release -p ferry --example forkjoin_loop -- [row] [seconds]`,
//! row one of `forkjoin` (default), `fork`, `yield`, `control` (map
//! inserts and removes, no ferry call: the machine's own spread); prints the kernel
//! thread's CPU time per operation (which leaves out the time other
//! processes took the core) over rounds of 2,048 operations: the minimum,
//! 10th percentile and median of the rounds.

fn fork_join(n: u64) {
    for _ in 0..n {
        ferry::spawn(|| {}).join().unwrap();
    }
}

fn fork(n: u64) {
    let mut hs = Vec::with_capacity(32);
    for _ in 0..n / 32 {
        for _ in 0..32 {
            hs.push(ferry::spawn(|| {}));
        }
        for h in hs.drain(..) {
            h.join().unwrap();
        }
    }
}

/// A control: ordinary branchy, allocating work (a map of boxes, one
/// insert or remove per operation), no ferry call, so its spread is the
/// machine's own. (On the development VM it slows by about a third in the
/// host's slow phases, while fork+join slows by up to 1.8x.)
fn control(n: u64) {
    use std::cell::RefCell;
    use std::collections::BTreeMap;
    type Boxes = BTreeMap<u64, Box<[u8; 64]>>;
    thread_local! {
        static STATE: RefCell<(Boxes, u64)> = const { RefCell::new((BTreeMap::new(), 12345)) };
    }
    STATE.with_borrow_mut(|(map, x)| {
        for _ in 0..n {
            *x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = (*x >> 33) % 4096;
            if map.remove(&k).is_none() {
                map.insert(k, Box::new([k as u8; 64]));
            }
        }
    });
}

fn yields(n: u64) {
    let a = ferry::spawn(move || (0..n / 2).for_each(|_| ferry::yield_now()));
    let b = ferry::spawn(move || (0..n / 2).for_each(|_| ferry::yield_now()));
    a.join().unwrap();
    b.join().unwrap();
}

/// The calling kernel thread's CPU time, ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn main() {
    let mut args = std::env::args().skip(1);
    let row = args.next().unwrap_or_else(|| "forkjoin".into());
    let secs: f64 = args.next().map_or(1.0, |s| s.parse().unwrap());
    let f: fn(u64) = match row.as_str() {
        "forkjoin" => fork_join,
        "fork" => fork,
        "yield" => yields,
        "control" => control,
        other => panic!("unknown row {other}"),
    };
    let rounds = (secs * 2000.0) as usize;
    let ns = ferry::Runtime::builder()
        .processors(1)
        .run(move || {
            // Rounds of about half a millisecond: short enough that many run
            // undisturbed on a shared machine, so the minimum says what an
            // operation costs alone.
            let n = 2048u64;
            f(n);
            let mut v: Vec<f64> = (0..rounds.max(1))
                .map(|_| {
                    let c = thread_cpu_ns();
                    f(n);
                    (thread_cpu_ns() - c) as f64 / n as f64
                })
                .collect();
            v.sort_by(f64::total_cmp);
            (v[0], v[v.len() / 10], v[v.len() / 2])
        })
        .unwrap();
    println!(
        "{row}: cpu ns/op min {:.2} p10 {:.2} median {:.2}",
        ns.0, ns.1, ns.2
    );
}
