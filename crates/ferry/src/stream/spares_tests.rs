//! Spare streams through the API: a closed stream is kept and the next
//! open of its capacity takes it, a revived stream is a new stream in
//! every way, and a stream too large to keep is not. Each test uses a
//! capacity no other test in this crate's unit tests opens, since the
//! shelf is the process's (the shelf's bounds are tested on a shelf of
//! their own, in `spares.rs`).

use std::io::{ErrorKind, Read, Write};

use super::spares::{MAX_SPARE_CAPACITY, held};
use super::{Builder, Reader, Writer};

fn open(capacity: usize) -> (Writer, Reader) {
    Builder::new().capacity(capacity).pipe()
}

#[test]
fn a_closed_stream_is_kept_and_the_next_open_of_its_capacity_takes_it() {
    const CAP: usize = 1 << 11;
    let before = held(CAP);
    let (w, r) = open(CAP);
    drop(w);
    assert_eq!(held(CAP), before, "kept while the reader is open");
    drop(r);
    assert_eq!(held(CAP), before + 1, "kept once both ends are gone");
    let (w, r) = open(CAP);
    assert_eq!(held(CAP), before, "taken by the next open");
    drop((w, r));
}

#[test]
fn a_revived_stream_is_a_new_stream() {
    const CAP: usize = 1 << 12;
    // Leave bytes unread, a clone of each end, and both ends' paths
    // switched to taking turns.
    {
        let (mut w, mut r) = open(CAP);
        let w2 = w.clone();
        let r2 = r.clone();
        w.write_all(&[7; 100]).unwrap();
        let mut one = [0; 1];
        r.read_exact(&mut one).unwrap();
        drop((w, w2, r, r2));
    }
    let kept = held(CAP);
    assert!(kept >= 1);
    let (mut w, mut r) = open(CAP);
    assert_eq!(held(CAP), kept - 1, "the open took the spare");
    assert_eq!(w.bytes_written(), 0);
    assert_eq!(r.bytes_read(), 0);
    assert!(!w.is_shared() && !r.is_shared());
    let mut buf = [0; 16];
    assert_eq!(
        r.try_read(&mut buf).unwrap_err().kind(),
        ErrorKind::WouldBlock,
        "nothing of the old stream's bytes"
    );
    // Fills to the capacity, no more.
    let big = vec![1u8; CAP + 10];
    assert_eq!(w.try_write(&big).unwrap(), CAP);
    let mut out = vec![0u8; CAP];
    r.read_exact(&mut out).unwrap();
    assert!(out.iter().all(|&b| b == 1));
    // One writer and one reader: end-of-file and BrokenPipe as new.
    w.write_all(b"end").unwrap();
    drop(w);
    let mut rest = Vec::new();
    r.read_to_end(&mut rest).unwrap();
    assert_eq!(rest, b"end");
    let (mut w, r) = open(CAP);
    drop(r);
    assert_eq!(w.write(b"x").unwrap_err().kind(), ErrorKind::BrokenPipe);
}

#[test]
fn a_stream_larger_than_the_shelf_keeps_is_freed() {
    const BIG: usize = MAX_SPARE_CAPACITY * 2;
    drop(open(BIG));
    assert_eq!(held(BIG), 0);
}
