//! Compiles `src/bpf/watch.bpf.c` into a BPF object with clang (`$CLANG`, else `clang`), with
//! libbpf's headers (`bpf/bpf_helpers.h`, Debian's libbpf-dev). Without them the crate still
//! builds: `tcpwhy watch` then says it was built without its BPF programs, and everything
//! else in tcpwhy works as before.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let src = "src/bpf/watch.bpf.c";
    println!("cargo:rerun-if-changed={src}");
    println!("cargo:rerun-if-env-changed=CLANG");
    println!("cargo:rustc-check-cfg=cfg(tcpwhy_bpf)");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let obj = out.join("watch.bpf.o");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    // The multiarch include directory holds asm/types.h, which linux/types.h needs.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let (target_arch, multiarch) = match arch.as_str() {
        "x86_64" => ("x86", "/usr/include/x86_64-linux-gnu"),
        "aarch64" => ("arm64", "/usr/include/aarch64-linux-gnu"),
        other => (other, "/usr/include"),
    };
    let status = Command::new(&clang)
        .args(["-O2", "-g", "-target", "bpf"])
        .arg(format!("-D__TARGET_ARCH_{target_arch}"))
        .arg(format!("-I{multiarch}"))
        .args(["-Wall", "-Werror", "-c", src, "-o"])
        .arg(&obj)
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        // Built without the programs: build again once clang or libbpf's headers appear
        // (cargo reruns a build script while a path it watches does not exist), so installing
        // them is enough, without `cargo clean`.
        println!("cargo:rerun-if-changed=/usr/include/bpf/bpf_helpers.h");
        if !clang.contains('/') {
            println!("cargo:rerun-if-changed=/usr/bin/{clang}");
        }
    }
    match status {
        Ok(s) if s.success() => println!("cargo:rustc-cfg=tcpwhy_bpf"),
        Ok(s) => println!(
            "cargo:warning=tcpwhy watch: {clang} could not compile {src} ({s}): watch is built without its BPF programs (needs clang and libbpf-dev)"
        ),
        Err(e) => println!(
            "cargo:warning=tcpwhy watch: {clang} not found ({e}): watch is built without its BPF programs (needs clang and libbpf-dev)"
        ),
    }
}
