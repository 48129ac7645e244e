//! Class data sharing for the Cassandra and Kafka JVMs. A Cassandra node
//! loads about 9,300 classes before it serves, and the suite starts dozens
//! of nodes and brokers on a 2-core machine: reading them from a shared
//! archive instead of the jars took a node start from 6.4 to 5.1 s of CPU
//! here (3.0 s with [`crate::NodeConfig::quick_jit`]).
//!
//! An archive is made once per set of jars and Java version. The first
//! server that starts without one (and gets the lock) writes the classes it loads
//! (`-XX:DumpLoadedClassList`); once it serves, `java -Xshare:dump` turns
//! that list into `classes-java<N>.jsa` beside the jars, written under a
//! temporary name and renamed into place. Every later node maps it
//! (`-XX:SharedArchiveFile`). The JVM checks that the archive matches its
//! own build and the classpath, and runs without it when they differ, so a
//! stale archive costs speed, never correctness. An archive that could not
//! be made leaves a marker, and nodes then start as before.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::dist::{DirLock, Distribution};

/// An archive of one set of jars for one Java.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Archive {
    /// The `java` that makes and maps it.
    pub java: PathBuf,
    /// The classpath it archives (the JVM checks it matches).
    pub classpath: String,
    /// The archive file.
    pub path: PathBuf,
}

impl Archive {
    /// The archive of the jars in `lib_dir` (classpath `lib_dir/*`) for Java
    /// `java_major`: `classes-java<N>.jsa` beside `lib_dir`.
    pub fn of_jars(java: &Path, java_major: u32, lib_dir: &Path) -> Archive {
        let dir = lib_dir.parent().unwrap_or(lib_dir);
        Archive {
            java: java.to_path_buf(),
            classpath: format!("{}/*", lib_dir.display()),
            path: dir.join(format!("classes-java{java_major}.jsa")),
        }
    }

    /// Cassandra's archive.
    pub fn cassandra(dist: &Distribution) -> Archive {
        Archive { classpath: dist.classpath(), ..Archive::of_jars(&dist.java, dist.java_major, &dist.lib_dir) }
    }
}

/// What a starting node does about the archive.
pub(crate) enum Plan {
    /// Map this archive.
    Use(PathBuf),
    /// Record the loaded classes, to make the archive once the node serves.
    Record(Recording),
    /// Neither: another process is making it, or making it failed before.
    Neither,
}

/// A server recording its classes, and the lock that makes it the only one.
#[derive(Debug)]
pub(crate) struct Recording {
    list: PathBuf,
    archive: Archive,
    _lock: DirLock,
}

impl Plan {
    /// The JVM arguments for this plan.
    pub(crate) fn jvm_args(&self) -> Vec<String> {
        match self {
            Plan::Use(archive) => vec![format!("-XX:SharedArchiveFile={}", archive.display())],
            Plan::Record(r) => vec![format!("-XX:DumpLoadedClassList={}", r.list.display())],
            Plan::Neither => Vec::new(),
        }
    }
}

fn failed_marker(archive: &Path) -> PathBuf {
    archive.with_extension("jsa.failed")
}

/// What a server about to start does; `SHARDWISE_NO_CLASS_ARCHIVE=1` turns
/// the archives off.
pub(crate) fn plan(archive: &Archive) -> Plan {
    if std::env::var("SHARDWISE_NO_CLASS_ARCHIVE").is_ok_and(|v| v == "1") {
        return Plan::Neither;
    }
    if archive.path.is_file() {
        return Plan::Use(archive.path.clone());
    }
    if failed_marker(&archive.path).exists() {
        return Plan::Neither;
    }
    match DirLock::try_acquire(&archive.path.with_extension("jsa.lock")) {
        Some(lock) => {
            let list = archive.path.with_extension(format!("classlist.{}", std::process::id()));
            let _ = fs::remove_file(&list);
            Plan::Record(Recording { list, archive: archive.clone(), _lock: lock })
        }
        None => Plan::Neither,
    }
}

impl Recording {
    /// Makes the archive from the classes recorded so far (the server
    /// serves, so its startup classes are all listed). A failure leaves the
    /// marker and is reported on stderr: the server runs on either way.
    pub(crate) fn finish(self) {
        let result = self.dump();
        let _ = fs::remove_file(&self.list);
        if let Err(e) = result {
            let path = self.archive.path.display();
            eprintln!("testkit: no class data archive {path} ({e}); servers start without it");
            let _ = fs::write(failed_marker(&self.archive.path), e);
        }
    }

    fn dump(&self) -> Result<(), String> {
        // The JVM is still writing the list: keep its complete lines only.
        let text = fs::read_to_string(&self.list).map_err(|e| format!("reading {}: {e}", self.list.display()))?;
        let complete = complete_lines(&text);
        if complete.lines().count() < 1000 {
            return Err(format!("only {} classes were listed", complete.lines().count()));
        }
        let list = self.list.with_extension("complete");
        fs::write(&list, complete).map_err(|e| format!("writing {}: {e}", list.display()))?;
        let partial = self.archive.path.with_extension(format!("jsa.{}.partial", std::process::id()));
        let out = Command::new(&self.archive.java)
            .arg("-Xshare:dump")
            .arg(format!("-XX:SharedClassListFile={}", list.display()))
            .arg(format!("-XX:SharedArchiveFile={}", partial.display()))
            .arg("-cp")
            .arg(&self.archive.classpath)
            .stdin(Stdio::null())
            .output();
        let _ = fs::remove_file(&list);
        let out = out.map_err(|e| format!("running java -Xshare:dump: {e}"))?;
        if !out.status.success() || !partial.is_file() {
            let _ = fs::remove_file(&partial);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
            return Err(format!("java -Xshare:dump exited with {}: {last}", out.status));
        }
        fs::rename(&partial, &self.archive.path).map_err(|e| format!("renaming {}: {e}", partial.display()))
    }
}

/// `text` up to its last newline: a list the JVM is still writing may end
/// in half a line.
fn complete_lines(text: &str) -> &str {
    text.rfind('\n').map_or("", |i| &text[..=i])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist(root: &Path) -> Distribution {
        Distribution { java: "java".into(), java_major: 17, lib_dir: root.join("cassandra-5.0.4").join("lib") }
    }

    #[test]
    fn an_archive_sits_beside_its_jars() {
        let kafka = Archive::of_jars(Path::new("/j/java"), 21, Path::new("/c/kafka_2.13-3.9.1/lib"));
        assert_eq!(kafka.path, Path::new("/c/kafka_2.13-3.9.1/classes-java21.jsa"));
        assert_eq!(kafka.classpath, "/c/kafka_2.13-3.9.1/lib/*");
        let d = dist(Path::new("/c"));
        assert_eq!(Archive::cassandra(&d).classpath, d.classpath());
    }

    #[test]
    fn a_half_written_last_line_is_dropped() {
        assert_eq!(complete_lines("a/B\nc/D\ne/F"), "a/B\nc/D\n");
        assert_eq!(complete_lines("a/B\n"), "a/B\n");
        assert_eq!(complete_lines("a/B"), "");
    }

    #[test]
    fn one_process_records_the_others_wait_for_the_archive_then_all_use_it() {
        let root = std::env::temp_dir().join(format!("testkit-cds-{}", std::process::id()));
        let d = dist(&root);
        fs::create_dir_all(&d.lib_dir).unwrap();
        let a = Archive::cassandra(&d);
        let archive = a.path.clone();
        assert_eq!(archive, root.join("cassandra-5.0.4").join("classes-java17.jsa"));

        let first = plan(&a);
        let Plan::Record(recording) = &first else { panic!("the first node records") };
        assert!(first.jvm_args()[0].starts_with("-XX:DumpLoadedClassList="));
        assert!(recording.list.starts_with(root.join("cassandra-5.0.4")));
        assert!(matches!(plan(&a), Plan::Neither), "a second node neither records nor waits");

        // A list too short to be a node's startup: the marker stops retries.
        fs::write(&recording.list, "java/lang/Object\n").unwrap();
        let Plan::Record(recording) = first else { unreachable!() };
        recording.finish();
        assert!(failed_marker(&archive).is_file());
        assert!(matches!(plan(&a), Plan::Neither));

        fs::remove_file(failed_marker(&archive)).unwrap();
        fs::write(&archive, b"an archive").unwrap();
        let used = plan(&a);
        assert!(matches!(used, Plan::Use(_)));
        assert_eq!(used.jvm_args(), [format!("-XX:SharedArchiveFile={}", archive.display())]);
        let _ = fs::remove_dir_all(&root);
    }
}
