#![cfg(ferry_loom)]
//! Loom model of a stream's ring (`src/stream/ring.rs`, included as it is
//! and compiled against loom's atomics, over a byte array whose every byte
//! is a loom cell, so a write and a read of one byte at once is caught):
//! one writer and one reader; a reader that goes while the writer waits
//! for room; a writer cloned while its bytes are in flight, after which
//! both writers take turns under a lock (the switch of paths); and two
//! readers taking turns while the bytes come. Under every interleaving loom explores, the
//! reader gets every byte once, in order per writer, then end-of-file,
//! and a writer whose readers are gone gets `Broken`.
//!
//! It also models the count of a stream's handles (`src/stream/counted.rs`,
//! included as it is): handles dropped on several threads, first as made
//! and then revived from a spare; exactly one drop recycles the value, and
//! every handle's use of it happens before the recycle (each handle writes
//! a loom cell of its own, which the recycle reads).

use loom::sync::{Arc, Mutex};
use loom::thread;

/// What `ring` reaches through `super::atomic`.
mod atomic {
    pub(crate) use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering, fence};
}

/// `src/stream/bytes.rs`'s interface over loom cells.
#[path = "loom_support/bytes.rs"]
mod bytes;

#[path = "../src/stream/ring.rs"]
#[allow(dead_code)]
mod ring;

use ring::{Put, Ring, Take};

#[path = "../src/stream/counted.rs"]
#[allow(dead_code)]
mod counted;

use counted::{Counted, Recycle, Spare};

fn check(f: impl Fn() + Send + Sync + 'static) {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(3);
    model.check(f);
}

/// Writes all of `src` (waiting by yielding while full), holding the
/// write end under `lock` if there is one; false if the readers went.
fn write_all(ring: &Ring, lock: Option<&Mutex<()>>, mut src: &[u8]) -> bool {
    while !src.is_empty() {
        let _held = lock.map(|l| l.lock().unwrap());
        // SAFETY: the caller is the lone writer, or holds `lock`.
        match unsafe { ring.put(src, 1) } {
            Put::Done(n) => src = &src[n..],
            Put::Full => {
                drop(_held);
                thread::yield_now();
            }
            Put::Broken => return false,
        }
    }
    true
}

/// Reads until end-of-file with a buffer of `chunk` bytes, holding the
/// read end under `lock` if there is one.
fn read_all(ring: &Ring, lock: Option<&Mutex<()>>, chunk: usize) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; chunk];
    loop {
        let held = lock.map(|l| l.lock().unwrap());
        // SAFETY: the caller is the lone reader, or holds `lock`.
        let r = unsafe { ring.take(&mut buf) };
        drop(held);
        match r {
            Take::Done(n) => got.extend_from_slice(&buf[..n]),
            Take::Empty => thread::yield_now(),
            Take::Eof => return got,
        }
    }
}

#[test]
fn one_writer_one_reader_every_byte_once_in_order_then_eof() {
    check(|| {
        let ring = Arc::new(Ring::new(2));
        let w = Arc::clone(&ring);
        let writer = thread::spawn(move || {
            assert!(write_all(&w, None, &[1, 2, 3]));
            w.drop_writer();
        });
        assert_eq!(read_all(&ring, None, 2), [1, 2, 3]);
        writer.join().unwrap();
        assert_eq!((ring.written(), ring.taken()), (3, 3));
    });
}

/// The lone handles' order of tries: the inline try first
/// (`put_all_seen`), then the full path; false if the readers went.
fn write_all_inline_first(ring: &Ring, mut src: &[u8], chunk: usize) -> bool {
    while !src.is_empty() {
        let part = &src[..chunk.min(src.len())];
        // SAFETY: the lone writer.
        if unsafe { ring.put_all_seen(part) } {
            src = &src[part.len()..];
            continue;
        }
        // SAFETY: the lone writer.
        match unsafe { ring.put(part, 1) } {
            Put::Done(n) => src = &src[n..],
            Put::Full => thread::yield_now(),
            Put::Broken => return false,
        }
    }
    true
}

/// The lone reader's order of tries: `take_seen` first, then `take`.
fn read_all_inline_first(ring: &Ring, chunk: usize) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; chunk];
    loop {
        // SAFETY: the lone reader.
        if let Some(n) = unsafe { ring.take_seen(&mut buf) } {
            got.extend_from_slice(&buf[..n]);
            continue;
        }
        // SAFETY: the lone reader.
        match unsafe { ring.take(&mut buf) } {
            Take::Done(n) => got.extend_from_slice(&buf[..n]),
            Take::Empty => thread::yield_now(),
            Take::Eof => return got,
        }
    }
}

#[test]
fn the_inline_tries_of_lone_handles_lose_nothing_across_the_wrap() {
    check(|| {
        let ring = Arc::new(Ring::new(2));
        let w = Arc::clone(&ring);
        let writer = thread::spawn(move || {
            assert!(write_all_inline_first(&w, &[1, 2, 3, 4], 2));
            w.drop_writer();
        });
        assert_eq!(read_all_inline_first(&ring, 2), [1, 2, 3, 4]);
        writer.join().unwrap();
        assert_eq!((ring.written(), ring.taken()), (4, 4));
    });
}

#[test]
fn an_inline_write_after_the_last_reader_went_is_refused() {
    check(|| {
        let ring = Arc::new(Ring::new(2));
        let w = Arc::clone(&ring);
        let writer = thread::spawn(move || write_all_inline_first(&w, &[1, 2, 3], 1));
        let mut b = [0u8; 1];
        // SAFETY: the lone reader.
        let _ = unsafe { ring.take_seen(&mut b) };
        ring.drop_reader();
        let all_in = writer.join().unwrap();
        assert_eq!(all_in, ring.written() == 3);
    });
}

#[test]
fn a_writer_waiting_for_room_sees_the_last_reader_go() {
    check(|| {
        let ring = Arc::new(Ring::new(1));
        let w = Arc::clone(&ring);
        let writer = thread::spawn(move || write_all(&w, None, &[1, 2]));
        let mut b = [0u8; 1];
        // Take at most one byte, then go.
        // SAFETY: the lone reader.
        let _ = unsafe { ring.take(&mut b) };
        ring.drop_reader();
        // Either everything fitted before the reader went, or the writer
        // got `Broken`.
        let all_in = writer.join().unwrap();
        assert_eq!(all_in, ring.written() == 2);
    });
}

#[test]
fn a_writer_cloned_with_bytes_in_flight_switches_to_turns_and_loses_nothing() {
    check(|| {
        let ring = Arc::new(Ring::new(2));
        let lock = Arc::new(Mutex::new(()));
        let (w, l) = (Arc::clone(&ring), Arc::clone(&lock));
        let first = thread::spawn(move || {
            // Alone: no lock.
            assert!(write_all(&w, None, &[1]));
            // The clone: count the new writer, then hand it to a thread;
            // from now on both take turns under the lock.
            w.add_writer();
            let (w2, l2) = (Arc::clone(&w), Arc::clone(&l));
            let second = thread::spawn(move || {
                assert!(write_all(&w2, Some(&l2), &[3]));
                w2.drop_writer();
            });
            assert!(write_all(&w, Some(&l), &[2]));
            w.drop_writer();
            second.join().unwrap();
        });
        let got = read_all(&ring, None, 1);
        first.join().unwrap();
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0], 1, "the lone writer's byte first: {got:?}");
        let mut rest = got[1..].to_vec();
        rest.sort_unstable();
        assert_eq!(rest, [2, 3]);
    });
}

#[test]
fn two_readers_taking_turns_get_every_byte_once() {
    check(|| {
        let ring = Arc::new(Ring::new(2));
        let lock = Arc::new(Mutex::new(()));
        // The reader is cloned before the bytes come; the writer (this
        // thread) then writes and goes, and reads as the first reader.
        ring.add_reader();
        let (r2, l2) = (Arc::clone(&ring), Arc::clone(&lock));
        let other = thread::spawn(move || read_all(&r2, Some(&l2), 1));
        assert!(write_all(&ring, None, &[1, 2]));
        ring.drop_writer();
        let mine = read_all(&ring, Some(&lock), 1);
        let theirs = other.join().unwrap();
        for got in [&mine, &theirs] {
            assert!(got.windows(2).all(|p| p[0] < p[1]), "out of order: {got:?}");
        }
        let mut all = [mine, theirs].concat();
        all.sort_unstable();
        assert_eq!(all, [1, 2]);
    });
}

/// A value whose handles each write a cell of their own before they go,
/// and whose recycle reads them all and puts it on a one-place shelf.
struct Probe {
    cells: [loom::cell::UnsafeCell<u32>; 3],
    recycled: Arc<loom::sync::atomic::AtomicUsize>,
    shelf: Arc<Mutex<Option<Spare<Probe>>>>,
}

// SAFETY: handle `i` alone writes `cells[i]`, and the recycle reads them
// only after every handle is gone (what the model checks).
unsafe impl Sync for Probe {}

impl Recycle for Probe {
    fn recycle(mut spare: Spare<Probe>) {
        let p = spare.value_mut();
        for c in &p.cells {
            // SAFETY: no handle is left (the claim under test: loom flags
            // a write of a handle that is not ordered before this read).
            c.with(|v| assert!(unsafe { *v } <= 2));
        }
        p.recycled
            .fetch_add(1, loom::sync::atomic::Ordering::Relaxed);
        let shelf = Arc::clone(&p.shelf);
        *shelf.lock().unwrap() = Some(spare);
    }
}

/// Uses `h` as handle `i` (a write of its cell), then drops it.
fn use_and_drop(h: Counted<Probe>, i: usize) {
    // SAFETY: handle `i` alone writes `cells[i]`.
    h.cells[i].with_mut(|v| unsafe { *v += 1 });
    drop(h);
}

#[test]
fn a_values_handles_dropped_on_three_threads_recycle_it_once_after_every_use() {
    check(|| {
        let recycled = Arc::new(loom::sync::atomic::AtomicUsize::new(0));
        let shelf = Arc::new(Mutex::new(None));
        let h = Counted::new(Probe {
            cells: std::array::from_fn(|_| loom::cell::UnsafeCell::new(0)),
            recycled: Arc::clone(&recycled),
            shelf: Arc::clone(&shelf),
        });
        let (a, b) = (h.clone(), h.clone());
        let ta = thread::spawn(move || use_and_drop(a, 1));
        let tb = thread::spawn(move || use_and_drop(b, 2));
        use_and_drop(h, 0);
        ta.join().unwrap();
        tb.join().unwrap();
        assert_eq!(recycled.load(loom::sync::atomic::Ordering::Relaxed), 1);
        // Freed (breaking the cycle through the shelf).
        let spare = shelf.lock().unwrap().take();
        assert!(spare.is_some());
        drop(spare);
    });
}

#[test]
fn a_revived_spare_is_counted_afresh_and_recycled_once_more() {
    check(|| {
        let recycled = Arc::new(loom::sync::atomic::AtomicUsize::new(0));
        let shelf = Arc::new(Mutex::new(None));
        drop(Counted::new(Probe {
            cells: std::array::from_fn(|_| loom::cell::UnsafeCell::new(0)),
            recycled: Arc::clone(&recycled),
            shelf: Arc::clone(&shelf),
        }));
        let spare = shelf
            .lock()
            .unwrap()
            .take()
            .expect("recycled on the first drop");
        let h = spare.revive();
        let other = h.clone();
        let t = thread::spawn(move || use_and_drop(other, 1));
        use_and_drop(h, 0);
        t.join().unwrap();
        assert_eq!(recycled.load(loom::sync::atomic::Ordering::Relaxed), 2);
        // Freed (breaking the cycle through the shelf).
        let spare = shelf.lock().unwrap().take();
        assert!(spare.is_some());
        drop(spare);
    });
}
