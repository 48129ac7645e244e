//! Consistency levels by name, for both drivers at once: the runners take
//! `--consistency LOCAL_QUORUM` and hand each driver its own type.

use anyhow::bail;

/// The consistency named `s` (case-insensitive, `-` or `_`), as shardwise's
/// and the official driver's type.
pub fn parse_consistency(
    s: &str,
) -> anyhow::Result<(shardwise::protocol::consistency::Consistency, scylla::statement::Consistency)> {
    use scylla::statement::Consistency as O;
    use shardwise::protocol::consistency::Consistency as S;
    Ok(match s.to_ascii_uppercase().replace('-', "_").as_str() {
        "ANY" => (S::Any, O::Any),
        "ONE" => (S::One, O::One),
        "TWO" => (S::Two, O::Two),
        "THREE" => (S::Three, O::Three),
        "QUORUM" => (S::Quorum, O::Quorum),
        "ALL" => (S::All, O::All),
        "LOCAL_QUORUM" => (S::LocalQuorum, O::LocalQuorum),
        "EACH_QUORUM" => (S::EachQuorum, O::EachQuorum),
        "LOCAL_ONE" => (S::LocalOne, O::LocalOne),
        other => bail!("unknown consistency {other:?}"),
    })
}
