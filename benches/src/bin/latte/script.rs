//! A workload script: compiled once with the `latte` module, then run by
//! one virtual machine per request loop (a machine runs one call at a time).
//!
//! Compile errors become one line with the script's path, line and column
//! and Rune's own message. `pub const LOAD_COUNT`, the rows `latte load`
//! writes when `-d` does not say, is read through a one-line accessor the
//! loader appends to the source when the script mentions the name (Rune
//! 0.14 keeps a unit's constants to itself).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rune::diagnostics::Diagnostic;
use rune::runtime::{RuntimeContext, Unit, Value, VmError};
use rune::{Diagnostics, Hash, Source, Sources, Vm};

use crate::context::CqlError;
use crate::error::LatteError;
use crate::functions;

/// The accessor appended to scripts that mention `LOAD_COUNT`.
const LOAD_COUNT_FN: &str = "__shardwise_load_count";

/// A compiled script.
pub struct Script {
    /// Where it came from.
    pub path: PathBuf,
    unit: Arc<Unit>,
    runtime: Arc<RuntimeContext>,
}

/// What a call of a script function gave.
pub enum Outcome {
    /// It returned (anything but an error value).
    Done,
    /// It returned a context error that is counted, not fatal (a failed request).
    Counted(String),
    /// It failed: a Rune error or any other error value.
    Failed(String),
}

impl Script {
    /// Reads and compiles `path`; `params` feed `latte::param!`.
    pub fn load(path: &Path, params: HashMap<String, String>) -> Result<Script, LatteError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| LatteError::ReadScript { path: path.to_path_buf(), source })?;
        Script::compile(path, &text, params)
    }

    /// Compiles `text` (read from `path`).
    pub fn compile(path: &Path, text: &str, params: HashMap<String, String>) -> Result<Script, LatteError> {
        let runtime_error = |e: &dyn std::fmt::Display| LatteError::Runtime(e.to_string());
        let mut context = rune::Context::with_default_modules().map_err(|e| runtime_error(&e))?;
        context
            .install(functions::module(Arc::new(params)).map_err(|e| runtime_error(&e))?)
            .map_err(|e| runtime_error(&e))?;
        let runtime = Arc::new(context.runtime().map_err(|e| runtime_error(&e))?);
        // With the LOAD_COUNT accessor first; if that does not compile (no
        // such constant after all), the script as it is, whose diagnostics
        // are the ones to report.
        let unit = if text.contains("LOAD_COUNT") {
            let with = format!("{text}\npub fn {LOAD_COUNT_FN}() {{ LOAD_COUNT }}\n");
            match build(path, &with, &context) {
                Ok(unit) => unit,
                Err(_) => build(path, text, &context)?,
            }
        } else {
            build(path, text, &context)?
        };
        Ok(Script { path: path.to_path_buf(), unit: Arc::new(unit), runtime })
    }

    /// A machine to call functions with.
    pub fn vm(&self) -> Vm {
        Vm::new(self.runtime.clone(), self.unit.clone())
    }

    /// Whether the script defines `function`.
    pub fn has(&self, function: &str) -> bool {
        self.vm().lookup_function([function]).is_ok()
    }

    /// `LOAD_COUNT`, if the script defines it as a non-negative integer.
    pub fn load_count(&self) -> Option<u64> {
        if !self.has(LOAD_COUNT_FN) {
            return None;
        }
        let v = self.vm().call([LOAD_COUNT_FN], ()).ok()?;
        v.as_integer::<u64>().ok()
    }
}

fn build(path: &Path, text: &str, context: &rune::Context) -> Result<Unit, LatteError> {
    let runtime_error = |e: &dyn std::fmt::Display| LatteError::Runtime(e.to_string());
    let mut sources = Sources::new();
    // With its path, so that `mod name;` finds `name.rn` beside the script.
    let source = Source::with_path(path.display().to_string(), text, path).map_err(|e| runtime_error(&e))?;
    let id = sources.insert(source).map_err(|e| runtime_error(&e))?;
    let mut diagnostics = Diagnostics::without_warnings();
    let result = rune::prepare(&mut sources).with_context(context).with_diagnostics(&mut diagnostics).build();
    match result {
        Ok(unit) => Ok(unit),
        Err(e) => {
            let fatal = diagnostics.diagnostics().iter().find_map(|d| match d {
                Diagnostic::Fatal(f) => Some(f),
                _ => None,
            });
            let (mut line, mut column, mut message) = (0, 0, e.to_string());
            if let Some(f) = fatal {
                message = f.to_string();
                if let rune::diagnostics::FatalDiagnosticKind::CompileError(ce) = f.kind() {
                    use rune::ast::Spanned;
                    let span = ce.span();
                    if let Some(src) = sources.get(id) {
                        let (l, c) = src.pos_to_utf8_linecol(span.start.into_usize());
                        (line, column) = (l + 1, c + 1);
                    }
                }
            }
            Err(LatteError::Compile { path: path.to_path_buf(), line, column, message: one_line(&message) })
        }
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Calls `function` (by its hash) with `args` and sorts the result.
pub async fn call(vm: &mut Vm, function: Hash, args: impl rune::runtime::GuardedArgs) -> Outcome {
    match vm.async_call(function, args).await {
        Ok(v) => outcome(v),
        Err(e) => Outcome::Failed(vm_error(&e)),
    }
}

fn vm_error(e: &VmError) -> String {
    one_line(&e.to_string())
}

fn outcome(v: Value) -> Outcome {
    // Most functions return `()`: a check that builds no error value.
    if v.into_unit().is_ok() {
        return Outcome::Done;
    }
    let Ok(Err(e)) = rune::from_value::<Result<Value, Value>>(v) else {
        return Outcome::Done;
    };
    if let Ok(cql) = e.borrow_ref::<CqlError>() {
        let message = one_line(&cql.0.to_string());
        return if cql.0.is_counted() { Outcome::Counted(message) } else { Outcome::Failed(message) };
    }
    // Any other error value the script returned: a string as it is, else
    // its debug form.
    let message = match e.borrow_string_ref() {
        Ok(text) => text.to_string(),
        Err(_) => format!("{e:?}"),
    };
    Outcome::Failed(one_line(&message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scripts() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("latte")
    }

    fn compile(text: &str, params: &[(&str, &str)]) -> Result<Script, LatteError> {
        let params = params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Script::compile(Path::new("test.rn"), text, params)
    }

    fn call(script: &Script, f: &str) -> Value {
        script.vm().call([f], ()).expect("call")
    }

    #[test]
    fn the_team_scripts_compile_with_every_phase() {
        for name in ["insert.rn", "read.rn", "batch.rn", "params.rn"] {
            let s = Script::load(&scripts().join(name), HashMap::new()).expect(name);
            for f in ["schema", "erase", "prepare", "load", "run"] {
                assert!(s.has(f), "{name} lacks {f}");
            }
        }
        let read = Script::load(&scripts().join("read.rn"), HashMap::new()).expect("read.rn");
        assert_eq!(read.load_count(), Some(500));
        let insert = Script::load(&scripts().join("insert.rn"), HashMap::new()).expect("insert.rn");
        assert_eq!(insert.load_count(), None);
    }

    #[test]
    fn params_replace_defaults() {
        let path = scripts().join("params.rn");
        assert_eq!(Script::load(&path, HashMap::new()).expect("default").load_count(), Some(100));
        let set = HashMap::from([("rows".to_string(), "37".to_string())]);
        assert_eq!(Script::load(&path, set).expect("set").load_count(), Some(37));
        let text = "pub fn ks() { latte::param!(\"ks\", \"dflt\") }\npub fn n() { latte::param!(\"n\", 1) }\n\
                    pub fn f() { latte::param!(\"f\", 1.0) }\npub fn b() { latte::param!(\"b\", false) }\n";
        let s = compile(text, &[]).expect("compile");
        assert_eq!(call(&s, "ks").into_string().expect("string").as_str(), "dflt");
        let s = compile(text, &[("ks", "ks_1"), ("n", "-3"), ("f", "2.5"), ("b", "true")]).expect("compile");
        assert_eq!(call(&s, "ks").into_string().expect("string").as_str(), "ks_1");
        assert_eq!(call(&s, "n").as_integer::<i64>().expect("int"), -3);
        assert_eq!(rune::from_value::<f64>(call(&s, "f")).expect("float"), 2.5);
        assert!(rune::from_value::<bool>(call(&s, "b")).expect("bool"));
        let s = compile(text, &[("ks", "\"quoted\"")]).expect("compile");
        assert_eq!(call(&s, "ks").into_string().expect("string").as_str(), "quoted");
    }

    #[test]
    fn generators_keep_their_contracts() {
        let text = "pub fn r() { latte::hash_range(12345, 10) }\npub fn b() { latte::blob(7, 13) }\n\
                    pub fn t() { latte::text(7, 9) }\npub fn u() { latte::uuid(3) }\n\
                    pub fn n() { latte::normal(4, 10.0, 0.0) }\npub fn bad() { latte::hash_range(1, 0) }\n\
                    pub fn huge() { latte::blob(1, 1 << 40) }\npub fn negative() { latte::text(1, -1) }\n";
        let s = compile(text, &[]).expect("compile");
        let r = call(&s, "r").as_integer::<i64>().expect("int");
        assert!((0..10).contains(&r));
        assert_eq!(call(&s, "b").borrow_ref::<rune::runtime::Bytes>().expect("bytes").len(), 13);
        let t = call(&s, "t").into_string().expect("string");
        assert!(t.len() == 9 && t.chars().all(|c| c.is_ascii_alphanumeric()), "{}", t.as_str());
        let uuid = |v: Value| v.borrow_ref::<crate::functions::Uuid>().expect("uuid").0;
        assert_eq!(uuid(call(&s, "u")), uuid(call(&s, "u")));
        assert_eq!(uuid(call(&s, "u")).get_version_num(), 4);
        assert_eq!(rune::from_value::<f64>(call(&s, "n")).expect("float"), 10.0);
        let err = s.vm().call(["bad"], ()).expect_err("max 0");
        assert!(err.to_string().contains("max must be positive"), "{err}");
        let err = s.vm().call(["huge"], ()).expect_err("too long");
        assert!(err.to_string().contains("is over"), "{err}");
        assert!(s.vm().call(["negative"], ()).is_err());
    }

    #[test]
    fn a_module_is_loaded_from_beside_the_script() {
        let dir = std::env::temp_dir().join(format!("shardwise-latte-mod-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("nested")).expect("temp dir");
        std::fs::write(dir.join("common.rn"), "pub fn g() { 40 }\n").expect("common.rn");
        std::fs::write(dir.join("nested").join("mod.rn"), "pub fn h() { 2 }\n").expect("nested/mod.rn");
        let main = dir.join("main.rn");
        std::fs::write(&main, "mod common;\nmod nested;\npub fn f() { common::g() + nested::h() }\n").expect("main.rn");
        let script = Script::load(&main, HashMap::new()).expect("compiles with its modules");
        assert_eq!(call(&script, "f").as_integer::<i64>().expect("an integer"), 42);
        std::fs::write(&main, "mod missing;\npub fn f() { 1 }\n").expect("main.rn");
        let err = Script::load(&main, HashMap::new()).err().expect("a module that is not there");
        assert!(err.to_string().contains("missing"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn compile_errors_name_the_place() {
        let err = compile("pub fn run(ctx, i) {\n    let x = ;\n}\n", &[]).err().expect("syntax error");
        let LatteError::Compile { line, column, .. } = &err else { panic!("{err}") };
        assert_eq!((*line, *column > 0), (2, true), "{err}");
        assert!(!err.to_string().contains('\n'));
        let err = compile("pub fn run(ctx, i) { nothing_here() }\n", &[]).err().expect("missing item");
        assert!(err.to_string().contains("nothing_here"), "{err}");
    }
}
