//! Records the commit the binary is built from, for `tcpwhy --version`: `git rev-parse` of
//! the checkout's HEAD; "unknown" without git or outside a checkout (a source tarball).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]);
    println!(
        "cargo:rustc-env=TCPWHY_COMMIT={}",
        commit.as_deref().unwrap_or("unknown")
    );
    // Run again when HEAD moves: a checkout (HEAD), a commit (the branch's ref, loose or
    // packed; a directory is watched for any file in it, so a ref written loose for the
    // first time counts).
    let branch = git(&["symbolic-ref", "-q", "HEAD"]);
    let watched = ["HEAD", "packed-refs", "refs/heads"]
        .into_iter()
        .chain(branch.as_deref());
    for what in watched {
        if let Some(p) = git(&["rev-parse", "--git-path", what]) {
            if std::path::Path::new(&p).exists() {
                println!("cargo:rerun-if-changed={p}");
            }
        }
    }
}
