//! What the command-line applications of `shardwise-cdc` share.
//!
//! Modules:
//! * [`connect`]: the connection flags (credentials, TLS) and the session they make.

pub mod connect;

use shardwise::protocol::consistency::Consistency;

/// How a tool ends: success, or one line on stderr that says what went
/// wrong (which node, which table, why) and a failure status.
pub fn exit(tool: &str, result: Result<(), Box<dyn std::error::Error>>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{tool}: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// A consistency level by its CQL name (`ONE`, `QUORUM`, `LOCAL_QUORUM`…, any case).
pub fn consistency(name: &str) -> Result<Consistency, String> {
    Ok(match name.to_ascii_uppercase().as_str() {
        "ONE" => Consistency::One,
        "TWO" => Consistency::Two,
        "THREE" => Consistency::Three,
        "QUORUM" => Consistency::Quorum,
        "ALL" => Consistency::All,
        "LOCAL_QUORUM" => Consistency::LocalQuorum,
        "EACH_QUORUM" => Consistency::EachQuorum,
        "LOCAL_ONE" => Consistency::LocalOne,
        other => return Err(format!("unknown consistency {other}")),
    })
}
