//! TUI benchmarks (written below).
fn main() {}
