//! The registry's machinery: from one list of protocols, each a type
//! implementing [`super::protocol::Protocol`], the closed enums of built
//! outbounds, of their streams and of their datagram links, and the
//! matches that dispatch to them. Adding a protocol is its module and one
//! line of the list in registry.rs.

macro_rules! outbounds {
    ($($(#[$doc:meta])* $name:ident($protocol:ty),)*) => {
        /// A built outbound of one of the registered protocols.
        pub(crate) enum Kind {
            $($(#[$doc])* $name($protocol),)*
        }

        /// The stream a TCP flow is relayed to, whatever opened it: a
        /// closed enum, as shadowsocks-rust's outbound stream is, no box
        /// where the types are known.
        pub enum OutboundStream {
            $($name(<$protocol as Protocol>::Stream),)*
        }

        /// The link a UDP flow opened on an outbound: a closed enum, so the
        /// fan-out holds links of different outbounds side by side.
        pub enum OutboundDatagram {
            $($name(<$protocol as Protocol>::Datagram),)*
        }

        impl Kind {
            /// The registered protocol that builds `protocol`.
            pub(crate) fn build(protocol: &OutboundProtocol, with: &Build) -> io::Result<Kind> {
                $(
                    if let Some(built) = <$protocol as Protocol>::build(protocol, with) {
                        return built.map(Kind::$name);
                    }
                )*
                Err(io::Error::other(format!(
                    "outbound protocol {} is not registered",
                    protocol.name()
                )))
            }

            pub(crate) async fn connect(
                &self,
                destination: &Address,
                resolved: Option<&[IpAddr]>,
                own: &OwnInbounds,
            ) -> io::Result<OutboundStream> {
                match self {
                    $(Kind::$name(p) => p
                        .connect(destination, resolved, own)
                        .await
                        .map(OutboundStream::$name),)*
                }
            }

            pub(crate) async fn associate(
                &self,
                toward: &Address,
                plane: Arc<ArcSwap<Plane>>,
            ) -> io::Result<OutboundDatagram> {
                match self {
                    $(Kind::$name(p) => p
                        .associate(toward, plane)
                        .await
                        .map(OutboundDatagram::$name),)*
                }
            }
        }

        impl AsyncRead for OutboundStream {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $(OutboundStream::$name(s) => Pin::new(s).poll_read(cx, buf),)*
                }
            }
        }

        impl AsyncWrite for OutboundStream {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    $(OutboundStream::$name(s) => Pin::new(s).poll_write(cx, buf),)*
                }
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    $(OutboundStream::$name(s) => Pin::new(s).poll_write_vectored(cx, bufs),)*
                }
            }

            fn is_write_vectored(&self) -> bool {
                match self {
                    $(OutboundStream::$name(s) => s.is_write_vectored(),)*
                }
            }

            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $(OutboundStream::$name(s) => Pin::new(s).poll_flush(cx),)*
                }
            }

            fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $(OutboundStream::$name(s) => Pin::new(s).poll_shutdown(cx),)*
                }
            }
        }

        impl Relayed for OutboundStream {
            fn plain_tcp(&mut self) -> Option<&mut TcpStream> {
                match self {
                    $(OutboundStream::$name(s) => Relayed::plain_tcp(s),)*
                }
            }

            fn fills(&mut self) -> Option<&mut dyn Fills> {
                match self {
                    $(OutboundStream::$name(s) => s.fills(),)*
                }
            }

            fn drains(&mut self) -> Option<&mut dyn Drains> {
                match self {
                    $(OutboundStream::$name(s) => s.drains(),)*
                }
            }

            fn buffer_len(&mut self) -> usize {
                match self {
                    $(OutboundStream::$name(s) => s.buffer_len(),)*
                }
            }

            fn holds_first_bytes(&self) -> bool {
                match self {
                    $(OutboundStream::$name(s) => s.holds_first_bytes(),)*
                }
            }

            fn local_addr(&self) -> Option<SocketAddr> {
                match self {
                    $(OutboundStream::$name(s) => Relayed::local_addr(s),)*
                }
            }
        }

        impl DatagramLink for OutboundDatagram {
            fn poll_send_to(
                &mut self,
                cx: &mut Context<'_>,
                payload: &[u8],
                to: &Address,
            ) -> Poll<io::Result<()>> {
                match self {
                    $(OutboundDatagram::$name(link) => link.poll_send_to(cx, payload, to),)*
                }
            }

            fn poll_recv_from(
                &mut self,
                cx: &mut Context<'_>,
                buf: &mut ReadBuf<'_>,
            ) -> Poll<io::Result<Address>> {
                match self {
                    $(OutboundDatagram::$name(link) => link.poll_recv_from(cx, buf),)*
                }
            }
        }
    };
}

pub(crate) use outbounds;
