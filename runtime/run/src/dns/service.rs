//! The internal DNS service: answers a client's DNS message from the
//! `destinations` resolver (and its cache). Messages are hickory's.

use hickory_resolver::proto::op::{Edns, Message, MessageType, OpCode, ResponseCode};

use crate::resolve::Resolver;

/// The UDP payload the service's answers offer (the DNS flag day's 1232).
const EDNS_PAYLOAD: u16 = 1232;

/// What carries the answer: over UDP it must fit the smaller of the
/// client's payload size and the one our OPT offers (512 bytes without
/// EDNS), or it goes out truncated, for the client to ask again over TCP,
/// where it comes whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Udp,
    Tcp,
}

#[derive(Clone)]
pub struct Service {
    resolver: Resolver,
}

impl Service {
    pub fn new(resolver: Resolver) -> Service {
        Service { resolver }
    }

    /// The answer to the DNS message `query`; `None` for bytes that are no
    /// query (dropped, as a DNS server drops them).
    pub async fn answer(&self, query: &[u8], transport: Transport) -> Option<Vec<u8>> {
        let request = Message::from_vec(query).ok()?;
        if request.message_type() != MessageType::Query {
            return None;
        }
        let mut response = Message::new();
        response
            .set_id(request.id())
            .set_message_type(MessageType::Response)
            .set_op_code(request.op_code())
            .set_recursion_desired(request.recursion_desired())
            .set_recursion_available(true)
            .add_queries(request.queries().iter().cloned());
        if request.extensions().is_some() {
            let mut edns = Edns::new();
            edns.set_max_payload(EDNS_PAYLOAD);
            response.set_edns(edns);
        }
        match request.queries() {
            _ if request.op_code() != OpCode::Query => {
                response.set_response_code(ResponseCode::NotImp);
            }
            [question] => match self
                .resolver
                .query(question.name(), question.query_type())
                .await
            {
                Ok(answer) => {
                    let now = std::time::Instant::now();
                    response.set_response_code(answer.rcode);
                    let aged = |record: &hickory_resolver::proto::rr::Record| {
                        let mut record = record.clone();
                        record.set_ttl(answer.remaining(record.ttl(), now));
                        record
                    };
                    response.add_answers(answer.records.iter().map(aged));
                    response.add_name_servers(answer.soa.iter().map(aged));
                }
                Err(e) => {
                    tracing::debug!(
                        "dns service: {} {}: {e}",
                        question.name(),
                        question.query_type()
                    );
                    response.set_response_code(ResponseCode::ServFail);
                }
            },
            _ => {
                response.set_response_code(ResponseCode::FormErr);
            }
        }
        let bytes = response.to_vec().ok()?;
        let limit = match transport {
            Transport::Udp => udp_limit(&request),
            Transport::Tcp => crate::resolve::MAX_MESSAGE,
        };
        if bytes.len() <= limit {
            return Some(bytes);
        }
        response.take_answers();
        response.take_name_servers();
        response.set_truncated(true);
        response.to_vec().ok()
    }
}

/// The largest UDP answer to `request`: the payload size its OPT offers,
/// capped by the one ours offers, so a query of a few dozen bytes asking
/// for 65,535 cannot draw kilobytes; 512 without EDNS, and never less.
fn udp_limit(request: &Message) -> usize {
    usize::from(request.max_payload().clamp(512, EDNS_PAYLOAD))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offering(payload: Option<u16>) -> Message {
        let mut request = Message::new();
        if let Some(payload) = payload {
            let mut edns = Edns::new();
            edns.set_max_payload(payload);
            request.set_edns(edns);
        }
        request
    }

    #[test]
    fn a_udp_answer_fits_the_smaller_of_the_clients_payload_size_and_ours() {
        let limit = |payload| udp_limit(&offering(payload));
        assert_eq!(limit(Some(65_535)), 1232);
        assert_eq!(limit(Some(4096)), 1232);
        assert_eq!(limit(Some(1232)), 1232);
        assert_eq!(limit(Some(1000)), 1000);
        assert_eq!(limit(Some(100)), 512, "an offer under 512 counts as 512");
        assert_eq!(limit(None), 512, "without EDNS");
    }
}
