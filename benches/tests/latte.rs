//! The `latte` binary against a real Cassandra (`testkit::shared_node`, or
//! `SHARDWISE_CASSANDRA`): each script in `benches/latte/` runs its schema,
//! load and run phases on both drivers and the table holds what it wrote;
//! bad scripts and values end in one `error:` line and a non-zero exit.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const DRIVERS: [&str; 2] = ["shardwise", "scylla"];

fn node() -> String {
    testkit::shared_node().expect("a Cassandra node").to_string()
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("latte").join(name)
}

fn latte(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_latte")).args(args).output().expect("running latte")
}

/// Runs `latte args…` and returns its stdout, failing with its output when it fails.
fn ok(args: &[&str]) -> String {
    let out = latte(args);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "latte {args:?} failed:\n{stdout}\n{stderr}");
    stdout.into_owned()
}

/// Runs `latte args…`, which must fail with one `error:` line mentioning `needles`.
fn fails(args: &[&str], needles: &[&str]) {
    let out = latte(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "latte {args:?} succeeded: {stderr}");
    assert!(!stderr.contains("panicked"), "latte {args:?} panicked: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one error line, got: {stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    for n in needles {
        assert!(lines[0].contains(n), "{n:?} not in: {stderr}");
    }
}

/// The figure after `label` in a report line such as `Requests [req]  300  150 req/s`.
fn figure(report: &str, label: &str) -> u64 {
    let line =
        report.lines().find(|l| l.trim_start().starts_with(label)).unwrap_or_else(|| panic!("{label} in {report}"));
    let after = line.split(']').nth(1).unwrap_or_else(|| panic!("{line}"));
    after.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{line}"))
}

async fn session() -> shardwise::Session {
    shardwise::SessionBuilder::new().known_node(node()).build().await.expect("session")
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

fn count(cql: &str) -> i64 {
    rt().block_on(async {
        let s = session().await;
        let r = s.execute(&shardwise::Statement::new(cql.to_string()), ()).await.expect(cql);
        r.first_row::<(i64,)>().expect("rows").expect("a row").0
    })
}

fn temp_script(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("shardwise-latte-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write script");
    path
}

#[test]
fn insert_writes_its_rows_on_both_drivers() {
    let node = node();
    let s = script("insert.rn");
    let s = s.to_str().expect("path");
    for driver in DRIVERS {
        ok(&["schema", s, &node, "--driver", driver]);
        ok(&["load", s, &node, "--driver", driver, "-d", "50"]);
        assert_eq!(count("SELECT count(*) FROM latte_insert.kv"), 50, "{driver}: load");
        let out = ok(&["run", s, &node, "--driver", driver, "-d", "200", "-p", "16", "--tag", "t1"]);
        assert_eq!(figure(&out, "Cycles"), 200, "{out}");
        assert_eq!(figure(&out, "Requests"), 200, "{out}");
        assert_eq!(figure(&out, "Errors"), 0, "{out}");
        assert!(
            out.contains(&format!("driver {driver}")) && out.contains("protocol V4") && out.contains("tags t1"),
            "{out}"
        );
        // Rows 0..200 (the load's 0..50 among them), v1 = 2 pk.
        assert_eq!(count("SELECT count(*) FROM latte_insert.kv"), 200, "{driver}: run");
        let v1 = rt().block_on(async {
            let s = session().await;
            let r = s
                .execute(&shardwise::Statement::new("SELECT v1 FROM latte_insert.kv WHERE pk = 199"), ())
                .await
                .expect("select");
            r.first_row::<(i64,)>().expect("rows").expect("row 199").0
        });
        assert_eq!(v1, 398);
    }
}

#[test]
fn read_reads_one_row_per_cycle_on_both_drivers() {
    let node = node();
    let s = script("read.rn");
    let s = s.to_str().expect("path");
    let json = std::env::temp_dir().join(format!("shardwise-latte-read-{}.json", std::process::id()));
    for driver in DRIVERS {
        ok(&["schema", s, &node, "--driver", driver]);
        // No -d: the script's LOAD_COUNT.
        let out = ok(&["load", s, &node, "--driver", driver]);
        assert_eq!(figure(&out, "Cycles"), 500, "{out}");
        assert_eq!(count("SELECT count(*) FROM latte_read.kv"), 500);
        let out = ok(&[
            "run",
            s,
            &node,
            "--driver",
            driver,
            "-d",
            "200",
            "-w",
            "50",
            "-t",
            "2",
            "-p",
            "8",
            "-o",
            json.to_str().expect("path"),
        ]);
        assert_eq!(figure(&out, "Cycles"), 200, "{out}");
        assert_eq!(figure(&out, "Rows"), 200, "every key read exists: {out}");
        let j = std::fs::read_to_string(&json).expect("json report");
        assert!(j.contains("\"rows\": 200") && j.contains(&format!("\"driver\": \"{driver}\"")), "{j}");
    }
}

#[test]
fn batch_runs_several_statements_per_cycle_on_both_drivers() {
    let node = node();
    let s = script("batch.rn");
    let s = s.to_str().expect("path");
    for driver in DRIVERS {
        ok(&["schema", s, &node, "--driver", driver]);
        ok(&["load", s, &node, "--driver", driver, "-d", "20"]);
        let out = ok(&["run", s, &node, "--driver", driver, "-d", "200", "-r", "2000"]);
        assert_eq!(figure(&out, "Cycles"), 200, "{out}");
        assert_eq!(figure(&out, "Requests"), 600, "{out}");
        assert_eq!(figure(&out, "Rows"), 200, "{out}");
        assert_eq!(count("SELECT count(*) FROM latte_batch.users"), 200);
        assert_eq!(count("SELECT count(*) FROM latte_batch.events"), 200);
    }
    let (payload, tags) = rt().block_on(async {
        let s = session().await;
        let r = s
            .execute(&shardwise::Statement::new("SELECT payload, tags FROM latte_batch.events WHERE user_id = 7"), ())
            .await
            .expect("select");
        r.first_row::<(Vec<u8>, Vec<String>)>().expect("rows").expect("row 7")
    });
    assert_eq!(payload.len(), 32);
    assert_eq!(tags, ["a", "b"]);
}

#[test]
fn params_set_keyspace_count_and_length() {
    let node = node();
    let ks = testkit::fresh_keyspace("latte_params");
    let s = script("params.rn");
    let s = s.to_str().expect("path");
    let (ks_param, rows, len) = (format!("keyspace={ks}"), "rows=37", "len=5");
    for driver in DRIVERS {
        let p = ["-P", ks_param.as_str(), "-P", rows, "-P", len, "--driver", driver];
        ok(&[&["schema", s, &node][..], &p].concat());
        let out = ok(&[&["load", s, &node][..], &p].concat());
        assert_eq!(figure(&out, "Cycles"), 37, "{out}");
        assert_eq!(count(&format!("SELECT count(*) FROM {ks}.kv")), 37);
        let out = ok(&[&["run", s, &node, "-d", "100"][..], &p].concat());
        assert_eq!(figure(&out, "Rows"), 100, "{out}");
    }
    let v = rt().block_on(async {
        let s = session().await;
        let r = s
            .execute(&shardwise::Statement::new(format!("SELECT v FROM {ks}.kv WHERE pk = 3")), ())
            .await
            .expect("select");
        r.first_row::<(String,)>().expect("rows").expect("row 3").0
    });
    assert_eq!(v.chars().count(), 5);
}

/// As latte's own workloads are written: helpers in a sibling file loaded
/// with `mod common;`, and the rows of `latte load` set by `prepare` through
/// `ctx.load_cycle_count` (no `-d`, no `LOAD_COUNT`).
#[test]
fn sibling_modules_and_a_load_cycle_count_set_in_prepare() {
    let node = node();
    let ks = testkit::fresh_keyspace("latte_modules");
    let dir = std::env::temp_dir().join(format!("shardwise-latte-modules-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("common.rn"), "pub fn rows() { 23 }\npub fn double(i) { i * 2 }\n").expect("common.rn");
    let main = dir.join("main.rn");
    std::fs::write(
        &main,
        format!(
            "mod common;\n\
             pub async fn schema(ctx) {{\n\
             ctx.execute(\"CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}\").await?;\n\
             ctx.execute(\"CREATE TABLE IF NOT EXISTS {ks}.kv (pk bigint PRIMARY KEY, v1 bigint)\").await?;\n}}\n\
             pub async fn prepare(ctx) {{\n\
             ctx.load_cycle_count = common::rows();\n\
             ctx.prepare(\"w\", \"INSERT INTO {ks}.kv (pk, v1) VALUES (?, ?)\").await?;\n}}\n\
             pub async fn load(ctx, i) {{\n\
             ctx.execute_prepared(\"w\", [i, common::double(i)]).await?;\n}}\n"
        ),
    )
    .expect("main.rn");
    let s = main.to_str().expect("path");
    for driver in DRIVERS {
        ok(&["schema", s, &node, "--driver", driver]);
        let out = ok(&["load", s, &node, "--driver", driver]);
        assert_eq!(figure(&out, "Cycles"), 23, "{driver}: the count prepare set: {out}");
        assert_eq!(count(&format!("SELECT count(*) FROM {ks}.kv")), 23, "{driver}");
    }
    let v1 = rt().block_on(async {
        let s = session().await;
        let r = s
            .execute(&shardwise::Statement::new(format!("SELECT v1 FROM {ks}.kv WHERE pk = 22")), ())
            .await
            .expect("select");
        r.first_row::<(i64,)>().expect("rows").expect("row 22").0
    });
    assert_eq!(v1, 44, "the sibling module's function wrote it");
    // A negative count is the script's error, on one line.
    std::fs::write(
        &main,
        "pub async fn prepare(ctx) {\n    ctx.load_cycle_count = -1;\n}\npub async fn load(ctx, i) { }\n",
    )
    .expect("main.rn");
    fails(&["load", s, &node], &["load_cycle_count = -1"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_scripts_fail_with_one_line() {
    let node = node();
    // A missing function: no network needed, the script is checked first.
    let only_run = temp_script("only_run.rn", "pub async fn run(ctx, i) { }\n");
    fails(&["schema", only_run.to_str().expect("path"), &node], &["no function `schema`"]);
    fails(&["load", only_run.to_str().expect("path"), &node, "-d", "1"], &["no function `load`"]);
    // A syntax error, with its place.
    let syntax = temp_script("syntax.rn", "pub async fn run(ctx, i) {\n    let = 5;\n}\n");
    fails(&["run", syntax.to_str().expect("path"), &node, "-d", "1"], &["syntax.rn:2:"]);
    // A missing script.
    fails(&["run", "/nonexistent/none.rn", &node], &["cannot read script"]);
    // An unknown prepared statement key.
    let unknown = temp_script(
        "unknown_key.rn",
        "pub async fn run(ctx, i) {\n    ctx.execute_prepared(\"nope\", [i]).await?;\n}\n",
    );
    for driver in DRIVERS {
        fails(&["run", unknown.to_str().expect("path"), &node, "-d", "5", "--driver", driver], &["\"nope\"", "`run`"]);
    }
    // A value of the wrong type for its marker.
    let wrong = temp_script(
        "wrong_type.rn",
        "pub async fn prepare(ctx) {\n    ctx.prepare(\"local\", \"SELECT cluster_name FROM system.local WHERE key = ?\").await?;\n}\n\
         pub async fn run(ctx, i) {\n    ctx.execute_prepared(\"local\", [i]).await?;\n}\n",
    );
    for driver in DRIVERS {
        fails(
            &["run", wrong.to_str().expect("path"), &node, "-d", "5", "--driver", driver],
            &["\"local\"", "`key`", "text"],
        );
    }
    // A runtime error of the script itself.
    let panics = temp_script("panics.rn", "pub async fn run(ctx, i) {\n    let v = [];\n    v[3]\n}\n");
    fails(&["run", panics.to_str().expect("path"), &node, "-d", "1"], &["`run`", "cycle 0"]);
    // A bad statement in schema is the script's mistake.
    let bad_cql =
        temp_script("bad_cql.rn", "pub async fn schema(ctx) {\n    ctx.execute(\"CREATE NONSENSE\").await?;\n}\n");
    fails(&["schema", bad_cql.to_str().expect("path"), &node], &["`schema`", "CREATE NONSENSE"]);
    // A statement the server refuses in the run is the script's mistake too
    // (only timeouts and overload are counted and the run goes on).
    let refused = temp_script(
        "refused.rn",
        "pub async fn run(ctx, i) {\n    ctx.execute(\"SELECT * FROM no_such_ks.t\").await?;\n}\n",
    );
    for driver in DRIVERS {
        fails(
            &["run", refused.to_str().expect("path"), &node, "-d", "5", "--driver", driver],
            &["`run`", "no_such_ks"],
        );
    }
    // A bad -P.
    let out = latte(&["run", only_run.to_str().expect("path"), "-P", "novalue"]);
    assert!(!out.status.success());
}
