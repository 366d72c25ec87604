//! A request frame as the Kafka listener receives it (after the size prefix): the header
//! checks of `split_request`, then the body decoder of whichever API and version it names —
//! every request decoder the broker uses, at every version it accepts.
#![no_main]

use bytes::Bytes;
use kafka_protocol::messages::RequestKind;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(mut request) = broker::kafka::router::split_request(Bytes::copy_from_slice(data)) {
        let _ = RequestKind::decode(request.key, &mut request.body, request.version);
    }
});
