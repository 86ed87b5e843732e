//! Binding (`ferry::rpc`): a client and a server meet by name and share a
//! sealed memfd; every way to get it wrong is a typed error.
//!
//! Plain cases run the server on a thread of the test process. The cases
//! that need real processes (two address spaces sharing the memory, and the
//! descriptor count, which other tests' threads would disturb) re-run this
//! test binary as a child with `FERRY_RPC_CHILD` set; the child runs one of
//! the `child_*` entries below, which do nothing in a normal run.
//!
//! Hand-made peers speak the handshake's wire format (see
//! `src/rpc/bind/wire.rs`): request `ferryRPC`, protocol u32, name length
//! u32, hash u64, zero u64, name; reply `ferryRPC`, status u32, zero u32,
//! hash u64, channel length u64 (all little-endian).

use std::io::{BufRead, BufReader, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ferry::rpc::{self, Error, Listener, Policy, RuntimeDir};
use rustix::fs::SealFlags;

fn uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// A fresh runtime directory of this test's own, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        TempDir(std::env::temp_dir().join(format!("ferry-rpc-test-{}-{n}", std::process::id())))
    }

    fn dir(&self) -> RuntimeDir {
        RuntimeDir::open(&self.0, uid()).unwrap()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The first word of a binding's memory.
fn word(b: &rpc::Binding, i: usize) -> &AtomicU64 {
    assert!(b.mapping().len() >= (i + 1) * 8);
    // SAFETY: the mapping is page-aligned and at least (i+1)*8 bytes long
    // (checked above); it lives as long as `b`.
    unsafe { &*(b.mapping().as_ptr() as *const AtomicU64).add(i) }
}

/// Waits (at most 30 s, a bound against hanging, not a measurement) until
/// `f` holds.
fn wait_until(what: &str, f: impl Fn() -> bool) {
    let end = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < end, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn request(magic: &[u8; 8], protocol: u32, name_len: u32, hash: u64, name: &[u8]) -> Vec<u8> {
    let mut out = magic.to_vec();
    out.extend_from_slice(&protocol.to_le_bytes());
    out.extend_from_slice(&name_len.to_le_bytes());
    out.extend_from_slice(&hash.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(name);
    out
}

#[test]
fn a_thread_server_and_a_client_share_memory_and_know_each_other() {
    let tmp = TempDir::new();
    let dir = tmp.dir();
    let mut listener = Listener::bind_in(&dir, "calc", 0xfeed).unwrap();
    listener.set_channel_len(3 * 4096 + 100).unwrap();
    std::thread::scope(|s| {
        let server = s.spawn(|| listener.accept(&Policy::SameUser).unwrap());
        let client = rpc::connect_raw_in(&dir, "calc", 0xfeed).unwrap();
        let accepted = server.join().unwrap();
        let server = accepted.binding;
        let me = std::process::id() as i32;
        assert_eq!((accepted.peer.pid, accepted.peer.uid), (me, uid()));
        assert_eq!(client.peer_pid(), me);
        assert_eq!(server.peer(), accepted.peer);
        assert_eq!((client.name(), client.version_hash()), ("calc", 0xfeed));
        assert_eq!(client.mapping().len(), 3 * 4096 + 100);
        assert_eq!(server.mapping().len(), 3 * 4096 + 100);
        word(&server, 0).store(0xabc, Ordering::Release);
        assert_eq!(word(&client, 0).load(Ordering::Acquire), 0xabc);
        word(&client, 1).store(0xdef, Ordering::Release);
        assert_eq!(word(&server, 1).load(Ordering::Acquire), 0xdef);
    });
}

#[test]
fn the_received_memfd_is_sealed_and_cannot_shrink() {
    let tmp = TempDir::new();
    let dir = tmp.dir();
    let listener = Listener::bind_in(&dir, "sealed", 1).unwrap();
    std::thread::scope(|s| {
        let server = s.spawn(|| listener.accept(&Policy::SameUser).unwrap());
        let client = rpc::connect_raw_in(&dir, "sealed", 1).unwrap();
        let _server = server.join().unwrap();
        let seals = rustix::fs::fcntl_get_seals(client.mapping()).unwrap();
        assert!(
            seals.contains(SealFlags::SHRINK | SealFlags::SEAL),
            "{seals:?}"
        );
        assert_eq!(
            rustix::fs::ftruncate(client.mapping(), 4096),
            Err(rustix::io::Errno::PERM)
        );
        assert!(rustix::fs::fcntl_add_seals(client.mapping(), SealFlags::WRITE).is_err());
        let fd_flags = rustix::io::fcntl_getfd(client.mapping()).unwrap();
        assert!(fd_flags.contains(rustix::io::FdFlags::CLOEXEC));
    });
}

#[test]
fn a_wrong_version_hash_is_a_mismatch_with_both_hashes_on_both_sides() {
    let tmp = TempDir::new();
    let dir = tmp.dir();
    let listener = Listener::bind_in(&dir, "v", 7).unwrap();
    std::thread::scope(|s| {
        let server = s.spawn(|| listener.accept(&Policy::SameUser));
        let client = rpc::connect_raw_in(&dir, "v", 8);
        assert!(
            matches!(client, Err(Error::VersionMismatch { ours: 8, theirs: 7 })),
            "{client:?}"
        );
        let server = server.join().unwrap();
        assert!(
            matches!(server, Err(Error::VersionMismatch { ours: 7, theirs: 8 })),
            "{server:?}"
        );
    });
}

#[test]
fn an_unknown_name_is_unknown_whether_nobody_or_another_server_answers() {
    let tmp = TempDir::new();
    let dir = tmp.dir();
    assert!(matches!(
        rpc::connect_raw_in(&dir, "nobody", 1),
        Err(Error::UnknownName)
    ));
    assert!(matches!(
        rpc::connect_raw_in(&dir, "bad/name", 1),
        Err(Error::BadName(_))
    ));
    // A link makes the socket of "served" answer to "other" too: the
    // server sees a request for a name it does not serve.
    let listener = Listener::bind_in(&dir, "served", 1).unwrap();
    std::fs::hard_link(listener.path(), dir.socket_path("other").unwrap()).unwrap();
    std::thread::scope(|s| {
        let server = s.spawn(|| listener.accept(&Policy::SameUser));
        let client = rpc::connect_raw_in(&dir, "other", 1);
        assert!(matches!(client, Err(Error::UnknownName)), "{client:?}");
        let server = server.join().unwrap();
        assert!(matches!(server, Err(Error::UnknownName)), "{server:?}");
    });
}

#[test]
fn a_refusing_policy_refuses_on_both_sides_and_sees_the_real_credentials() {
    let tmp = TempDir::new();
    let dir = tmp.dir();
    let listener = Listener::bind_in(&dir, "strict", 1).unwrap();
    let seen_pid = AtomicI32::new(0);
    // Simulates a client of another user: this policy admits nobody of ours.
    let policy = |c: rpc::Credentials| {
        seen_pid.store(c.pid, Ordering::Relaxed);
        c.uid != uid()
    };
    std::thread::scope(|s| {
        let server = s.spawn(|| listener.accept(&Policy::Custom(&policy)));
        let client = rpc::connect_raw_in(&dir, "strict", 1);
        assert!(matches!(client, Err(Error::Refused)), "{client:?}");
        let server = server.join().unwrap();
        assert!(matches!(server, Err(Error::Refused)), "{server:?}");
    });
    assert_eq!(seen_pid.load(Ordering::Relaxed), std::process::id() as i32);
    // The same listener goes on serving a client the policy admits.
    let admit = |c: rpc::Credentials| c.uid == uid();
    std::thread::scope(|s| {
        let server = s.spawn(|| listener.accept(&Policy::Custom(&admit)));
        rpc::connect_raw_in(&dir, "strict", 1).unwrap();
        server.join().unwrap().unwrap();
    });
}

#[test]
fn a_silent_client_cannot_hold_accept_past_its_timeout() {
    let tmp = TempDir::new();
    let dir = tmp.dir();
    let mut listener = Listener::bind_in(&dir, "silent", 1).unwrap();
    listener.set_handshake_timeout(Duration::from_millis(100));
    let silent = UnixStream::connect(listener.path()).unwrap();
    let r = listener.accept(&Policy::SameUser);
    assert!(matches!(r, Err(Error::TimedOut)), "{r:?}");
    // One that sends half a request and stops is timed out too.
    let mut half = UnixStream::connect(listener.path()).unwrap();
    half.write_all(&request(b"ferryRPC", 1, 10, 1, b"abc"))
        .unwrap();
    let r = listener.accept(&Policy::SameUser);
    assert!(matches!(r, Err(Error::TimedOut)), "{r:?}");
    drop((silent, half));
}

#[test]
fn garbage_handshakes_get_clear_errors() {
    let tmp = TempDir::new();
    let dir = tmp.dir();
    let mut listener = Listener::bind_in(&dir, "g", 1).unwrap();
    listener.set_handshake_timeout(Duration::from_secs(10));
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut random = vec![0u8; 4096];
    for b in &mut random {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        *b = seed as u8;
    }
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (random, "wrong magic"),
        (
            request(b"ferryRPC", 1, u32::MAX, 1, b"g"),
            "name length out of range",
        ),
        (
            request(b"ferryRPC", 1, 101, 1, &[b'a'; 101]),
            "name length out of range",
        ),
        (
            request(b"ferryRPC", 1, 0, 1, b""),
            "name length out of range",
        ),
        (
            request(b"ferryRPC", u32::MAX, 1, 1, b"g"),
            "unknown protocol version",
        ),
    ];
    for (bytes, expected) in cases {
        let mut c = UnixStream::connect(listener.path()).unwrap();
        c.write_all(&bytes).unwrap();
        let r = listener.accept(&Policy::SameUser);
        assert!(
            matches!(r, Err(Error::BadHandshake(w)) if w == expected),
            "{r:?}"
        );
        // The client is told: a reply with status 4 (bad request).
        let mut reply = [0u8; 32];
        c.read_exact(&mut reply).unwrap();
        assert_eq!(&reply[0..8], b"ferryRPC");
        assert_eq!(u32::from_le_bytes(reply[8..12].try_into().unwrap()), 4);
    }
    // A client that hangs up mid-request.
    let mut c = UnixStream::connect(listener.path()).unwrap();
    c.write_all(&request(b"ferryRPC", 1, 5, 1, b"g")).unwrap();
    drop(c);
    let r = listener.accept(&Policy::SameUser);
    assert!(matches!(r, Err(Error::PeerDied)), "{r:?}");
}

/// A hand-made server that answers one request with `reply` and the
/// descriptors `fds`.
fn fake_server(
    dir: &RuntimeDir,
    name: &str,
    reply: [u8; 32],
    fds: Vec<std::os::fd::OwnedFd>,
) -> rpc::Result<rpc::Binding> {
    let path = dir.socket_path(name).unwrap();
    let listener = UnixListener::bind(&path).unwrap();
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            let (mut c, _) = listener.accept().unwrap();
            let mut head = [0u8; 32];
            c.read_exact(&mut head).unwrap();
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
            let mut control = rustix::net::SendAncillaryBuffer::new(&mut space);
            let borrowed: Vec<_> = fds.iter().map(|f| f.as_fd()).collect();
            if !borrowed.is_empty() {
                assert!(control.push(rustix::net::SendAncillaryMessage::ScmRights(&borrowed)));
            }
            let iov = [std::io::IoSlice::new(&reply)];
            rustix::net::sendmsg(&c, &iov, &mut control, rustix::net::SendFlags::empty()).unwrap();
            // Keep the connection open until the client is done with it.
            let _ = c.read(&mut [0u8; 1]);
        });
        rpc::connect_raw_in(dir, name, 1)
    });
    std::fs::remove_file(&path).unwrap();
    r
}

fn ok_reply(len: u64) -> [u8; 32] {
    let mut r = [0u8; 32];
    r[0..8].copy_from_slice(b"ferryRPC");
    r[16..24].copy_from_slice(&1u64.to_le_bytes());
    r[24..32].copy_from_slice(&len.to_le_bytes());
    r
}

fn memfd(len: u64, seals: SealFlags) -> std::os::fd::OwnedFd {
    use rustix::fs::MemfdFlags;
    let fd =
        rustix::fs::memfd_create("fake", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).unwrap();
    rustix::fs::ftruncate(&fd, len).unwrap();
    if !seals.is_empty() {
        rustix::fs::fcntl_add_seals(&fd, seals).unwrap();
    }
    fd
}

#[test]
fn a_client_checks_what_a_server_hands_over() {
    let tmp = TempDir::new();
    let dir = tmp.dir();
    let both = SealFlags::SHRINK | SealFlags::SEAL;
    let r = fake_server(&dir, "good", ok_reply(4096), vec![memfd(4096, both)]);
    assert_eq!(r.unwrap().mapping().len(), 4096);
    let r = fake_server(
        &dir,
        "unsealed",
        ok_reply(4096),
        vec![memfd(4096, SealFlags::empty())],
    );
    assert!(matches!(r, Err(Error::BadLayout(_))), "{r:?}");
    let r = fake_server(
        &dir,
        "only-shrink",
        ok_reply(4096),
        vec![memfd(4096, SealFlags::SHRINK)],
    );
    assert!(matches!(r, Err(Error::BadLayout(_))), "{r:?}");
    let r = fake_server(&dir, "size", ok_reply(8192), vec![memfd(4096, both)]);
    assert!(matches!(r, Err(Error::BadLayout(_))), "{r:?}");
    let r = fake_server(
        &dir,
        "write-sealed",
        ok_reply(4096),
        vec![memfd(4096, both | SealFlags::WRITE)],
    );
    assert!(matches!(r, Err(Error::BadLayout(_))), "{r:?}");
    let huge = ok_reply(u64::MAX);
    let r = fake_server(&dir, "huge", huge, vec![memfd(4096, both)]);
    assert!(matches!(r, Err(Error::TooLarge)), "{r:?}");
    let r = fake_server(&dir, "no-fd", ok_reply(4096), vec![]);
    assert!(matches!(r, Err(Error::BadReply)), "{r:?}");
    let two = vec![memfd(4096, both), memfd(4096, both)];
    let r = fake_server(&dir, "two-fds", ok_reply(4096), two);
    assert!(matches!(r, Err(Error::BadReply)), "{r:?}");
    // More than the client's control buffer holds: the kernel truncates.
    let three = vec![memfd(4096, both), memfd(4096, both), memfd(4096, both)];
    let r = fake_server(&dir, "three-fds", ok_reply(4096), three);
    assert!(matches!(r, Err(Error::BadReply)), "{r:?}");
    let file = std::fs::File::open("/proc/self/exe").unwrap();
    let r = fake_server(&dir, "not-memfd", ok_reply(4096), vec![file.into()]);
    assert!(matches!(r, Err(Error::BadLayout(_))), "{r:?}");
    let mut garbage = ok_reply(4096);
    garbage[3] ^= 0xff;
    let r = fake_server(&dir, "garbage", garbage, vec![memfd(4096, both)]);
    assert!(matches!(r, Err(Error::BadReply)), "{r:?}");
}

#[test]
fn a_silent_server_cannot_hold_connect_past_its_timeout() {
    let tmp = TempDir::new();
    let dir = tmp.dir();
    let path = dir.socket_path("mute").unwrap();
    // Connections queue in the backlog; nobody accepts or answers them.
    let _mute = UnixListener::bind(&path).unwrap();
    let r = rpc::connect_raw_with(&dir, "mute", 1, Duration::from_millis(100));
    assert!(matches!(r, Err(Error::TimedOut)), "{r:?}");
}

#[test]
fn runtime_dirs_open_to_others_or_owned_by_another_user_are_refused() {
    let tmp = TempDir::new();
    let dir = tmp.dir();
    let meta = std::fs::metadata(dir.path()).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);
    // Opening an existing good directory again is fine.
    RuntimeDir::open(dir.path(), uid()).unwrap();
    let r = RuntimeDir::open(dir.path(), uid() ^ 1);
    assert!(
        matches!(r, Err(Error::UnsafeDir("it is owned by another user"))),
        "{r:?}"
    );
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let r = RuntimeDir::open(dir.path(), uid());
    assert!(
        matches!(
            r,
            Err(Error::UnsafeDir("it is open to the group or others"))
        ),
        "{r:?}"
    );
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o710)).unwrap();
    assert!(matches!(
        RuntimeDir::open(dir.path(), uid()),
        Err(Error::UnsafeDir(_))
    ));
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let link = dir.path().join("link");
    let target = dir.path().join("target");
    std::fs::create_dir(&target).unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let r = RuntimeDir::open(&link, uid());
    assert!(
        matches!(r, Err(Error::UnsafeDir("it is a symbolic link"))),
        "{r:?}"
    );
    let file = dir.path().join("file");
    std::fs::write(&file, b"").unwrap();
    let r = RuntimeDir::open(&file, uid());
    assert!(
        matches!(r, Err(Error::UnsafeDir("it is not a directory"))),
        "{r:?}"
    );
}

#[test]
fn a_stale_socket_is_replaced_and_a_live_one_is_not() {
    let tmp = TempDir::new();
    let dir = tmp.dir();
    let path = dir.socket_path("stale").unwrap();
    drop(UnixListener::bind(&path).unwrap());
    assert!(path.exists(), "a dropped std listener leaves its file");
    let listener = Listener::bind_in(&dir, "stale", 1).unwrap();
    std::thread::scope(|s| {
        let server = s.spawn(|| listener.accept(&Policy::SameUser).unwrap());
        rpc::connect_raw_in(&dir, "stale", 1).unwrap();
        server.join().unwrap();
    });
    let r = Listener::bind_in(&dir, "stale", 1);
    assert!(matches!(r, Err(Error::NameInUse)), "{r:?}");
    drop(listener);
    assert!(!path.exists(), "a dropped Listener removes its file");
    std::fs::write(&path, b"not a socket").unwrap();
    let r = Listener::bind_in(&dir, "stale", 1);
    assert!(
        matches!(&r, Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::AlreadyExists),
        "{r:?}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), b"not a socket");
}

/// Re-runs this test binary as a child running `entry` (with `env` set).
fn child(entry: &str, env: &[(&str, &str)]) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([entry, "--exact", "--nocapture", "--test-threads=1"]);
    c.env("FERRY_RPC_CHILD", entry);
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

fn is_child(entry: &str) -> bool {
    std::env::var("FERRY_RPC_CHILD").as_deref() == Ok(entry)
}

#[test]
fn a_server_process_and_a_client_process_share_memory() {
    let tmp = TempDir::new();
    let dir = tmp.dir();
    let path = dir.path().to_str().unwrap();
    let mut server = KillOnDrop(
        child("child_serve", &[("FERRY_RPC_DIR", path)])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let server = &mut server.0;
    // The test harness may print "test child_serve ... " on the same line.
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    loop {
        let line = lines
            .next()
            .expect("the child ended before it was ready")
            .unwrap();
        if line.ends_with("ferry-rpc-child-ready") {
            break;
        }
    }
    let b = rpc::connect_raw_in(&dir, "proc", 42).unwrap();
    assert_eq!(b.peer_pid(), server.id() as i32);
    wait_until("the server's word", || {
        word(&b, 0).load(Ordering::Acquire) == 0x5e12_7e12
    });
    word(&b, 1).store(0xc1_1e47, Ordering::Release);
    let status = server.wait().unwrap();
    assert!(status.success(), "{status}");
    // The word the server wrote stays readable after it exited.
    assert_eq!(word(&b, 0).load(Ordering::Acquire), 0x5e12_7e12);
}

/// A child process that is killed if the test fails before it ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// The server process of `a_server_process_and_a_client_process_share_memory`.
#[test]
fn child_serve() {
    if !is_child("child_serve") {
        return;
    }
    let dir = RuntimeDir::open(std::env::var("FERRY_RPC_DIR").unwrap(), uid()).unwrap();
    let listener = Listener::bind_in(&dir, "proc", 42).unwrap();
    println!("ferry-rpc-child-ready");
    let a = listener.accept(&Policy::SameUser).unwrap();
    assert_eq!(a.peer.pid, std::os::unix::process::parent_id() as i32);
    word(&a.binding, 0).store(0x5e12_7e12, Ordering::Release);
    wait_until("the client's word", || {
        word(&a.binding, 1).load(Ordering::Acquire) == 0xc1_1e47
    });
}

#[test]
fn a_hundred_bindings_leak_no_descriptor_or_mapping() {
    let out = child("child_fd_leak", &[]).output().unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("ferry-rpc-no-leak"),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn count_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn count_maps() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .count()
}

/// The process of `a_hundred_bindings_leak_no_descriptor_or_mapping`,
/// alone so that no other test opens descriptors meanwhile.
#[test]
fn child_fd_leak() {
    if !is_child("child_fd_leak") {
        return;
    }
    let tmp = TempDir::new();
    let dir = tmp.dir();
    let listener = Listener::bind_in(&dir, "leak", 3).unwrap();
    // Every tenth client has the wrong hash: failed bindings must not leak
    // either.
    let cycles = |n: usize| {
        std::thread::scope(|s| {
            let server = s.spawn(|| {
                for i in 0..n {
                    let r = listener.accept(&Policy::SameUser);
                    assert_eq!(r.is_ok(), i % 10 != 9, "{r:?}");
                }
            });
            for i in 0..n {
                let hash = if i % 10 == 9 { 4 } else { 3 };
                let b = rpc::connect_raw_in(&dir, "leak", hash);
                assert_eq!(b.is_ok(), hash == 3, "{b:?}");
            }
            server.join().unwrap();
        })
    };
    // One round first, so that lazily made things (the C library's cached
    // thread stack) exist before counting.
    cycles(1);
    let (fds, maps) = (count_fds(), count_maps());
    cycles(100);
    assert_eq!((count_fds(), count_maps()), (fds, maps));
    println!("ferry-rpc-no-leak");
}
