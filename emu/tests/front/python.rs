//! The Python `scylla-driver` (installed by `.ci/run`, or here with pip when
//! missing) through the front: it negotiates the protocol version down to
//! v4, sees a sharded Scylla node, and runs queries, including Scylla-only
//! syntax and a CDC table. Without pip the test fails and says how to get
//! it: it is never skipped.

use std::process::Command;

use shardwise_emu::FrontConfig;
use testkit::fresh_keyspace;

use crate::support::start_front;

const SCRIPT: &str = r#"
import sys
from cassandra.cluster import Cluster
port, ks = int(sys.argv[1]), sys.argv[2]
cluster = Cluster(['127.0.0.1'], port=port, connect_timeout=20)
session = cluster.connect()
print('protocol', cluster.protocol_version)
assert cluster.protocol_version == 4, cluster.protocol_version
host = cluster.metadata.all_hosts()[0]
info = getattr(host, 'sharding_info', None)
print('sharding', info and (info.shards_count, info.sharding_ignore_msb, info.shard_aware_port))
assert info is not None and info.shards_count == 8, 'no sharding info'
row = session.execute("SELECT release_version FROM system.local BYPASS CACHE").one()
print('release', row.release_version)
session.execute("CREATE KEYSPACE %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}" % ks)
session.execute("CREATE TABLE %s.t (pk int PRIMARY KEY, v text) WITH cdc = {'enabled': true}" % ks)
insert = session.prepare("INSERT INTO %s.t (pk, v) VALUES (?, ?)" % ks)
for i in range(200):
    session.execute(insert, (i, 'v%d' % i))
rows = list(session.execute("SELECT pk, v FROM %s.t USING TIMEOUT 10s" % ks))
assert len(rows) == 200, len(rows)
cols = [r.column_name for r in session.execute(
    "SELECT column_name FROM system_schema.columns WHERE keyspace_name = %s AND table_name = 't_scylla_cdc_log'", (ks,))]
assert 'cdc$stream_id' in cols and 'cdc$deleted_v' in cols, cols
gens = list(session.execute("SELECT time FROM system_distributed.cdc_generation_timestamps WHERE key = 'timestamps'"))
assert gens, 'no generation'
print('ok', len(rows), 'rows', len(gens), 'generation(s)')
cluster.shutdown()
"#;

fn python_has_driver() -> bool {
    Command::new("python3").args(["-c", "import cassandra.cluster"]).output().is_ok_and(|o| o.status.success())
}

#[test]
fn python_scylla_driver_through_the_front() {
    if !python_has_driver() {
        let pip = Command::new("python3").args(["-m", "pip", "--version"]).output();
        assert!(
            pip.is_ok_and(|o| o.status.success()),
            "python3 -m pip is not available to install scylla-driver: `apt-get install python3-pip` \
             (.ci/run installs it, and the driver)"
        );
        let install = Command::new("python3")
            .args(["-m", "pip", "install", "--quiet", "scylla-driver"])
            .status()
            .expect("running pip");
        assert!(install.success(), "pip install scylla-driver failed");
        assert!(python_has_driver(), "scylla-driver installed but `import cassandra.cluster` fails");
    }
    let front = start_front(FrontConfig::default());
    let ks = fresh_keyspace("emu_python");
    let out = Command::new("python3")
        .args(["-c", SCRIPT, &front.addr().port().to_string(), &ks])
        .output()
        .expect("running python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}\n{stderr}\n{}", front.stats());
    assert!(out.status.success(), "python exited with {}:\n{stdout}\n{stderr}", out.status);
    assert!(stdout.contains("ok 200 rows"));
    let stats = front.stats();
    assert!(stats.hit_rate() >= 0.95, "python driver's prepared inserts hit rate {:.3}\n{stats}", stats.hit_rate());
}
