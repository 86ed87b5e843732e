//! `src/stream/bytes.rs`'s interface over loom cells, one per byte, so
//! that a write and a read of one byte at once is caught: what the stream
//! models (`loom_stream.rs`, `loom_stream_remote.rs`) include as `bytes`.

use loom::cell::UnsafeCell;

pub(super) struct Bytes {
    /// Shared by the `Bytes` made by [`Bytes::share`], as two processes'
    /// mappings of one memfd share its pages.
    cells: std::sync::Arc<Vec<UnsafeCell<u8>>>,
}

// SAFETY: the ring's protocol gives each byte to one side at a time;
// loom checks exactly that through the cells.
unsafe impl Sync for Bytes {}
// SAFETY: plain bytes.
unsafe impl Send for Bytes {}

impl Bytes {
    pub(super) fn new(len: usize) -> Bytes {
        Bytes {
            cells: std::sync::Arc::new((0..len).map(|_| UnsafeCell::new(0)).collect()),
        }
    }

    /// Another view of the same bytes.
    #[allow(dead_code)] // only the cross-process model shares
    pub(super) fn share(&self) -> Bytes {
        Bytes {
            cells: self.cells.clone(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.cells.len()
    }

    fn cell(&self, at: u64, k: usize) -> &UnsafeCell<u8> {
        &self.cells[(at as usize).wrapping_add(k) & (self.cells.len() - 1)]
    }

    /// # Safety
    /// As the real `Bytes::write`.
    pub(super) unsafe fn write(&self, at: u64, src: &[u8]) {
        for (k, &b) in src.iter().enumerate() {
            // SAFETY: the contract (loom checks it).
            self.cell(at, k).with_mut(|p| unsafe { *p = b });
        }
    }

    /// # Safety
    /// As the real `Bytes::read`.
    pub(super) unsafe fn read(&self, at: u64, dst: &mut [u8]) {
        for (k, d) in dst.iter_mut().enumerate() {
            // SAFETY: the contract (loom checks it).
            *d = self.cell(at, k).with(|p| unsafe { *p });
        }
    }

    /// # Safety
    /// As the real `Bytes::write_unwrapped`.
    #[allow(dead_code)] // only the in-process model takes the fast paths
    pub(super) unsafe fn write_unwrapped(&self, at: u64, src: &[u8]) -> bool {
        if (at as usize & (self.len() - 1)) + src.len() > self.len() {
            return false;
        }
        // SAFETY: forwarded.
        unsafe { self.write(at, src) };
        true
    }

    /// # Safety
    /// As the real `Bytes::read_unwrapped`.
    #[allow(dead_code)] // only the in-process model takes the fast paths
    pub(super) unsafe fn read_unwrapped(&self, at: u64, dst: &mut [u8]) -> bool {
        if (at as usize & (self.len() - 1)) + dst.len() > self.len() {
            return false;
        }
        // SAFETY: forwarded.
        unsafe { self.read(at, dst) };
        true
    }
}
