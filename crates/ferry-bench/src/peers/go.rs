//! Go as a peer of the `threads` experiment: the standard-library program
//! in `crates/ferry-bench/go/`, built once per invocation with `go build`
//! (`GOTOOLCHAIN=local`, `GOPROXY=off`: nothing is downloaded) into a
//! temporary directory and run once per timed run with `GOMAXPROCS` set; it
//! times its own loop and prints `name ns_per_op` lines. `go f()` +
//! `sync.WaitGroup`, `runtime.Gosched`, `sync.Mutex`, `sync.Cond`.
//!
//! This module owns building, running and parsing the program; the C
//! program of `--lang c` prints the same lines ([`parse`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::thread_ops::{FORK_BATCH, Kind, Op};

/// Where the program's source is.
pub fn source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("go")
}

/// The built program; the temporary directory goes when it is dropped.
#[derive(Debug)]
pub struct Program {
    dir: PathBuf,
    bin: PathBuf,
}

impl Drop for Program {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Builds the program with the installed `go` (offline: `GOPROXY=off`,
/// `GOTOOLCHAIN=local`). `Err` says why there is none.
pub fn build() -> Result<Program, String> {
    build_in(&source_dir(), "threads")
}

/// Builds the Go program whose source is in `src` (offline, as
/// [`build`]) into a temporary directory named after `name`.
pub fn build_in(src: &Path, name: &str) -> Result<Program, String> {
    let dir = std::env::temp_dir().join(format!("ferry-bench-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    let bin = dir.join(format!("{name}-go"));
    let program = Program {
        dir,
        bin: bin.clone(),
    };
    let out = Command::new("go")
        .arg("build")
        .arg("-o")
        .arg(&bin)
        .arg(".")
        .current_dir(src)
        .env("GOTOOLCHAIN", "local")
        .env("GOPROXY", "off")
        .output()
        .map_err(|e| format!("go is not installed ({e})"))?;
    if !out.status.success() {
        return Err(format!(
            "go build failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(program)
}

impl Program {
    /// The built executable.
    pub fn path(&self) -> &Path {
        &self.bin
    }

    /// One timed run of `kind` with `n` operations and `GOMAXPROCS=procs`:
    /// `(row, ns per op)` for each row the kind has.
    pub fn run(&self, kind: Kind, n: u64, procs: usize) -> Result<Vec<(Op, f64)>, String> {
        let out = Command::new(&self.bin)
            .args(["-case", kind.go_name(), "-n", &n.to_string()])
            .args(["-batch", &FORK_BATCH.to_string()])
            .env("GOMAXPROCS", procs.to_string())
            .output()
            .map_err(|e| format!("cannot run the Go program: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "the Go program failed on {}: {}",
                kind.go_name(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        parse(&String::from_utf8_lossy(&out.stdout), kind)
    }
}

/// Parses the program's `name ns_per_op` lines into the kind's rows.
pub fn parse(stdout: &str, kind: Kind) -> Result<Vec<(Op, f64)>, String> {
    let mut got = HashMap::new();
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let mut parts = line.split_whitespace();
        let (Some(name), Some(value), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(format!("unexpected line from the Go program: {line:?}"));
        };
        let ns: f64 = value
            .parse()
            .map_err(|_| format!("unexpected number from the Go program: {line:?}"))?;
        got.insert(name.to_owned(), ns);
    }
    kind.rows()
        .iter()
        .map(|&row| {
            let name = match row {
                Op::Fork => "fork",
                Op::Create => "create",
                Op::Destroy => "destroy",
                _ => kind.go_name(),
            };
            got.get(name)
                .map(|&ns| (row, ns))
                .ok_or_else(|| format!("the Go program printed no {name:?} line"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_output_is_parsed_into_rows() {
        let rows = parse("create 10.5\ndestroy 20.25\nfork 30.75\n", Kind::Fork).unwrap();
        assert_eq!(
            rows,
            vec![(Op::Fork, 30.75), (Op::Create, 10.5), (Op::Destroy, 20.25)]
        );
        assert_eq!(
            parse("yield 150\n", Kind::Yield).unwrap(),
            vec![(Op::Yield, 150.0)]
        );
        assert!(parse("yield\n", Kind::Yield).is_err());
        assert!(parse("pingpong 3\n", Kind::Yield).is_err());
    }
}
