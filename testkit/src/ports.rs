//! Free ports for test servers.
//!
//! The kernel hands out a free ephemeral port for a bind to port 0; the port
//! is released again before Cassandra binds it, so another process could take
//! it in between. That race is accepted: it is rare, and losing it makes the
//! node fail to start with "Address already in use" in its log, not hang.

use std::net::{IpAddr, SocketAddr, TcpListener};

use crate::error::{HarnessError, Result};

/// Whether a TCP listener can be bound at `addr` right now.
pub fn is_free(addr: SocketAddr) -> bool {
    TcpListener::bind(addr).is_ok()
}

/// A port that is free on every address of `addrs`.
pub fn free_port(addrs: &[IpAddr]) -> Result<u16> {
    free_ports(addrs, 1).map(|v| v[0])
}

/// Two different ports free on every address of `addrs` (native, storage).
pub fn free_port_pair(addrs: &[IpAddr]) -> Result<(u16, u16)> {
    let v = free_ports(addrs, 2)?;
    Ok((v[0], v[1]))
}

/// `count` different ports, each free on every address of `addrs`.
pub fn free_ports(addrs: &[IpAddr], count: usize) -> Result<Vec<u16>> {
    let first = *addrs.first().ok_or_else(|| HarnessError::Config("no address to find a port on".into()))?;
    let mut found: Vec<u16> = Vec::with_capacity(count);
    // Keep the probe listeners open until all ports are found so the kernel
    // does not hand out the same port twice.
    let mut held = Vec::new();
    for _ in 0..200 {
        if found.len() == count {
            break;
        }
        let listener = match TcpListener::bind(SocketAddr::new(first, 0)) {
            Ok(l) => l,
            Err(e) => return Err(HarnessError::io(format!("binding a probe socket on {first}"), e)),
        };
        let port = listener.local_addr().map_err(|e| HarnessError::io("reading a probe socket's port", e))?.port();
        let rest_free = addrs[1..].iter().all(|a| is_free(SocketAddr::new(*a, port)));
        if rest_free && !found.contains(&port) {
            found.push(port);
        }
        held.push(listener);
    }
    if found.len() == count {
        Ok(found)
    } else {
        Err(HarnessError::NoFreePort { addrs: addrs.to_vec() })
    }
}

/// The loopback addresses 127.0.0.1 … 127.0.0.n.
pub fn loopback_addresses(n: u8) -> Vec<IpAddr> {
    (1..=n).map(|i| IpAddr::from([127, 0, 0, i])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_is_distinct_and_free() {
        let addrs = loopback_addresses(3);
        let (a, b) = free_port_pair(&addrs).unwrap();
        assert_ne!(a, b);
        for ip in addrs {
            assert!(is_free(SocketAddr::new(ip, a)));
            assert!(is_free(SocketAddr::new(ip, b)));
        }
    }

    #[test]
    fn taken_port_is_not_free() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        assert!(!is_free(l.local_addr().unwrap()));
    }
}
