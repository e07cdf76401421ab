//! How the `tether` binary is linked.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // Release builds link the binary position-dependent on Linux. A PIE of this size carries
    // 20,000 relative relocations: at every start the loader writes each into `.data.rel.ro`,
    // a private copy of ~90 pages, and tether starts twice per brokered command (the front
    // end, then `tether broker`), so a shell shim call paid ~190 page faults more than it
    // needed (docs/benchmarks.md). The cost: the binary's own code and data are not at a
    // random address (libraries, heap and stacks still are). Debug builds keep the default.
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    if release && linux {
        println!("cargo:rustc-link-arg-bin=tether=-no-pie");
    }
}
