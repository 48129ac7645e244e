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
    let source = Source::new(path.display().to_string(), text).map_err(|e| runtime_error(&e))?;
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
