//! Null calls to a server in the same process, each timed alone: `cargo
//! run --release -p ferry --example rpc_local [calls] [processors]` prints
//! the mean and the median. With one processor the caller and the
//! server's activation take turns on it.

use std::time::Instant;

use ferry::rpc::{Client, Fault, RuntimeDir, Server};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let calls: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let processors: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1);
    let path = std::env::temp_dir().join(format!("ferry-rpc-local-{}", std::process::id()));
    let p = path.clone();
    ferry::Runtime::builder()
        .processors(processors)
        .run(move || {
            let d = RuntimeDir::open(&p, rustix::process::getuid().as_raw()).unwrap();
            let _s = Server::serve_in(
                &d,
                "local",
                1,
                |_op: u32, a: &[u8]| -> Result<Vec<u8>, Fault> { Ok(a.to_vec()) },
            )
            .unwrap();
            let c = Client::connect_in(&d, "local", 1).unwrap();
            for _ in 0..100 {
                c.call(0, &[]).unwrap();
            }
            let mut samples = Vec::with_capacity(calls);
            let start = Instant::now();
            for _ in 0..calls {
                let t = Instant::now();
                c.call(0, &[]).unwrap();
                samples.push(t.elapsed());
            }
            let total = start.elapsed();
            samples.sort();
            println!(
                "{calls} calls on {processors} processor(s): mean {:?}, median {:?}, p99 {:?}",
                total / calls as u32,
                samples[calls / 2],
                samples[calls * 99 / 100]
            );
        })
        .unwrap();
    let _ = std::fs::remove_dir_all(&path);
}
