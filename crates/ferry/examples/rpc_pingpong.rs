//! Null calls into another process, each timed alone: `cargo run --release
//! -p ferry --example rpc_pingpong [calls] [payload bytes]` prints the mean,
//! the median, the 90th and 99th percentiles and how many calls took over
//! 5 µs (`docs/results/urpc.md`, "What holds ferry back"). The example runs
//! itself again as the server process; `FERRY_PINGPONG_PIN=1` puts the
//! client on core 0 and the server on core 1; `FERRY_PINGPONG_WORK=N` has
//! the server compute for N µs in each call.

use std::time::{Duration, Instant};

use ferry::rpc::{Client, Fault, RuntimeDir, Server};

fn dir(path: &str) -> RuntimeDir {
    RuntimeDir::open(path, rustix::process::getuid().as_raw()).unwrap()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("serve") {
        let d = dir(&args[2]);
        let work = Duration::from_micros(
            std::env::var("FERRY_PINGPONG_WORK")
                .ok()
                .and_then(|w| w.parse().ok())
                .unwrap_or(0),
        );
        ferry::Runtime::builder()
            .processors(1)
            .run(move || {
                let _s = Server::serve_in(
                    &d,
                    "pingpong",
                    1,
                    move |_op: u32, a: &[u8]| -> Result<Vec<u8>, Fault> {
                        let start = Instant::now();
                        while start.elapsed() < work {
                            std::hint::spin_loop();
                        }
                        Ok(a.to_vec())
                    },
                )
                .unwrap();
                println!("ready");
                loop {
                    ferry::sleep(Duration::from_secs(3600));
                }
            })
            .unwrap();
        return;
    }
    let calls: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let len: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(0);
    let path = std::env::temp_dir().join(format!("ferry-pingpong-{}", std::process::id()));
    let path = path.to_str().unwrap().to_owned();
    let d = dir(&path);
    // FERRY_PINGPONG_PIN=1: the client on core 0, the server on core 1.
    let pin = std::env::var_os("FERRY_PINGPONG_PIN").is_some();
    let exe = std::env::current_exe().unwrap();
    let mut cmd = if pin {
        let mut set = rustix::thread::CpuSet::new();
        set.set(0);
        rustix::thread::sched_setaffinity(None, &set).unwrap();
        let mut c = std::process::Command::new("taskset");
        c.args(["-c", "1"]).arg(&exe);
        c
    } else {
        std::process::Command::new(&exe)
    };
    let mut child = cmd
        .args(["serve", &path])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    ferry::Runtime::builder()
        .processors(1)
        .run(move || {
            let c = Client::connect_in(&d, "pingpong", 1).unwrap();
            let payload = vec![7u8; len];
            for _ in 0..1000 {
                c.call(0, &payload).unwrap();
            }
            let mut samples = Vec::with_capacity(calls);
            let start = Instant::now();
            for _ in 0..calls {
                let t = Instant::now();
                c.call(0, &payload).unwrap();
                samples.push(t.elapsed());
            }
            let total = start.elapsed();
            samples.sort();
            let slow = samples.iter().filter(|d| **d > Duration::from_micros(5)).count();
            println!(
                "{calls} calls of {len} B: mean {:?}, median {:?}, p90 {:?}, p99 {:?}, over 5 us: {slow}",
                total / calls as u32,
                samples[calls / 2],
                samples[calls * 90 / 100],
                samples[calls * 99 / 100]
            );
        })
        .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_dir_all(&path);
}
