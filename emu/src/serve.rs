//! Serving a front from a command line: the flags that configure it, what it prints when it
//! comes up, and the counters it prints while it runs. Shared by the `shardwise-emu` binary
//! and `cargo xtask emu`, which differ only in where their Cassandra comes from.

use std::fmt::Write as _;
use std::time::Duration;

use crate::{FrontConfig, FrontHandle, TabletsMode};

/// The flags every front command line accepts, for usage texts.
pub const FRONT_FLAGS: &str = "  --shards N              shards per emulated node (default 8)
  --ignore-msb N          SCYLLA_SHARDING_IGNORE_MSB (default 12)
  --miss-delay-us N       extra latency of a request that reaches the wrong shard
  --port P                regular port (default: a free one)
  --shard-aware-port P    shard-aware port (default: a free one)
  --keyspace NAME         keyspace of the stand-in tables (default shardwise_emu)
  --tablets-mode M        tablets_mode_for_new_keyspaces: disabled (default: vnodes unless a
                          keyspace asks for tablets) or enabled (Scylla's default: tablets for
                          NetworkTopologyStrategy keyspaces unless they say enabled: false)
";

/// A front flag with a value that does not fit it.
#[derive(Debug, thiserror::Error)]
#[error("{flag}: {value:?} is not {what}")]
pub struct BadFlag {
    /// The flag.
    pub flag: String,
    /// The value given.
    pub value: String,
    /// What the flag takes.
    pub what: &'static str,
}

/// Applies `flag value` to `config` if `flag` is one of [`FRONT_FLAGS`]; `Ok(false)` when
/// it is not a front flag (the caller's own flags, or an unknown one).
pub fn apply_front_flag(config: &mut FrontConfig, flag: &str, value: &str) -> Result<bool, BadFlag> {
    let bad = |what| BadFlag { flag: flag.to_string(), value: value.to_string(), what };
    match flag {
        "--shards" => {
            config.shards = value.parse().ok().filter(|n| (1..=1024).contains(n)).ok_or_else(|| bad("1..1024"))?
        }
        "--ignore-msb" => config.ignore_msb = value.parse().ok().filter(|n| *n < 64).ok_or_else(|| bad("0..63"))?,
        "--miss-delay-us" => {
            let us: u64 = value.parse().map_err(|_| bad("a number of microseconds"))?;
            config.miss_delay = Some(Duration::from_micros(us));
        }
        "--port" => config.port = value.parse().map_err(|_| bad("a port"))?,
        "--shard-aware-port" => config.shard_aware_port = value.parse().map_err(|_| bad("a port"))?,
        "--keyspace" => config.emu_keyspace = value.to_string(), // the front checks the name
        "--tablets-mode" => {
            config.tablets_mode = match value {
                "disabled" => TabletsMode::Disabled,
                "enabled" => TabletsMode::Enabled,
                _ => return Err(bad("disabled or enabled")),
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// What a front serves, in a few lines: shards, each node's addresses, the contact point.
pub fn announce(front: &FrontHandle) -> String {
    let mut out = format!(
        "Scylla emulation front up: {} shards per node, ignore_msb {}, miss delay {:?}\n",
        front.sharder().nr_shards(),
        front.sharder().ignore_msb(),
        front.config().miss_delay
    );
    for n in front.nodes() {
        let host_id = n.host_id.map(|h| h.to_string()).unwrap_or_else(|| "?".into());
        let _ = writeln!(
            out,
            "  Cassandra {}  ->  front {}  shard-aware {}  (host id {host_id})",
            n.upstream, n.addr, n.shard_aware_addr
        );
    }
    let _ = writeln!(out, "contact point (Scylla): {}", front.addr());
    let _ =
        write!(out, "counters: SELECT * FROM {}.front_stats (through the front); Ctrl-C stops", front.emu_keyspace());
    out
}

/// Prints the front's counters whenever they changed, every 10 s, until `stop()` says so;
/// then prints them once more.
pub fn report_until(front: &FrontHandle, stop: impl Fn() -> bool) {
    let mut last = front.stats();
    let mut ticks = 0u32;
    while !stop() {
        std::thread::sleep(Duration::from_millis(200));
        ticks += 1;
        if ticks >= 50 {
            ticks = 0;
            let now = front.stats();
            if now != last {
                println!("{now}");
                last = now;
            }
        }
    }
    println!("{}", front.stats());
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn front_flags() {
        let mut c = FrontConfig::default();
        assert!(apply_front_flag(&mut c, "--shards", "4").unwrap());
        assert!(apply_front_flag(&mut c, "--miss-delay-us", "50").unwrap());
        assert!(!apply_front_flag(&mut c, "--nodes", "3").unwrap());
        assert_eq!((c.shards, c.miss_delay), (4, Some(Duration::from_micros(50))));
        assert!(apply_front_flag(&mut c, "--tablets-mode", "enabled").unwrap());
        assert_eq!(c.tablets_mode, TabletsMode::Enabled);
        for (flag, value) in [
            ("--shards", "0"),
            ("--shards", "x"),
            ("--ignore-msb", "64"),
            ("--port", "70000"),
            ("--tablets-mode", "enforced"),
        ] {
            assert!(apply_front_flag(&mut c, flag, value).is_err(), "{flag} {value}");
        }
    }
}
