//! The two shared-memory peers: `spin floor` (both processes spin on one
//! word in one cache line) and `futex shm` (a call word and a reply word,
//! each side asleep in a process-shared `FUTEX_WAIT` between messages),
//! over one memfd mapped by both processes.
//!
//! This module owns the layout of that memory and its word protocols, the
//! client's side of a call and the server's loop. It measures nothing.
//!
//! # Layout
//!
//! | offset | what |
//! |--------|------|
//! | 0 | word `A` (u32): spin floor: the one word; futex: the call word |
//! | 64 | word `B` (u32): futex: the reply word (unused by the spin floor) |
//! | 128 | the arguments area, `size` bytes |
//! | 128 + `size` rounded up to 64 | the result area, `size` bytes |
//!
//! # Spin floor: word `A`
//!
//! | value | meaning | written by |
//! |-------|---------|------------|
//! | 0 | no call yet | creation |
//! | 2n - 1 | call n's arguments are in the arguments area | client (Release, after copying them in) |
//! | 2n | call n's result is in the result area | server (Release, after copying it in) |
//! | `STOP` | the server is to exit | client |
//!
//! # Futex shm: words `A` (call) and `B` (reply)
//!
//! | word | value | meaning | written by |
//! |------|-------|---------|------------|
//! | A | n | call n's arguments are in place | client (Release, then `FUTEX_WAKE`) |
//! | A | `STOP` | the server is to exit | client (then `FUTEX_WAKE`) |
//! | B | n | call n's result is in place | server (Release, then `FUTEX_WAKE`) |
//!
//! Each side waits with `FUTEX_WAIT` on the word it reads while that word
//! still holds its last value; there is no spinning before the sleep.
//!
//! Nothing read from the words is trusted: the server exits with an error
//! on a value that is neither the next call nor `STOP`, and call numbers
//! stay below `STOP` (a client refuses to go past [`MAX_CALLS`]).

use std::os::fd::{BorrowedFd, OwnedFd};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

use super::sys::{self, Shared};
use crate::error::Error;

/// The word value that tells the server to exit.
pub const STOP: u32 = u32::MAX;

/// Calls one mapping may carry (so that `2n` stays below [`STOP`]).
pub const MAX_CALLS: u32 = (1 << 30) - 1;

/// Offset of the arguments area.
const ARGS_AT: usize = 128;

/// Which of the two protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Both sides spin on word `A`.
    Spin,
    /// Both sides sleep in `FUTEX_WAIT`.
    Futex,
}

/// Bytes the mapping needs for calls of `size` bytes each way.
pub fn mapping_len(size: usize) -> usize {
    (ARGS_AT + 2 * size.next_multiple_of(64)).next_multiple_of(4096)
}

/// Offset of the result area.
fn result_at(size: usize) -> usize {
    ARGS_AT + size.next_multiple_of(64)
}

/// The two words and the two areas of one mapping.
#[derive(Debug)]
struct Words {
    shared: Shared,
    size: usize,
}

impl Words {
    fn new(shared: Shared, size: usize) -> Result<Words, Error> {
        if shared.len() < mapping_len(size) {
            return Err(Error(format!(
                "shared mapping of {} bytes, {} needed",
                shared.len(),
                mapping_len(size)
            )));
        }
        Ok(Words { shared, size })
    }

    fn word(&self, at: usize) -> &AtomicU32 {
        debug_assert!(at == 0 || at == 64);
        // SAFETY: offsets 0 and 64 are 4-aligned (the mapping is
        // page-aligned) and inside the mapping (checked in `new`); the
        // mapping lives as long as `self`, and both processes use these
        // bytes only as atomics.
        unsafe { AtomicU32::from_ptr(self.shared.base().add(at).cast()) }
    }

    /// Copies `from` into the area at `at` (`from.len() == size`).
    fn put(&self, at: usize, from: &[u8]) {
        assert_eq!(from.len(), self.size);
        // SAFETY: `at + size` is inside the mapping (`new` checked the
        // length against `mapping_len`); the protocol gives this side the
        // area until it publishes the word, so the peer does not write it
        // meanwhile; `from` is private memory, not overlapping.
        unsafe { ptr::copy_nonoverlapping(from.as_ptr(), self.shared.base().add(at), self.size) };
    }

    /// Copies the area at `at` out into `to` (`to.len() == size`).
    fn get(&self, at: usize, to: &mut [u8]) {
        assert_eq!(to.len(), self.size);
        // SAFETY: as in `put`; the peer published the area before the
        // word this side acquired, and does not touch it until this side
        // publishes its next word.
        unsafe { ptr::copy_nonoverlapping(self.shared.base().add(at), to.as_mut_ptr(), self.size) };
    }
}

/// The client's side of one mapping.
#[derive(Debug)]
pub struct Client {
    words: Words,
    kind: Kind,
    calls: u32,
}

impl Client {
    /// A fresh mapping for calls of `size` bytes; its memfd goes to the
    /// server ([`Client::fd`]).
    pub fn new(kind: Kind, size: usize) -> Result<Client, Error> {
        let shared = Shared::create("ferry-bench-urpc", mapping_len(size))
            .map_err(|e| Error(format!("shared memory: {e}")))?;
        Ok(Client {
            words: Words::new(shared, size)?,
            kind,
            calls: 0,
        })
    }

    /// The memfd the server maps.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.words.shared.fd()
    }

    /// One call: `args` in, the result copied out into `result` (both
    /// `size` bytes).
    pub fn call(&mut self, args: &[u8], result: &mut [u8]) -> Result<(), Error> {
        if self.calls >= MAX_CALLS {
            return Err(Error("too many calls on one mapping".into()));
        }
        self.calls += 1;
        let n = self.calls;
        let w = &self.words;
        w.put(ARGS_AT, args);
        match self.kind {
            Kind::Spin => {
                let a = w.word(0);
                a.store(2 * n - 1, Ordering::Release);
                while a.load(Ordering::Acquire) != 2 * n {
                    std::hint::spin_loop();
                }
            }
            Kind::Futex => {
                w.word(0).store(n, Ordering::Release);
                sys::futex_wake(w.word(0));
                let b = w.word(64);
                loop {
                    let seen = b.load(Ordering::Acquire);
                    if seen == n {
                        break;
                    }
                    sys::futex_wait(b, seen);
                }
            }
        }
        w.get(result_at(w.size), result);
        Ok(())
    }

    /// Tells the server to exit.
    pub fn stop(&mut self) {
        self.words.word(0).store(STOP, Ordering::Release);
        if self.kind == Kind::Futex {
            sys::futex_wake(self.words.word(0));
        }
    }
}

/// The server's loop over the mapping of `shared`: answers every call
/// with its arguments (copied out into private memory, then into the
/// result area) until `STOP`.
///
/// # Errors
/// A word value that is neither the next call nor `STOP`.
pub fn serve(kind: Kind, shared: Shared, size: usize) -> Result<(), Error> {
    let w = Words::new(shared, size)?;
    let mut buf = vec![0u8; size];
    let mut n: u32 = 0;
    loop {
        n += 1;
        let (word, want) = match kind {
            Kind::Spin => (w.word(0), 2 * n - 1),
            Kind::Futex => (w.word(0), n),
        };
        let last = match kind {
            Kind::Spin => 2 * (n - 1),
            Kind::Futex => n - 1,
        };
        loop {
            let seen = word.load(Ordering::Acquire);
            if seen == want {
                break;
            }
            if seen == STOP {
                return Ok(());
            }
            if seen != last {
                return Err(Error(format!(
                    "call word {seen}: expected {want} (call {n}) or STOP"
                )));
            }
            match kind {
                Kind::Spin => std::hint::spin_loop(),
                Kind::Futex => sys::futex_wait(word, seen),
            }
        }
        w.get(ARGS_AT, &mut buf);
        w.put(result_at(size), &buf);
        match kind {
            Kind::Spin => w.word(0).store(2 * n, Ordering::Release),
            Kind::Futex => {
                w.word(64).store(n, Ordering::Release);
                sys::futex_wake(w.word(64));
            }
        }
    }
}

/// Maps the memfd `fd` the client created for calls of `size` bytes.
pub fn open(fd: OwnedFd, size: usize) -> Result<Shared, Error> {
    Shared::open(fd, mapping_len(size)).map_err(|e| Error(format!("mapping the shared memfd: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo(kind: Kind, size: usize) {
        let mut client = Client::new(kind, size).unwrap();
        let shared = open(client.fd().try_clone_to_owned().unwrap(), size).unwrap();
        let server = std::thread::spawn(move || serve(kind, shared, size));
        let mut result = vec![0u8; size];
        for i in 0..50u8 {
            let args = vec![i; size];
            client.call(&args, &mut result).unwrap();
            assert_eq!(result, args);
        }
        client.stop();
        server.join().unwrap().unwrap();
    }

    #[test]
    fn spin_and_futex_echo_every_size() {
        for size in [0, 1, 32, 1000, 40_000] {
            echo(Kind::Spin, size);
            echo(Kind::Futex, size);
        }
    }

    #[test]
    fn a_server_given_a_wrong_word_exits_with_an_error() {
        for kind in [Kind::Spin, Kind::Futex] {
            let client = Client::new(kind, 8).unwrap();
            client.words.word(0).store(12345, Ordering::Release);
            let shared = open(client.fd().try_clone_to_owned().unwrap(), 8).unwrap();
            let err = serve(kind, shared, 8).unwrap_err();
            assert!(err.0.contains("12345"), "{err}");
        }
    }

    #[test]
    fn layout_keeps_words_and_areas_apart() {
        assert_eq!(mapping_len(0), 4096);
        assert_eq!(result_at(32), 192);
        assert!(result_at(1 << 20) + (1 << 20) <= mapping_len(1 << 20));
        let c = Client::new(Kind::Spin, 0).unwrap();
        let dup = c.fd().try_clone_to_owned().unwrap();
        assert!(open(dup, 1 << 20).is_err(), "a short memfd is refused");
    }
}
