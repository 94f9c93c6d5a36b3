//! [`Admission`]: how many connections a server holds, in all and from one address, so that one
//! host (a leak, a flood, a slow-loris client) cannot take every slot or every file descriptor.
//! A connection holds an [`AdmissionSlot`] for as long as it is open; dropping the slot frees it.
//!
//! Pure bookkeeping (a mutex around two counters), shared by the remoting server and the broker's
//! admin HTTP server.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::Mutex;

use crate::sync::lock;

/// Connection limits of one server and the connections it holds now.
#[derive(Debug, Clone)]
pub struct Admission {
    inner: Arc<Mutex<Counts>>,
    total_max: usize,
    per_host_max: usize,
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    by_host: HashMap<IpAddr, usize>,
}

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The server holds its maximum of connections.
    Total(usize),
    /// The address holds its maximum of connections.
    PerHost(usize),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Total(n) => write!(f, "the server holds its maximum of {n} connections"),
            Refused::PerHost(n) => write!(f, "this address holds its maximum of {n} connections"),
        }
    }
}

/// One admitted connection; frees its place when dropped.
#[derive(Debug)]
pub struct AdmissionSlot {
    inner: Arc<Mutex<Counts>>,
    host: IpAddr,
}

impl Admission {
    /// At most `total_max` connections, `per_host_max` from one address.
    pub fn new(total_max: usize, per_host_max: usize) -> Self {
        Admission { inner: Arc::default(), total_max, per_host_max }
    }

    /// A slot for a connection from `host`, unless a limit is reached.
    pub fn admit(&self, host: IpAddr) -> Result<AdmissionSlot, Refused> {
        let mut counts = lock(&self.inner);
        if counts.total >= self.total_max {
            return Err(Refused::Total(self.total_max));
        }
        let from_host = counts.by_host.get(&host).copied().unwrap_or(0);
        if from_host >= self.per_host_max {
            return Err(Refused::PerHost(self.per_host_max));
        }
        counts.total += 1;
        counts.by_host.insert(host, from_host + 1);
        Ok(AdmissionSlot { inner: Arc::clone(&self.inner), host })
    }

    /// Connections held now.
    pub fn held(&self) -> usize {
        lock(&self.inner).total
    }
}

impl Drop for AdmissionSlot {
    fn drop(&mut self) {
        let mut counts = lock(&self.inner);
        counts.total = counts.total.saturating_sub(1);
        if let Some(n) = counts.by_host.get_mut(&self.host) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.by_host.remove(&self.host);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_hold_per_host_and_in_all_and_slots_come_back() {
        let a = Admission::new(3, 2);
        let h1: IpAddr = "10.0.0.1".parse().unwrap();
        let h2: IpAddr = "10.0.0.2".parse().unwrap();
        let s1 = a.admit(h1).unwrap();
        let _s2 = a.admit(h1).unwrap();
        assert_eq!(a.admit(h1).unwrap_err(), Refused::PerHost(2));
        let _s3 = a.admit(h2).unwrap();
        assert_eq!(a.admit(h2).unwrap_err(), Refused::Total(3));
        drop(s1);
        assert_eq!(a.held(), 2);
        let _s4 = a.admit(h1).unwrap();
        assert_eq!(a.held(), 3);
    }
}
