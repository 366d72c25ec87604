//! Record batches as a produce request or a follower's fetch brings them (and as recovery
//! reads them from disk): batch headers, the CRC, every record (decompressed when the batch
//! says so) and every record header.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for item in broker::log::batches(data) {
        let Ok((_, range)) = item else { break };
        let batch = &data[range];
        let _ = broker::log::verify_crc(batch);
        let _ = broker::log::for_each_record(batch, |record| {
            let _ = broker::log::for_each_header(record.headers, |_, _| {});
        });
    }
});
