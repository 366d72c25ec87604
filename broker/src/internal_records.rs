//! Primitives of the records Strom writes to its internal topics in Kafka's formats
//! (`__consumer_offsets`, `__transaction_state`): big-endian integers, strings and byte
//! arrays with signed length prefixes (-1 is null). Reads check the length first and never
//! allocate what a length claims beyond what is there.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// A field that could not be read: what, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FieldError(pub String);

pub fn put_str(buf: &mut BytesMut, s: &str) {
    buf.put_i16(i16::try_from(s.len()).unwrap_or(i16::MAX));
    buf.put_slice(&s.as_bytes()[..s.len().min(i16::MAX as usize)]);
}

pub fn put_nullable_str(buf: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_str(buf, s),
        None => buf.put_i16(-1),
    }
}

pub fn put_bytes(buf: &mut BytesMut, b: &[u8]) {
    buf.put_i32(i32::try_from(b.len()).unwrap_or(i32::MAX));
    buf.put_slice(b);
}

fn need(buf: &Bytes, n: usize, what: &str) -> Result<(), FieldError> {
    if buf.remaining() < n {
        return Err(FieldError(format!("truncated {what}")));
    }
    Ok(())
}

pub fn get_i16(buf: &mut Bytes, what: &str) -> Result<i16, FieldError> {
    need(buf, 2, what)?;
    Ok(buf.get_i16())
}

pub fn get_i32(buf: &mut Bytes, what: &str) -> Result<i32, FieldError> {
    need(buf, 4, what)?;
    Ok(buf.get_i32())
}

pub fn get_i64(buf: &mut Bytes, what: &str) -> Result<i64, FieldError> {
    need(buf, 8, what)?;
    Ok(buf.get_i64())
}

pub fn get_nullable_str(buf: &mut Bytes, what: &str) -> Result<Option<String>, FieldError> {
    let len = get_i16(buf, what)?;
    if len < 0 {
        return Ok(None);
    }
    let len = len as usize;
    need(buf, len, what)?;
    let s = buf.split_to(len);
    String::from_utf8(s.to_vec()).map(Some).map_err(|_| FieldError(format!("{what} is not UTF-8")))
}

pub fn get_str(buf: &mut Bytes, what: &str) -> Result<String, FieldError> {
    get_nullable_str(buf, what)?.ok_or_else(|| FieldError(format!("{what} is null")))
}

pub fn get_bytes(buf: &mut Bytes, what: &str) -> Result<Bytes, FieldError> {
    let len = get_i32(buf, what)?;
    if len < 0 {
        return Ok(Bytes::new());
    }
    let len = len as usize;
    need(buf, len, what)?;
    Ok(buf.split_to(len))
}
