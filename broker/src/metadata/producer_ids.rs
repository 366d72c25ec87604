//! Producer ids for InitProducerId. Ids are handed out from blocks whose upper bound is
//! persisted before any id of the block is used, so a restart (or crash) never hands out an id
//! twice — it only skips the rest of the block, as Kafka's controller does.

use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use super::atomic_file;

const BLOCK_SIZE: i64 = 1000;

/// Allocates unique producer ids on this node.
#[derive(Debug)]
pub struct ProducerIdAllocator {
    path: PathBuf,
    state: Mutex<Block>,
}

#[derive(Debug)]
struct Block {
    next: i64,
    end: i64,
}

/// The producer-id file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ProducerIdError {
    #[error("accessing producer id block file {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("producer id block file {path} is malformed")]
    Malformed { path: PathBuf },
    #[error("producer ids are exhausted")]
    Exhausted,
}

impl ProducerIdAllocator {
    /// Opens the allocator persisted at `<metadata dir>/producer-ids`.
    pub fn open(metadata_dir: &Path) -> Result<ProducerIdAllocator, ProducerIdError> {
        let path = metadata_dir.join("producer-ids");
        let start = match std::fs::read_to_string(&path) {
            Ok(text) => text.trim().parse::<i64>().map_err(|_| ProducerIdError::Malformed { path: path.clone() })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(source) => return Err(ProducerIdError::Io { path, source }),
        };
        Ok(ProducerIdAllocator { path, state: Mutex::new(Block { next: start, end: start }) })
    }

    /// The next unused producer id.
    pub fn next_id(&self) -> Result<i64, ProducerIdError> {
        let mut block = self.state.lock();
        if block.next >= block.end {
            let end = block.end.checked_add(BLOCK_SIZE).ok_or(ProducerIdError::Exhausted)?;
            atomic_file::write(&self.path, end.to_string().as_bytes())
                .map_err(|source| ProducerIdError::Io { path: self.path.clone(), source })?;
            block.next = block.end;
            block.end = end;
        }
        let id = block.next;
        block.next += 1;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_never_reused_across_restarts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = ProducerIdAllocator::open(dir.path()).expect("open");
        let first: Vec<i64> = (0..3).map(|_| a.next_id().expect("id")).collect();
        drop(a);
        let b = ProducerIdAllocator::open(dir.path()).expect("reopen");
        let next = b.next_id().expect("id");
        assert!(first.iter().all(|&id| id < next), "{first:?} then {next}");
    }
}
