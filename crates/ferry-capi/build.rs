//! Writes `ferry.pc` for pkg-config next to the libraries cargo builds
//! (`target/<profile>/pkgconfig/ferry.pc`), so that after
//! `cargo build --release -p ferry-capi`
//!
//! ```sh
//! export PKG_CONFIG_PATH=$PWD/target/release/pkgconfig
//! cc prog.c $(pkg-config --cflags --libs ferry)
//! ```
//!
//! compiles and links a C program against `libferry.so` (with an rpath to
//! it; `pkg-config --static` adds what `libferry.a` needs).

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    // OUT_DIR is <target>/<profile>/build/ferry-capi-<hash>/out.
    let Some(profile_dir) = out.ancestors().nth(3).map(PathBuf::from) else {
        return;
    };
    let include = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("include");
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let pc = format!(
        "libdir={lib}\n\
         includedir={inc}\n\
         \n\
         Name: ferry\n\
         Description: ferry's C API: C-Threads and Mach thread control on user-level threads\n\
         Version: {version}\n\
         Cflags: -I${{includedir}} -fstack-clash-protection\n\
         Libs: -L${{libdir}} -Wl,-rpath,${{libdir}} -lferry\n\
         Libs.private: -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc\n",
        lib = profile_dir.display(),
        inc = include.display(),
    );
    let dir = profile_dir.join("pkgconfig");
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::fs::write(dir.join("ferry.pc"), pc);
    }
}
