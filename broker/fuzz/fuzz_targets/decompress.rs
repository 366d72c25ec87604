//! The decompressors behind compressed batches (gzip, snappy in Kafka's framing, lz4, zstd),
//! with the broker's cap on the decompressed size: the first byte picks the codec.
#![no_main]

use broker::log::{decompress, Codec};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, compressed)) = data.split_first() else { return };
    let Ok(codec) = Codec::from_id(i16::from(which % 5)) else { return };
    let _ = decompress(codec, compressed);
});
