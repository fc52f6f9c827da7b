//! The DNS service as a route target: a UDP sub-link that answers every
//! packet sent on it, and a TCP stream that answers every length-prefixed
//! message written to it. Each answer is worked out on a task of its own
//! (a lookup may take a round trip upstream), at most
//! [`MAX_IN_FLIGHT`] at once per link; the link's owner is woken when one
//! is ready.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use etemenanki_proto::Address;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::task::JoinSet;

use super::ready_now;
use super::service::{Service, Transport};
use crate::outbound::DatagramLink;
use crate::resolve::{BoxFuture, MAX_MESSAGE};

/// Queries one link answers at once; more are dropped, as a lossy link
/// drops them.
pub const MAX_IN_FLIGHT: usize = 64;

pub struct DnsUdpLink {
    service: Service,
    /// Answers ready at once (from the cache), not yet received.
    ready: VecDeque<(Vec<u8>, Address)>,
    answering: JoinSet<Option<(Vec<u8>, Address)>>,
}

impl DnsUdpLink {
    pub fn new(service: Service) -> DnsUdpLink {
        DnsUdpLink {
            service,
            ready: VecDeque::new(),
            answering: JoinSet::new(),
        }
    }
}

impl DatagramLink for DnsUdpLink {
    fn poll_send_to(
        &mut self,
        cx: &mut Context<'_>,
        payload: &[u8],
        to: &Address,
    ) -> Poll<io::Result<()>> {
        if self.answering.len() + self.ready.len() >= MAX_IN_FLIGHT {
            tracing::debug!("dns service: too many queries in flight, dropping one");
            return Poll::Ready(Ok(()));
        }
        let now = ready_now(std::pin::pin!(self.service.answer(payload, Transport::Udp)));
        match now {
            Some(Some(answer)) => {
                self.ready.push_back((answer, to.clone()));
                // The owner polls the receive side again.
                cx.waker().wake_by_ref();
                return Poll::Ready(Ok(()));
            }
            Some(None) => return Poll::Ready(Ok(())),
            None => {}
        }
        let service = self.service.clone();
        let query = payload.to_vec();
        // The answer comes from where the query went, as the client expects.
        let from = to.clone();
        self.answering.spawn(async move {
            let answer = service.answer(&query, Transport::Udp).await?;
            Some((answer, from))
        });
        Poll::Ready(Ok(()))
    }

    fn poll_recv_from(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>> {
        if let Some((answer, from)) = self.ready.pop_front() {
            let n = answer.len().min(buf.remaining());
            buf.put_slice(&answer[..n]);
            return Poll::Ready(Ok(from));
        }
        loop {
            match self.answering.poll_join_next(cx) {
                Poll::Ready(Some(Ok(Some((answer, from))))) => {
                    let n = answer.len().min(buf.remaining());
                    buf.put_slice(&answer[..n]);
                    return Poll::Ready(Ok(from));
                }
                // No answer (not a query), or a task that failed: next.
                Poll::Ready(Some(_)) => continue,
                // Nothing in flight: the next send wakes the owner's task,
                // which polls again.
                Poll::Ready(None) | Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// A TCP flow to the DNS service: messages written to it, each after its
/// 2-byte length, are answered in order on the read side.
pub struct DnsTcpStream {
    service: Service,
    /// Written bytes not yet taken as a whole message.
    input: Vec<u8>,
    answering: Option<BoxFuture<'static, Option<Vec<u8>>>>,
    /// The framed answer being read, and how much of it was.
    output: Vec<u8>,
    read: usize,
    /// The writer shut down: once everything is answered, the read side
    /// ends.
    shut: bool,
    reader: Option<Waker>,
    writer: Option<Waker>,
}

/// How many written bytes wait at most: two whole messages.
const INPUT_LIMIT: usize = 2 * (2 + MAX_MESSAGE);

impl DnsTcpStream {
    pub fn new(service: Service) -> DnsTcpStream {
        DnsTcpStream {
            service,
            input: Vec::new(),
            answering: None,
            output: Vec::new(),
            read: 0,
            shut: false,
            reader: None,
            writer: None,
        }
    }

    /// The next whole message written, if there is one.
    fn take_message(&mut self) -> Option<Vec<u8>> {
        let len = usize::from(u16::from_be_bytes([
            *self.input.first()?,
            *self.input.get(1)?,
        ]));
        if self.input.len() < 2 + len {
            return None;
        }
        let message = self.input[2..2 + len].to_vec();
        self.input.drain(..2 + len);
        if let Some(writer) = self.writer.take() {
            writer.wake();
        }
        Some(message)
    }
}

impl AsyncRead for DnsTcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.read < this.output.len() {
                let n = (this.output.len() - this.read).min(buf.remaining());
                buf.put_slice(&this.output[this.read..this.read + n]);
                this.read += n;
                return Poll::Ready(Ok(()));
            }
            if let Some(answering) = &mut this.answering {
                let answer = match answering.as_mut().poll(cx) {
                    Poll::Ready(answer) => answer,
                    Poll::Pending => return Poll::Pending,
                };
                this.answering = None;
                this.output.clear();
                this.read = 0;
                if let Some(answer) = answer {
                    // An answer always fits: the service caps it at 65,535.
                    let len = u16::try_from(answer.len()).unwrap_or(u16::MAX);
                    this.output.extend_from_slice(&len.to_be_bytes());
                    this.output.extend_from_slice(&answer[..usize::from(len)]);
                }
                continue;
            }
            if let Some(query) = this.take_message() {
                let service = this.service.clone();
                this.answering = Some(Box::pin(async move {
                    service.answer(&query, Transport::Tcp).await
                }));
                continue;
            }
            if this.shut {
                return Poll::Ready(Ok(()));
            }
            this.reader = Some(cx.waker().clone());
            return Poll::Pending;
        }
    }
}

impl AsyncWrite for DnsTcpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let room = INPUT_LIMIT.saturating_sub(this.input.len());
        if room == 0 {
            this.writer = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = buf.len().min(room);
        this.input.extend_from_slice(&buf[..n]);
        if let Some(reader) = this.reader.take() {
            reader.wake();
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.shut = true;
        if let Some(reader) = this.reader.take() {
            reader.wake();
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;
    use std::str::FromStr;

    use hickory_resolver::proto::op::{Message, MessageType, Query, ResponseCode};
    use hickory_resolver::proto::rr::{Name, RData, RecordType};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    fn service() -> Service {
        Service::new(crate::dns::no_servers().destinations)
    }

    fn query(id: u16, name: &str) -> Vec<u8> {
        let mut message = Message::new();
        message
            .set_id(id)
            .set_recursion_desired(true)
            .add_query(Query::query(Name::from_str(name).unwrap(), RecordType::A));
        message.to_vec().unwrap()
    }

    fn loopback_answer(bytes: &[u8], id: u16) {
        let answer = Message::from_vec(bytes).unwrap();
        assert_eq!(answer.id(), id);
        assert_eq!(answer.message_type(), MessageType::Response);
        assert_eq!(answer.response_code(), ResponseCode::NoError);
        assert!(answer.recursion_available());
        assert_eq!(
            answer.answers()[0].data(),
            Some(&RData::A(std::net::Ipv4Addr::LOCALHOST.into()))
        );
    }

    #[tokio::test]
    async fn a_tcp_flow_to_the_dns_service_is_answered_message_by_message() {
        let mut stream = DnsTcpStream::new(service());
        let mut written = Vec::new();
        for id in [7u16, 8] {
            let q = query(id, "localhost.");
            written.extend_from_slice(&(q.len() as u16).to_be_bytes());
            written.extend_from_slice(&q);
        }
        // Written in two pieces that split a length prefix.
        stream.write_all(&written[..1]).await.unwrap();
        stream.write_all(&written[1..]).await.unwrap();
        stream.shutdown().await.unwrap();
        let mut read = Vec::new();
        stream.read_to_end(&mut read).await.unwrap();
        let mut at = 0;
        for id in [7u16, 8] {
            let len = usize::from(u16::from_be_bytes([read[at], read[at + 1]]));
            loopback_answer(&read[at + 2..at + 2 + len], id);
            at += 2 + len;
        }
        assert_eq!(at, read.len());
    }

    #[tokio::test]
    async fn a_udp_link_to_the_dns_service_answers_from_where_the_query_went() {
        let mut link = DnsUdpLink::new(service());
        let to = Address::Ip("192.0.2.53:53".parse().unwrap());
        poll_fn(|cx| link.poll_send_to(cx, &query(9, "localhost."), &to))
            .await
            .unwrap();
        // Bytes that are no DNS message get no answer, and end nothing.
        poll_fn(|cx| link.poll_send_to(cx, b"junk", &to))
            .await
            .unwrap();
        let mut buf = [0u8; 512];
        let (from, n) = poll_fn(|cx| {
            let mut read = ReadBuf::new(&mut buf);
            match link.poll_recv_from(cx, &mut read) {
                Poll::Ready(Ok(from)) => Poll::Ready((from, read.filled().len())),
                Poll::Ready(Err(e)) => panic!("{e}"),
                Poll::Pending => Poll::Pending,
            }
        })
        .await;
        assert_eq!(from, to);
        loopback_answer(&buf[..n], 9);
    }
}
