//! `cargo xtask features`: does the test build reuse what building xtask
//! compiled?
//!
//! `cargo xtask test` first builds this package, then `cargo test
//! --workspace --all-targets`. Cargo compiles a crate again whenever its
//! features, or those of anything below it, differ between the two builds;
//! xtask's `Cargo.toml` asks for the features the test build unifies to
//! (the two builds took 372 s on a clean 2-core machine that way, 397 s
//! otherwise). This compares the two unit graphs (`cargo +nightly ...
//! --unit-graph`, the only way cargo tells what it would compile) and names
//! each unit of xtask's build that the test build would compile differently.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::ExitCode;

use serde_json::Value;

/// A unit as cargo would fingerprint it, short of the compiler flags (the
/// same for both builds): package, target, mode, features and the same of
/// everything it depends on.
fn unit_keys(graph: &Value) -> Result<Vec<(String, u64)>, String> {
    let units = graph["units"].as_array().ok_or("no \"units\" in cargo's unit graph")?;
    let mut memo: HashMap<usize, u64> = HashMap::new();
    fn key(i: usize, units: &[Value], memo: &mut HashMap<usize, u64>, depth: usize) -> Result<u64, String> {
        use std::hash::{Hash, Hasher};
        if let Some(k) = memo.get(&i) {
            return Ok(*k);
        }
        let u = units.get(i).ok_or_else(|| format!("unit {i} is not in the graph"))?;
        if depth > units.len() {
            return Err("the unit graph has a cycle".into());
        }
        let mut deps = Vec::new();
        for d in u["dependencies"].as_array().map(Vec::as_slice).unwrap_or_default() {
            let index = d["index"].as_u64().ok_or("a dependency without an index")? as usize;
            deps.push(key(index, units, memo, depth + 1)?);
        }
        deps.sort_unstable();
        let mut features: Vec<&str> =
            u["features"].as_array().map(|f| f.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
        features.sort_unstable();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (u["pkg_id"].as_str(), u["target"]["name"].as_str(), u["mode"].as_str(), features, deps).hash(&mut h);
        let k = h.finish();
        memo.insert(i, k);
        Ok(k)
    }
    let mut out = Vec::new();
    for (i, u) in units.iter().enumerate() {
        if u["mode"] != "build" {
            continue;
        }
        let name = format!(
            "{} ({}), features [{}]",
            package(u["pkg_id"].as_str().unwrap_or("?")),
            u["target"]["name"].as_str().unwrap_or("?"),
            u["features"]
                .as_array()
                .map(|f| f.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", "))
                .unwrap_or_default()
        );
        out.push((name, key(i, units, &mut memo, 0)?));
    }
    Ok(out)
}

/// `name@version` from a package id: `registry+https://...#name@1.0`, or
/// `path+file:///w/xtask#0.1.0` where the folder names the package.
fn package(pkg_id: &str) -> String {
    let (source, tail) = pkg_id.rsplit_once('#').unwrap_or(("", pkg_id));
    if tail.contains('@') {
        tail.to_string()
    } else {
        format!("{}@{tail}", source.rsplit('/').next().unwrap_or(source))
    }
}

/// The units of `xtask_graph` (other than xtask's own) that `test_graph`
/// does not have.
pub fn not_reused(xtask_graph: &Value, test_graph: &Value) -> Result<Vec<String>, String> {
    let test: HashSet<u64> = unit_keys(test_graph)?.into_iter().map(|(_, k)| k).collect();
    let mut missing: Vec<String> = unit_keys(xtask_graph)?
        .into_iter()
        .filter(|(name, k)| !test.contains(k) && !name.starts_with("xtask@"))
        .map(|(name, _)| name)
        .collect();
    missing.sort();
    missing.dedup();
    Ok(missing)
}

/// What `cmd` (`what`, for the errors) prints, or its error output.
fn stdout_of(cmd: &mut std::process::Command, what: &str) -> Result<Vec<u8>, String> {
    let out = cmd.output().map_err(|e| format!("could not run {what}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{what}: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(out.stdout)
}

fn unit_graph(root: &Path, args: &[&str]) -> Result<Value, String> {
    let mut cmd = crate::fuzz::cargo_nightly();
    cmd.current_dir(root).args(args).args(["--unit-graph", "-Z", "unstable-options"]);
    let graph = stdout_of(&mut cmd, &format!("cargo +nightly {}", args.join(" ")))?;
    serde_json::from_slice(&graph).map_err(|e| format!("cargo's unit graph: {e}"))
}

/// Compares the two builds; `Ok(list)` names what the test build compiles again.
pub fn check(root: &Path) -> Result<Vec<String>, String> {
    let xtask = unit_graph(root, &["build", "-p", "xtask"])?;
    let tests = unit_graph(root, &["test", "--workspace", "--all-targets", "--no-run"])?;
    not_reused(&xtask, &tests)
}

/// The TLS crates (rustls, ring, aws-lc) in the driver's dependency tree
/// with `features` (`--no-default-features` or nothing): the README says
/// `default-features = false` leaves rustls out.
#[cfg(test)]
pub fn tls_crates(root: &Path, features: &[&str]) -> Result<Vec<String>, String> {
    let mut cmd = crate::steps::cargo();
    cmd.current_dir(root)
        .args(["tree", "-p", "shardwise", "-e", "normal,build", "--prefix", "none", "-f", "{p}"])
        .args(features);
    let tree = stdout_of(&mut cmd, "cargo tree")?;
    let tree = String::from_utf8_lossy(&tree);
    let mut found: Vec<String> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| ["rustls", "ring", "aws-lc"].iter().any(|t| name.starts_with(t)))
        .map(str::to_string)
        .collect();
    found.sort();
    found.dedup();
    Ok(found)
}

/// The workspace's `rust-version` and the dependencies of the publishable
/// crates (normal and build edges, on this platform) that declare a later
/// one: a user's build with the stated minimum would fail on them.
#[cfg(test)]
pub fn later_rust_versions(root: &Path) -> Result<(String, Vec<String>), String> {
    let rustc = stdout_of(std::process::Command::new("rustc").arg("-vV"), "rustc -vV")?;
    let host = String::from_utf8_lossy(&rustc)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .ok_or("rustc -vV names no host")?;
    let mut cmd = crate::steps::cargo();
    cmd.current_dir(root).args(["metadata", "--format-version", "1", "--filter-platform", &host]);
    let meta: Value =
        serde_json::from_slice(&stdout_of(&mut cmd, "cargo metadata")?).map_err(|e| format!("cargo metadata: {e}"))?;
    let packages = meta["packages"].as_array().ok_or("no packages in cargo metadata")?;
    let by_id: HashMap<&str, &Value> = packages.iter().filter_map(|p| Some((p["id"].as_str()?, p))).collect();
    let version = |p: &Value| -> Option<(u64, u64)> {
        let mut parts = p["rust_version"].as_str()?.split('.').map(|n| n.parse::<u64>().ok());
        Some((parts.next()??, parts.next().flatten().unwrap_or(0)))
    };
    let workspace = meta["workspace_members"].as_array().ok_or("no workspace members")?;
    let published: Vec<&str> = workspace
        .iter()
        .filter_map(Value::as_str)
        .filter(|id| by_id.get(id).is_some_and(|p| p["publish"] != serde_json::json!([])))
        .collect();
    let ours = published
        .iter()
        .find_map(|id| by_id.get(id).and_then(|p| p["rust_version"].as_str()))
        .ok_or("no rust-version on the publishable crates")?
        .to_string();
    let minimum = published.iter().find_map(|id| by_id.get(id).and_then(|p| version(p))).ok_or("rust-version")?;
    let nodes: HashMap<&str, &Value> = meta["resolve"]["nodes"]
        .as_array()
        .ok_or("no resolve graph")?
        .iter()
        .filter_map(|n| Some((n["id"].as_str()?, n)))
        .collect();
    let (mut stack, mut seen) = (published.clone(), HashSet::new());
    let mut later = Vec::new();
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        if let Some(p) = by_id.get(id) {
            if version(p).is_some_and(|v| v > minimum) {
                let text = |k: &str| p[k].as_str().unwrap_or("?").to_string();
                later.push(format!("{} {} (rust-version {})", text("name"), text("version"), text("rust_version")));
            }
        }
        for dep in nodes.get(id).and_then(|n| n["deps"].as_array()).map(Vec::as_slice).unwrap_or_default() {
            let runtime = dep["dep_kinds"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|k| k["kind"].is_null() || k["kind"] == "build"));
            if let (true, Some(pkg)) = (runtime, dep["pkg"].as_str()) {
                stack.push(pkg);
            }
        }
    }
    later.sort();
    Ok((ours, later))
}

pub fn run(root: &Path) -> ExitCode {
    match check(root) {
        Ok(missing) if missing.is_empty() => {
            println!("the test build reuses every crate that building xtask compiles");
            ExitCode::SUCCESS
        }
        Ok(missing) => {
            println!("the test build compiles these again (align their features in xtask/Cargo.toml):");
            for m in &missing {
                println!("  {m}");
            }
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("xtask features: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Claim `msrv` (docs/claims.md): no dependency of a publishable crate
    /// needs a later Rust than the workspace's `rust-version` (clippy's
    /// `incompatible_msrv`, on by default, checks the standard library's
    /// APIs against it).
    #[test]
    fn no_dependency_needs_a_later_rust_than_the_stated_minimum() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root");
        let (ours, later) = later_rust_versions(root).expect("cargo metadata");
        assert!(later.is_empty(), "dependencies needing more than Rust {ours}: {later:?}");
        let readme = std::fs::read_to_string(root.join("README.md")).expect("README");
        assert!(readme.contains(&format!("need Rust {ours} ")), "the README states Rust {ours}");
    }

    /// Claim `no-rustls` (docs/claims.md): the driver without its default
    /// features has no TLS crate in its tree, and with them it has rustls
    /// (so the check can see one).
    #[test]
    fn the_driver_without_default_features_has_no_rustls() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root");
        let without = tls_crates(root, &["--no-default-features"]).expect("cargo tree");
        assert!(without.is_empty(), "TLS crates without default features: {without:?}");
        let with = tls_crates(root, &[]).expect("cargo tree");
        assert!(with.iter().any(|c| c == "rustls"), "rustls not found with the default features: {with:?}");
    }

    fn unit(pkg: &str, features: &[&str], deps: &[usize]) -> Value {
        serde_json::json!({
            "pkg_id": format!("registry+https://example#{pkg}"),
            "target": { "name": pkg.split('@').next().unwrap_or(pkg) },
            "mode": "build",
            "features": features,
            "dependencies": deps.iter().map(|i| serde_json::json!({ "index": i })).collect::<Vec<_>>(),
        })
    }

    #[test]
    fn a_unit_differs_when_anything_below_it_does() {
        let tests = serde_json::json!({ "units": [
            unit("zerocopy@0.8", &["derive", "simd"], &[]),
            unit("rand@0.9", &["std"], &[0]),
            unit("tokio@1", &["net"], &[]),
        ]});
        // Same features as the test build's: reused.
        let same = serde_json::json!({ "units": [unit("tokio@1", &["net"], &[]), unit("xtask@0.1", &[], &[0])] });
        assert_eq!(not_reused(&same, &tests).expect("graphs"), Vec::<String>::new());
        // rand's own features match, but zerocopy below it lacks one.
        let drifted = serde_json::json!({ "units": [
            unit("zerocopy@0.8", &["simd"], &[]),
            unit("rand@0.9", &["std"], &[0]),
        ]});
        assert_eq!(
            not_reused(&drifted, &tests).expect("graphs"),
            ["rand@0.9 (rand), features [std]", "zerocopy@0.8 (zerocopy), features [simd]"]
        );
    }

    #[test]
    fn package_names() {
        assert_eq!(package("registry+https://github.com/rust-lang/crates.io-index#tokio@1.54.1"), "tokio@1.54.1");
        assert_eq!(package("path+file:///w/xtask#0.1.0"), "xtask@0.1.0");
        assert_eq!(package("path+file:///w/driver#shardwise@0.1.0"), "shardwise@0.1.0");
    }

    #[test]
    fn a_broken_graph_is_an_error() {
        assert!(not_reused(&serde_json::json!({}), &serde_json::json!({ "units": [] })).is_err());
        let dangling = serde_json::json!({ "units": [unit("a@1", &[], &[7])] });
        assert!(not_reused(&dangling, &dangling).is_err());
    }
}
