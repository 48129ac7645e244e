//! A value read in place until it is first replaced, then from behind a
//! lock: a prepared statement's result shape (`statement.rs`), which every
//! request reads and which changes only when the server reports new result
//! metadata. Until then, requests on different workers read it sharing no
//! written word (no lock, no reference count). Kept free of the driver's
//! other types so that `loom-tests` can model it.
//!
//! A replacement made from the current value ([`Replaceable::update`])
//! reads and writes it under one write lock, so that a replacement made
//! meanwhile by another request is not lost.

use crate::sync::{AtomicBool, Ordering, RwLock};

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Replaceable<T> {
    /// The value until the first replacement.
    first: T,
    /// Set once replaced: from then on `current` holds the value.
    replaced: AtomicBool,
    current: RwLock<Option<T>>,
}

impl<T> Replaceable<T> {
    pub(crate) fn new(first: T) -> Self {
        Replaceable { first, replaced: AtomicBool::new(false), current: RwLock::new(None) }
    }

    /// `f` of the current value.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        if !self.replaced.load(Ordering::Acquire) {
            return f(&self.first);
        }
        let current = self.current.read().unwrap_or_else(|e| e.into_inner());
        f(current.as_ref().unwrap_or(&self.first))
    }

    /// Replaces the value.
    pub(crate) fn replace(&self, value: T) {
        self.update(|_| value);
    }

    /// Replaces the value with `f` of the current one.
    pub(crate) fn update(&self, f: impl FnOnce(&T) -> T) {
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        let value = f(current.as_ref().unwrap_or(&self.first));
        *current = Some(value);
        self.replaced.store(true, Ordering::Release);
    }
}
