//! A blocking SOCKS5 client over std sockets: CONNECT and UDP ASSOCIATE.
//! Blocking and thread-per-caller on purpose, so the client's own cost per
//! connection is a few system calls, the same for every proxy measured.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::codec::{self, Addr};

/// Every socket operation of the client gives up after this long, so a
/// proxy that stalls fails the measurement instead of hanging it.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens a TCP connection with the benchmark's timeouts and no Nagle delay.
pub fn dial(addr: SocketAddr) -> io::Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Greets the server offering only "no authentication".
pub fn greet(stream: &mut TcpStream) -> io::Result<()> {
    stream.write_all(&codec::GREETING)?;
    let mut selection = [0; 2];
    stream.read_exact(&mut selection)?;
    codec::check_method(selection)
}

/// Sends one request and reads its reply; a reply other than "succeeded"
/// is an error naming the code.
pub fn request(stream: &mut TcpStream, cmd: u8, dst: SocketAddr) -> io::Result<Addr> {
    let mut out = Vec::with_capacity(22);
    codec::encode_request(cmd, dst, &mut out);
    stream.write_all(&out)?;
    let mut reply = [0u8; 4 + 1 + 255 + 2];
    stream.read_exact(&mut reply[..5])?;
    let len = codec::reply_len(reply[..5].try_into().expect("5 bytes"))?;
    stream.read_exact(&mut reply[5..len])?;
    let reply = codec::decode_reply(&reply[..len])?;
    if reply.code != 0 {
        return Err(io::Error::other(format!(
            "socks5 request refused: {} (code {})",
            codec::reply_text(reply.code),
            reply.code
        )));
    }
    Ok(reply.bound)
}

/// A TCP stream to `target` through the SOCKS5 server at `proxy`.
pub fn connect(proxy: SocketAddr, target: SocketAddr) -> io::Result<TcpStream> {
    let mut stream = dial(proxy)?;
    greet(&mut stream)?;
    request(&mut stream, codec::CMD_CONNECT, target)?;
    Ok(stream)
}

/// A UDP association for the client socket at `client`: the control stream
/// (the association lives as long as it does) and the relay address to send
/// datagrams to. A relay bound to an unspecified address is reached at the
/// proxy's own address.
pub fn udp_associate(proxy: SocketAddr, client: SocketAddr) -> io::Result<(TcpStream, SocketAddr)> {
    let mut stream = dial(proxy)?;
    greet(&mut stream)?;
    let relay = match request(&mut stream, codec::CMD_UDP_ASSOCIATE, client)? {
        Addr::Ip(addr) if addr.ip().is_unspecified() => SocketAddr::new(proxy.ip(), addr.port()),
        Addr::Ip(addr) => addr,
        Addr::Domain(name, port) => {
            return Err(io::Error::other(format!(
                "socks5 udp relay given as a name ({name}:{port}), expected an address"
            )))
        }
    };
    Ok((stream, relay))
}
