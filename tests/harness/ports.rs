//! Loopback ports for the end-to-end tests, handed out below the kernel's ephemeral port range.
//!
//! A port the OS chose with `bind(:0)` and then released lies in the ephemeral range, where the
//! local side of any outgoing connection (a parallel test's client, a replica dialing its peers)
//! can take it before the broker binds it, or before a restarted broker binds it again. CI once
//! failed on exactly that ("cannot listen on 0.0.0.0:40863: Address already in use"). The kernel
//! never picks a port outside that range by itself, so only a process binding one explicitly can
//! collide with us: a bind probe skips ports held that way.
//!
//! Invariant: within one test process no port is handed out twice (one cursor, under a lock, only
//! moves forward; it wraps around the window only after handing out all of it).

#![allow(dead_code)]

use std::net::TcpListener;
use std::sync::Mutex;

/// Lowest port handed out: above the registered ports most local services listen on.
const PORT_MIN: u16 = 20_000;
/// Ports needed below the ephemeral range before the window moves above it instead.
const WINDOW_MIN_PORTS: u16 = 2_000;
/// Linux's default ephemeral range, used where `/proc` does not say.
const EPHEMERAL_DEFAULT: (u16, u16) = (32_768, 60_999);

/// The next port to try, and the window `[low, high)` it moves in; `None` until first use.
static CURSOR: Mutex<Option<Cursor>> = Mutex::new(None);

#[derive(Debug, Clone, Copy)]
struct Cursor {
    next: u16,
    low: u16,
    high: u16,
}

fn ephemeral_range() -> (u16, u16) {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let mut bounds = text.split_whitespace().map(str::parse::<u16>);
    match (bounds.next(), bounds.next()) {
        (Some(Ok(low)), Some(Ok(high))) if low <= high => (low, high),
        _ => EPHEMERAL_DEFAULT,
    }
}

fn first_cursor() -> Cursor {
    let (ephemeral_low, ephemeral_high) = ephemeral_range();
    let (low, high) = if ephemeral_low >= PORT_MIN + WINDOW_MIN_PORTS {
        (PORT_MIN, ephemeral_low)
    } else if ephemeral_high <= u16::MAX - WINDOW_MIN_PORTS {
        (ephemeral_high + 1, u16::MAX)
    } else {
        panic!("no room for test ports outside the ephemeral range {ephemeral_low}-{ephemeral_high}")
    };
    // Test binaries run one after another, but other processes may run tests too: each process
    // starts at its own place in the window, so two of them rarely probe the same ports.
    let offset = (u64::from(std::process::id()) * 7_919 % u64::from(high - low)) as u16;
    Cursor { next: low + offset, low, high }
}

/// `base`, `base + step`, ..., `base + (count - 1)·step`: all free on every interface right now and
/// never handed out before by this process. Returns `base`.
pub fn free_ports_spaced(step: u16, count: u16) -> u16 {
    assert!(step >= 1 && count >= 1, "step {step} and count {count} must be at least 1");
    let mut guard = CURSOR.lock().unwrap_or_else(|p| p.into_inner());
    let cursor = guard.get_or_insert_with(first_cursor);
    let span = u32::from(step) * u32::from(count - 1);
    let window = u32::from(cursor.high - cursor.low);
    assert!(span < window, "{count} ports {step} apart do not fit in {}..{}", cursor.low, cursor.high);
    for _ in 0..window {
        let base = cursor.next;
        let last = u32::from(base) + span;
        if last >= u32::from(cursor.high) {
            cursor.next = cursor.low;
            continue;
        }
        cursor.next = if last + 1 >= u32::from(cursor.high) { cursor.low } else { last as u16 + 1 };
        // 0.0.0.0 rather than 127.0.0.1: brokers listen on every interface, and a wildcard bind
        // fails if any address holds the port.
        let free = (0..count).all(|i| TcpListener::bind(("0.0.0.0", base + i * step)).is_ok());
        if free {
            return base;
        }
    }
    panic!("no {count} free ports {step} apart in {}..{}", cursor.low, cursor.high)
}

/// One port, free right now and never handed out before by this process.
pub fn free_port() -> u16 {
    free_ports_spaced(1, 1)
}

/// `count` distinct free ports.
pub fn free_ports(count: usize) -> Vec<u16> {
    (0..count).map(|_| free_port()).collect()
}
