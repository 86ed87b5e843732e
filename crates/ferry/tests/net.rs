//! `ferry::net` on readiness: many connections on few kernel threads, UDP,
//! timeouts, waking a parked reader by shutdown and by abort, and a
//! runtime that ends with threads parked on sockets.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::Shutdown;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use ferry::net::{TcpListener, TcpStream, UdpSocket};

/// The tests of this file count the whole process's kernel threads and
/// descriptors, so they run one at a time: another test's runtime would
/// be counted as this one's.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Kernel threads of this process.
fn tasks() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// Open sockets, epoll instances and eventfds of this process (what
/// `ferry::net` and its reactor open).
fn fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|l| {
            let l = l.to_string_lossy();
            l.starts_with("socket:") || l.starts_with("anon_inode:")
        })
        .count()
}

/// Raises the soft descriptor limit to the hard one; returns it.
fn raise_nofile() -> u64 {
    let (_, hard) = rustix_limits();
    let lim = libc::rlimit {
        rlim_cur: hard,
        rlim_max: hard,
    };
    // SAFETY: a plain setrlimit with a valid struct.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
    hard
}

fn rustix_limits() -> (u64, u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a plain getrlimit into a valid struct.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    (lim.rlim_cur, lim.rlim_max)
}

const CONNECTIONS: usize = 10_000;
const ROUNDS: usize = 3;
const MESSAGE: usize = 64;

/// The bytes client `c` sends in round `r`.
fn message(c: usize, r: usize) -> [u8; MESSAGE] {
    let mut m = [0u8; MESSAGE];
    for (i, b) in m.iter_mut().enumerate() {
        *b = (c.wrapping_mul(131) ^ r.wrapping_mul(17) ^ i) as u8;
    }
    m[..8].copy_from_slice(&(c as u64).to_le_bytes());
    m
}

/// The clients of `ten_thousand_echo_connections`, in a child process (the
/// descriptor limit does not fit both ends in one): each connects, then
/// all send and check their echoes `ROUNDS` times.
#[test]
fn echo_clients_child() {
    let Ok(addr) = std::env::var("FERRY_NET_ECHO_ADDR") else {
        return;
    };
    raise_nofile();
    ferry::Runtime::builder()
        .processors(2)
        .run(move || {
            let gate = Arc::new(ferry::sync::Barrier::new(CONNECTIONS));
            let clients: Vec<_> = (0..CONNECTIONS)
                .map(|c| {
                    let (addr, gate) = (addr.clone(), Arc::clone(&gate));
                    ferry::spawn(move || {
                        let mut s = TcpStream::connect(addr.as_str()).unwrap();
                        gate.wait();
                        for r in 0..ROUNDS {
                            let m = message(c, r);
                            s.write_all(&m).unwrap();
                            let mut back = [0u8; MESSAGE];
                            s.read_exact(&mut back).unwrap();
                            assert_eq!(back, m, "client {c} round {r}");
                        }
                    })
                })
                .collect();
            for c in clients {
                c.join().unwrap();
            }
        })
        .unwrap();
}

/// 10,000 concurrent connections to an echo server with a thread per
/// connection, every byte checked (by the clients, in a re-executed child
/// process: 2 × 10,000 descriptors exceed this machine's hard limit of
/// 20,000), on two processors and few kernel threads.
#[test]
fn ten_thousand_echo_connections() {
    let _serial = one_at_a_time();
    let hard = raise_nofile();
    assert!(
        hard as usize >= CONNECTIONS + 64,
        "RLIMIT_NOFILE hard limit {hard} is below {} for the server",
        CONNECTIONS + 64
    );
    // The harness's own threads and this test's caller.
    let before = tasks();
    let (most_tasks, takeovers) = ferry::Runtime::builder()
        .processors(2)
        .run(|| {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let mut child = Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "echo_clients_child", "--nocapture"])
                .env("FERRY_NET_ECHO_ADDR", addr.to_string())
                .spawn()
                .unwrap();
            let served = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let mut most = tasks();
            let mut servers = Vec::with_capacity(CONNECTIONS);
            for _ in 0..CONNECTIONS {
                let (mut s, _) = listener.accept().unwrap();
                let served = Arc::clone(&served);
                servers.push(ferry::spawn(move || {
                    let mut buf = [0u8; MESSAGE];
                    let mut bytes = 0;
                    loop {
                        let n = s.read(&mut buf).unwrap();
                        if n == 0 {
                            break;
                        }
                        s.write_all(&buf[..n]).unwrap();
                        bytes += n;
                    }
                    served.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
                }));
                most = most.max(tasks());
            }
            for s in servers {
                s.join().unwrap();
                most = most.max(tasks());
            }
            let status = ferry::blocking(|| child.wait()).unwrap();
            assert!(status.success(), "the clients failed: {status}");
            assert_eq!(
                served.load(std::sync::atomic::Ordering::Relaxed),
                CONNECTIONS * ROUNDS * MESSAGE
            );
            // For the record: a driver asleep in the kernel outside a
            // blocking call (a page fault, a lock) shows as a takeover.
            let stats = ferry::Handle::current().upcall_stats();
            let takeovers = stats.unannounced_blocks + stats.stand_in_takeovers;
            eprintln!(
                "unannounced blocks {}, stand-in takeovers {}",
                stats.unannounced_blocks, stats.stand_in_takeovers
            );
            (most, takeovers)
        })
        .unwrap();
    let added = most_tasks - before;
    eprintln!("server kernel threads at most: {added} besides the {before} before it");
    // Sockets never hand a kernel thread over: a takeover is a driver the
    // kernel put to sleep outside a blocking call (a page fault, a lock),
    // a few in a run, not one per connection or per read.
    assert!(
        takeovers < (CONNECTIONS / 100) as u64,
        "{takeovers} takeovers for {CONNECTIONS} connections"
    );
    // What a runtime of P processors adds to its caller: a driver per
    // processor, the monitor, the pool's reserve of spares (P + 2) and a
    // stand-in per processor, 3P + 3; and, for each takeover, at most one
    // spare beyond the reserve (the driver taken over, back in the pool,
    // retires after a second idle there). Not one per connection.
    assert!(
        added as u64 <= 3 * 2 + 3 + takeovers,
        "{added} kernel threads for 2 processors, {CONNECTIONS} connections and \
         {takeovers} takeovers"
    );
}

#[test]
fn udp_ping_pong() {
    let _serial = one_at_a_time();
    ferry::Runtime::builder()
        .processors(2)
        .run(|| {
            let a = UdpSocket::bind("127.0.0.1:0").unwrap();
            let b = UdpSocket::bind("127.0.0.1:0").unwrap();
            let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
            b.connect(aa).unwrap();
            let ponger = ferry::spawn(move || {
                let mut buf = [0u8; 16];
                for i in 0..100u32 {
                    let (n, from) = a.peek_from(&mut buf).unwrap();
                    assert_eq!((n, from), (4, ba));
                    let (n, from) = a.recv_from(&mut buf).unwrap();
                    assert_eq!(&buf[..n], &i.to_le_bytes());
                    a.send_to(&(i + 1).to_le_bytes(), from).unwrap();
                }
            });
            let mut buf = [0u8; 16];
            for i in 0..100u32 {
                b.send(&i.to_le_bytes()).unwrap();
                let n = b.recv(&mut buf).unwrap();
                assert_eq!(&buf[..n], &(i + 1).to_le_bytes());
            }
            ponger.join().unwrap();
        })
        .unwrap();
}

/// A short TCP read (or write) leaves the direction not ready, and the
/// next operation parks without trying: data that comes after a short
/// read, and room that comes after a short write, still wake the thread,
/// and every byte arrives once, in order.
#[test]
fn after_short_reads_and_writes_later_data_and_room_still_wake_the_thread() {
    const ROUNDS: u32 = 300;
    const BULK: usize = 16 << 20;
    let _serial = one_at_a_time();
    common::within(common::WATCHDOG, "short reads and writes", || {
        ferry::Runtime::builder()
            .processors(2)
            .run(|| {
                let listener = TcpListener::bind("127.0.0.1:0").unwrap();
                let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
                let (mut server, _) = listener.accept().unwrap();
                client.set_nodelay(true).unwrap();
                server.set_nodelay(true).unwrap();
                let echo = ferry::spawn(move || {
                    // Reads into a buffer larger than a message: short reads.
                    let mut buf = [0u8; 64];
                    for i in 0..ROUNDS {
                        let n = server.read(&mut buf).unwrap();
                        assert_eq!(&buf[..n], &i.to_le_bytes(), "round {i}");
                        server.write_all(&buf[..n]).unwrap();
                    }
                    // Then a bulk write larger than the socket's buffers:
                    // short writes, each woken by the room the reader makes.
                    let bulk: Vec<u8> = (0..BULK).map(|i| (i % 251) as u8).collect();
                    server.write_all(&bulk).unwrap();
                });
                let mut buf = [0u8; 4];
                for i in 0..ROUNDS {
                    // Every few rounds the peer waits, so that the echo
                    // thread parks after its short read.
                    if i % 16 == 0 {
                        ferry::thread::sleep(Duration::from_millis(1));
                    }
                    client.write_all(&i.to_le_bytes()).unwrap();
                    client.read_exact(&mut buf).unwrap();
                    assert_eq!(buf, i.to_le_bytes());
                }
                let mut got = 0;
                let mut chunk = vec![0u8; 64 << 10];
                while got < BULK {
                    if got % (1 << 20) < chunk.len() {
                        ferry::thread::sleep(Duration::from_millis(1));
                    }
                    let n = client.read(&mut chunk).unwrap();
                    assert_ne!(n, 0, "end of stream after {got} bytes");
                    for (k, b) in chunk[..n].iter().enumerate() {
                        assert_eq!(*b, ((got + k) % 251) as u8, "byte {}", got + k);
                    }
                    got += n;
                }
                echo.join().unwrap();
            })
            .unwrap();
    });
}

#[test]
fn a_read_timeout_ends_the_wait_with_would_block() {
    let _serial = one_at_a_time();
    ferry::Runtime::builder()
        .processors(1)
        .run(|| {
            let (a, _b) = ferry::net::UnixStream::pair().unwrap();
            assert_eq!(
                a.set_read_timeout(Some(Duration::ZERO)).unwrap_err().kind(),
                ErrorKind::InvalidInput
            );
            a.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
            // Another thread keeps running meanwhile: the wait parks.
            let other = ferry::spawn(|| (0..1000).map(|_| ferry::yield_now()).count());
            let e = (&a).read(&mut [0u8; 4]).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::WouldBlock);
            assert_eq!(other.join().unwrap(), 1000);
        })
        .unwrap();
}

/// A TCP connection on loopback: its client end (shared, for a thread
/// that waits on it and one that shuts it down) and its server end.
fn loopback_pair() -> (Arc<TcpStream>, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    (Arc::new(client), server)
}

#[test]
fn shutdown_wakes_a_parked_reader_with_end_of_file() {
    let _serial = one_at_a_time();
    ferry::Runtime::builder()
        .processors(1)
        .run(|| {
            let (client, _server) = loopback_pair();
            let reader = {
                let c = Arc::clone(&client);
                ferry::spawn(move || (&*c).read(&mut [0u8; 8]).unwrap())
            };
            // One processor: the reader runs up to its park before this
            // thread runs again after a yield.
            ferry::yield_now();
            ferry::yield_now();
            client.shutdown(Shutdown::Both).unwrap();
            assert_eq!(reader.join().unwrap(), 0);
        })
        .unwrap();
}

#[test]
fn shutdown_wakes_a_parked_writer_with_an_error() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let _serial = one_at_a_time();
    ferry::Runtime::builder()
        .processors(1)
        .run(|| {
            // The peer never reads: the writer fills both buffers and parks.
            let (client, _server) = loopback_pair();
            let written = Arc::new(AtomicUsize::new(0));
            let writer = {
                let (c, written) = (Arc::clone(&client), Arc::clone(&written));
                ferry::spawn(move || {
                    let chunk = [7u8; 64 * 1024];
                    loop {
                        match (&*c).write(&chunk) {
                            Ok(n) => written.fetch_add(n, Ordering::SeqCst),
                            Err(e) => return e.kind(),
                        };
                    }
                })
            };
            // One processor, no time slice: while this thread sleeps the
            // writer runs until it parks; once the count stops moving
            // over a sleep, it waits on its socket.
            let mut seen = usize::MAX;
            loop {
                ferry::sleep(Duration::from_millis(20));
                let now = written.load(Ordering::SeqCst);
                if now == seen && now > 0 {
                    break;
                }
                seen = now;
            }
            client.shutdown(Shutdown::Both).unwrap();
            assert_eq!(writer.join().unwrap(), ErrorKind::BrokenPipe);
        })
        .unwrap();
}

#[test]
fn abort_ends_a_socket_wait_with_interrupted() {
    let _serial = one_at_a_time();
    ferry::Runtime::builder()
        .processors(1)
        .run(|| {
            let (a, _b) = ferry::net::UnixStream::pair().unwrap();
            let reader = ferry::spawn(move || (&a).read(&mut [0u8; 4]).map_err(|e| e.kind()));
            // One processor: the reader runs up to its park before this
            // thread runs again after a yield.
            ferry::yield_now();
            ferry::yield_now();
            assert!(reader.thread().abort(), "the reader waits on its socket");
            assert_eq!(reader.join().unwrap(), Err(ErrorKind::Interrupted));
        })
        .unwrap();
}

#[test]
fn run_returns_with_a_thousand_threads_parked_on_sockets_and_leaves_no_fds() {
    let _serial = one_at_a_time();
    // Descriptors are counted process-wide: in a child of its own, apart
    // from the other tests' sockets.
    if std::env::var_os("FERRY_NET_FDS_CHILD").is_none() {
        let name = "run_returns_with_a_thousand_threads_parked_on_sockets_and_leaves_no_fds";
        let status = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", name, "--nocapture"])
            .env("FERRY_NET_FDS_CHILD", "1")
            .status()
            .unwrap();
        assert!(status.success(), "the child failed: {status}");
        return;
    }
    raise_nofile();
    let before = fds();
    ferry::Runtime::builder()
        .processors(1)
        .run(|| {
            let gate = Arc::new(ferry::sync::Barrier::new(1001));
            let reading = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            for _ in 0..500 {
                let (a, b) = ferry::net::UnixStream::pair().unwrap();
                for mut s in [a, b] {
                    let (gate, reading) = (Arc::clone(&gate), Arc::clone(&reading));
                    ferry::spawn(move || {
                        gate.wait();
                        reading.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let _ = s.read(&mut [0u8; 1]);
                        unreachable!("nobody writes");
                    });
                }
            }
            gate.wait();
            // One processor, run in turn: once all have begun their read
            // and this thread ran again, each has parked.
            while reading.load(std::sync::atomic::Ordering::Relaxed) < 1000 {
                ferry::yield_now();
            }
            ferry::yield_now();
        })
        .unwrap();
    assert_eq!(
        fds(),
        before,
        "sockets or reactor descriptors left after run"
    );
}

/// Thousands of sockets parking for the first time at once, on a runtime
/// with a short time slice and few kernel threads: each first park makes
/// the socket's wait lists (in chunks of 1,024, made by whichever thread
/// gets there first). A thread that reaches a chunk being made must not
/// wait for its maker in the kernel: a time slice may have switched the
/// maker out, and each waiting kernel thread would cost its processor a
/// takeover, until no kernel thread is left to run the maker. Every reader
/// wakes with its byte.
#[test]
fn thousands_of_first_parks_at_once_never_wait_for_a_chunk_in_the_kernel() {
    const SOCKETS: usize = 4096;
    let _serial = one_at_a_time();
    raise_nofile();
    common::within(common::WATCHDOG, "first parks of many sockets", || {
        ferry::Runtime::builder()
            .processors(2)
            .time_slice(Some(Duration::from_micros(20)))
            .max_kernel_threads(32)
            .run(|| {
                let gate = Arc::new(ferry::sync::Barrier::new(SOCKETS + 1));
                let mut writers = Vec::with_capacity(SOCKETS);
                let readers: Vec<_> = (0..SOCKETS)
                    .map(|i| {
                        let (mut r, w) = ferry::net::UnixStream::pair().unwrap();
                        writers.push(w);
                        let gate = Arc::clone(&gate);
                        ferry::spawn(move || {
                            gate.wait();
                            let mut b = [0u8; 1];
                            r.read_exact(&mut b).unwrap();
                            assert_eq!(b[0], i as u8);
                        })
                    })
                    .collect();
                gate.wait();
                // Let the readers park (on their first park, most of them).
                ferry::sleep(Duration::from_millis(50));
                for (i, w) in writers.iter_mut().enumerate() {
                    w.write_all(&[i as u8]).unwrap();
                }
                for r in readers {
                    r.join().unwrap();
                }
            })
            .unwrap();
    });
}

/// Readers and writers sharing streams make their first blocking
/// operations at the same moment, a thousand streams at once: both of a
/// pair register the socket together, and the one that finds it already
/// in the epoll set takes the other's registration instead of failing
/// with `EEXIST`. Every byte arrives.
#[test]
fn a_reader_and_a_writer_sharing_a_socket_register_it_together() {
    const PAIRS: usize = 1000;
    let _serial = one_at_a_time();
    raise_nofile();
    common::within(common::WATCHDOG, "shared first registrations", || {
        ferry::Runtime::builder()
            .processors(2)
            .run(|| {
                let gate = Arc::new(ferry::sync::Barrier::new(2 * PAIRS));
                let mut others = Vec::new();
                let mut threads = Vec::new();
                for _ in 0..PAIRS {
                    let (a, b) = ferry::net::UnixStream::pair().unwrap();
                    let a = Arc::new(a);
                    // One thread of `a` reads (nothing there: it parks),
                    // the other reads too, from the same moment.
                    for _ in 0..2 {
                        let (a, gate) = (Arc::clone(&a), Arc::clone(&gate));
                        threads.push(ferry::spawn(move || {
                            gate.wait();
                            let mut byte = [0u8; 1];
                            (&*a).read_exact(&mut byte).unwrap();
                            byte[0]
                        }));
                    }
                    others.push(b);
                }
                ferry::sleep(std::time::Duration::from_millis(50));
                for b in &mut others {
                    b.write_all(&[9, 9]).unwrap();
                }
                for t in threads {
                    assert_eq!(t.join().unwrap(), 9);
                }
            })
            .unwrap();
    });
}
