//! Each read and write that moves bytes counts them on the running ferry
//! thread (for the fine-grain policy): the write path, the read path and
//! `BufRead`'s `consume`.

use std::io::{BufRead, Read, Write};

#[test]
fn a_threads_stream_reads_and_writes_add_up_in_its_header() {
    crate::thread::count_stream_bytes_from_now();
    let n = crate::Runtime::builder()
        .processors(1)
        .run(|| {
            let (mut w, r) = super::pipe();
            w.write_all(&[7; 100]).unwrap();
            let mut r = r;
            let mut buf = [0; 60];
            r.read_exact(&mut buf).unwrap();
            let got = r.fill_buf().unwrap().len();
            r.consume(got);
            crate::current().header().take_stream_bytes()
        })
        .unwrap();
    assert_eq!(n, 200);
}
