//! The harness of the C tests, shared by `c_api.rs` and `c_rpc.rs`:
//! building `libferry`, compiling a C program against it with gcc or clang
//! (shared or static) and running it with a time limit.

#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The libraries a Rust static library needs from the system.
pub const STATIC_DEPS: &[&str] = &[
    "-lgcc_s",
    "-lutil",
    "-lrt",
    "-lpthread",
    "-lm",
    "-ldl",
    "-lc",
];

/// This crate's directory.
pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `target/<profile>`, where cargo puts `libferry.so` and `libferry.a`,
/// after building them (once per test process).
pub fn lib_dir() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(build_libraries).clone()
}

/// Builds `libferry.so` and `libferry.a` (see [`lib_dir`]).
pub fn build_libraries() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
    let target = dir.parent().unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-p", "ferry-capi"])
        .env("CARGO_TARGET_DIR", target)
        .current_dir(crate_dir());
    if dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let out = cmd.output().expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo build -p ferry-capi failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for lib in ["libferry.so", "libferry.a"] {
        assert!(
            dir.join(lib).exists(),
            "{} is missing: build it with `cargo build -p ferry-capi` (cargo test does)",
            dir.join(lib).display()
        );
    }
    dir
}

/// Which library a C test links.
#[derive(Clone, Copy, Debug)]
pub enum Link {
    /// `libferry.so`, found through an rpath.
    Shared,
    /// `libferry.a` and the system libraries it needs.
    Static,
}

/// How to compile one C test: the compiler, its flags beyond the common
/// ones, and a tag that keeps the executables of different builds apart.
pub struct Cc<'a> {
    /// The compiler (`""`: `cc`, or `c++` for `.cpp`).
    pub compiler: &'a str,
    /// Flags beyond the common ones.
    pub flags: &'a [&'a str],
    /// Added to the executable's name.
    pub tag: &'a str,
}

/// The default build: the system `cc` (`c++` for `.cpp`) at -O2.
pub const DEFAULT: Cc<'static> = Cc {
    compiler: "",
    flags: &["-O2"],
    tag: "",
};

/// The C compilers to build with: `gcc`, and `clang` when it is installed.
pub fn compilers() -> Vec<&'static str> {
    let mut v = vec!["gcc"];
    let clang = Command::new("clang").arg("--version").output();
    if clang.is_ok_and(|o| o.status.success()) {
        v.push("clang");
    } else {
        eprintln!("clang is not installed: the C tests build with gcc only");
    }
    v
}

/// Compiles `source` the default way ([`DEFAULT`]).
pub fn compile(source: &Path, link: Link) -> PathBuf {
    compile_with(source, link, &DEFAULT)
}

/// Compiles `source` with `cc` against the `link` library; returns the
/// executable.
pub fn compile_with(source: &Path, link: Link, cc: &Cc<'_>) -> PathBuf {
    let libs = lib_dir();
    let out_dir = libs.join("ferry-capi-ctests");
    std::fs::create_dir_all(&out_dir).unwrap();
    let stem = source.file_stem().unwrap().to_string_lossy();
    let exe = out_dir.join(format!("{stem}{}-{link:?}", cc.tag).to_lowercase());
    let cpp = source.extension().is_some_and(|e| e == "cpp");
    let compiler = match cc.compiler {
        "" if cpp => "c++",
        "" => "cc",
        c => c,
    };
    let mut cmd = Command::new(compiler);
    if !cpp {
        cmd.arg("-std=c11").arg("-D_GNU_SOURCE");
    }
    cmd.args(cc.flags)
        .args(["-g", "-Wall", "-Wextra", "-Werror", "-pthread"])
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg(source)
        .arg("-o")
        .arg(&exe);
    match link {
        Link::Shared => {
            cmd.arg("-L").arg(&libs).arg("-lferry");
            cmd.arg(format!("-Wl,-rpath,{}", libs.display()));
        }
        Link::Static if compiler == "clang" && cc.flags.contains(&"-flto") => {
            cmd.arg(static_lib_without_bitcode()).args(STATIC_DEPS);
        }
        Link::Static => {
            cmd.arg(libs.join("libferry.a")).args(STATIC_DEPS);
        }
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("the C compiler {compiler} does not run: {e}"));
    assert!(
        out.status.success(),
        "compiling {} ({link:?}, {compiler} {:?}) failed:\n{}",
        source.display(),
        cc.flags,
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// `libferry.a` without the LLVM bitcode rustc embeds in its objects
/// (made once per test process). clang's LTO reads that bitcode, and a
/// clang whose LLVM is older than rustc's refuses it ("Opaque pointers are
/// only supported..."); the README tells clang -flto users to strip it so.
pub fn static_lib_without_bitcode() -> PathBuf {
    static STRIPPED: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    STRIPPED
        .get_or_init(|| {
            let libs = lib_dir();
            let out = libs.join("ferry-capi-ctests").join("libferry-nobitcode.a");
            std::fs::create_dir_all(out.parent().unwrap()).unwrap();
            let status = Command::new("objcopy")
                .args(["--remove-section=.llvmbc", "--remove-section=.llvmcmd"])
                .arg(libs.join("libferry.a"))
                .arg(&out)
                .status()
                .expect("objcopy runs");
            assert!(status.success(), "objcopy could not strip libferry.a");
            out
        })
        .clone()
}

/// How long one run of a C test may take before it counts as hung.
pub const RUN_LIMIT: Duration = Duration::from_secs(120);

/// Runs `exe` with `env`, killing it if it has not ended within
/// [`RUN_LIMIT`]: a hang fails the test (`None`) instead of stalling it.
pub fn run_exe(exe: &Path, env: &[(&str, &str)]) -> Option<Output> {
    let mut cmd = Command::new(exe);
    cmd.envs(env.iter().copied());
    run_command(cmd)
}

/// Runs `cmd` as [`run_exe`] runs a program. It runs in a process group
/// of its own, killed whole at the time limit: a process it forked must
/// not outlive it holding the output pipes open.
pub fn run_command(mut cmd: Command) -> Option<Output> {
    use std::os::unix::process::CommandExt;
    let mut child = cmd
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{:?} does not start: {e}", cmd.get_program()));
    // Drain the pipes while waiting, so a chatty program cannot block.
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stdout.read_to_end(&mut b);
        b
    });
    let err = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stderr.read_to_end(&mut b);
        b
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > RUN_LIMIT {
            // SAFETY: a plain system call; the group is the child's own.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = out.join().unwrap();
    let stderr = err.join().unwrap();
    status.map(|status| Output {
        status,
        stdout,
        stderr,
    })
}

/// Runs `exe` and checks that it ended well and printed `ok`.
pub fn check_run(exe: &Path, env: &[(&str, &str)], what: &str) {
    let Some(out) = run_exe(exe, env) else {
        panic!("{what} hung: killed after {RUN_LIMIT:?}");
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.lines().any(|l| l == "ok"),
        "{what} failed: {:?}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs C test `name` built the default way, shared and static.
pub fn run(name: &str, env: &[(&str, &str)]) {
    let source = crate_dir().join("tests/c").join(name);
    for link in [Link::Shared, Link::Static] {
        let exe = compile(&source, link);
        check_run(&exe, env, &format!("{name} ({link:?})"));
    }
}

/// Builds `source` at -O2 with every compiler at hand, shared and static,
/// and hands each executable to `f` with a label naming the build.
pub fn for_each_build(source: &Path, mut f: impl FnMut(&Path, &str)) {
    for compiler in compilers() {
        let tag = format!("-{compiler}");
        let cc = Cc {
            compiler,
            flags: &["-O2"],
            tag: &tag,
        };
        for link in [Link::Shared, Link::Static] {
            let exe = compile_with(source, link, &cc);
            f(&exe, &format!("{link:?}, {compiler}"));
        }
    }
}

/// Runs C test `name` built at -O2 with every compiler at hand.
pub fn run_with_each_compiler(name: &str, env: &[(&str, &str)]) {
    let source = crate_dir().join("tests/c").join(name);
    for_each_build(&source, |exe, build| {
        check_run(exe, env, &format!("{name} ({build})"));
    });
}

/// Runs C test `name` built with every compiler at hand, at -O2 and -O3,
/// with and without -flto, each with `variants` (extra flags; `&[""]` for
/// none), shared and static.
pub fn run_everywhere(name: &str, variants: &[&str], env: &[(&str, &str)]) {
    let source = crate_dir().join("tests/c").join(name);
    for compiler in compilers() {
        for opt in ["-O2", "-O3"] {
            for lto in [false, true] {
                for variant in variants {
                    let mut flags = vec![opt];
                    if lto {
                        flags.push("-flto");
                    }
                    if !variant.is_empty() {
                        flags.push(variant);
                    }
                    let tag = format!(
                        "-{compiler}{opt}{}{}",
                        if lto { "-lto" } else { "" },
                        variant.trim_start_matches("-D").to_lowercase()
                    );
                    let cc = Cc {
                        compiler,
                        flags: &flags,
                        tag: &tag,
                    };
                    for link in [Link::Shared, Link::Static] {
                        let exe = compile_with(&source, link, &cc);
                        check_run(
                            &exe,
                            env,
                            &format!("{name} ({link:?}, {compiler} {flags:?})"),
                        );
                    }
                }
            }
        }
    }
}

/// Builds `examples/c/<name>.c` the documented way: `cc -O2` with
/// `pkg-config --cflags --libs ferry` and the `ferry.pc` cargo's build
/// wrote; returns the executable.
pub fn build_example(name: &str) -> PathBuf {
    let libs = lib_dir();
    let pc_dir = libs.join("pkgconfig");
    let flags = Command::new("pkg-config")
        .args(["--cflags", "--libs", "ferry"])
        .env("PKG_CONFIG_PATH", &pc_dir)
        .output()
        .expect("pkg-config runs");
    assert!(
        flags.status.success(),
        "pkg-config found no ferry.pc in {}: {}",
        pc_dir.display(),
        String::from_utf8_lossy(&flags.stderr)
    );
    let flags = String::from_utf8(flags.stdout).unwrap();
    let exe = libs.join("ferry-capi-ctests").join(name);
    std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
    let source = crate_dir().join(format!("../../examples/c/{name}.c"));
    let out = Command::new("cc")
        .args(["-O2", "-Wall", "-Wextra", "-Werror"])
        .arg(&source)
        .args(flags.split_whitespace())
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}
