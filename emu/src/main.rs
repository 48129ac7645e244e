//! `shardwise-emu`: the Scylla emulation front in front of an already-running
//! Cassandra, without the test harness. Prints the addresses it serves and
//! the counters whenever they change; Ctrl-C stops it.
//!
//! ```text
//! shardwise-emu --upstream 127.0.0.1:9042 [--nodes N] [--shards N] [--ignore-msb N]
//!               [--miss-delay-us N] [--listen IP[:PORT]] [--port P] [--shard-aware-port P]
//!               [--keyspace NAME]
//! ```
//!
//! Bad arguments exit with code 2, a front that cannot start with code 1.

#![forbid(unsafe_code)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use shardwise_emu::serve::{self, BadFlag, FRONT_FLAGS};
use shardwise_emu::{Front, FrontConfig};

fn usage() -> String {
    format!(
        "\
usage: shardwise-emu --upstream HOST:PORT [options]

Runs the Scylla emulation front in front of a running Cassandra 5.0 until Ctrl-C.

  --upstream HOST:PORT    a Cassandra node's native address (repeat it for several nodes)
  --nodes N               N nodes at consecutive IPv4 addresses from the one --upstream,
                          on its port (as `cargo xtask emu --nodes N` lays them out)
  --listen IP[:PORT]      listen on IP (and PORT) instead of each node's own address
                          (one node only)
{FRONT_FLAGS}  -h, --help              this text
"
    )
}

/// Why the command line was refused.
#[derive(Debug, thiserror::Error)]
enum UsageError {
    #[error("{0} takes a value")]
    MissingValue(String),
    #[error(transparent)]
    BadValue(#[from] BadFlag),
    #[error("unknown option {0:?}")]
    Unknown(String),
    #[error("--upstream is required")]
    NoUpstream,
    #[error("{0}")]
    Conflict(&'static str),
}

/// What the command line asks for.
#[derive(Debug)]
enum Command {
    Help,
    Serve { upstreams: Vec<SocketAddr>, config: FrontConfig },
}

fn parse_args(args: &[String]) -> Result<Command, UsageError> {
    let mut upstreams: Vec<SocketAddr> = Vec::new();
    let mut nodes: Option<u8> = None;
    let mut listen: Option<SocketAddr> = None;
    let mut config = FrontConfig::default();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let flag = flag.as_str();
        if matches!(flag, "-h" | "--help") {
            return Ok(Command::Help);
        }
        let value = it.next().ok_or_else(|| UsageError::MissingValue(flag.to_string()))?;
        if serve::apply_front_flag(&mut config, flag, value)? {
            continue;
        }
        let bad = |what| BadFlag { flag: flag.to_string(), value: value.clone(), what };
        match flag {
            "--upstream" => upstreams.push(resolve(value).ok_or_else(|| bad("a reachable HOST:PORT"))?),
            "--nodes" => nodes = Some(value.parse().ok().filter(|n| (1..=9).contains(n)).ok_or_else(|| bad("1..9"))?),
            "--listen" => listen = Some(parse_listen(value).ok_or_else(|| bad("IP or IP:PORT"))?),
            _ => return Err(UsageError::Unknown(flag.to_string())),
        }
    }
    if upstreams.is_empty() {
        return Err(UsageError::NoUpstream);
    }
    if let Some(n) = nodes {
        if upstreams.len() > 1 {
            return Err(UsageError::Conflict("--nodes goes with one --upstream, not several"));
        }
        let first = upstreams[0];
        let IpAddr::V4(ip) = first.ip() else {
            return Err(UsageError::Conflict("--nodes needs an IPv4 --upstream"));
        };
        let base = u32::from(ip);
        upstreams = (0..u32::from(n))
            .map(|i| base.checked_add(i).map(|a| SocketAddr::new(Ipv4Addr::from(a).into(), first.port())))
            .collect::<Option<_>>()
            .ok_or(UsageError::Conflict("--nodes runs past the last IPv4 address"))?;
    }
    if let Some(addr) = listen {
        if upstreams.len() > 1 {
            return Err(UsageError::Conflict("--listen works with one node only (each node needs its own address)"));
        }
        config.bind_ip = Some(addr.ip());
        if addr.port() != 0 {
            if config.port != 0 && config.port != addr.port() {
                return Err(UsageError::Conflict("--listen IP:PORT and --port disagree"));
            }
            config.port = addr.port();
        }
    }
    Ok(Command::Serve { upstreams, config })
}

/// `HOST:PORT` to its first address.
fn resolve(value: &str) -> Option<SocketAddr> {
    value.to_socket_addrs().ok()?.next()
}

/// `IP` or `IP:PORT` (`[v6]:PORT`); port 0 when none is given.
fn parse_listen(value: &str) -> Option<SocketAddr> {
    value.parse::<SocketAddr>().ok().or_else(|| value.parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, 0)))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (upstreams, config) = match parse_args(&args) {
        Ok(Command::Help) => {
            print!("{}", usage());
            return ExitCode::SUCCESS;
        }
        Ok(Command::Serve { upstreams, config }) => (upstreams, config),
        Err(e) => {
            eprintln!("shardwise-emu: {e}\n\n{}", usage());
            return ExitCode::from(2);
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    if let Err(e) = ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst)) {
        eprintln!("shardwise-emu: warning: cannot install the Ctrl-C handler: {e}");
    }
    let front = match Front::start_cluster(&upstreams, config) {
        Ok(front) => front,
        Err(e) => {
            eprintln!("shardwise-emu: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("{}", serve::announce(&front));
    serve::report_until(&front, || stop.load(Ordering::SeqCst));
    front.stop();
    ExitCode::SUCCESS
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn serve(s: &str) -> (Vec<SocketAddr>, FrontConfig) {
        match parse_args(&args(s)).unwrap() {
            Command::Serve { upstreams, config } => (upstreams, config),
            Command::Help => panic!("help"),
        }
    }

    #[test]
    fn options() {
        let (up, c) = serve("--upstream 127.0.0.1:9042 --shards 4 --miss-delay-us 50 --listen 127.0.0.5:19042");
        assert_eq!(up, vec!["127.0.0.1:9042".parse::<SocketAddr>().unwrap()]);
        assert_eq!((c.shards, c.miss_delay, c.port), (4, Some(Duration::from_micros(50)), 19042));
        assert_eq!(c.bind_ip, Some("127.0.0.5".parse().unwrap()));
        let (up, _) = serve("--upstream 127.0.0.1:9042 --nodes 3");
        assert_eq!(
            up.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            ["127.0.0.1:9042", "127.0.0.2:9042", "127.0.0.3:9042"]
        );
        assert!(matches!(parse_args(&args("--help")), Ok(Command::Help)));
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        for bad in [
            "",
            "--shards 4",
            "--upstream",
            "--upstream nowhere",
            "--upstream 127.0.0.1:9042 --shards 0",
            "--upstream 127.0.0.1:9042 --shards x",
            "--upstream 127.0.0.1:9042 --nodes 10",
            "--upstream 127.0.0.1:9042 --port 70000",
            "--upstream 127.0.0.1:9042 --listen here",
            "--upstream 127.0.0.1:9042 --nodes 2 --listen 127.0.0.1",
            "--upstream 255.255.255.255:9042 --nodes 2",
            "--upstream 127.0.0.1:9042 --frobnicate",
        ] {
            assert!(parse_args(&args(bad)).is_err(), "{bad}");
        }
    }
}
