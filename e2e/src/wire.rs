//! Raw Kafka framing over a plain `TcpStream`, for tests that must send what no client would:
//! valid requests built with the `kafka-protocol` crate, and hand-made broken frames.
//!
//! A frame is an i32 big-endian size followed by that many bytes: request header, then body.
//! Responses to ApiVersions always carry response header v0 (just the correlation id).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// Connects to `addr` with read/write timeouts of `timeout`.
pub fn connect(addr: SocketAddr, timeout: Duration) -> Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&addr, timeout).with_context(|| format!("connect {addr}"))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Prefixes `payload` with its length as an i32 (big-endian).
pub fn frame(payload: &[u8]) -> Vec<u8> {
    let len = i32::try_from(payload.len()).unwrap_or(i32::MAX);
    let mut out = Vec::with_capacity(payload.len() + 4);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Splits size-prefixed frames sent back to back (a captured connection) into their
/// payloads; a trailing partial frame is dropped.
pub fn split_frames(mut bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    while bytes.len() >= 4 {
        let size = i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        let Ok(size) = usize::try_from(size) else { break };
        let Some(payload) = bytes.get(4..4 + size) else { break };
        frames.push(payload.to_vec());
        bytes = &bytes[4 + size..];
    }
    frames
}

/// The request header and body of `body` as `api_key` v`version`, without the size prefix.
pub fn encode_request_payload<M: Encodable>(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &M,
) -> Result<Vec<u8>> {
    let header = RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("strom-e2e-raw")));
    let mut buf = BytesMut::new();
    header.encode(&mut buf, api_key.request_header_version(version)).context("encode request header")?;
    body.encode(&mut buf, version).with_context(|| format!("encode {api_key:?} v{version} body"))?;
    Ok(buf.to_vec())
}

/// A complete request frame (size prefix, header, body).
pub fn encode_request<M: Encodable>(api_key: ApiKey, version: i16, correlation_id: i32, body: &M) -> Result<Vec<u8>> {
    Ok(frame(&encode_request_payload(api_key, version, correlation_id, body)?))
}

/// A request header written by hand, for API keys or versions the crate refuses to encode.
/// `flexible` selects header v2 (an empty tagged-field section after the client id).
pub fn raw_request_header(api_key: i16, version: i16, correlation_id: i32, client_id: &str, flexible: bool) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&api_key.to_be_bytes());
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(&correlation_id.to_be_bytes());
    let id_len = i16::try_from(client_id.len()).unwrap_or(i16::MAX);
    out.extend_from_slice(&id_len.to_be_bytes());
    out.extend_from_slice(client_id.as_bytes());
    if flexible {
        out.push(0); // no tagged fields
    }
    out
}

/// Reads one response frame; `Ok(None)` if the peer closed the connection cleanly before
/// sending anything.
pub fn read_frame(stream: &mut TcpStream) -> Result<Option<Bytes>> {
    let mut size = [0u8; 4];
    match stream.read_exact(&mut size) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e).context("read response size"),
    }
    let size = i32::from_be_bytes(size);
    if !(0..=64 * 1024 * 1024).contains(&size) {
        bail!("response frame size {size} out of range");
    }
    let mut body = vec![0u8; usize::try_from(size).context("frame size")?];
    stream.read_exact(&mut body).context("read response body")?;
    Ok(Some(Bytes::from(body)))
}

/// How a connection ended in [`wait_closed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// Orderly close (FIN) after `bytes` bytes from the broker.
    Eof { bytes: usize },
    /// Reset (RST) after `bytes` bytes from the broker.
    Reset { bytes: usize },
}

/// Reads (and discards) until the broker closes the connection; an error if it is still
/// open after `timeout`.
pub fn wait_closed(stream: &mut TcpStream, timeout: Duration) -> Result<Closed> {
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 8192];
    let mut bytes = 0;
    stream.set_read_timeout(Some(Duration::from_millis(200)))?;
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Ok(Closed::Eof { bytes }),
            Ok(n) => bytes += n,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe
                ) =>
            {
                return Ok(Closed::Reset { bytes })
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e).context("read while waiting for close"),
        }
        if Instant::now() > deadline {
            bail!("connection still open {timeout:?} later ({bytes} bytes received)");
        }
    }
}

/// Writes `data`, tolerating the broker closing the connection part-way (which is what many
/// hostile-input cases expect); returns whether everything was written.
pub fn write_tolerant(stream: &mut TcpStream, data: &[u8]) -> bool {
    match stream.write_all(data) {
        Ok(()) => true,
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::ConnectionReset | ErrorKind::BrokenPipe | ErrorKind::ConnectionAborted
            ) =>
        {
            false
        }
        Err(_) => false,
    }
}

/// Splits a response frame into its correlation id (response header v0) and body.
pub fn split_response_v0(mut frame: Bytes) -> Result<(i32, Bytes)> {
    if frame.len() < 4 {
        bail!("response of {} bytes has no correlation id", frame.len());
    }
    let correlation_id = frame.get_i32();
    Ok((correlation_id, frame))
}

/// Decodes a response of `api_key` v`version` from a frame (header, then body).
pub fn decode_response<M: Decodable>(api_key: ApiKey, version: i16, frame: Bytes) -> Result<(i32, M)> {
    let mut buf = frame;
    let header =
        ResponseHeader::decode(&mut buf, api_key.response_header_version(version)).context("decode response header")?;
    let body = M::decode(&mut buf, version).with_context(|| format!("decode {api_key:?} v{version} response"))?;
    Ok((header.correlation_id, body))
}

/// An ApiVersions request at `version` (v3+ carries the client software name and version).
pub fn api_versions_request() -> ApiVersionsRequest {
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("strom-e2e"))
        .with_client_software_version(StrBytes::from_static_str("0.1.0"))
}

/// One ApiVersions round trip on a fresh connection; checks the correlation id.
pub fn api_versions_roundtrip(addr: SocketAddr, version: i16) -> Result<ApiVersionsResponse> {
    let mut stream = connect(addr, Duration::from_secs(10))?;
    let correlation_id = 0x5EED;
    stream
        .write_all(&encode_request(ApiKey::ApiVersions, version, correlation_id, &api_versions_request())?)
        .context("send ApiVersions")?;
    let frame =
        read_frame(&mut stream)?.ok_or_else(|| anyhow!("connection closed instead of an ApiVersions response"))?;
    let (got, response) = decode_response::<ApiVersionsResponse>(ApiKey::ApiVersions, version, frame)?;
    if got != correlation_id {
        bail!("ApiVersions correlation id {got}, sent {correlation_id}");
    }
    Ok(response)
}

/// One client connection that sends typed requests and reads their typed responses in turn.
pub struct Conn {
    stream: TcpStream,
    correlation_id: i32,
}

impl Conn {
    pub fn open(addr: SocketAddr) -> Result<Conn> {
        Ok(Conn { stream: connect(addr, Duration::from_secs(10))?, correlation_id: 0 })
    }

    /// Sends `request` at `version` and decodes the answer (checking its correlation id).
    pub fn call<Req: Encodable, Resp: Decodable>(&mut self, key: ApiKey, version: i16, request: &Req) -> Result<Resp> {
        self.correlation_id += 1;
        let frame = encode_request(key, version, self.correlation_id, request)
            .context("encode the request (a test bug, not a broker one)")?;
        self.stream.write_all(&frame).context("send")?;
        let answer = read_frame(&mut self.stream)?.ok_or_else(|| anyhow!("connection closed instead of an answer"))?;
        let (correlation_id, response) = decode_response::<Resp>(key, version, answer)?;
        if correlation_id != self.correlation_id {
            bail!("correlation id {correlation_id}, sent {}", self.correlation_id);
        }
        Ok(response)
    }
}
