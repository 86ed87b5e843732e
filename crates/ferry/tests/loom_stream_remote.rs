#![cfg(ferry_loom)]
//! Loom model of one direction of a cross-process stream: the shared ring
//! (`src/stream/remote/ring.rs`) and the bells' handshake
//! (`src/event/doorbell.rs`'s `arm` and `ring`, used as
//! `src/stream/remote/wait.rs` uses them), both included as they are and
//! compiled against loom's atomics, over a byte array of loom cells.
//!
//! The writing process is one thread (its writes, each followed by a
//! ring of the reader's bell, then its close and a last ring); the
//! reading process is two reader handles taking turns under a lock, each
//! waiting as `wait::until` does: read the bell's count, arm its flag,
//! look again, then sleep while the count stays. Neither sleeper ever
//! puts `AWAKE` back itself. Under every interleaving loom explores: every
//! byte is read once, in order, then end-of-file; and no sleeper is left
//! asleep once the writer is done (the futex wait is modelled without a
//! timeout, so a lost wakeup is a deadlock loom reports), even when the
//! other sleeper armed the flag again after a ring.

use loom::sync::atomic::Ordering::{Acquire, Release, SeqCst};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

/// What the included files reach through `super::atomic`.
mod atomic {
    pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};
}

#[path = "loom_support/bytes.rs"]
mod bytes;

#[path = "../src/event/doorbell.rs"]
#[allow(dead_code)]
mod doorbell;

#[path = "../src/stream/ring.rs"]
#[allow(dead_code)]
mod ring;

#[path = "../src/stream/remote/ring.rs"]
#[allow(dead_code)]
mod remote_ring;

use atomic::{AtomicU32, AtomicU64};
use bytes::Bytes;
use remote_ring::{Bell, In, Out, RingWords};
use ring::{Put, Take};

/// The ring's words, as the memfd holds them.
struct Words {
    head: AtomicU64,
    wclosed: AtomicU64,
    tail: AtomicU64,
    rclosed: AtomicU64,
    rflag: AtomicU32,
    rseq: AtomicU32,
    wflag: AtomicU32,
    wseq: AtomicU32,
}

impl Words {
    fn new() -> &'static Words {
        Box::leak(Box::new(Words {
            head: AtomicU64::new(0),
            wclosed: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            rclosed: AtomicU64::new(0),
            rflag: AtomicU32::new(doorbell::AWAKE),
            rseq: AtomicU32::new(0),
            wflag: AtomicU32::new(doorbell::AWAKE),
            wseq: AtomicU32::new(0),
        }))
    }

    fn ring(&'static self) -> RingWords<'static> {
        RingWords {
            head: &self.head,
            wclosed: &self.wclosed,
            tail: &self.tail,
            rclosed: &self.rclosed,
            rbell: Bell {
                flag: &self.rflag,
                seq: &self.rseq,
            },
            wbell: Bell {
                flag: &self.wflag,
                seq: &self.wseq,
            },
        }
    }
}

/// The kernel's side of a futex on a bell's count: `FUTEX_WAIT` checks
/// the count and sleeps in one step under the bucket's lock, and
/// `FUTEX_WAKE` takes that lock to wake the sleepers.
struct Futex {
    bucket: Mutex<()>,
    woken: Condvar,
}

impl Futex {
    fn new() -> Futex {
        Futex {
            bucket: Mutex::new(()),
            woken: Condvar::new(),
        }
    }

    /// `FUTEX_WAIT(seq, seen)`, without a timeout: a lost wakeup leaves
    /// the thread blocked for ever, and loom reports the deadlock.
    fn wait(&self, seq: &AtomicU32, seen: u32) {
        let mut held = self.bucket.lock().unwrap();
        while seq.load(SeqCst) == seen {
            held = self.woken.wait(held).unwrap();
        }
    }

    /// `FUTEX_WAKE(seq, all)`.
    fn wake(&self) {
        let _held = self.bucket.lock().unwrap();
        self.woken.notify_all();
    }
}

/// One reader handle: takes in turns under `lock` until end-of-file,
/// sleeping on the bell as `wait::until` does: the count read, the flag
/// armed, a last look, then a futex wait on the count.
fn read_all(inn: &In<'static>, lock: &Mutex<()>, bell: Bell<'static>, futex: &Futex) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 1];
    let mut look = |got: &mut Vec<u8>| {
        let _held = lock.lock().unwrap();
        // SAFETY: the read end is held under `lock`.
        match unsafe { inn.take(&mut buf) }.expect("an honest writer") {
            Take::Done(n) => {
                got.extend_from_slice(&buf[..n]);
                Some(false)
            }
            Take::Eof => Some(true),
            Take::Empty => None,
        }
    };
    loop {
        if let Some(eof) = look(&mut got) {
            if eof {
                return got;
            }
            continue;
        }
        let seen = bell.seq.load(Acquire);
        doorbell::arm([bell.flag]);
        if let Some(eof) = look(&mut got) {
            if eof {
                return got;
            }
            continue;
        }
        futex.wait(bell.seq, seen);
    }
}

/// `wait::ring`: the doorbell's ring, bumping the count and waking.
fn ring_bell(bell: Bell<'static>, futex: &Futex) {
    doorbell::ring(bell.flag, false, |_| {
        bell.seq.fetch_add(1, Release);
        futex.wake();
    });
}

#[test]
fn two_sleeping_readers_are_never_left_asleep_and_get_every_byte_once() {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(2);
    model.check(|| {
        let words = Words::new();
        let bytes = Bytes::new(2);
        let out = Arc::new(Out::new(words.ring(), bytes.share()));
        let inn = Arc::new(In::new(words.ring(), bytes));
        let lock = Arc::new(Mutex::new(()));
        let futex = Arc::new(Futex::new());
        let writer = {
            let (out, futex) = (out.clone(), futex.clone());
            thread::spawn(move || {
                for b in [1u8, 2] {
                    // SAFETY: the lone writer; the ring has room for both.
                    assert_eq!(unsafe { out.put(&[b], 1) }, Ok(Put::Done(1)));
                    ring_bell(words.ring().rbell, &futex);
                }
                out.close();
                ring_bell(words.ring().rbell, &futex);
            })
        };
        let other = {
            let (inn, lock, futex) = (inn.clone(), lock.clone(), futex.clone());
            thread::spawn(move || read_all(&inn, &lock, words.ring().rbell, &futex))
        };
        let mine = read_all(&inn, &lock, words.ring().rbell, &futex);
        let theirs = other.join().unwrap();
        writer.join().unwrap();
        for got in [&mine, &theirs] {
            assert!(got.windows(2).all(|p| p[0] < p[1]), "out of order: {got:?}");
        }
        let mut all = [mine, theirs].concat();
        all.sort_unstable();
        assert_eq!(all, [1, 2]);
        assert_eq!(inn.taken(), 2);
    });
}

#[test]
fn a_writer_sees_a_tail_it_never_published_as_bad() {
    loom::model(|| {
        let words = Words::new();
        let out = Out::new(words.ring(), Bytes::new(2));
        // SAFETY: the lone writer.
        assert_eq!(unsafe { out.put(&[1, 2], 2) }, Ok(Put::Done(2)));
        // A peer that claims to have read five bytes of two.
        words.tail.store(5, Release);
        // SAFETY: as above.
        let r = unsafe { out.put(&[3], 1) };
        assert!(
            matches!(
                r,
                Err(remote_ring::Bad::TailOut {
                    tail: 5,
                    seen: 0,
                    head: 2
                })
            ),
            "{r:?}"
        );
    });
}
