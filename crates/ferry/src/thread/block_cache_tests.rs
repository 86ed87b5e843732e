//! A thread's small block (see `header::raw`) goes to the cache of the
//! processor its last reference drops on, and the next spawn there takes
//! it back.
use crate::processor;
use crate::thread;

/// Small blocks this processor keeps now.
fn cached() -> usize {
    crate::upcall::enter()
        .expect("on a processor")
        .cached_blocks()
}

/// A joined thread's block goes to its processor's cache, and the next
/// spawn there takes it back: the same memory, with the new thread's
/// own header and closure.
#[test]
fn a_joined_threads_block_serves_the_next_spawn() {
    crate::Runtime::builder()
        .processors(1)
        .run(|| {
            // The cache starts empty: one spawn and join leave a block.
            thread::spawn(|| ()).join().unwrap();
            let before = cached();
            assert!(before >= 1, "a joined thread's block is kept");
            let first = thread::spawn(|| 1u32);
            assert_eq!(cached(), before - 1, "a spawn takes a kept block");
            let block = first.thread().as_ptr();
            assert_eq!(first.join().unwrap(), 1);
            assert_eq!(cached(), before, "the joined block is kept");
            let second = thread::Builder::new()
                .name("second")
                .spawn(|| (thread::current().name().map(str::to_owned), 2u32))
                .unwrap();
            assert_eq!(second.thread().as_ptr(), block, "the kept block is reused");
            assert_eq!(second.join().unwrap(), (Some("second".to_owned()), 2));
        })
        .unwrap();
}

/// The cache keeps at most `LOCAL_BLOCKS` blocks: a full one gives a
/// magazine to the process's depot (or frees it there, at the depot's
/// bound) and keeps the rest.
#[test]
fn a_processors_block_cache_is_bounded() {
    crate::Runtime::builder()
        .processors(1)
        .run(|| {
            let many = 3 * processor::LOCAL_BLOCKS;
            let handles: Vec<_> = (0..many).map(|i| thread::spawn(move || i)).collect();
            for (i, h) in handles.into_iter().enumerate() {
                assert_eq!(h.join().unwrap(), i);
                assert!(cached() <= processor::LOCAL_BLOCKS);
            }
            // The last spill left `LOCAL_BLOCKS - MAGAZINE` and the joins
            // after it added at most a magazine less one.
            let kept = cached();
            assert!(
                kept > processor::LOCAL_BLOCKS - processor::block_depot::MAGAZINE,
                "{kept} kept"
            );
        })
        .unwrap();
}

/// A processor whose cache is empty takes a magazine from the depot for
/// its next spawn.
#[test]
fn an_empty_cache_refills_from_the_depot() {
    use processor::block_depot::{self, MAGAZINE};
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::sync::atomic::Ordering::{Acquire, Release};

    crate::Runtime::builder()
        .processors(1)
        .run(|| {
            let gate = Arc::new(AtomicBool::new(false));
            let mut held = Vec::new();
            // The depot is the process's: another test may take the
            // magazine between the give and the spawn, so try a few times.
            let refilled = (0..100).any(|_| {
                // Empty this processor's cache: each block it keeps is
                // taken by a thread that parks until the end.
                while cached() > 0 {
                    let gate = gate.clone();
                    held.push(thread::spawn(move || {
                        while !gate.load(Acquire) {
                            thread::park();
                        }
                    }));
                }
                let magazine: Vec<_> = (0..MAGAZINE)
                    .map(|_| crate::header::SmallBlock::try_alloc().expect("memory"))
                    .collect();
                block_depot::give(magazine);
                held.push(thread::spawn(|| ()));
                cached() == MAGAZINE - 1
            });
            assert!(
                refilled,
                "a spawn on an empty cache took the depot's magazine"
            );
            gate.store(true, Release);
            for t in &held {
                t.thread().unpark();
            }
            for t in held {
                t.join().unwrap();
            }
        })
        .unwrap();
}

/// A thread whose closure or result does not fit a small block gets a
/// block of its own: it takes none from the cache, and gives none back.
#[test]
fn a_large_thread_gets_a_block_of_its_own() {
    crate::Runtime::builder()
        .processors(1)
        .run(|| {
            thread::spawn(|| ()).join().unwrap();
            let before = cached();
            assert!(before >= 1);
            let big = [7u8; 1024];
            let h = thread::spawn(move || {
                let mut out = big;
                out[1023] = 9;
                out
            });
            assert_eq!(cached(), before, "a large spawn takes no small block");
            let out = h.join().unwrap();
            assert!(out[..1023].iter().all(|&b| b == 7) && out[1023] == 9);
            assert_eq!(cached(), before, "a large block is not cached");
        })
        .unwrap();
}
