//! Changes paired with their images. With `preimage` or `postimage` on, a
//! table's log holds, around each delta row, the state of the row before
//! (`cdc$operation` 0) and after (9) the write: rows of the same stream and
//! `cdc$time`, pre-images first, then deltas, then post-images, told apart
//! by `cdc$batch_seq_no`. [`WithImages`] wraps an [`ImagesConsumer`] as a
//! [`Consumer`]: it collects the rows of one write (one stream and
//! `cdc$time`, never split across windows, since windows are ranges of
//! time) and hands over each delta with the images of the same row, found
//! by the base table's primary key.
//!
//! The rows of a write are copied ([`Change`]): images are wanted for
//! their values, and one write's rows are few.

use crate::consumer::{Change, Consumer, ConsumerError};
use crate::plan::ReadWindow;
use crate::row::{CdcRow, Operation};
use crate::stream::StreamId;

/// A delta row with the images of the same base row, when the table writes
/// them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeWithImages {
    /// The change itself. An image that matched no delta of its write (not
    /// written by Scylla, but never dropped) comes here alone, its
    /// operation saying which image it is.
    pub delta: Change,
    /// The row before the change (`preimage: true` or `'full'`).
    pub preimage: Option<Change>,
    /// The row after the change (`postimage: true`).
    pub postimage: Option<Change>,
}

/// Receives changes with their images; see [`WithImages`].
pub trait ImagesConsumer: Send {
    /// One change.
    fn consume(&mut self, change: ChangeWithImages) -> Result<(), ConsumerError>;

    /// Every change of `window` was consumed (as [`Consumer::window_end`]).
    fn window_end(&mut self, window: &ReadWindow) -> Result<(), ConsumerError> {
        let _ = window;
        Ok(())
    }
}

/// A closure is an images consumer.
impl<F> ImagesConsumer for F
where
    F: FnMut(ChangeWithImages) -> Result<(), ConsumerError> + Send,
{
    fn consume(&mut self, change: ChangeWithImages) -> Result<(), ConsumerError> {
        self(change)
    }
}

/// The rows of the write being collected.
#[derive(Debug, Default)]
struct Write {
    at: Option<(StreamId, uuid::Uuid)>,
    pre: Vec<Change>,
    deltas: Vec<Change>,
    post: Vec<Change>,
}

/// A [`Consumer`] that pairs each delta with its images and hands them to
/// `C`.
#[derive(Debug)]
pub struct WithImages<C> {
    inner: C,
    write: Write,
}

impl<C: ImagesConsumer> WithImages<C> {
    /// Wraps `inner`.
    pub fn new(inner: C) -> Self {
        WithImages { inner, write: Write::default() }
    }

    /// The wrapped consumer.
    pub fn into_inner(self) -> C {
        self.inner
    }

    /// Hands over the collected write, each delta with its images.
    fn flush(&mut self) -> Result<(), ConsumerError> {
        let Write { pre, deltas, post, .. } = std::mem::take(&mut self.write);
        // Rows of one write share the log's columns, so a key column is at the same index in each.
        let same_row = |a: &Change, b: &Change| {
            a.columns.iter().zip(&b.columns).all(|(x, y)| !x.key || (x.name == y.name && x.value == y.value))
        };
        let (mut pre, mut post): (Vec<Option<Change>>, Vec<Option<Change>>) =
            (pre.into_iter().map(Some).collect(), post.into_iter().map(Some).collect());
        let take = |images: &mut Vec<Option<Change>>, delta: &Change| {
            images.iter_mut().find(|i| i.as_ref().is_some_and(|i| same_row(i, delta))).and_then(Option::take)
        };
        for delta in deltas {
            let (preimage, postimage) = (take(&mut pre, &delta), take(&mut post, &delta));
            self.inner.consume(ChangeWithImages { delta, preimage, postimage })?;
        }
        for image in pre.into_iter().chain(post).flatten() {
            self.inner.consume(ChangeWithImages { delta: image, preimage: None, postimage: None })?;
        }
        Ok(())
    }
}

impl<C: ImagesConsumer> Consumer for WithImages<C> {
    fn consume(&mut self, row: CdcRow<'_>) -> Result<(), ConsumerError> {
        let at = (row.stream_id(), row.time());
        if self.write.at.is_some_and(|w| w != at) {
            self.flush()?;
        }
        self.write.at = Some(at);
        let change = Change::from_row(&row)?;
        match row.operation() {
            Operation::PreImage => self.write.pre.push(change),
            Operation::PostImage => self.write.post.push(change),
            _ => self.write.deltas.push(change),
        }
        Ok(())
    }

    fn window_end(&mut self, window: &ReadWindow) -> Result<(), ConsumerError> {
        self.flush()?;
        self.inner.window_end(window)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::plan::GroupId;
    use crate::row::tests::{log_rows, log_specs, STREAM};
    use crate::row::{LogPage, LogSchema, RowIndex};
    use crate::stream::StreamGroup;
    use crate::time::Millis;
    use shardwise::protocol::types::CqlValue;

    /// (operation, ck, v) of each change.
    fn brief(c: Option<&Change>) -> Option<(Operation, Option<i32>, Option<i32>)> {
        let int = |name| match c?.value(name) {
            Some(CqlValue::Int(v)) => Some(*v),
            _ => None,
        };
        Some((c?.operation, int("ck"), int("v")))
    }

    #[test]
    fn each_delta_gets_the_images_of_its_row_and_no_image_is_lost() {
        // One write (same stream and time) over rows ck 1 and 2 of pk 7:
        // pre-images, deltas (ck 2 first), post-images, and a post-image of
        // ck 3 that matches no delta.
        let row = |seq, op, ck, v| (seq, op, None, None, Some(ck), None, 7, Some(v), None, None, None);
        let rows = log_rows(
            &[
                row(0, 0, 1, 10),
                row(1, 0, 2, 20),
                row(2, 1, 2, 21),
                row(3, 1, 1, 11),
                row(4, 9, 1, 11),
                row(5, 9, 3, 30),
            ],
            false,
        );
        let schema = LogSchema::new(log_specs()).unwrap();
        let mut index = RowIndex::default();
        let page = LogPage::new(&schema, &rows, &mut index).unwrap();
        let mut seen = Vec::new();
        let mut consumer = WithImages::new(|c: ChangeWithImages| {
            seen.push([brief(Some(&c.delta)), brief(c.preimage.as_ref()), brief(c.postimage.as_ref())]);
            Ok(())
        });
        for row in &page {
            consumer.consume(row).unwrap();
        }
        let window = ReadWindow {
            group: GroupId(0),
            generation: Millis(0),
            streams: StreamGroup::new([StreamId::from_bytes(STREAM)]).unwrap(),
            from: Millis(0),
            to: Millis(1),
            epoch: 0,
        };
        consumer.window_end(&window).unwrap();
        drop(consumer);
        use Operation::{PostImage as Post, PreImage as Pre, Update};
        assert_eq!(
            seen,
            [
                [Some((Update, Some(2), Some(21))), Some((Pre, Some(2), Some(20))), None],
                [Some((Update, Some(1), Some(11))), Some((Pre, Some(1), Some(10))), Some((Post, Some(1), Some(11)))],
                [Some((Post, Some(3), Some(30))), None, None],
            ]
        );
    }
}
