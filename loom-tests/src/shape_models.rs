//! Models of a prepared statement's result shape (`replaced.rs`, which
//! `statement.rs` keeps it in): two answers replace it at once, one with a
//! new metadata id and its columns, one (without a metadata id, v4) with
//! new columns only, keeping the current id (`Replaceable::update`), while
//! a request reads it twice. A shape is (metadata id, columns), prepared as
//! (1, 1).
//!
//! To see it fail: make `Replaceable::update` read the value with `with`
//! and store `f` of it with `replace` (the read-then-replace that
//! `connection/execute.rs` did before): loom finds the answer's new
//! metadata id overwritten by the other's stale one ("the new metadata id
//! was lost").

use loom::sync::Arc;
use loom::thread;

use crate::replaced::Replaceable;
use crate::support::model;

type Shape = (u8, u8);

/// Every read is a shape some answer made whole (an id with columns it
/// came with, or a v4 answer's columns with the id current then), a read
/// never goes back to the prepared shape once it saw another, and the new
/// metadata id is never lost.
#[test]
fn racing_replacements_keep_the_new_metadata_id() {
    model(|| {
        let shape = Arc::new(Replaceable::<Shape>::new((1, 1)));
        let with_id = {
            let shape = shape.clone();
            thread::spawn(move || shape.replace((2, 2)))
        };
        let reader = {
            let shape = shape.clone();
            thread::spawn(move || (shape.with(|s| *s), shape.with(|s| *s)))
        };
        shape.update(|s| (s.0, 3));
        with_id.join().expect("answer");
        let (first, second) = reader.join().expect("request");
        for read in [first, second] {
            assert!([(1, 1), (2, 2), (1, 3), (2, 3)].contains(&read), "a torn shape: {read:?}");
        }
        assert!(first == (1, 1) || second != (1, 1), "read {first:?}, then the prepared shape again");
        let last = shape.with(|s| *s);
        assert_eq!(last.0, 2, "the new metadata id was lost: {last:?}");
        assert!(last == (2, 2) || last == (2, 3), "{last:?}");
    });
}
