//! An SSE body from the control plane (`/v1/turns/{id}/events`, `/v1/jobs/{id}/events`), read
//! as the SDK's `EventStream` reads it (`hermes::decode_sse_body`: the same SSE framing and the
//! same decoding into `TurnEvent` / `JobEvent`).
//!
//! Asserts, besides no panic: the events do not depend on how the body was cut into network
//! chunks (one chunk; one byte per chunk, for bodies up to 512 bytes; uneven chunks: a character
//! or a line ending split across chunks reads the same); the events read, written back as the control plane writes
//! them (`id:`, `event:`, `data:`, with keep-alive comments between), read as the same events.

#![no_main]

use std::fmt::Debug;
use std::io::Write;

use hermes::types::{JobEvent, TurnEvent};
use hermes::{Error, LogEvent, decode_sse_body};
use libfuzzer_sys::fuzz_target;
use serde::Serialize;

fuzz_target!(|data: &[u8]| {
    check::<TurnEvent>(data);
    check::<JobEvent>(data);
});

/// What a body read as, in a form that can be compared.
#[derive(Debug, PartialEq)]
enum Item<E> {
    Event(E),
    /// A message whose data is not an event: the decoding error and the data.
    Undecodable(String),
    /// The body broke (its bytes are not UTF-8).
    Broken,
}

fn read<E: LogEvent>(chunks: Vec<Vec<u8>>) -> Vec<Item<E>> {
    decode_sse_body::<E>(chunks)
        .into_iter()
        .map(|item| match item {
            Ok(event) => Item::Event(event),
            Err(e @ Error::Decode { .. }) => Item::Undecodable(e.to_string()),
            Err(Error::StreamEnded(_)) => Item::Broken,
            Err(other) => panic!("unexpected error from an SSE body: {other}"),
        })
        .collect()
}

fn check<E: LogEvent + Serialize + PartialEq + Debug>(data: &[u8]) {
    let whole = read::<E>(vec![data.to_vec()]);
    // The SSE parser reads a line again from its start for each chunk: one byte per chunk is
    // quadratic in the line's length, so only short bodies are read that way.
    if data.len() <= 512 {
        let bytewise = read::<E>(data.iter().map(|b| vec![*b]).collect());
        assert_eq!(bytewise, whole, "one byte per chunk reads differently");
    }
    let uneven = read::<E>(uneven_chunks(data));
    assert_eq!(uneven, whole, "uneven chunks read differently");
    if whole.iter().any(|item| matches!(item, Item::Broken)) {
        assert!(
            matches!(whole.last(), Some(Item::Broken)),
            "a broken body goes on"
        );
    }

    // Written back as the control plane writes a log, the events read as the same events.
    let events: Vec<&E> = whole
        .iter()
        .filter_map(|item| match item {
            Item::Event(event) => Some(event),
            _ => None,
        })
        .collect();
    let mut body = Vec::new();
    for event in &events {
        let json = serde_json::to_string(event).expect("an event serializes");
        write!(body, ":\n\nid: {}\nevent: e\ndata: {json}\n\n", event.seq()).unwrap();
    }
    let again = read::<E>(vec![body]);
    let expected: Vec<Item<&E>> = events.into_iter().map(Item::Event).collect();
    let again: Vec<Item<&E>> = again
        .iter()
        .map(|item| match item {
            Item::Event(event) => Item::Event(event),
            Item::Undecodable(e) => Item::Undecodable(e.clone()),
            Item::Broken => Item::Broken,
        })
        .collect();
    assert_eq!(again, expected, "the events written back read differently");
}

/// The body cut into chunks of 1 to 16 bytes, the sizes drawn from the body itself.
fn uneven_chunks(data: &[u8]) -> Vec<Vec<u8>> {
    let mut state = data.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    }) | 1;
    let mut chunks = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let size = (1 + (state % 16) as usize).min(rest.len());
        let (chunk, tail) = rest.split_at(size);
        chunks.push(chunk.to_vec());
        rest = tail;
    }
    chunks
}
