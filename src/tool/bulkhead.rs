//! Concurrency limits with a bounded wait queue: a slow tool can occupy only its own permits,
//! and a flood of calls waits in a queue of known size instead of piling up without bound.
//! A call that finds the queue full is refused at once with a clear message.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Why a call did not get a permit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Every permit is taken and the wait queue is full.
    QueueFull { running: usize, queued: usize },
}

/// A semaphore with a cap on waiters.
#[derive(Debug)]
pub struct Bulkhead {
    permits: Arc<Semaphore>,
    limit: usize,
    max_queued: usize,
    queued: AtomicUsize,
}

/// Decrements the queue count however the wait ends (permit, cancellation, timeout).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Bulkhead {
    pub fn new(limit: usize, max_queued: usize) -> Self {
        let limit = limit.max(1);
        Self { permits: Arc::new(Semaphore::new(limit)), limit, max_queued, queued: AtomicUsize::new(0) }
    }

    /// Calls running now.
    pub fn running(&self) -> usize {
        self.limit - self.permits.available_permits()
    }

    /// Calls waiting for a permit now.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    /// A permit, waiting in the queue if there is room. Dropping the future leaves the queue.
    pub async fn acquire(&self) -> Result<OwnedSemaphorePermit, Refused> {
        if let Ok(permit) = self.permits.clone().try_acquire_owned() {
            return Ok(permit);
        }
        let position = self.queued.fetch_add(1, Ordering::AcqRel);
        let _waiting = Waiting(&self.queued);
        if position >= self.max_queued {
            return Err(Refused::QueueFull { running: self.running(), queued: position });
        }
        // The semaphore is never closed, so acquiring only ends with a permit.
        self.permits.clone().acquire_owned().await.map_err(|_| Refused::QueueFull { running: self.limit, queued: position })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_queue_is_bounded_and_freed_on_drop() {
        let b = Arc::new(Bulkhead::new(1, 1));
        let first = b.acquire().await.expect("free permit");
        let waiter = tokio::spawn({
            let b = b.clone();
            async move { b.acquire().await.map(drop) }
        });
        tokio::task::yield_now().await;
        while b.queued() == 0 {
            tokio::task::yield_now().await;
        }
        assert!(matches!(b.acquire().await, Err(Refused::QueueFull { running: 1, queued: 1 })), "no room left in the queue");
        drop(first);
        assert!(waiter.await.expect("join").is_ok(), "the waiter got the freed permit");
        assert_eq!((b.running(), b.queued()), (0, 0));
    }

    #[tokio::test]
    async fn a_cancelled_wait_leaves_the_queue() {
        let b = Bulkhead::new(1, 4);
        let _held = b.acquire().await.expect("permit");
        let wait = b.acquire();
        assert!(tokio::time::timeout(std::time::Duration::from_millis(10), wait).await.is_err());
        assert_eq!(b.queued(), 0);
    }
}
