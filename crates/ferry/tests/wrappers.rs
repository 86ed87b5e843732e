//! `ferry::fs`, `ferry::net` and `ferry::process`: the wrappers behave as
//! std's calls do (values, errors, end of file), and on a runtime of one
//! processor a ferry thread blocked in one of them does not stop the others
//! (the tests where two threads wait for each other need `ferry::blocking`
//! to hand the processor off).
//!
//! The fs cases run twice each, through io_uring and through the blocking
//! handoff ([`on_both_paths`]).
//!
//! Every runtime runs under a watchdog, as in `sync.rs`: a processor that a
//! blocking call failed to hand off shows up as a failure naming the test,
//! not as a hung test binary. No test measures time.

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::net::Shutdown;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use ferry::Runtime;
use ferry::fs::{self, File, OpenOptions};
use ferry::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use ferry::process;

mod common;
use common::WATCHDOG;

/// Processors of every test runtime: one, so that a thread blocked in the
/// kernel would stop every other thread if its processor were not handed
/// off.
const PROCESSORS: usize = 1;

/// Runs `f` as the first thread of a one-processor runtime, under the
/// watchdog, and returns its result.
fn on_one_processor<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let what = format!("{what}: a blocked processor or a lost wakeup");
    common::within(WATCHDOG, &what, move || {
        Runtime::builder().processors(PROCESSORS).run(f).unwrap()
    })
}

/// Runs `f` as [`on_one_processor`] does, twice: with the fs operations
/// through the runtime's io_uring, then through the blocking handoff
/// (`Builder::io_uring(false)`), checking each runtime uses the path asked
/// for (where the kernel refuses io_uring, the first run takes the
/// blocking path too, and says so).
fn on_both_paths<F: FnOnce() + Clone + Send + 'static>(what: &str, f: F) {
    for ring in [true, false] {
        let what = format!("{what} (io_uring {ring}): a blocked processor or a lost wakeup");
        let f = f.clone();
        common::within(WATCHDOG, &what, move || {
            Runtime::builder()
                .processors(PROCESSORS)
                .io_uring(ring)
                .run(move || {
                    let backend = ferry::Handle::current().fs_backend();
                    match (ring, &backend) {
                        (true, fs::Backend::IoUring) | (false, fs::Backend::Blocking(_)) => {}
                        (true, fs::Backend::Blocking(why @ fs::Fallback::Kernel(_))) => {
                            eprintln!("io_uring not available here ({why:?}): blocking path twice");
                        }
                        (_, other) => panic!("io_uring({ring}) gave {other:?}"),
                    }
                    f();
                    if !ring {
                        assert_eq!(ferry::Handle::current().fs_ring_stats().completed, 0);
                    }
                })
                .unwrap()
        });
    }
}

/// A path in the temporary directory unique to this process and `name`,
/// removed (if it exists) when dropped.
struct TempPath(PathBuf);

impl TempPath {
    fn new(name: &str) -> TempPath {
        let path =
            std::env::temp_dir().join(format!("ferry-wrappers-{}-{name}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        TempPath(path)
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

// ---- fs ----

#[test]
fn file_round_trip() {
    on_both_paths("file_round_trip", || {
        let tmp = TempPath::new("round-trip");
        let mut file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp.0)
            .unwrap();
        file.write_all(b"hello world").unwrap();
        assert_eq!(file.write(b"!").unwrap(), 1);
        file.flush().unwrap();
        file.sync_all().unwrap();
        assert_eq!(file.metadata().unwrap().len(), 12);

        assert_eq!(file.seek(SeekFrom::Start(6)).unwrap(), 6);
        let mut word = String::new();
        file.read_to_string(&mut word).unwrap();
        assert_eq!(word, "world!");
        assert_eq!(file.stream_position().unwrap(), 12);

        // Through a shared reference, as std allows.
        (&file).seek(SeekFrom::End(-6)).unwrap();
        let mut five = [0; 5];
        (&file).read_exact(&mut five).unwrap();
        assert_eq!(&five, b"world");

        file.set_len(5).unwrap();
        file.sync_data().unwrap();
        assert_eq!(file.metadata().unwrap().len(), 5);
        file.rewind().unwrap();
        let mut all = Vec::new();
        assert_eq!(file.read_to_end(&mut all).unwrap(), 5);
        assert_eq!(all, b"hello");
        // At the end: a read gives end of file.
        assert_eq!(file.read(&mut five).unwrap(), 0);
    });
}

#[test]
fn open_options_append_and_create_new() {
    on_both_paths("open_options_append_and_create_new", || {
        let tmp = TempPath::new("append");
        let mut first = File::create(&tmp.0).unwrap();
        first.write_all(b"one\n").unwrap();
        drop(first);

        let mut log = OpenOptions::new().append(true).open(&tmp.0).unwrap();
        log.write_all(b"two\n").unwrap();
        let mut log2 = File::options().append(true).open(&tmp.0).unwrap();
        log2.write_all(b"three\n").unwrap();
        assert_eq!(fs::read_to_string(&tmp.0).unwrap(), "one\ntwo\nthree\n");

        let err = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp.0)
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(
            File::create_new(&tmp.0).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );

        let fresh = TempPath::new("create-new");
        let mut made = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&fresh.0)
            .unwrap();
        made.write_all(b"x").unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(made.metadata().unwrap().permissions().mode() & 0o777, 0o600);
    });
}

#[test]
fn whole_file_functions() {
    on_both_paths("whole_file_functions", || {
        let tmp = TempPath::new("whole");
        fs::write(&tmp.0, "first").unwrap();
        fs::write(&tmp.0, b"second").unwrap(); // truncates
        assert_eq!(fs::read(&tmp.0).unwrap(), b"second");
        assert_eq!(fs::read_to_string(&tmp.0).unwrap(), "second");

        fs::write(&tmp.0, [0xff, 0xfe]).unwrap();
        assert_eq!(
            fs::read_to_string(&tmp.0).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
    });
}

#[test]
fn file_std_conversions() {
    on_both_paths("file_std_conversions", || {
        use std::os::fd::{AsFd, AsRawFd};
        let tmp = TempPath::new("conversions");
        let std_file = std::fs::File::create(&tmp.0).unwrap();
        let raw = std_file.as_raw_fd();
        let mut file = File::from(std_file);
        assert_eq!(file.as_raw_fd(), raw);
        assert_eq!(file.as_fd().as_raw_fd(), raw);
        assert_eq!(file.as_std().as_raw_fd(), raw);
        file.write_all(b"via ferry").unwrap();
        let mut std_file = File::from_std(file.into_std()).into_std();
        std_file.write_all(b", via std").unwrap();
        let back: std::fs::File = File::from(std_file).into();
        drop(back);
        assert_eq!(fs::read(&tmp.0).unwrap(), b"via ferry, via std");
    });
}

#[test]
fn missing_file_is_not_found() {
    on_both_paths("missing_file_is_not_found", || {
        let tmp = TempPath::new("missing");
        assert_eq!(
            File::open(&tmp.0).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert_eq!(
            fs::read(&tmp.0).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert_eq!(
            fs::read_to_string(&tmp.0).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert_eq!(
            OpenOptions::new()
                .read(true)
                .open(&tmp.0)
                .unwrap_err()
                .kind(),
            io::ErrorKind::NotFound
        );
    });
}

#[test]
fn fifo_opens_meet_across_threads_on_both_paths() {
    let tmp = TempPath::new("fifo");
    let made = Command::new("mkfifo").arg(&tmp.0).status().unwrap();
    assert!(made.success(), "mkfifo failed: {made}");
    let path = tmp.0.clone();
    on_both_paths("fifo_opens_meet_across_threads_on_both_paths", move || {
        // Opening either end of a FIFO blocks in the kernel until the other
        // end is opened: whichever thread gets there first must not keep the
        // one processor from the other.
        let reader_path = path.clone();
        let reader = ferry::spawn(move || fs::read_to_string(reader_path).unwrap());
        ferry::yield_now();
        fs::write(&path, "through the fifo").unwrap();
        assert_eq!(reader.join().unwrap(), "through the fifo");
    });
}

// ---- net: TCP ----

#[test]
fn tcp_echo_between_two_threads_on_one_processor() {
    on_one_processor("tcp_echo_between_two_threads_on_one_processor", || {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = ferry::spawn(move || {
            let mut stream = listener.incoming().next().unwrap().unwrap();
            let mut request = Vec::new();
            stream.read_to_end(&mut request).unwrap();
            stream.write_all(&request).unwrap();
            request.len()
        });
        // Let the server block in `accept` first, so that both threads wait
        // in the kernel for the other in turn.
        ferry::yield_now();

        let mut client = TcpStream::connect(addr).unwrap();
        assert_eq!(client.peer_addr().unwrap(), addr);
        assert_eq!(client.local_addr().unwrap().ip(), addr.ip());
        client.set_nodelay(true).unwrap();
        assert!(client.nodelay().unwrap());
        let message: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        client.write_all(&message).unwrap();
        client.flush().unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        let mut echo = Vec::new();
        client.read_to_end(&mut echo).unwrap();
        assert_eq!(echo, message);
        assert_eq!(server.join().unwrap(), message.len());
    });
}

#[test]
fn tcp_shared_reference_read_and_write_and_clone() {
    on_one_processor("tcp_shared_reference_read_and_write_and_clone", || {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = ferry::spawn(move || {
            let (stream, peer) = listener.accept().unwrap();
            assert_eq!(peer, stream.peer_addr().unwrap());
            // Echo line by line through `&TcpStream`, until end of file.
            let mut buf = [0; 64];
            loop {
                let n = (&stream).read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                (&stream).write_all(&buf[..n]).unwrap();
            }
        });
        let client = TcpStream::connect(addr).unwrap();
        let reader = client.try_clone().unwrap();
        let echoed = ferry::spawn(move || {
            let mut got = [0; 3];
            (&reader).read_exact(&mut got).unwrap();
            got
        });
        (&client).write_all(b"abc").unwrap();
        assert_eq!(&echoed.join().unwrap(), b"abc");
        client.shutdown(Shutdown::Write).unwrap();
        server.join().unwrap();
    });
}

#[test]
fn tcp_connect_to_a_closed_port_fails() {
    on_one_processor("tcp_connect_to_a_closed_port_fails", || {
        // A socket bound to a port but not listening: nothing accepts
        // there, and nobody else can take the port while it is held.
        // SAFETY: plain socket calls on a socket this test owns; `addr` and
        // `len` are valid for `bind` and `getsockname`.
        let (fd, port) = unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            assert!(fd >= 0, "socket: {}", io::Error::last_os_error());
            let mut addr: libc::sockaddr_in = std::mem::zeroed();
            addr.sin_family = libc::AF_INET as libc::sa_family_t;
            addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
            let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            let bound = libc::bind(fd, (&raw const addr).cast(), len);
            assert_eq!(bound, 0, "bind: {}", io::Error::last_os_error());
            let named = libc::getsockname(fd, (&raw mut addr).cast(), &mut len);
            assert_eq!(named, 0, "getsockname: {}", io::Error::last_os_error());
            (fd, u16::from_be(addr.sin_port))
        };
        let err = TcpStream::connect(("127.0.0.1", port)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused, "{err}");
        // SAFETY: `fd` is the socket made above, closed once.
        unsafe { libc::close(fd) };
    });
}

#[test]
fn tcp_read_from_a_closed_peer_gives_end_of_file() {
    on_one_processor("tcp_read_from_a_closed_peer_gives_end_of_file", || {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        // The connection completes in the kernel's backlog before `accept`.
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server_side, _) = listener.accept().unwrap();
        drop(client);
        let mut buf = [0; 16];
        assert_eq!(server_side.read(&mut buf).unwrap(), 0);
        let mut rest = Vec::new();
        assert_eq!(server_side.read_to_end(&mut rest).unwrap(), 0);
        assert_eq!(
            server_side.read_exact(&mut buf).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
    });
}

#[test]
fn tcp_std_conversions() {
    on_one_processor("tcp_std_conversions", || {
        use std::os::fd::AsRawFd;
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let raw = std_listener.as_raw_fd();
        let listener = TcpListener::from_std(std_listener);
        assert_eq!(listener.as_raw_fd(), raw);
        let listener = TcpListener::from(listener.into_std());
        let addr = listener.local_addr().unwrap();
        let client = TcpStream::from(std::net::TcpStream::connect(addr).unwrap());
        let (server_side, _) = listener.accept().unwrap();
        let mut std_server: std::net::TcpStream = server_side.into();
        (&client).write_all(b"hi").unwrap();
        let mut got = [0; 2];
        std_server.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hi");
        assert_eq!(client.as_std().as_raw_fd(), client.as_raw_fd());
        let _std_client: std::net::TcpStream = client.into_std();
    });
}

// ---- net: Unix ----

#[test]
fn unix_pair_between_two_threads_on_one_processor() {
    on_one_processor("unix_pair_between_two_threads_on_one_processor", || {
        let (a, b) = UnixStream::pair().unwrap();
        // The reader blocks in `read` before anything is written.
        let reader = ferry::spawn(move || {
            let mut b = b;
            let mut got = String::new();
            b.read_to_string(&mut got).unwrap();
            b.write_all(b"ack").unwrap();
            got
        });
        ferry::yield_now();
        (&a).write_all(b"over the pair").unwrap();
        a.shutdown(Shutdown::Write).unwrap();
        assert_eq!(reader.join().unwrap(), "over the pair");
        let mut ack = Vec::new();
        (&a).read_to_end(&mut ack).unwrap();
        assert_eq!(ack, b"ack");
    });
}

#[test]
fn unix_listener_echo_between_two_threads_on_one_processor() {
    let tmp = TempPath::new("unix-listener.sock");
    let path = tmp.0.clone();
    on_one_processor(
        "unix_listener_echo_between_two_threads_on_one_processor",
        move || {
            let listener = UnixListener::bind(&path).unwrap();
            assert_eq!(listener.local_addr().unwrap().as_pathname(), Some(&*path));
            let server = ferry::spawn(move || {
                for stream in listener.incoming().take(2) {
                    let mut stream = stream.unwrap();
                    let mut request = Vec::new();
                    stream.read_to_end(&mut request).unwrap();
                    request.reverse();
                    stream.write_all(&request).unwrap();
                }
            });
            // The server blocks in `accept` before anyone connects.
            ferry::yield_now();
            for message in ["first", "second"] {
                let mut client = UnixStream::connect(&path).unwrap();
                client.write_all(message.as_bytes()).unwrap();
                client.shutdown(Shutdown::Write).unwrap();
                let mut reply = String::new();
                client.read_to_string(&mut reply).unwrap();
                assert_eq!(reply, message.chars().rev().collect::<String>());
            }
            server.join().unwrap();
        },
    );
}

#[test]
fn unix_errors_and_end_of_file() {
    let tmp = TempPath::new("unix-errors.sock");
    let path = tmp.0.clone();
    on_one_processor("unix_errors_and_end_of_file", move || {
        assert_eq!(
            UnixStream::connect(&path).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        let listener = UnixListener::bind(&path).unwrap();
        assert_eq!(
            UnixListener::bind(&path).unwrap_err().kind(),
            io::ErrorKind::AddrInUse
        );
        let client = UnixStream::connect(&path).unwrap();
        let (mut server_side, _) = listener.accept().unwrap();
        drop(client);
        let mut buf = [0; 8];
        assert_eq!(server_side.read(&mut buf).unwrap(), 0);
    });
}

// ---- process ----

#[test]
fn process_output_of_echo() {
    on_one_processor("process_output_of_echo", || {
        let out = process::output(Command::new("/bin/echo").arg("hi")).unwrap();
        assert!(out.status.success());
        assert_eq!(out.stdout, b"hi\n");
        assert!(out.stderr.is_empty());
    });
}

#[test]
fn process_wait_and_status_give_the_exit_code() {
    on_one_processor("process_wait_and_status_give_the_exit_code", || {
        let mut child = Command::new("sh").args(["-c", "exit 3"]).spawn().unwrap();
        assert_eq!(process::wait(&mut child).unwrap().code(), Some(3));
        // Waited for already: the same status again.
        assert_eq!(process::wait(&mut child).unwrap().code(), Some(3));

        let status = process::status(Command::new("sh").args(["-c", "exit 3"])).unwrap();
        assert_eq!(status.code(), Some(3));
    });
}

#[test]
fn process_wait_with_output_collects_both_streams() {
    on_one_processor("process_wait_with_output_collects_both_streams", || {
        let child = Command::new("sh")
            .args(["-c", "echo out; echo err >&2; exit 1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = process::wait_with_output(child).unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
    });
}

#[test]
fn process_missing_program_is_not_found() {
    on_one_processor("process_missing_program_is_not_found", || {
        let missing = "/nonexistent/ferry-wrappers-no-such-program";
        assert_eq!(
            process::output(&mut Command::new(missing))
                .unwrap_err()
                .kind(),
            io::ErrorKind::NotFound
        );
        assert_eq!(
            process::status(&mut Command::new(missing))
                .unwrap_err()
                .kind(),
            io::ErrorKind::NotFound
        );
    });
}

#[test]
fn process_waiter_does_not_stop_the_thread_feeding_the_child() {
    on_one_processor(
        "process_waiter_does_not_stop_the_thread_feeding_the_child",
        || {
            let mut child = Command::new("sh")
                .args(["-c", "read line; echo \"got $line\""])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            // The waiter blocks until the child exits, which it does only
            // after this thread has written its line.
            let waiter = ferry::spawn(move || process::wait_with_output(child).unwrap());
            ferry::yield_now();
            stdin.write_all(b"ping\n").unwrap();
            drop(stdin);
            let out = waiter.join().unwrap();
            assert!(out.status.success());
            assert_eq!(out.stdout, b"got ping\n");
        },
    );
}

// ---- outside a runtime ----

#[test]
fn wrappers_work_outside_a_runtime() {
    let tmp = TempPath::new("outside");
    fs::write(&tmp.0, "plain kernel thread").unwrap();
    assert_eq!(fs::read_to_string(&tmp.0).unwrap(), "plain kernel thread");
    let (mut a, mut b) = UnixStream::pair().unwrap();
    a.write_all(b"x").unwrap();
    let mut got = [0; 1];
    b.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"x");
    let out = process::output(Command::new("/bin/echo").arg("hi")).unwrap();
    assert_eq!(out.stdout, b"hi\n");
}
