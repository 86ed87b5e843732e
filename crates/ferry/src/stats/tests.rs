//! The sequence lock's reader and the checked mapping, on real files.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use super::mapped::Mapping;
use super::page::{self, DATA_WORDS, PAGE_MAGIC, PAGE_SIZE, PAGE_VERSION, PageError, Snapshot};
use super::seqlock;
use super::{MappedPage, OpenError};

fn words(n: usize, v: u64) -> Vec<AtomicU64> {
    (0..n).map(|_| AtomicU64::new(v)).collect()
}

#[test]
fn a_whole_write_is_read_at_the_first_try() {
    let seq = AtomicU64::new(0);
    let w = words(4, 0);
    seqlock::write(&seq, &w, &[1, 2, 3, 4]);
    assert_eq!(seq.load(Relaxed), 2);
    let mut dst = [0; 4];
    assert!(seqlock::try_read(&seq, &w, &mut dst, &mut || {}));
    assert_eq!(dst, [1, 2, 3, 4]);
}

#[test]
fn a_torn_copy_is_refused_and_the_next_try_reads_the_new_write() {
    let seq = AtomicU64::new(0);
    let w = words(4, 0);
    seqlock::write(&seq, &w, &[1, 1, 1, 1]);
    let mut dst = [0; 4];
    // A write lands between the copy and the check: the copy (old words)
    // must not be taken.
    let mut overlap = || seqlock::write(&seq, &w, &[2, 2, 2, 2]);
    assert!(!seqlock::try_read(&seq, &w, &mut dst, &mut overlap));
    assert!(seqlock::read(&seq, &w, &mut dst, 3));
    assert_eq!(dst, [2, 2, 2, 2]);
}

#[test]
fn a_write_under_way_is_never_read_and_the_reader_gives_up() {
    let seq = AtomicU64::new(5); // odd: a writer stopped half-way
    let w = words(4, 9);
    let mut dst = [0; 4];
    assert!(!seqlock::read(&seq, &w, &mut dst, 100));
    assert_eq!(dst, [0; 4]);
    // The next writer starts over from an even value.
    seqlock::write(&seq, &w, &[3, 3, 3, 3]);
    assert_eq!(seq.load(Relaxed), 6);
    assert!(seqlock::read(&seq, &w, &mut dst, 1));
}

/// A fresh file of `len` bytes in a private temp dir.
fn temp_file(name: &str, len: u64) -> (tempdir::Dir, std::path::PathBuf, std::fs::File) {
    let dir = tempdir::Dir::new(name);
    let path = dir.0.join("page");
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .unwrap();
    f.set_len(len).unwrap();
    (dir, path, f)
}

mod tempdir {
    /// A directory removed when dropped.
    pub(super) struct Dir(pub(super) std::path::PathBuf);
    impl Dir {
        pub(super) fn new(name: &str) -> Dir {
            let p = std::env::temp_dir().join(format!("ferry-stats-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir(&p).unwrap();
            Dir(p)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn header(map: &Mapping, magic: u64, version: u64, size: u64) {
    let w = map.words();
    w[0].store(magic, Relaxed);
    w[1].store(version, Relaxed);
    w[2].store(size, Relaxed);
}

#[test]
fn a_page_written_through_one_mapping_is_read_through_another() {
    let (_d, path, f) = temp_file("roundtrip", PAGE_SIZE as u64);
    let map = Mapping::new(&f, true).unwrap();
    header(&map, PAGE_MAGIC, PAGE_VERSION, PAGE_SIZE as u64);
    let snap = Snapshot {
        pid: 77,
        start: 5,
        command: "demo".into(),
        processors: 2,
        max_processors: 2,
        cores: vec![Some(0), Some(1)],
        ..Snapshot::default()
    };
    let mut data = [0u64; DATA_WORDS];
    page::encode(&snap, &mut data);
    seqlock::write(map.seq(), map.data(), &data);
    let read = MappedPage::open(&path).unwrap().read().unwrap();
    assert_eq!(read, snap);
}

#[test]
fn bad_headers_short_files_and_stuck_writes_are_errors() {
    let (_d, path, f) = temp_file("bad", PAGE_SIZE as u64);
    let map = Mapping::new(&f, true).unwrap();
    let page = MappedPage::open(&path).unwrap();
    header(&map, 0xdead, PAGE_VERSION, PAGE_SIZE as u64);
    assert_eq!(page.read(), Err(PageError::BadMagic(0xdead)));
    header(&map, PAGE_MAGIC, 7, PAGE_SIZE as u64);
    assert_eq!(page.read(), Err(PageError::BadVersion(7)));
    header(&map, PAGE_MAGIC, PAGE_VERSION, 1);
    assert_eq!(page.read(), Err(PageError::BadSize(1)));
    header(&map, PAGE_MAGIC, PAGE_VERSION, PAGE_SIZE as u64);
    map.seq().store(1, Relaxed);
    assert_eq!(page.read(), Err(PageError::Busy));
    map.seq().store(2, Relaxed);
    // All zero data: pid 0.
    assert_eq!(page.read(), Err(PageError::BadValue("pid")));

    let (_d2, short, _f2) = temp_file("short", 100);
    match MappedPage::open(&short) {
        Err(OpenError::Page(PageError::TooShort(100))) => {}
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a 100-byte file was mapped as a page"),
    }
}

/// A source for the tests below: reports one channel, or is busy.
struct Fixed {
    busy: bool,
}

impl super::Source for Fixed {
    fn report(&self, out: &mut super::Report) -> bool {
        if self.busy {
            return false;
        }
        out.channels.push(channel("fixed"));
        true
    }
}

fn channel(name: &str) -> super::Channel {
    super::Channel {
        kind: super::ChannelKind::Server,
        name: name.into(),
        peers: 0,
        calls: 0,
        cpu_ns: 0,
    }
}

/// The monitor writes the page; a ferry thread registering a source holds
/// the list meanwhile (and may be preempted holding it): the write keeps
/// the last figures instead of waiting, and so does a source whose own
/// lock is held.
#[test]
fn a_write_keeps_the_last_figures_instead_of_waiting_for_a_held_lock() {
    let mut out = super::Report::default();
    out.channels.push(channel("last"));
    {
        let _held = super::SOURCES.lock().unwrap();
        assert!(
            !super::gather_sources(&mut out),
            "a held list is not waited for"
        );
    }
    assert_eq!(out.channels.len(), 1);
    assert_eq!(out.channels[0].name, "last");

    let busy: std::sync::Arc<dyn super::Source> = std::sync::Arc::new(Fixed { busy: true });
    super::register(std::sync::Arc::downgrade(&busy));
    assert!(!super::gather_sources(&mut out), "a busy source");
    assert_eq!(out.channels[0].name, "last", "the last figures stay");
    drop(busy);

    let fixed: std::sync::Arc<dyn super::Source> = std::sync::Arc::new(Fixed { busy: false });
    super::register(std::sync::Arc::downgrade(&fixed));
    // (Sources of other tests of this process may report too, or be busy
    // for a moment.)
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !super::gather_sources(&mut out) {
        assert!(std::time::Instant::now() < deadline, "sources stay busy");
        std::thread::yield_now();
    }
    assert!(out.channels.iter().any(|c| c.name == "fixed"));
    assert!(out.channels.iter().all(|c| c.name != "last"));
}
