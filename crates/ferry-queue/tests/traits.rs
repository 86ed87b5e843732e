//! Which handles are `Send` and `Clone`: the kinds' limits as compile-time
//! facts. (What must *not* compile is checked by the `compile_fail` examples
//! in the crate and kind docs.)

use ferry_queue::{mpmc, mpsc, spmc, spsc};

fn send<T: Send>(_: &T) {}
fn clone<T: Clone>(t: &T) -> T {
    t.clone()
}

#[test]
fn every_handle_is_send() {
    let (a, b) = spsc::channel::<String>(2);
    send(&a);
    send(&b);
    let (a, b) = mpsc::channel::<String>(2);
    send(&a);
    send(&b);
    let (a, b) = spmc::channel::<String>(2);
    send(&a);
    send(&b);
    let (a, b) = mpmc::channel::<String>(2);
    send(&a);
    send(&b);
}

#[test]
fn multi_sides_clone_and_share_one_queue() {
    let (tx, rx) = mpsc::channel::<u8>(2);
    clone(&tx).push(1).unwrap();
    assert_eq!(rx.try_pop(), Some(1));

    let (tx, rx) = spmc::channel::<u8>(2);
    tx.push(2).unwrap();
    assert_eq!(clone(&rx).try_pop(), Some(2));

    let (tx, rx) = mpmc::channel::<u8>(2);
    clone(&tx).push(3).unwrap();
    assert_eq!(clone(&rx).try_pop(), Some(3));
}
