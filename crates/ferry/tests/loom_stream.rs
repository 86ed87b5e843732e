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

use loom::sync::{Arc, Mutex};
use loom::thread;

/// What `ring` reaches through `super::atomic`.
mod atomic {
    pub(crate) use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
}

/// `src/stream/bytes.rs`'s interface over loom cells.
#[path = "loom_support/bytes.rs"]
mod bytes;

#[path = "../src/stream/ring.rs"]
#[allow(dead_code)]
mod ring;

use ring::{Put, Ring, Take};

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
