// The shared-state modules compiled here (by `#[path]`) gate their plain
// unit tests with `not(loom)`: set the cfg for this crate only.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(loom)");
    println!("cargo:rustc-cfg=loom");
}
