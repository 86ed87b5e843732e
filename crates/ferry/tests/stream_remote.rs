//! Streams across processes: the test binary runs itself again as the
//! peer process (the role in `FERRY_STREAM_ROLE`), so that each side has
//! its own address space, and the peer can be killed with SIGKILL
//! mid-stream or play a hostile peer that scribbles on the shared
//! positions.

use std::io::{self, ErrorKind, Read, Write};
use std::process::Child;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use ferry::stream::{self, Builder, Reader, Writer};

mod common;

const ROLE: &str = "FERRY_STREAM_ROLE";

/// The stream binding's version hash and the memory's offsets, as the
/// layout (`src/stream/remote/layout.rs`) documents them: what a hostile
/// peer needs to know.
const HASH: u64 = u64::from_le_bytes(*b"ferrySTM") ^ (1 << 56);
const DATA: usize = 4096;
fn ring_base(i: usize) -> usize {
    128 + i * 640
}

fn fresh(tag: &str) -> String {
    format!("stream-remote-{tag}-{}", std::process::id())
}

/// SplitMix64's finaliser.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Sizes drawn from a seeded SplitMix64 sequence.
struct Sizes(u64);

impl Sizes {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        (mix(self.0) % n as u64) as usize
    }
}

/// The `i`th byte of the sequence of `seed`.
fn pattern(seed: u64, i: u64) -> u8 {
    (mix(seed.wrapping_add(i / 8).wrapping_mul(0x9e37_79b9_7f4a_7c15)) >> ((i % 8) * 8)) as u8
}

/// Writes `len` bytes of the sequence of `seed` in writes of random
/// sizes (try-writes now and then), then drops the writer.
fn send(mut w: Writer, seed: u64, len: u64) {
    let mut rng = Sizes(seed | 1);
    let mut i = 0u64;
    let mut buf = Vec::new();
    while i < len {
        let n = (1 + rng.below(3000)).min((len - i) as usize);
        buf.clear();
        buf.extend((i..i + n as u64).map(|k| pattern(seed, k)));
        let wrote = if rng.below(4) == 0 {
            match w.try_write(&buf) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => 0,
                r => r.unwrap(),
            }
        } else {
            w.write(&buf).unwrap()
        };
        i += wrote as u64;
    }
    assert_eq!(w.bytes_written(), len);
}

/// Reads the sequence of `seed` with reads of random sizes until
/// end-of-file; checks every byte and the count.
fn check(mut r: Reader, seed: u64, len: u64) {
    let mut rng = Sizes(seed.rotate_left(7) | 1);
    let mut i = 0u64;
    let mut buf = vec![0u8; 5000];
    loop {
        let want = 1 + rng.below(buf.len());
        let n = r.read(&mut buf[..want]).unwrap();
        if n == 0 {
            break;
        }
        for (k, &b) in buf[..n].iter().enumerate() {
            assert_eq!(b, pattern(seed, i + k as u64), "byte {}", i + k as u64);
        }
        i += n as u64;
    }
    assert_eq!(i, len, "every byte once, then end-of-file");
    assert_eq!(r.bytes_read(), len);
}

/// A writer's records: its id and a sequence number, 8 bytes, written a
/// few records per write (below the atomic-write size, so whole).
fn send_records(mut w: Writer, id: u32, count: u32) {
    let mut rng = Sizes(u64::from(id) + 99);
    let mut seq = 0;
    while seq < count {
        let k = (1 + rng.below(16) as u32).min(count - seq);
        let mut buf = Vec::new();
        for s in seq..seq + k {
            buf.extend_from_slice(&id.to_le_bytes());
            buf.extend_from_slice(&s.to_le_bytes());
        }
        assert_eq!(
            w.write(&buf).unwrap(),
            buf.len(),
            "a small write goes in whole"
        );
        seq += k;
    }
}

/// The peer processes' entry: does nothing unless the role is set.
#[test]
fn child() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let words: Vec<String> = role.split(' ').map(str::to_owned).collect();
    let num = |i: usize| words[i].parse::<u64>().unwrap();
    let name = words[1].clone();
    match words[0].as_str() {
        // Both directions at once, on kernel threads.
        "mirror" => {
            let (w, r) = stream::connect(&name).unwrap();
            let (mine, theirs, len) = (num(2), num(3), num(4));
            let t = std::thread::spawn(move || send(w, mine, len));
            check(r, theirs, len);
            t.join().unwrap();
            println!("done");
        }
        // Four clones of the writer, on four threads.
        "writers" => {
            let (w, _r) = stream::connect(&name).unwrap();
            let count = num(2) as u32;
            let ts: Vec<_> = (0..4)
                .map(|id| {
                    let w = w.clone();
                    assert!(w.is_shared());
                    std::thread::spawn(move || send_records(w, id, count))
                })
                .collect();
            drop(w);
            for t in ts {
                t.join().unwrap();
            }
            println!("done");
        }
        // Writes a greeting and closes its writer, then reads to the end.
        "close" => {
            let (mut w, mut r) = stream::connect(&name).unwrap();
            w.write_all(b"hello").unwrap();
            drop(w);
            let mut back = Vec::new();
            r.read_to_end(&mut back).unwrap();
            assert_eq!(back, b"bye");
            println!("done");
        }
        // Writes the bytes given, then waits to be killed.
        "idle" => {
            let (mut w, r) = stream::connect(&name).unwrap();
            w.write_all(&vec![7u8; num(2) as usize]).unwrap();
            println!("ready");
            std::thread::sleep(Duration::from_secs(600));
            drop((w, r));
        }
        // A hostile peer: binds as a stream but only scribbles on the
        // shared words of `ring` (`head` or `tail`, per `what`).
        "hostile" => {
            let binding = ferry::rpc::connect_raw(&name, HASH).unwrap();
            let m = binding.mapping();
            let word = |at: usize| {
                // SAFETY: `at` is inside the mapping (the layout's words),
                // 8-aligned; the mapping lives while `binding` does.
                unsafe { &*m.as_ptr().add(at).cast::<AtomicU64>() }
            };
            // A ring as the bell's protocol has it (flag AWAKE, count
            // bumped); the sleeper's bounded wait sees it without a wake.
            let ring = |at: usize| {
                // SAFETY: as above, for a bell's two words.
                let (flag, seq) = unsafe {
                    (
                        &*m.as_ptr().add(at).cast::<AtomicU32>(),
                        &*m.as_ptr().add(at + 8).cast::<AtomicU32>(),
                    )
                };
                flag.store(0, Ordering::SeqCst);
                seq.fetch_add(1, Ordering::SeqCst);
            };
            match words[2].as_str() {
                // Ring 1 carries the connector's bytes: a head far ahead.
                "ahead" => {
                    word(ring_base(1)).store(1 << 40, Ordering::Release);
                    ring(ring_base(1) + 384);
                }
                // Ten bytes, then the head moves back to four.
                "back" => {
                    let cap = word(16).load(Ordering::Relaxed) as usize;
                    // SAFETY: ring 1's bytes start at DATA + capacity (the
                    // third header word), and ten of them are inside the
                    // mapping.
                    unsafe { std::ptr::write_bytes(m.as_ptr().add(DATA + cap), 1, 10) };
                    word(ring_base(1)).store(10, Ordering::Release);
                    println!("ten");
                    let mut line = String::new();
                    io::stdin().read_line(&mut line).unwrap();
                    word(ring_base(1)).store(4, Ordering::Release);
                    ring(ring_base(1) + 384);
                }
                // Ring 0 carries the listener's bytes: a tail past its head.
                "tail" => {
                    word(ring_base(0) + 128).store(1 << 50, Ordering::Release);
                    ring(ring_base(0) + 512);
                }
                other => panic!("unknown scribble {other}"),
            }
            println!("ready");
            std::thread::sleep(Duration::from_secs(600));
        }
        other => panic!("unknown role {other}"),
    }
    std::process::exit(0);
}

fn spawn_role(role: &str) -> Child {
    common::spawn_child(ROLE, role)
}

fn wait_for(child: &mut Child, word: &str) {
    common::wait_for(child, word);
}

/// Listens on a fresh name made of `tag`, starts the peer as `role` on
/// it (with `args`), accepts it and waits for it to say `ready`.
fn peer(
    tag: &str,
    capacity: usize,
    role: &str,
    args: &str,
    ready: &str,
) -> (String, Writer, Reader, Child) {
    let name = fresh(tag);
    let listener = Builder::new().capacity(capacity).listen(&name).unwrap();
    let mut child = spawn_role(&format!("{role} {name} {args}"));
    let (w, r) = listener.accept().unwrap();
    wait_for(&mut child, ready);
    (name, w, r, child)
}

fn finish(mut child: Child) {
    wait_for(&mut child, "done");
    assert!(child.wait().unwrap().success());
}

fn kill(mut child: Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

fn mirror(tag: &str, capacity: usize, seed: u64, len: u64) {
    let name = fresh(tag);
    let listener = Builder::new().capacity(capacity).listen(&name).unwrap();
    let (mine, theirs) = (seed, seed ^ 0x5555);
    let child = spawn_role(&format!("mirror {name} {theirs} {mine} {len}"));
    let mut rt = ferry::Runtime::builder();
    rt.processors(2);
    rt.run(move || {
        let (w, r) = listener.accept().unwrap();
        assert_eq!(w.capacity(), capacity.next_power_of_two());
        let t = ferry::spawn(move || send(w, mine, len));
        check(r, theirs, len);
        t.join().unwrap();
    })
    .unwrap();
    finish(child);
}

#[test]
fn bytes_go_both_ways_at_once_in_order_with_random_sizes() {
    // A small ring (writes and reads wrap and wait often), a middling one
    // and the default.
    mirror("small", 100, 1, 300_000);
    mirror("mid", 4096, 2, 2_000_000);
    mirror("default", stream::DEFAULT_CAPACITY, 3, 4_000_000);
}

#[test]
fn several_writers_in_the_peer_keep_their_order_and_records_whole() {
    let name = fresh("writers");
    let listener = Builder::new().capacity(1024).listen(&name).unwrap();
    let count = 20_000u32;
    let child = spawn_role(&format!("writers {name} {count}"));
    let (_w, mut r) = listener.accept().unwrap();
    let mut next = [0u32; 4];
    let mut rec = [0u8; 8];
    loop {
        match r.read_exact(&mut rec) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => break,
            Err(e) => panic!("{e}"),
        }
        let id = u32::from_le_bytes(rec[..4].try_into().unwrap()) as usize;
        let seq = u32::from_le_bytes(rec[4..].try_into().unwrap());
        assert!(id < 4, "a torn record");
        assert_eq!(seq, next[id], "writer {id}'s records out of order");
        next[id] += 1;
    }
    assert_eq!(next, [count; 4]);
    assert_eq!(r.bytes_read(), 4 * 8 * u64::from(count));
    finish(child);
}

#[test]
fn dropping_writers_gives_eof_and_dropping_readers_gives_broken_pipe() {
    let name = fresh("close");
    let listener = Builder::new().capacity(64).listen(&name).unwrap();
    let child = spawn_role(&format!("close {name}"));
    let (mut w, mut r) = listener.accept().unwrap();
    let mut got = Vec::new();
    r.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"hello");
    assert_eq!(r.read(&mut [0; 4]).unwrap(), 0, "end-of-file stays");
    assert_eq!(r.try_read(&mut [0; 4]).unwrap(), 0);
    w.write_all(b"bye").unwrap();
    let w2 = w.clone();
    drop(w);
    assert!(w2.is_shared());
    // The peer reads "bye" to end-of-file only once both writers went.
    drop(w2);
    finish(child);
}

#[test]
fn a_write_to_a_peer_whose_readers_are_gone_is_broken_pipe() {
    let name = fresh("broken");
    let listener = Builder::new().capacity(64).listen(&name).unwrap();
    let t = std::thread::spawn(move || {
        let (w, r) = stream::connect(&name).unwrap();
        drop(r);
        w
    });
    let (mut w, _r) = listener.accept().unwrap();
    let _peer_writer = t.join().unwrap();
    // The peer's reader is gone: every write fails, none blocks.
    for _ in 0..3 {
        let e = w.write(&[1; 100]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BrokenPipe);
    }
    assert_eq!(w.try_write(&[1]).unwrap_err().kind(), ErrorKind::BrokenPipe);
}

#[test]
fn a_peer_killed_mid_stream_gives_an_error_not_a_hang() {
    // Blocked in a read when the peer dies (or reading just after).
    let (_, mut w, mut r, child) = peer("killed-read", 256, "idle", "10", "ready");
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 100];
        // The ten bytes written before the peer went come first.
        let mut got = 0;
        let e = loop {
            match r.read(&mut buf) {
                Ok(0) => panic!("end-of-file from a peer that never closed"),
                Ok(n) => got += n,
                Err(e) => break e,
            }
        };
        (got, e, r)
    });
    std::thread::sleep(Duration::from_millis(100));
    kill(child);
    let (got, e, mut r) = reader.join().unwrap();
    assert_eq!(got, 10);
    assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}");
    // The next call, too.
    assert_eq!(
        r.read(&mut [0; 8]).unwrap_err().kind(),
        ErrorKind::ConnectionReset
    );
    assert_eq!(
        r.try_read(&mut [0; 8]).unwrap_err().kind(),
        ErrorKind::ConnectionReset
    );
    assert_eq!(w.write(&[1; 8]).unwrap_err().kind(), ErrorKind::BrokenPipe);

    // Blocked in a write (the ring full) when the peer dies.
    let (_, mut w, _r, child) = peer("killed-write", 256, "idle", "0", "ready");
    let writer = std::thread::spawn(move || {
        let e = loop {
            if let Err(e) = w.write(&[9; 64]) {
                break e;
            }
        };
        (e, w)
    });
    std::thread::sleep(Duration::from_millis(100));
    kill(child);
    let (e, mut w) = writer.join().unwrap();
    assert_eq!(e.kind(), ErrorKind::BrokenPipe, "{e}");
    assert_eq!(w.write(&[1]).unwrap_err().kind(), ErrorKind::BrokenPipe);
    assert_eq!(w.try_write(&[1]).unwrap_err().kind(), ErrorKind::BrokenPipe);
}

fn invalid(e: &io::Error, what: &str, stream: &str) {
    assert_eq!(e.kind(), ErrorKind::InvalidData, "{e}");
    let msg = e.to_string();
    assert!(msg.contains(what), "{msg}");
    assert!(msg.contains(stream), "the message names the stream: {msg}");
}

#[test]
fn a_hostile_peer_scribbling_on_the_positions_gives_invalid_data() {
    // A head far past the tail.
    let (name, mut w, mut r, child) = peer("ahead", 1024, "hostile", "ahead", "ready");
    let e = r.read(&mut [0; 16]).unwrap_err();
    invalid(&e, &(1u64 << 40).to_string(), &name);
    // The connection is poisoned: every handle, every call.
    invalid(&r.read(&mut [0; 16]).unwrap_err(), "1099511627776", &name);
    invalid(&w.write(&[1]).unwrap_err(), "1099511627776", &name);
    invalid(&w.clone().try_write(&[1]).unwrap_err(), "unusable", &name);
    kill(child);

    // A head that moves back.
    let (name, _w, mut r, mut child) = peer("back", 1024, "hostile", "back", "ten");
    let mut buf = [0u8; 10];
    r.read_exact(&mut buf).unwrap();
    assert_eq!(buf, [1; 10]);
    child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    let e = r.read(&mut buf).unwrap_err();
    invalid(&e, "moved back from 10 to 4", &name);
    kill(child);

    // A tail past the head: seen when the writer looks for room.
    let (name, mut w, _r, child) = peer("tail", 64, "hostile", "tail", "ready");
    let e = w.write_all(&[5; 200]).unwrap_err();
    invalid(&e, "read position 1125899906842624", &name);
    kill(child);
}

#[test]
fn connecting_to_a_name_nobody_listens_on_is_not_found() {
    let e = stream::connect(&fresh("nobody")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    let e = stream::connect("bad/name").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    let e = Builder::new()
        .capacity(0)
        .listen(&fresh("zero"))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
}

#[test]
fn a_listener_of_another_layout_is_refused_with_invalid_data() {
    // Not a stream at all: an rpc interface of another version hash.
    let name = fresh("rpc");
    let other = ferry::rpc::Listener::bind(&name, 0x1234).unwrap();
    let server = std::thread::spawn(move || other.accept(&Default::default()).is_err());
    let e = stream::connect(&name).unwrap_err();
    invalid(&e, "not a ferry stream of this layout version", &name);
    assert!(server.join().unwrap());

    // The stream's hash, but memory without a stream's header.
    let name = fresh("zeroed");
    let mut other = ferry::rpc::Listener::bind(&name, HASH).unwrap();
    other.set_channel_len(DATA + 2 * 64).unwrap();
    let server = std::thread::spawn(move || other.accept(&Default::default()).unwrap());
    let e = stream::connect(&name).unwrap_err();
    invalid(&e, "not a ferry stream's (magic 0x0000000000000000", &name);
    let accepted = server.join().unwrap();
    drop(accepted);
}

#[test]
fn a_second_listener_on_a_live_name_is_refused_and_the_first_goes_on() {
    let name = fresh("twice");
    let first = stream::listen(&name).unwrap();
    // The second looks whether the name is live by connecting to it: the
    // first listener's next accept passes that connection over.
    let e = stream::listen(&name).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AddrInUse, "{e}");
    let peer = std::thread::spawn(move || {
        let (mut w, _r) = stream::connect(&name).unwrap();
        w.write_all(b"x").unwrap();
    });
    let (_w, mut r) = first.accept().unwrap();
    let mut got = Vec::new();
    r.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"x");
    peer.join().unwrap();
}
