//! The transcript suite: every `emu/tests/transcripts/*.cql` runs through a
//! front ([`shardwise_emu::transcript`]) and must print exactly its
//! `.result` file, which holds what ScyllaDB prints for the script (derived
//! from ScyllaDB's documentation and its own `test/cql` transcripts, each
//! file says from where). On a mismatch the actual output is written beside
//! the script as `.reject`, as ScyllaDB's runner does, and the test fails
//! with the differing lines. `cargo xtask transcript <file.cql>` writes a
//! `.result` from the front's output, for review.

use std::path::PathBuf;

use shardwise_emu::{transcript, FrontConfig};

use crate::support::start_front;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transcripts_match_scylla() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests").join("transcripts");
    let mut scripts: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("transcripts directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "cql"))
        .collect();
    scripts.sort();
    assert!(!scripts.is_empty(), "no transcripts in {}", dir.display());
    let front = start_front(FrontConfig::default());
    let mut failures = Vec::new();
    for script in &scripts {
        let name = script.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let text = std::fs::read_to_string(script).expect("script");
        let expected = std::fs::read_to_string(script.with_extension("result")).unwrap_or_default();
        let actual = match transcript::run(front.addr(), &text).await {
            Ok(a) => a,
            Err(e) => {
                failures.push(format!("{name}: the runner failed: {e}"));
                continue;
            }
        };
        let reject = script.with_extension("reject");
        match transcript::compare(&expected, &actual) {
            Ok(()) => {
                let _ = std::fs::remove_file(&reject);
                println!("PASS {name}");
            }
            Err(diff) => {
                let _ = std::fs::write(&reject, &actual);
                println!("FAIL {name} (actual output in {})\n{diff}", reject.display());
                failures.push(name);
            }
        }
    }
    assert!(failures.is_empty(), "transcripts differ from Scylla's: {failures:?}");
}
