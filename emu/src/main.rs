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
use std::time::Duration;

use shardwise_emu::{Front, FrontConfig};

const USAGE: &str = "\
usage: shardwise-emu --upstream HOST:PORT [options]

Runs the Scylla emulation front in front of a running Cassandra 5.0 until Ctrl-C.

  --upstream HOST:PORT    a Cassandra node's native address (repeat it for several nodes)
  --nodes N               N nodes at consecutive IPv4 addresses from the one --upstream,
                          on its port (as `cargo xtask emu --nodes N` lays them out)
  --shards N              shards per emulated node (default 8)
  --ignore-msb N          SCYLLA_SHARDING_IGNORE_MSB (default 12)
  --miss-delay-us N       extra latency of a request that reaches the wrong shard
  --listen IP[:PORT]      listen on IP (and PORT) instead of each node's own address
                          (one node only)
  --port P                regular port (default: a free one)
  --shard-aware-port P    shard-aware port (default: a free one)
  --keyspace NAME         keyspace of the stand-in tables (default shardwise_emu)
  -h, --help              this text
";

/// Why the command line was refused.
#[derive(Debug, thiserror::Error)]
enum UsageError {
    #[error("{0} takes a value")]
    MissingValue(String),
    #[error("{flag}: {value:?} is not {what}")]
    BadValue { flag: String, value: String, what: &'static str },
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
        if !matches!(
            flag,
            "--upstream"
                | "--nodes"
                | "--shards"
                | "--ignore-msb"
                | "--miss-delay-us"
                | "--listen"
                | "--port"
                | "--shard-aware-port"
                | "--keyspace"
        ) {
            return Err(UsageError::Unknown(flag.to_string()));
        }
        let value = it.next().ok_or_else(|| UsageError::MissingValue(flag.to_string()))?;
        let bad = |what| UsageError::BadValue { flag: flag.to_string(), value: value.clone(), what };
        match flag {
            "--upstream" => upstreams.push(resolve(value).ok_or_else(|| bad("a reachable HOST:PORT"))?),
            "--nodes" => nodes = Some(value.parse().ok().filter(|n| (1..=9).contains(n)).ok_or_else(|| bad("1..9"))?),
            "--shards" => {
                config.shards = value.parse().ok().filter(|n| (1..=1024).contains(n)).ok_or_else(|| bad("1..1024"))?
            }
            "--ignore-msb" => config.ignore_msb = value.parse().ok().filter(|n| *n < 64).ok_or_else(|| bad("0..63"))?,
            "--miss-delay-us" => {
                let us: u64 = value.parse().map_err(|_| bad("a number of microseconds"))?;
                config.miss_delay = Some(Duration::from_micros(us));
            }
            "--listen" => listen = Some(parse_listen(value).ok_or_else(|| bad("IP or IP:PORT"))?),
            "--port" => config.port = value.parse().map_err(|_| bad("a port"))?,
            "--shard-aware-port" => config.shard_aware_port = value.parse().map_err(|_| bad("a port"))?,
            _ => config.emu_keyspace = value.clone(), // --keyspace; the front checks the name
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
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(Command::Serve { upstreams, config }) => (upstreams, config),
        Err(e) => {
            eprintln!("shardwise-emu: {e}\n\n{USAGE}");
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
    println!(
        "Scylla emulation front up: {} shards per node, ignore_msb {}, miss delay {:?}",
        front.sharder().nr_shards(),
        front.sharder().ignore_msb(),
        front.config().miss_delay
    );
    for n in front.nodes() {
        println!(
            "  Cassandra {}  ->  front {}  shard-aware {}  (host id {})",
            n.upstream,
            n.addr,
            n.shard_aware_addr,
            n.host_id.map(|h| h.to_string()).unwrap_or_else(|| "?".into())
        );
    }
    println!("contact point (Scylla): {}", front.addr());
    println!("counters: SELECT * FROM {}.front_stats (through the front); Ctrl-C stops", front.emu_keyspace());
    let mut last = front.stats();
    let mut ticks = 0u32;
    while !stop.load(Ordering::SeqCst) {
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
    front.stop();
    ExitCode::SUCCESS
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
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
