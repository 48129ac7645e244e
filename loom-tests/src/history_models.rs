//! Models of the request history collector (`driver/src/history.rs`): a
//! request's own run of attempts and a speculative execution report to
//! one `HistoryCollector` from different worker threads at once, while the
//! application copies or takes the history. Each attempt is kept in its own
//! run with its outcome, none lost and none in another's; and a history
//! taken meanwhile holds the request whole or not at all (what reports
//! after it is dropped, never kept as a second, partial copy).
//!
//! To see them fail (done by hand): in `attempt_started` copy the
//! requests under the lock, add the attempt to the copy and store the copy
//! under a second lock (the lock not held from the read to the store).
//! loom finds, in the first model, the speculative attempt's failure,
//! recorded between the other run's copy and its store, overwritten by the
//! stale copy (it printed the attempt with `result: None`: "an outcome was
//! lost"); in the second, the request taken away put back by a stale copy
//! ("what reported after the take was kept").

use std::net::SocketAddr;
use std::time::Duration;

use loom::sync::Arc;
use loom::thread;
use shardwise_protocol::consistency::Consistency;

use crate::error::{ConnectionError, ExecutionError};
use crate::history::{AttemptResult, HistoryCollector, RequestHistory};
use crate::observer::{AttemptInfo, RequestId, RequestObserver};
use crate::support::model;

const TOOK: Duration = Duration::from_millis(3);

fn attempt(request: RequestId, speculative: usize) -> AttemptInfo<'static> {
    AttemptInfo {
        request,
        node: SocketAddr::from(([127, 0, 0, 1 + speculative as u8], 9042)),
        shard: None,
        retry: 0,
        speculative,
        consistency: Consistency::One,
        table: None,
    }
}

/// The request's own run: one attempt, answered.
fn own_run(collector: &HistoryCollector, request: RequestId) {
    let a = attempt(request, 0);
    collector.attempt_started(&a);
    collector.attempt_succeeded(&a, TOOK);
}

/// A speculative execution beside it: one attempt, failed.
fn speculative_run(collector: &HistoryCollector, request: RequestId) {
    let a = attempt(request, 1);
    collector.attempt_started(&a);
    collector.attempt_failed(&a, &ExecutionError::Connection(ConnectionError::Closed), TOOK, None);
}

/// Each run of `r` holds at most its one attempt, sent to its own node.
fn well_formed(r: &RequestHistory) {
    assert!(r.fiber.attempts.len() <= 1, "{r:?}");
    assert!(r.speculative_fibers.len() <= 1, "{r:?}");
    for a in &r.fiber.attempts {
        assert_eq!(a.node, attempt(r.id, 0).node, "an attempt in another run: {r:?}");
    }
    for a in r.speculative_fibers.iter().flat_map(|f| &f.attempts) {
        assert_eq!(a.node, attempt(r.id, 1).node, "an attempt in another run: {r:?}");
    }
}

#[test]
fn racing_runs_each_keep_their_attempt() {
    model(|| {
        let collector = Arc::new(HistoryCollector::new());
        let request = RequestId::next();
        collector.request_started(request);
        let speculative = {
            let collector = collector.clone();
            thread::spawn(move || speculative_run(&collector, request))
        };
        let own = {
            let collector = collector.clone();
            thread::spawn(move || own_run(&collector, request))
        };
        // A copy meanwhile sees each run as it stood.
        for r in &collector.clone_structured_history().requests {
            well_formed(r);
        }
        own.join().expect("own run");
        speculative.join().expect("speculative run");
        let history = collector.clone_structured_history();
        let [r] = history.requests.as_slice() else { panic!("one request: {history:?}") };
        well_formed(r);
        let own = r.fiber.attempts.first().expect("an attempt was lost: the request's own");
        assert!(matches!(own.result, Some(AttemptResult::Success { .. })), "an outcome was lost: {r:?}");
        let spec = r.speculative_fibers.first().and_then(|f| f.attempts.first());
        let spec = spec.expect("an attempt was lost: the speculative one");
        assert!(matches!(spec.result, Some(AttemptResult::Error { .. })), "an outcome was lost: {r:?}");
    });
}

#[test]
fn a_history_taken_while_runs_report_holds_the_request_once() {
    model(|| {
        let collector = Arc::new(HistoryCollector::new());
        let request = RequestId::next();
        collector.request_started(request);
        let runs: Vec<_> = [own_run as fn(&HistoryCollector, RequestId), speculative_run]
            .into_iter()
            .map(|run| {
                let collector = collector.clone();
                thread::spawn(move || run(&collector, request))
            })
            .collect();
        let taken = collector.take_structured_history();
        for run in runs {
            run.join().expect("run");
        }
        let left = collector.take_structured_history();
        assert_eq!(taken.requests.len(), 1, "taken: {taken:?}");
        assert!(left.requests.is_empty(), "what reported after the take was kept: {left:?}");
        for r in &taken.requests {
            well_formed(r);
        }
    });
}
