//! Kafka's wire protocol.
//!
//! - [`listener`]: accepts client connections (bounded by `max.connections`).
//! - [`connection`]: framing — reads the size prefix, refuses frames over
//!   `socket.request.max.bytes` before buffering them, takes request-memory budget, answers
//!   requests in order.
//! - [`router`]: decodes the request header, checks the version against [`versions`], decodes
//!   the body for that API, calls its handler, encodes the response (with the right header
//!   version; ApiVersions always with v0).
//! - [`versions`]: the table of APIs Strom serves and their version ranges; ApiVersions is
//!   computed from it, so what is advertised is exactly what is routed.
//! - [`handlers`]: one file per API key.
//! - [`error_code`]: the one place where Strom's errors become Kafka error codes.
//! - [`response_errors`]: the error codes a response holds, counted per API and code.
//! - [`fetch_reply`]: Fetch responses spliced around `sendfile` of the segment ranges.
//! - [`fetch_session`]: KIP-227 fetch sessions, the bookkeeping behind incremental fetches.

pub mod connection;
pub mod error_code;
pub mod fetch_reply;
pub mod fetch_session;
pub mod handlers;
pub mod listener;
pub mod response_errors;
pub mod router;
pub mod versions;

#[cfg(test)]
mod decode_props;
