//! The compression codecs of record batches (attributes bits 0–2), for the few places that must
//! look inside a batch: decompressing its records section under a size cap, and compressing a
//! rewritten one with the batch's own codec (kafka-protocol's codecs; gzip, lz4 and zstd are
//! decompressed with the same codec crates read as bounded streams).
//!
//! The cap: a records section may not decompress to more than [`MAX_DECOMPRESSED_BYTES`], nor
//! to more than [`MAX_COMPRESSION_RATIO`] times its compressed size once past
//! [`RATIO_FLOOR_BYTES`]. Snappy declares its block sizes up front and is checked before
//! anything is allocated; gzip, lz4 and zstd are read as streams that stop one byte past the
//! cap, so no codec ever buffers more than the cap.

use bytes::{Bytes, BytesMut};
use kafka_protocol::compression::{Compressor, Decompressor, Gzip, Lz4, Snappy, Zstd};

use super::records::RecordsError;

/// Upper bound of a decompressed records section.
pub const MAX_DECOMPRESSED_BYTES: usize = 64 << 20;
/// Upper bound of decompressed size / compressed size (beyond the floor below).
pub const MAX_COMPRESSION_RATIO: usize = 100;
/// Sections decompressing to at most this are never refused for their ratio: small batches of
/// repetitive values legitimately compress far better than 100:1 and cost nothing.
pub const RATIO_FLOOR_BYTES: usize = 1 << 20;

/// A record-batch compression codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Codec {
    /// The codec of a batch's attributes bits 0–2.
    pub fn from_id(id: i16) -> Result<Codec, RecordsError> {
        Ok(match id {
            0 => Codec::None,
            1 => Codec::Gzip,
            2 => Codec::Snappy,
            3 => Codec::Lz4,
            4 => Codec::Zstd,
            other => return Err(RecordsError::UnknownCodec(other)),
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Gzip => "gzip",
            Codec::Snappy => "snappy",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        }
    }
}

/// The most a section of `compressed_len` bytes may decompress to.
pub fn decompressed_limit(compressed_len: usize) -> usize {
    compressed_len.saturating_mul(MAX_COMPRESSION_RATIO).clamp(RATIO_FLOOR_BYTES, MAX_DECOMPRESSED_BYTES)
}

/// Reads a decompressing stream to its end, but never buffers more than `limit` + 1 bytes:
/// a decompression bomb is refused before it is allocated.
fn bounded(codec: Codec, decoder: impl std::io::Read, limit: usize) -> Result<Bytes, RecordsError> {
    use std::io::Read as _;
    let mut out = Vec::new();
    decoder
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| RecordsError::Decompress { codec: codec.name(), source: e.into() })?;
    if out.len() > limit {
        return Err(RecordsError::DecompressedTooLarge { codec: codec.name(), size: out.len(), limit });
    }
    Ok(Bytes::from(out))
}

/// Decompresses a records section (not for `Codec::None`, whose section is used in place).
pub fn decompress(codec: Codec, mut compressed: &[u8]) -> Result<Bytes, RecordsError> {
    let limit = decompressed_limit(compressed.len());
    let failed = |source: anyhow::Error| RecordsError::Decompress { codec: codec.name(), source: source.into() };
    let take = |buf: &mut Bytes| Ok(std::mem::take(buf));
    let out = match codec {
        Codec::None => Bytes::copy_from_slice(compressed),
        Codec::Gzip => bounded(codec, flate2::read::GzDecoder::new(compressed), limit)?,
        Codec::Snappy => {
            if let Some(declared) = snappy_declared_len(compressed) {
                if declared > limit as u64 {
                    let size = usize::try_from(declared).unwrap_or(usize::MAX);
                    return Err(RecordsError::DecompressedTooLarge { codec: codec.name(), size, limit });
                }
            }
            Snappy::decompress(&mut compressed, take).map_err(failed)?
        }
        Codec::Lz4 => {
            let decoder = lz4::Decoder::new(compressed)
                .map_err(|e| RecordsError::Decompress { codec: codec.name(), source: e.into() })?;
            bounded(codec, decoder, limit)?
        }
        Codec::Zstd => {
            let decoder = zstd::stream::read::Decoder::new(compressed)
                .map_err(|e| RecordsError::Decompress { codec: codec.name(), source: e.into() })?;
            bounded(codec, decoder, limit)?
        }
    };
    if out.len() > limit {
        return Err(RecordsError::DecompressedTooLarge { codec: codec.name(), size: out.len(), limit });
    }
    Ok(out)
}

/// Compresses a records section with `codec` (kafka-protocol's default levels).
pub fn compress(codec: Codec, raw: &[u8]) -> Result<Vec<u8>, RecordsError> {
    let mut out = Vec::with_capacity(raw.len() / 2 + 64);
    let fill = |buf: &mut BytesMut| {
        buf.extend_from_slice(raw);
        Ok(())
    };
    let result = match codec {
        Codec::None => {
            out.extend_from_slice(raw);
            Ok(())
        }
        Codec::Gzip => Gzip::compress(&mut out, fill),
        Codec::Snappy => Snappy::compress(&mut out, fill),
        Codec::Lz4 => Lz4::compress(&mut out, fill),
        Codec::Zstd => Zstd::compress(&mut out, fill),
    };
    result.map_err(|source| RecordsError::Compress { codec: codec.name(), source: source.into() })?;
    Ok(out)
}

/// The xerial snappy framing Kafka uses: a 16-byte magic, then blocks of (u32 length, raw
/// snappy block). Without the magic the section is one raw snappy block.
const SNAPPY_MAGIC: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";

/// The total uncompressed size the snappy blocks declare (each raw block starts with it as an
/// unsigned varint), which is what the decoder allocates. The decoder takes the blocks in
/// order and allocates for each before decompressing it, so a malformed block only stops it
/// after the blocks before it were allocated: their sizes count, whatever follows. `None`
/// when the decoder allocates nothing (a raw block whose length does not parse).
fn snappy_declared_len(section: &[u8]) -> Option<u64> {
    let Some(mut rest) = section.strip_prefix(SNAPPY_MAGIC) else {
        return uvarint_prefix(section);
    };
    let mut total: u64 = 0;
    while let Some((len, after)) = rest.split_first_chunk::<4>() {
        let Some(block) = usize::try_from(u32::from_be_bytes(*len)).ok().and_then(|len| after.get(..len)) else {
            break;
        };
        let Some(declared) = uvarint_prefix(block) else { break };
        total = total.saturating_add(declared);
        rest = &after[block.len()..];
    }
    Some(total)
}

/// The unsigned varint (at most 5 bytes, as snappy writes it) at the start of `buf`.
fn uvarint_prefix(buf: &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for (i, byte) in buf.iter().take(5).enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `decompress` fuzz target (docs/fuzzing.md): a first xerial block declaring
    /// 2.2 GB followed by an empty block. The size check gave up on the whole section at the
    /// empty block, while the decoder allocates the first block's 2.2 GB before it gets there.
    #[test]
    fn a_snappy_block_declaring_gigabytes_is_refused_even_when_a_later_block_is_malformed() {
        let mut section = SNAPPY_MAGIC.to_vec();
        section.extend_from_slice(&[0, 0, 0, 7, 0xa3, 0xa3, 0xa3, 0xa6, 0x08, 0x08, 0x00]);
        section.extend_from_slice(&[0, 0, 0, 0]);
        section.extend_from_slice(b"\x03\x95W\xffK\x14Q\x01\x00\x00");
        assert!(snappy_declared_len(&section).is_some_and(|n| n > 2_000_000_000));
        match decompress(Codec::Snappy, &section) {
            Err(RecordsError::DecompressedTooLarge { size, .. }) => assert!(size > 2_000_000_000),
            other => panic!("expected DecompressedTooLarge, got {other:?}"),
        }
    }

    const CODECS: [Codec; 4] = [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd];

    #[test]
    fn every_codec_round_trips() {
        let raw: Vec<u8> = (0..5000u32).map(|i| (i * 31 % 251) as u8).collect();
        for codec in CODECS {
            let compressed = compress(codec, &raw).expect("compress");
            assert_eq!(decompress(codec, &compressed).expect("decompress"), raw, "{codec:?}");
        }
    }

    #[test]
    fn a_section_that_expands_past_the_cap_is_refused() {
        // Snappy never compresses better than about 20:1, so only the absolute cap reaches it.
        let zeros = vec![0u8; 4 << 20];
        for codec in [Codec::Gzip, Codec::Lz4, Codec::Zstd] {
            let compressed = compress(codec, &zeros).expect("compress");
            assert!(compressed.len() * MAX_COMPRESSION_RATIO < zeros.len(), "{codec:?} compresses zeros well");
            let err = decompress(codec, &compressed).expect_err("over the ratio");
            assert!(matches!(err, RecordsError::DecompressedTooLarge { .. }), "{codec:?}: {err}");
        }
        let huge = vec![0u8; MAX_DECOMPRESSED_BYTES + 1];
        for codec in CODECS {
            let compressed = compress(codec, &huge).expect("compress");
            let err = decompress(codec, &compressed).expect_err("over the absolute cap");
            assert!(matches!(err, RecordsError::DecompressedTooLarge { .. }), "{codec:?}: {err}");
        }
        // Small sections are never refused for their ratio.
        let small = vec![0u8; RATIO_FLOOR_BYTES];
        for codec in CODECS {
            let compressed = compress(codec, &small).expect("compress");
            assert_eq!(decompress(codec, &compressed).expect("under the floor").len(), small.len());
        }
    }

    #[test]
    fn snappy_blocks_declaring_a_huge_size_are_refused_before_decoding() {
        let mut section = SNAPPY_MAGIC.to_vec();
        // One 6-byte block declaring 2^32 - 1 uncompressed bytes.
        section.extend_from_slice(&6u32.to_be_bytes());
        section.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0x00]);
        let err = decompress(Codec::Snappy, &section).expect_err("declared too large");
        assert!(matches!(err, RecordsError::DecompressedTooLarge { size: 0xffff_ffff, .. }), "{err}");
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let raw: Vec<u8> = (0..5000u32).map(|i| (i * 31 % 251) as u8).collect();
        for codec in CODECS {
            let compressed = compress(codec, &raw).expect("compress");
            // kafka-protocol's lz4 decodes a cut or foreign stream to whatever it got (maybe
            // nothing) without an error: the record parser then finds records missing.
            let cut = decompress(codec, &compressed[..compressed.len() / 2]);
            assert!(cut.is_err() || cut.is_ok_and(|out| out.len() < raw.len()), "{codec:?}");
            let foreign = decompress(codec, b"xyz\xff\xff\xff");
            assert!(foreign.is_err() || codec == Codec::Lz4, "{codec:?}");
        }
        assert!(matches!(Codec::from_id(5), Err(RecordsError::UnknownCodec(5))));
    }
}
