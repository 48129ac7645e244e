//! Getting a runnable Cassandra: a Java 11+ runtime and the server's jars.
//! The same resolution serves the Kafka broker of [`crate::kafka`]
//! ([`Artifact`] names what to resolve).
//!
//! The server is not a download of the binary tarball: it is the Maven
//! artifact `org.apache.cassandra:cassandra-all` plus its ~100 dependencies,
//! resolved by `mvn dependency:copy-dependencies` on a generated
//! one-dependency POM. Maven is an ordinary package client (it reaches Maven
//! Central, which this project's machines can), caches in `~/.m2`, and gives
//! exactly the jars Cassandra's own `lib/` would hold.
//!
//! The jars live outside the repository, in `$SHARDWISE_CACHE/cassandra-5.0.4/`
//! (default `~/.cache/shardwise/cassandra-5.0.4/`). A marker file written after
//! a successful resolution makes later runs skip Maven entirely; a lock
//! directory keeps concurrent test processes from resolving at the same time,
//! and the jars are copied into `lib.partial/` and renamed into place so a
//! half-finished copy is never used.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use crate::error::{HarnessError, Result};

/// The Cassandra release the harness runs.
pub const CASSANDRA_VERSION: &str = "5.0.4";

/// The entry point of the server.
pub const MAIN_CLASS: &str = "org.apache.cassandra.service.CassandraDaemon";

/// A Maven artifact whose jars (with every dependency) make a runnable server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Artifact {
    /// The group id.
    pub group: &'static str,
    /// The artifact id.
    pub artifact: &'static str,
    /// The version.
    pub version: &'static str,
}

impl Artifact {
    /// Its main jar's file name.
    fn jar(&self) -> String {
        format!("{}-{}.jar", self.artifact, self.version)
    }
}

/// Cassandra's server: `org.apache.cassandra:cassandra-all`.
pub const CASSANDRA: Artifact =
    Artifact { group: "org.apache.cassandra", artifact: "cassandra-all", version: CASSANDRA_VERSION };

/// Name of the marker file written into `lib/` once every jar is there.
const MARKER: &str = ".shardwise-complete";

/// How long to wait for another process that is resolving the jars.
const LOCK_WAIT: Duration = Duration::from_secs(15 * 60);

/// A lock directory older than this is considered left behind by a dead process.
const LOCK_STALE: Duration = Duration::from_secs(20 * 60);

/// A Java runtime and a directory of Cassandra jars, ready to launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Distribution {
    /// The `java` binary.
    pub java: PathBuf,
    /// The major version `java -version` reported.
    pub java_major: u32,
    /// The directory holding `cassandra-all-<version>.jar` and its dependencies.
    pub lib_dir: PathBuf,
}

impl Distribution {
    /// Finds Java, and resolves the jars with Maven unless a previous run left
    /// a complete `lib/` in the cache. The result is memoized for the process.
    pub fn ensure() -> Result<Distribution> {
        static CACHED: OnceLock<Distribution> = OnceLock::new();
        if let Some(d) = CACHED.get() {
            return Ok(d.clone());
        }
        let (java, java_major) = find_java()?;
        let lib_dir = ensure_jars(&cassandra_cache_dir()?, &CASSANDRA)?;
        let dist = Distribution { java, java_major, lib_dir };
        Ok(CACHED.get_or_init(|| dist).clone())
    }

    /// The classpath argument: every jar of `lib_dir` (Java expands `dir/*`).
    pub fn classpath(&self) -> String {
        format!("{}/*", self.lib_dir.display())
    }
}

/// The cache root: `$SHARDWISE_CACHE`, else `$XDG_CACHE_HOME/shardwise`, else
/// `~/.cache/shardwise`.
pub fn cache_root() -> Result<PathBuf> {
    if let Some(dir) = non_empty_env("SHARDWISE_CACHE") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = non_empty_env("XDG_CACHE_HOME") {
        return Ok(PathBuf::from(dir).join("shardwise"));
    }
    match non_empty_env("HOME") {
        Some(home) => Ok(PathBuf::from(home).join(".cache").join("shardwise")),
        None => Err(HarnessError::Config(
            "neither SHARDWISE_CACHE nor HOME is set: nowhere to cache the Cassandra jars".into(),
        )),
    }
}

/// The directory of this Cassandra version inside the cache root.
pub fn cassandra_cache_dir() -> Result<PathBuf> {
    Ok(cache_root()?.join(format!("cassandra-{CASSANDRA_VERSION}")))
}

fn non_empty_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Finds `java` (`$JAVA_HOME/bin/java`, else `java` on `PATH`) and checks it is
/// Java 11 or newer.
pub fn find_java() -> Result<(PathBuf, u32)> {
    let (java, looked_for) = match non_empty_env("JAVA_HOME") {
        Some(home) if Path::new(&home).join("bin/java").is_file() => {
            let p = Path::new(&home).join("bin/java");
            let s = p.display().to_string();
            (p, s)
        }
        _ => (PathBuf::from("java"), "`java` on PATH and $JAVA_HOME/bin/java".to_string()),
    };
    let out = match Command::new(&java).arg("-version").stdin(Stdio::null()).output() {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(HarnessError::MissingTool { tool: "java", looked_for, package: "openjdk-17-jre-headless" })
        }
        Err(e) => return Err(HarnessError::io(format!("running `{} -version`", java.display()), e)),
    };
    // `java -version` writes to stderr: `openjdk version "17.0.15" 2025-04-15`.
    let text = format!("{}{}", String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
    match parse_java_major(&text) {
        Some(major) if major >= 11 && out.status.success() => Ok((java, major)),
        _ => Err(HarnessError::UnsupportedJava { java, version: text.lines().next().unwrap_or("").trim().to_string() }),
    }
}

/// Extracts the major version from `java -version` output: `"17.0.15"` → 17,
/// `"1.8.0_392"` → 8.
pub fn parse_java_major(text: &str) -> Option<u32> {
    let start = text.find("version \"")? + "version \"".len();
    let rest = &text[start..];
    let version = &rest[..rest.find('"')?];
    let mut parts = version.split(['.', '-', '+', '_']);
    let first: u32 = parts.next()?.parse().ok()?;
    if first == 1 {
        parts.next()?.parse().ok()
    } else {
        Some(first)
    }
}

/// The one-dependency POM Maven resolves.
pub fn pom_xml(a: &Artifact) -> String {
    let Artifact { group, artifact, version } = a;
    format!(
        r#"<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>shardwise</groupId><artifactId>{artifact}-fetch</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId><version>{version}</version></dependency>
  </dependencies>
</project>
"#
    )
}

/// Whether `lib` holds a completed resolution of `a`.
fn jars_complete(lib: &Path, a: &Artifact) -> bool {
    lib.join(MARKER).is_file() && lib.join(a.jar()).is_file()
}

/// Makes sure `dir/lib` holds every jar of `a`, running Maven if it does
/// not. Returns the `lib` directory.
pub fn ensure_jars(dir: &Path, a: &Artifact) -> Result<PathBuf> {
    let lib = dir.join("lib");
    if jars_complete(&lib, a) {
        return Ok(lib);
    }
    fs::create_dir_all(dir).map_err(|e| HarnessError::io(format!("creating {}", dir.display()), e))?;
    let _lock = DirLock::acquire(&dir.join(".lock"))?;
    // Someone else may have finished while we waited for the lock.
    if jars_complete(&lib, a) {
        return Ok(lib);
    }
    resolve_with_maven(dir, a)?;
    Ok(lib)
}

fn resolve_with_maven(dir: &Path, a: &Artifact) -> Result<()> {
    let pom = dir.join("pom.xml");
    fs::write(&pom, pom_xml(a)).map_err(|e| HarnessError::io(format!("writing {}", pom.display()), e))?;
    let partial = dir.join("lib.partial");
    if partial.exists() {
        fs::remove_dir_all(&partial).map_err(|e| HarnessError::io(format!("removing {}", partial.display()), e))?;
    }
    let log_path = dir.join("mvn.log");
    let log =
        fs::File::create(&log_path).map_err(|e| HarnessError::io(format!("creating {}", log_path.display()), e))?;
    let log2 = log.try_clone().map_err(|e| HarnessError::io("duplicating the Maven log handle", e))?;
    let status = Command::new("mvn")
        .args(["-q", "-B", "dependency:copy-dependencies", "-DoutputDirectory=lib.partial"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2)
        .status();
    let status = match status {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(HarnessError::MissingTool { tool: "mvn", looked_for: "`mvn` on PATH".into(), package: "maven" })
        }
        Err(e) => return Err(HarnessError::io("running mvn", e)),
    };
    let main_jar = partial.join(a.jar());
    if !status.success() || !main_jar.is_file() {
        let status = if status.success() {
            format!("exited 0 but {} is missing", main_jar.display())
        } else {
            status.to_string()
        };
        return Err(HarnessError::Maven {
            artifact: format!("{}:{}:{}", a.group, a.artifact, a.version),
            dir: dir.into(),
            status,
            tail: crate::process::tail_lines(&log_path, 30),
            log: log_path,
        });
    }
    let jars = fs::read_dir(&partial)
        .map_err(|e| HarnessError::io(format!("listing {}", partial.display()), e))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "jar"))
        .count();
    fs::write(partial.join(MARKER), format!("{}\n{jars} jars\n", a.version))
        .map_err(|e| HarnessError::io("writing the completion marker", e))?;
    let lib = dir.join("lib");
    if lib.exists() {
        fs::remove_dir_all(&lib).map_err(|e| HarnessError::io(format!("removing {}", lib.display()), e))?;
    }
    fs::rename(&partial, &lib)
        .map_err(|e| HarnessError::io(format!("renaming {} to {}", partial.display(), lib.display()), e))
}

/// A cross-process lock: a directory created atomically, removed on drop.
#[derive(Debug)]
pub(crate) struct DirLock {
    path: PathBuf,
}

impl DirLock {
    /// The lock if nobody holds it now (one left behind by a dead process,
    /// older than [`LOCK_STALE`], is taken over); never waits.
    pub(crate) fn try_acquire(path: &Path) -> Option<DirLock> {
        for _ in 0..2 {
            match fs::create_dir(path) {
                Ok(()) => return Some(DirLock { path: path.into() }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let age = fs::metadata(path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| SystemTime::now().duration_since(t).ok());
                    if age.is_none_or(|a| a <= LOCK_STALE) {
                        return None;
                    }
                    let _ = fs::remove_dir(path);
                }
                Err(_) => return None,
            }
        }
        None
    }

    fn acquire(path: &Path) -> Result<DirLock> {
        let started = Instant::now();
        loop {
            match fs::create_dir(path) {
                Ok(()) => return Ok(DirLock { path: path.into() }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let age = fs::metadata(path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| SystemTime::now().duration_since(t).ok());
                    if age.is_some_and(|a| a > LOCK_STALE) {
                        // Left behind by a process that died; take it over.
                        let _ = fs::remove_dir(path);
                        continue;
                    }
                    if started.elapsed() > LOCK_WAIT {
                        return Err(HarnessError::CacheLocked { lock: path.into(), waited: started.elapsed() });
                    }
                    std::thread::sleep(Duration::from_millis(500));
                }
                Err(e) => return Err(HarnessError::io(format!("creating lock {}", path.display()), e)),
            }
        }
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_versions() {
        assert_eq!(parse_java_major("openjdk version \"17.0.15\" 2025-04-15\nOpenJDK Runtime"), Some(17));
        assert_eq!(parse_java_major("java version \"1.8.0_392\""), Some(8));
        assert_eq!(parse_java_major("openjdk version \"21\" 2023-09-19"), Some(21));
        assert_eq!(parse_java_major("openjdk version \"11.0.2-ea\""), Some(11));
        assert_eq!(parse_java_major("garbage"), None);
    }

    #[test]
    fn pom_names_the_artifact() {
        let pom = pom_xml(&CASSANDRA);
        assert!(pom.contains(&format!("<artifactId>cassandra-all</artifactId><version>{CASSANDRA_VERSION}</version>")));
        assert!(pom.contains("<groupId>org.apache.cassandra</groupId>"));
    }

    #[test]
    fn marker_decides_completeness() {
        let dir = std::env::temp_dir().join(format!("shardwise-dist-test-{}", std::process::id()));
        let lib = dir.join("lib");
        fs::create_dir_all(&lib).unwrap();
        fs::write(lib.join("cassandra-all-9.9.9.jar"), b"").unwrap();
        let version = |version| Artifact { version, ..CASSANDRA };
        assert!(!jars_complete(&lib, &version("9.9.9")));
        fs::write(lib.join(MARKER), b"").unwrap();
        assert!(jars_complete(&lib, &version("9.9.9")));
        assert!(!jars_complete(&lib, &version("9.9.8")));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn lock_is_exclusive_and_released() {
        let dir = std::env::temp_dir().join(format!("shardwise-lock-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join(".lock");
        {
            let _a = DirLock::acquire(&path).unwrap();
            assert!(path.is_dir());
            assert!(fs::create_dir(&path).is_err());
        }
        assert!(!path.exists());
        fs::remove_dir_all(&dir).unwrap();
    }
}
