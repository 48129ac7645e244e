//! Running several futures at once on the task that awaits them: the
//! lease holder fences and the stores fence groups side by side, without a
//! dependency for one small function.

use std::future::Future;
use std::task::Poll;

/// Runs `futures` at once; their outputs, in order.
pub(crate) async fn join_all<F: Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let mut futures: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(out) => *output = Some(out),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// The futures run at once: the first waits for what the second sends,
    /// which one after the other would never finish.
    #[tokio::test]
    async fn join_all_runs_the_futures_at_once_and_keeps_their_order() {
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        let first = async move { rx.await.unwrap_or(0) + 1 };
        let second = async move {
            let _ = tx.send(41);
            7
        };
        let futures: Vec<std::pin::Pin<Box<dyn Future<Output = u32>>>> = vec![Box::pin(first), Box::pin(second)];
        let outputs = tokio::time::timeout(Duration::from_secs(5), join_all(futures)).await;
        assert_eq!(outputs.ok(), Some(vec![42, 7]));
    }
}
