//! The TCP socket of a connection: made, given its options
//! ([`SocketOptions`], Nagle's algorithm), bound when a local address or
//! port is asked for, and connected. Kept apart from the handshake so that
//! what the system is asked for is in one place.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use tokio::net::{TcpSocket, TcpStream};

use crate::config::SocketOptions;

/// Connects to `addr` from `local_port` (the shard-aware port's choice;
/// `None`: any) and `opts.local_ip_address` (`None`: the system's), with
/// `opts` set before the connection is made (buffer sizes must be, for the
/// window the handshake agrees). A local address of the other family than
/// `addr` is an `InvalidInput` error, never a silent fallback.
pub(super) async fn connect(
    addr: SocketAddr,
    local_port: Option<u16>,
    nodelay: bool,
    opts: &SocketOptions,
) -> io::Result<TcpStream> {
    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    set_options(&socket, nodelay, opts)?;
    if let Some(local) = local_addr(addr, local_port, opts.local_ip_address)? {
        socket.bind(local)?;
    }
    socket.connect(addr).await
}

/// The address to bind before connecting to `addr`; `None` when neither a
/// port nor an address is asked for.
fn local_addr(addr: SocketAddr, port: Option<u16>, ip: Option<IpAddr>) -> io::Result<Option<SocketAddr>> {
    let ip = match ip {
        Some(ip) if ip.is_ipv4() != addr.is_ipv4() => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the local address {ip} is not of the address family of the node {addr}"),
            ));
        }
        Some(ip) => ip,
        None if port.is_none() => return Ok(None),
        None if addr.is_ipv4() => Ipv4Addr::UNSPECIFIED.into(),
        None => Ipv6Addr::UNSPECIFIED.into(),
    };
    Ok(Some(SocketAddr::new(ip, port.unwrap_or(0))))
}

/// The options of `opts` that are set, and Nagle's algorithm.
fn set_options(socket: &TcpSocket, nodelay: bool, opts: &SocketOptions) -> io::Result<()> {
    socket.set_nodelay(nodelay)?;
    if let Some(size) = opts.send_buffer_size {
        socket.set_send_buffer_size(size)?;
    }
    if let Some(size) = opts.recv_buffer_size {
        socket.set_recv_buffer_size(size)?;
    }
    if let Some(reuse) = opts.reuse_address {
        socket.set_reuseaddr(reuse)?;
    }
    let sock = socket2::SockRef::from(socket);
    if let Some(linger) = opts.linger {
        sock.set_linger(Some(linger))?;
    }
    if let Some(interval) = opts.keepalive_interval {
        let keepalive = socket2::TcpKeepalive::new().with_time(interval);
        #[cfg(any(
            target_os = "android",
            target_os = "freebsd",
            target_os = "fuchsia",
            target_os = "illumos",
            target_os = "ios",
            target_os = "linux",
            target_os = "macos",
            target_os = "netbsd",
            target_os = "windows",
        ))]
        let keepalive = keepalive.with_interval(interval);
        sock.set_tcp_keepalive(&keepalive)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// What is asked for is what the socket has, read back from the
    /// system; what is not asked for is left as it was.
    #[tokio::test]
    async fn the_options_asked_for_are_the_sockets() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let opts = SocketOptions {
            local_ip_address: Some("127.0.0.3".parse().expect("ip")),
            keepalive_interval: Some(Duration::from_secs(17)),
            send_buffer_size: Some(64 * 1024),
            recv_buffer_size: Some(96 * 1024),
            reuse_address: Some(true),
            linger: Some(Duration::ZERO),
        };
        let stream = connect(addr, None, false, &opts).await.expect("connect");
        let sock = socket2::SockRef::from(&stream);
        assert_eq!(stream.local_addr().expect("local").ip(), opts.local_ip_address.expect("set"));
        assert!(!stream.nodelay().expect("nodelay"));
        assert!(sock.keepalive().expect("keepalive"));
        // Linux doubles the sizes asked for (its bookkeeping).
        assert!(sock.send_buffer_size().expect("sndbuf") >= 64 * 1024);
        assert!(sock.recv_buffer_size().expect("rcvbuf") >= 96 * 1024);
        assert_eq!(sock.linger().expect("linger"), Some(Duration::ZERO));
        assert!(sock.reuse_address().expect("reuseaddr"));

        let plain = connect(addr, None, true, &SocketOptions::default()).await.expect("connect");
        let sock = socket2::SockRef::from(&plain);
        assert!(plain.nodelay().expect("nodelay"));
        assert!(!sock.keepalive().expect("keepalive"), "off unless asked for");
        assert_eq!(sock.linger().expect("linger"), None);
        assert_eq!(plain.local_addr().expect("local").ip(), addr.ip());
    }

    /// A local address of the other family is refused before any system
    /// call could fall back to another one.
    #[test]
    fn a_local_address_of_the_other_family_is_refused() {
        let v4: SocketAddr = "127.0.0.1:9042".parse().expect("addr");
        let v6: IpAddr = "::1".parse().expect("ip");
        let err = local_addr(v4, None, Some(v6)).expect_err("families differ");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("::1"), "{err}");
        assert_eq!(local_addr(v4, None, None).expect("none"), None);
        assert_eq!(local_addr(v4, Some(19042), None).expect("port"), Some("0.0.0.0:19042".parse().expect("addr")));
        let local: IpAddr = "127.0.0.2".parse().expect("ip");
        assert_eq!(local_addr(v4, None, Some(local)).expect("ip"), Some(SocketAddr::new(local, 0)));
    }
}
