//! Reading a consumer's messages many at a time, for the load generator.
//!
//! The rdkafka crate hands out one message per `poll`, and each call reads the clock, wraps
//! the message in an event and takes the queue's lock. With 100-byte records that per-call
//! work is what limits a consume benchmark (docs/benchmarks.md), so the benchmark measures the
//! client rather than the broker. librdkafka's own batch call, `rd_kafka_consume_batch_queue`
//! (the one confluent-kafka-python's `Consumer.consume(num_messages)` makes), dequeues up to
//! a whole array of messages per call from the same consumer queue. [`BatchReader`] wraps it:
//! the messages of one call are lent to a closure and destroyed when it returns.

use std::marker::PhantomData;
use std::ptr::NonNull;
use std::time::Duration;

use anyhow::{bail, Result};
use rdkafka::bindings as rdsys;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

/// What one message of a batch looks like to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivered<'m> {
    /// A record: its partition, offset, key and value (`None` for a null key or value).
    Record { partition: i32, offset: i64, key: Option<&'m [u8]>, value: Option<&'m [u8]> },
    /// An error librdkafka reported in place of a message.
    Error(RDKafkaErrorCode),
}

/// Reads batches of messages from the queue of `consumer` (an assign- or subscribe-based
/// `BaseConsumer`). Borrowing the consumer keeps it alive, and the queue handle is released
/// on drop.
pub struct BatchReader<'c> {
    queue: NonNull<rdsys::rd_kafka_queue_t>,
    slots: Vec<*mut rdsys::rd_kafka_message_t>,
    _consumer: PhantomData<&'c BaseConsumer>,
}

impl std::fmt::Debug for BatchReader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchReader").field("capacity", &self.slots.len()).finish_non_exhaustive()
    }
}

#[allow(unsafe_code)]
impl<'c> BatchReader<'c> {
    /// A reader returning at most `capacity` messages per call.
    pub fn new(consumer: &'c BaseConsumer, capacity: usize) -> Result<Self> {
        if capacity == 0 {
            bail!("a batch holds at least one message");
        }
        // SAFETY: the client pointer is valid for as long as `consumer`, which the returned
        // reader borrows; rd_kafka_queue_get_consumer returns a new reference (or NULL when the
        // client has no consumer group queue), which Drop releases.
        let queue = unsafe { rdsys::rd_kafka_queue_get_consumer(consumer.client().native_ptr()) };
        let Some(queue) = NonNull::new(queue) else {
            bail!("the consumer has no consumer queue (is group.id set?)");
        };
        Ok(Self { queue, slots: vec![std::ptr::null_mut(); capacity], _consumer: PhantomData })
    }

    /// Lends up to `max` messages (at most the capacity) to `each`, in queue order, and
    /// returns how many there were. librdkafka returns once it has `max` messages or
    /// `timeout` has passed, whichever is first: it waits for a full batch, so a caller that
    /// needs only N more messages should ask for N, not wait out the timeout at the end.
    pub fn read(&mut self, max: usize, timeout: Duration, mut each: impl FnMut(Delivered<'_>)) -> Result<usize> {
        let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        let max = max.clamp(1, self.slots.len());
        // SAFETY: the queue handle is live (released only in Drop) and `slots` has room for
        // at least `max` message pointers, the size passed.
        let n = unsafe {
            rdsys::rd_kafka_consume_batch_queue(self.queue.as_ptr(), timeout_ms, self.slots.as_mut_ptr(), max)
        };
        let Ok(n) = usize::try_from(n) else {
            // SAFETY: reading librdkafka's thread-local last error has no preconditions.
            let code = unsafe { rdsys::rd_kafka_last_error() };
            return Err(KafkaError::MessageConsumption(code.into()).into());
        };
        let batch = Destroying(&mut self.slots[..n]);
        for &message in batch.0.iter() {
            // SAFETY: librdkafka filled the first `n` slots with valid messages that stay
            // alive until `Destroying` destroys them after this loop.
            let message = unsafe { &*message };
            each(delivered(message));
        }
        drop(batch);
        Ok(n)
    }
}

/// A message as [`Delivered`]; its slices borrow from `message`.
#[allow(unsafe_code)]
fn delivered(message: &rdsys::rd_kafka_message_t) -> Delivered<'_> {
    if message.err != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        return Delivered::Error(message.err.into());
    }
    // SAFETY: for a message without error, `payload`/`len` and `key`/`key_len` describe
    // buffers owned by the message (or are NULL), valid while it is.
    let slice = |ptr: *mut std::ffi::c_void, len: usize| -> Option<&[u8]> {
        (!ptr.is_null()).then(|| unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
    };
    Delivered::Record {
        partition: message.partition,
        offset: message.offset,
        key: slice(message.key, message.key_len),
        value: slice(message.payload, message.len),
    }
}

/// The messages of one batch, destroyed when dropped (also if the caller's closure panics).
struct Destroying<'s>(&'s mut [*mut rdsys::rd_kafka_message_t]);

#[allow(unsafe_code)]
impl Drop for Destroying<'_> {
    fn drop(&mut self) {
        for slot in self.0.iter_mut() {
            let message = std::mem::replace(slot, std::ptr::null_mut());
            if !message.is_null() {
                // SAFETY: each non-null slot holds a message librdkafka handed over to us and
                // that has not been destroyed (the slot is nulled first).
                unsafe { rdsys::rd_kafka_message_destroy(message) };
            }
        }
    }
}

#[allow(unsafe_code)]
impl Drop for BatchReader<'_> {
    fn drop(&mut self) {
        // SAFETY: the handle came from rd_kafka_queue_get_consumer and is released once, here.
        unsafe { rdsys::rd_kafka_queue_destroy(self.queue.as_ptr()) };
    }
}
