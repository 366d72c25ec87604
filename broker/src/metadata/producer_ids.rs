//! Producer ids for InitProducerId. The controller hands each broker blocks of ids
//! (`AllocateProducerIds`, committed in the metadata log before any id is used), so no two
//! brokers — and no two starts of one broker — ever hand out the same id; a restart only
//! skips the rest of its block, as with Kafka's controller.

use std::time::Duration;

use tokio::sync::{watch, Mutex};

use super::client::{ClientError, ControllerClient};

/// How long InitProducerId may wait for a new block.
const ALLOCATE_TIMEOUT: Duration = Duration::from_secs(10);

/// Allocates unique producer ids on this broker.
#[derive(Debug)]
pub struct ProducerIdAllocator {
    broker_id: i32,
    /// This broker's current epoch, once registered.
    epoch: watch::Receiver<Option<u64>>,
    client: ControllerClient,
    block: Mutex<Block>,
}

#[derive(Debug, Default)]
struct Block {
    next: i64,
    end: i64,
}

/// No producer id could be allocated.
#[derive(Debug, thiserror::Error)]
pub enum ProducerIdError {
    #[error("this broker is not registered with the controller yet")]
    NotRegistered,
    #[error("allocating a block of producer ids")]
    Controller(#[source] ClientError),
}

impl ProducerIdAllocator {
    pub fn new(broker_id: i32, epoch: watch::Receiver<Option<u64>>, client: ControllerClient) -> ProducerIdAllocator {
        ProducerIdAllocator { broker_id, epoch, client, block: Mutex::new(Block::default()) }
    }

    /// The next unused producer id.
    pub async fn next_id(&self) -> Result<i64, ProducerIdError> {
        let mut block = self.block.lock().await;
        if block.next >= block.end {
            let epoch = (*self.epoch.borrow()).ok_or(ProducerIdError::NotRegistered)?;
            let (first, count) = self
                .client
                .allocate_producer_ids(self.broker_id, epoch, ALLOCATE_TIMEOUT)
                .await
                .map_err(ProducerIdError::Controller)?;
            *block = Block { next: first, end: first + i64::from(count) };
        }
        let id = block.next;
        block.next += 1;
        Ok(id)
    }
}
