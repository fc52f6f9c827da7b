//! TLS over any byte stream, with OpenSSL: the client side of a proxy
//! upstream, over the dialed TCP socket, and the server side of an inbound,
//! the first layer over the accepted socket.
//!
//! Both sides are built once per apply from the plan, so every error a plan
//! can carry (a CA bundle without a certificate, a key that does not match its
//! certificate) fails the apply, never a flow. A handshake error is an
//! `io::Error` whose text says what failed and why, in OpenSSL's words.

use std::io;

use etemenanki_ir::spec::{ServerTls, TlsSpec, Verify};
use openssl::error::ErrorStack;
use openssl::pkey::PKey;
use openssl::ssl::{
    self, AlpnError, ErrorCode, Ssl, SslAcceptor, SslConnector, SslContextBuilder, SslMethod,
    SslMode, SslRef, SslSessionCacheMode, SslVerifyMode, SslVersion,
};
use openssl::x509::{X509VerifyResult, X509};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

mod idle;
mod records;
mod resume;
mod stream;
mod track;
mod window;

use resume::Sessions;
pub use stream::{TlsStream, WIRE_BUF};

/// The oldest protocol version either side speaks.
const MIN_VERSION: SslVersion = SslVersion::TLS1_2;

/// The TLS 1.3 suites a client offers, fastest first where the CPU has
/// AES instructions (as Go's client orders them): AES-128-GCM does four
/// rounds fewer a block than AES-256-GCM, and OpenSSL's server takes the
/// client's order.
const CLIENT_SUITES: &str =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";

/// What both sides set on their context for the data path. Read-ahead
/// lets one read of the socket take a whole record and the start of the
/// next, where OpenSSL otherwise reads each record's 5-byte header and its
/// body apart: one system call a record instead of two. The context's
/// builder already releases a connection's record buffers while it is
/// idle (`SslMode::RELEASE_BUFFERS`, set by the openssl crate).
fn tune(builder: &mut SslContextBuilder) {
    builder.set_read_ahead(true);
    // What a TLS 1.3 session's records are handed over with (tls/track.rs).
    track::log_secrets(builder);
}

/// The client side: an `SslConnector` configured from a [`TlsSpec`], and the
/// name every handshake sends as SNI and checks the certificate against.
pub struct TlsConnector {
    connector: SslConnector,
    server_name: String,
    /// False for `Verify::Insecure`: no chain and no hostname check.
    verify: bool,
    /// The sessions the next handshakes offer to resume.
    sessions: Sessions,
}

impl TlsConnector {
    /// Built once per apply from the plan. `default_alpn` is used when
    /// `spec.alpn` is empty (the ws transport passes `["http/1.1"]`, grpc
    /// `["h2"]`, plain tls `[]`).
    pub fn build(spec: &TlsSpec, default_alpn: &[&str]) -> io::Result<TlsConnector> {
        // `SslConnector::builder` already loads the default verify paths (the
        // system roots) and asks for peer verification.
        let mut builder = SslConnector::builder(SslMethod::tls_client()).map_err(openssl_error)?;
        builder
            .set_min_proto_version(Some(MIN_VERSION))
            .map_err(openssl_error)?;
        builder
            .set_ciphersuites(CLIENT_SUITES)
            .map_err(openssl_error)?;
        tune(&mut builder);
        let verify = match &spec.verify {
            Verify::System => true,
            Verify::CustomCa { pem, .. } => {
                let certs = X509::stack_from_pem(pem).map_err(openssl_error)?;
                if certs.is_empty() {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "no certificate in CA PEM bundle",
                    ));
                }
                let store = builder.cert_store_mut();
                for cert in certs {
                    store.add_cert(cert).map_err(openssl_error)?;
                }
                true
            }
            Verify::Insecure => {
                builder.set_verify(SslVerifyMode::NONE);
                false
            }
        };
        let alpn = if spec.alpn.is_empty() {
            alpn_wire(default_alpn)?
        } else {
            alpn_wire(&spec.alpn)?
        };
        if !alpn.is_empty() {
            builder.set_alpn_protos(&alpn).map_err(openssl_error)?;
        }
        let sessions = Sessions::install(&mut builder);
        Ok(TlsConnector {
            connector: builder.build(),
            server_name: spec.server_name.clone(),
            verify,
            sessions,
        })
    }

    /// Handshakes over `stream`: SNI is the spec's server name (unless it is
    /// an IP address), and the certificate is checked against it unless the
    /// spec says `Insecure`. A session this connector was given earlier is
    /// offered for resumption; a server that declines it does a full
    /// handshake.
    pub async fn connect<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        stream: S,
    ) -> io::Result<TlsStream<S>> {
        let mut ssl = self
            .connector
            .configure()
            .and_then(|mut config| {
                config.set_verify_hostname(self.verify);
                config.into_ssl(&self.server_name)
            })
            .map_err(openssl_error)?;
        self.sessions.offer(&mut ssl);
        let mut tls = TlsStream::new(ssl, stream).map_err(openssl_error)?;
        match tls.connect().await {
            // The last flight may still be in the wire.
            Ok(()) => match tls.flush().await {
                Ok(()) => Ok(tls),
                Err(e) => Err(io::Error::new(
                    e.kind(),
                    format!("tls handshake with {} failed: {e}", self.server_name),
                )),
            },
            Err(error) => {
                let rejected = if self.verify {
                    tls.ssl()
                        .map(SslRef::verify_result)
                        .filter(|r| *r != X509VerifyResult::OK)
                } else {
                    // Insecure still records the chain's verdict; it is not
                    // why the handshake failed.
                    None
                };
                let what = format!("tls handshake with {}", self.server_name);
                Err(match rejected {
                    Some(result) => io::Error::other(format!(
                        "{what} failed: certificate verify failed: {}",
                        result.error_string()
                    )),
                    None => handshake_error(&what, error),
                })
            }
        }
    }
}

/// The server side: an `SslAcceptor` holding the certificate chain and key the
/// compiler read into the plan.
pub struct TlsAcceptor {
    acceptor: SslAcceptor,
}

impl TlsAcceptor {
    /// From the certificate chain and key the compiler read into the plan; the
    /// first certificate of the chain is the server's own. ALPN is chosen from
    /// `tls.alpn` in its order of preference, or from `default_alpn` when the
    /// plan names none (the ws transport passes `["http/1.1"]`, grpc
    /// `["h2"]`, as the connector does); a client that offers none of them is
    /// still served, without ALPN.
    pub fn build(tls: &ServerTls, default_alpn: &[&str]) -> io::Result<TlsAcceptor> {
        let path = &tls.cert_path;
        let mut builder =
            SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server()).map_err(openssl_error)?;
        builder
            .set_min_proto_version(Some(MIN_VERSION))
            .map_err(openssl_error)?;
        tune(&mut builder);
        // One TLS 1.3 session ticket a handshake, as Go's servers send:
        // a client resumes with it (ours keeps those a connector was
        // given, each for one handshake), which spares both sides the certificate (~400 us of
        // the client's CPU a connect, ~100 us of ours) and the client the
        // parsed certificate a connection holds. A connection that
        // resumes gets a new one, so one keeps a client resuming; a second
        // costs another seal and, in clients that keep each, another
        // session (measured: no less client memory with two).
        builder.set_num_tickets(1).map_err(openssl_error)?;
        // Tickets are stateless: no session is kept here, where a TLS 1.2
        // client's sessions would otherwise pile up (20,480 of them, about
        // 1 KiB each, before OpenSSL flushes its cache).
        builder.set_session_cache_mode(SslSessionCacheMode::OFF);
        // The chain sent is the plan's, leaf and extras as read: without
        // this, a leaf given alone has OpenSSL try to build its chain from
        // the context's store (an X509_verify_cert) on every full
        // handshake, to send the same leaf alone.
        builder.set_mode(SslMode::NO_AUTO_CHAIN);
        let mut chain = X509::stack_from_pem(&tls.cert_pem)
            .map_err(|e| {
                invalid(format!(
                    "certificate {path} does not parse: {}",
                    reasons(&e)
                ))
            })?
            .into_iter();
        let leaf = chain
            .next()
            .ok_or_else(|| invalid(format!("no certificate in {path}")))?;
        builder.set_certificate(&leaf).map_err(openssl_error)?;
        for cert in chain {
            builder.add_extra_chain_cert(cert).map_err(openssl_error)?;
        }
        let key = PKey::private_key_from_pem(tls.key_pem.expose())
            .map_err(|e| invalid(format!("the key of {path} does not parse: {}", reasons(&e))))?;
        // OpenSSL checks here that the key is the certificate's.
        builder.set_private_key(&key).map_err(|e| {
            invalid(format!(
                "the key does not match the certificate {path}: {}",
                reasons(&e)
            ))
        })?;
        let alpn = if tls.alpn.is_empty() {
            alpn_wire(default_alpn)?
        } else {
            alpn_wire(&tls.alpn)?
        };
        if !alpn.is_empty() {
            builder.set_alpn_select_callback(move |_, offered| {
                select_alpn(&alpn, offered).ok_or(AlpnError::NOACK)
            });
        }
        Ok(TlsAcceptor {
            acceptor: builder.build(),
        })
    }

    /// The server handshake. It has no timeout of its own: the caller applies
    /// the 10 s `tls handshake timed out` limit.
    pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        stream: S,
    ) -> io::Result<TlsStream<S>> {
        let ssl = Ssl::new(self.acceptor.context()).map_err(openssl_error)?;
        let mut tls = TlsStream::new(ssl, stream).map_err(openssl_error)?;
        match tls.accept().await {
            Ok(()) => match tls.flush().await {
                Ok(()) => Ok(tls),
                Err(e) => Err(io::Error::new(
                    e.kind(),
                    format!("tls handshake failed: {e}"),
                )),
            },
            Err(error) => Err(handshake_error("tls handshake", error)),
        }
    }
}

/// ALPN protocol names in their wire format: each prefixed by its length.
fn alpn_wire<P: AsRef<str>>(protocols: &[P]) -> io::Result<Vec<u8>> {
    let mut wire = Vec::new();
    for protocol in protocols {
        let name = protocol.as_ref().as_bytes();
        let len = u8::try_from(name.len())
            .ok()
            .filter(|len| *len > 0)
            .ok_or_else(|| {
                invalid(format!(
                    "alpn protocol {:?} must be 1 to 255 bytes long",
                    protocol.as_ref()
                ))
            })?;
        wire.push(len);
        wire.extend_from_slice(name);
    }
    Ok(wire)
}

/// The first of the server's protocols (wire format) that the client offered,
/// as a slice of the client's list: OpenSSL's callback must return one.
/// `ssl::select_next_proto` cannot be used, because it ties the answer's
/// lifetime to the server's list too.
fn select_alpn<'c>(server: &[u8], offered: &'c [u8]) -> Option<&'c [u8]> {
    wire_names(server).find_map(|wanted| wire_names(offered).find(|name| *name == wanted))
}

/// The names of an ALPN list in wire format; a truncated tail is ignored.
fn wire_names(mut wire: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        let (&len, rest) = wire.split_first()?;
        let name = rest.get(..usize::from(len))?;
        wire = &rest[name.len()..];
        Some(name)
    })
}

/// A failed handshake, said as `<what> failed: <reason>`. An I/O error of the
/// stream underneath keeps its kind; a peer that closes mid-handshake is
/// `UnexpectedEof`; everything OpenSSL refused is `Other`.
fn handshake_error(what: &str, error: ssl::Error) -> io::Error {
    if let Some(stack) = error.ssl_error() {
        return io::Error::other(format!("{what} failed: {}", reasons(stack)));
    }
    let code = error.code();
    match error.into_io_error() {
        Ok(io) => io::Error::new(io.kind(), format!("{what} failed: {io}")),
        Err(_) if code == ErrorCode::SYSCALL || code == ErrorCode::ZERO_RETURN => io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("{what} failed: the peer closed the connection"),
        ),
        Err(other) => io::Error::other(format!("{what} failed: {other}")),
    }
}

/// OpenSSL's reasons (`certificate verify failed`, `wrong version number`),
/// without the file and line noise of its full error text.
fn reasons(stack: &ErrorStack) -> String {
    let reasons: Vec<&str> = stack.errors().iter().filter_map(|e| e.reason()).collect();
    if reasons.is_empty() {
        stack.to_string()
    } else {
        reasons.join(", ")
    }
}

/// An OpenSSL error outside a handshake, in OpenSSL's own text (kind Other).
fn openssl_error(stack: ErrorStack) -> io::Error {
    io::Error::other(stack)
}

fn invalid(text: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, text)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use etemenanki_ir::spec::Secret;
    use openssl::asn1::Asn1Time;
    use openssl::bn::{BigNum, MsbOption};
    use openssl::ec::{EcGroup, EcKey};
    use openssl::hash::MessageDigest;
    use openssl::nid::Nid;
    use openssl::pkey::Private;
    use openssl::x509::extension::{BasicConstraints, KeyUsage, SubjectAlternativeName};
    use openssl::x509::{X509Name, X509NameRef};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    pub(crate) const NAME: &str = "proxy.etemenanki.test";

    fn key() -> PKey<Private> {
        let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
        PKey::from_ec_key(EcKey::generate(&group).unwrap()).unwrap()
    }

    fn name(common_name: &str) -> X509Name {
        let mut name = X509Name::builder().unwrap();
        name.append_entry_by_nid(Nid::COMMONNAME, common_name)
            .unwrap();
        name.build()
    }

    /// A certificate for `subject` signed by `issuer` (self-signed when None).
    fn certificate(
        subject: &X509NameRef,
        key: &PKey<Private>,
        issuer: Option<(&X509, &PKey<Private>)>,
        dns: Option<&str>,
    ) -> X509 {
        let mut cert = X509::builder().unwrap();
        cert.set_version(2).unwrap();
        let mut serial = BigNum::new().unwrap();
        serial.rand(64, MsbOption::MAYBE_ZERO, false).unwrap();
        cert.set_serial_number(&serial.to_asn1_integer().unwrap())
            .unwrap();
        cert.set_subject_name(subject).unwrap();
        cert.set_pubkey(key).unwrap();
        cert.set_not_before(&Asn1Time::days_from_now(0).unwrap())
            .unwrap();
        cert.set_not_after(&Asn1Time::days_from_now(2).unwrap())
            .unwrap();
        let (issuer_name, signer) = match issuer {
            Some((ca, ca_key)) => (ca.subject_name(), ca_key),
            None => (subject, key),
        };
        cert.set_issuer_name(issuer_name).unwrap();
        match dns {
            Some(dns) => {
                let context = cert.x509v3_context(issuer.map(|(ca, _)| &**ca), None);
                let san = SubjectAlternativeName::new()
                    .dns(dns)
                    .build(&context)
                    .unwrap();
                cert.append_extension(san).unwrap();
            }
            None => {
                let ca = BasicConstraints::new().critical().ca().build().unwrap();
                cert.append_extension(ca).unwrap();
                let usage = KeyUsage::new()
                    .critical()
                    .key_cert_sign()
                    .crl_sign()
                    .build()
                    .unwrap();
                cert.append_extension(usage).unwrap();
            }
        }
        cert.sign(signer, MessageDigest::sha256()).unwrap();
        cert.build()
    }

    /// A CA that signed nothing the tests serve.
    fn another_ca_pem() -> Vec<u8> {
        let key = key();
        let ca = certificate(&name("another test ca"), &key, None, None);
        ca.to_pem().unwrap()
    }

    /// A CA and a server certificate for [`NAME`] it signed.
    pub(crate) struct Pki {
        pub(crate) ca_pem: Vec<u8>,
        pub(crate) server: ServerTls,
    }

    pub(crate) fn pki() -> Pki {
        let ca_key = key();
        let ca = certificate(&name("etemenanki test ca"), &ca_key, None, None);
        let leaf_key = key();
        let leaf = certificate(&name(NAME), &leaf_key, Some((&ca, &ca_key)), Some(NAME));
        Pki {
            ca_pem: ca.to_pem().unwrap(),
            server: ServerTls {
                cert_path: "server.pem".into(),
                cert_pem: leaf.to_pem().unwrap(),
                key_pem: Secret(leaf_key.private_key_to_pem_pkcs8().unwrap()),
                alpn: vec![],
            },
        }
    }

    /// Our acceptor for the test certificate and a connector trusting its
    /// CA, ALPN left out.
    pub(crate) fn ends(pki: &Pki) -> (TlsAcceptor, TlsConnector) {
        let acceptor = TlsAcceptor::build(&pki.server, &[]).unwrap();
        let connector =
            TlsConnector::build(&client_spec(NAME, custom_ca(&pki.ca_pem), &[]), &[]).unwrap();
        (acceptor, connector)
    }

    pub(crate) fn client_spec(server_name: &str, verify: Verify, alpn: &[&str]) -> TlsSpec {
        TlsSpec {
            server_name: server_name.into(),
            verify,
            alpn: alpn.iter().map(|p| p.to_string()).collect(),
        }
    }

    pub(crate) fn custom_ca(pem: &[u8]) -> Verify {
        Verify::CustomCa {
            path: "ca.pem".into(),
            pem: pem.to_vec(),
        }
    }

    /// Runs one handshake on loopback: the acceptor on the listening side,
    /// the connector on the dialing side. A successful pair exchanges a byte
    /// each way; the server's result comes back with the selected ALPN.
    async fn handshake(
        server: &ServerTls,
        spec: &TlsSpec,
        default_alpn: &[&str],
    ) -> (io::Result<Option<Vec<u8>>>, io::Result<Option<Vec<u8>>>) {
        let acceptor = TlsAcceptor::build(server, &[]).unwrap();
        let connector = TlsConnector::build(spec, default_alpn).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let serve = async {
            let (tcp, _) = listener.accept().await?;
            let mut tls = acceptor.accept(tcp).await?;
            // Asked before the session is handed over, which its first
            // idle read does.
            let alpn = alpn(&tls);
            let mut byte = [0; 1];
            tls.read_exact(&mut byte).await?;
            tls.write_all(&byte).await?;
            tls.shutdown().await?;
            Ok(alpn)
        };
        let dial = async {
            let tcp = TcpStream::connect(addr).await?;
            let mut tls = connector.connect(tcp).await?;
            let alpn = alpn(&tls);
            tls.write_all(b"x").await?;
            let mut byte = [0; 1];
            tls.read_exact(&mut byte).await?;
            assert_eq!(&byte, b"x");
            Ok(alpn)
        };
        tokio::join!(serve, dial)
    }

    fn alpn(tls: &TlsStream<TcpStream>) -> Option<Vec<u8>> {
        let ssl = tls
            .ssl()
            .expect("a session is OpenSSL's until its first idle read");
        ssl.selected_alpn_protocol().map(<[u8]>::to_vec)
    }

    #[tokio::test]
    async fn records_read_ahead_arrive_whole_and_aes_128_gcm_is_chosen() {
        let pki = pki();
        let (acceptor, connector) = ends(&pki);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Writes of many sizes, so records of many sizes follow each other
        // and a read ahead ends anywhere in one.
        let bytes: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
        let serve = async {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut tls = acceptor.accept(tcp).await.unwrap();
            let mut got = Vec::new();
            tls.read_to_end(&mut got).await.unwrap();
            tls.shutdown().await.unwrap();
            got
        };
        let dial = async {
            let tcp = TcpStream::connect(addr).await.unwrap();
            let mut tls = connector.connect(tcp).await.unwrap();
            let cipher = tls.ssl().unwrap().current_cipher().map(|c| c.name());
            let mut at = 0;
            for size in [1, 5, 100, 16 * 1024, 16 * 1024 + 1, 70_000].iter().cycle() {
                let end = (at + size).min(bytes.len());
                tls.write_all(&bytes[at..end]).await.unwrap();
                at = end;
                if at == bytes.len() {
                    break;
                }
            }
            tls.shutdown().await.unwrap();
            // Open until the server has read everything: a socket closed
            // with the server's session tickets unread would reset the
            // connection under the bytes still on their way.
            let mut rest = Vec::new();
            tls.read_to_end(&mut rest).await.unwrap();
            cipher
        };
        let (got, cipher) = tokio::join!(serve, dial);
        assert!(got == bytes, "the bytes arrived changed");
        assert_eq!(cipher, Some("TLS_AES_128_GCM_SHA256"));
    }

    /// The server side of one resumption-test connection: echoes the
    /// client's byte, then reads until the client has closed.
    async fn echo_byte<S: AsyncRead + AsyncWrite + Unpin>(
        tls: &mut TlsStream<S>,
    ) -> io::Result<()> {
        let mut byte = [0; 1];
        tls.read_exact(&mut byte).await?;
        tls.write_all(&byte).await?;
        tls.flush().await?;
        let mut rest = Vec::new();
        tls.read_to_end(&mut rest).await.map(drop)
    }

    /// One client connection of the resumption tests: it sends a byte,
    /// reads the echo (and so the server's ticket) if `reads_its_ticket`,
    /// closes with a close_notify if `notifies` (else it is dropped), and
    /// says whether it resumed a session.
    async fn dial_once(
        connector: &TlsConnector,
        addr: std::net::SocketAddr,
        reads_its_ticket: bool,
        notifies: bool,
    ) -> bool {
        let tcp = TcpStream::connect(addr).await.unwrap();
        dial_on(connector, tcp, reads_its_ticket, notifies).await
    }

    /// [`dial_once`] over a TCP connection already open.
    async fn dial_on(
        connector: &TlsConnector,
        tcp: TcpStream,
        reads_its_ticket: bool,
        notifies: bool,
    ) -> bool {
        let mut tls = connector.connect(tcp).await.unwrap();
        // Asked before the session is handed over, which an idle read
        // after its ticket does.
        let reused = tls.ssl().unwrap().session_reused();
        tls.write_all(b"x").await.unwrap();
        tls.flush().await.unwrap();
        if reads_its_ticket {
            let mut byte = [0; 1];
            tls.read_exact(&mut byte).await.unwrap();
        }
        if notifies {
            let closed = tls.shutdown().await;
            // A client that never read the server's ticket may find the
            // connection reset.
            if reads_its_ticket {
                closed.unwrap();
            }
        }
        reused
    }

    /// Connects `connector` to `acceptor` over loopback `rounds` times, each
    /// connection exchanging a byte each way (so the client reads the
    /// server's ticket), and says for each whether the client and the
    /// server resumed a session.
    async fn reuses(acceptor: &TlsAcceptor, connectors: &[&TlsConnector]) -> Vec<(bool, bool)> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut reused = Vec::new();
        for connector in connectors {
            let serve = async {
                let (tcp, _) = listener.accept().await.unwrap();
                let mut tls = acceptor.accept(tcp).await.unwrap();
                let reused = tls.ssl().unwrap().session_reused();
                echo_byte(&mut tls).await.unwrap();
                reused
            };
            let dial = dial_once(connector, addr, true, true);
            let (server, client) = tokio::join!(serve, dial);
            reused.push((client, server));
        }
        reused
    }

    #[tokio::test]
    async fn a_second_connect_resumes_the_session_of_the_first() {
        let pki = pki();
        let (acceptor, connector) = ends(&pki);
        let reused = reuses(&acceptor, &[&connector, &connector, &connector]).await;
        assert_eq!(reused, [(false, false), (true, true), (true, true)]);
    }

    /// Drives `futures` together and returns their outputs in order; each
    /// wakeup polls every one still running, so the first poll of each
    /// comes before any of them goes further.
    async fn together<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
        let mut futures: Vec<_> = futures.into_iter().map(Box::pin).collect();
        let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
        std::future::poll_fn(|cx| {
            for (future, output) in futures.iter_mut().zip(&mut outputs) {
                if output.is_none() {
                    if let std::task::Poll::Ready(done) = future.as_mut().poll(cx) {
                        *output = Some(done);
                    }
                }
            }
            if outputs.iter().all(Option::is_some) {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        })
        .await;
        outputs.into_iter().flatten().collect()
    }

    /// `wide` connections of `connector` to `acceptor` at once, every
    /// handshake started (and its session offered) before any ends, each
    /// exchanging a byte each way; how many of them the client resumed.
    async fn wave(acceptor: &TlsAcceptor, connector: &TlsConnector, wide: usize) -> usize {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut pairs = Vec::new();
        for _ in 0..wide {
            let client = TcpStream::connect(addr).await.unwrap();
            let (server, _) = listener.accept().await.unwrap();
            pairs.push((client, server));
        }
        let connections = pairs.into_iter().map(|(client, server)| async move {
            let serve = async {
                let mut tls = acceptor.accept(server).await.unwrap();
                echo_byte(&mut tls).await.unwrap();
            };
            let ((), reused) = tokio::join!(serve, dial_on(connector, client, true, true));
            reused
        });
        let reused = together(connections.collect()).await;
        reused.into_iter().filter(|reused| *reused).count()
    }

    #[tokio::test]
    async fn a_burst_of_50_connects_resumes_whole_after_a_first_wave() {
        // Every connection of the first wave does a full handshake and
        // gives a ticket back: a second wave as wide (the bench's 50 at
        // once) resumes every connection. The connector keeps the newest
        // `KEPT` and no more: a wider wave resumes what the last one left,
        // and the one after it `KEPT`.
        let pki = pki();
        let (acceptor, connector) = ends(&pki);
        assert_eq!(wave(&acceptor, &connector, 50).await, 0);
        assert_eq!(wave(&acceptor, &connector, 50).await, 50);
        let wider = resume::KEPT + 4;
        assert_eq!(wave(&acceptor, &connector, wider).await, 50);
        assert_eq!(wave(&acceptor, &connector, wider).await, resume::KEPT);
    }

    #[tokio::test]
    async fn a_connector_never_offers_another_connectors_session() {
        let pki = pki();
        let acceptor = TlsAcceptor::build(&pki.server, &[]).unwrap();
        let verified =
            TlsConnector::build(&client_spec(NAME, custom_ca(&pki.ca_pem), &[]), &[]).unwrap();
        let insecure = TlsConnector::build(
            &client_spec("other.etemenanki.test", Verify::Insecure, &[]),
            &[],
        )
        .unwrap();
        let reused = reuses(&acceptor, &[&verified, &insecure, &verified, &insecure]).await;
        assert_eq!(
            reused,
            [(false, false), (false, false), (true, true), (true, true)]
        );
    }

    #[tokio::test]
    async fn a_session_of_another_acceptor_is_declined_for_a_full_handshake() {
        // A server rebuilt by an apply has new ticket keys: the old
        // session is offered, declined, and the full handshake's ticket
        // replaces it.
        let pki = pki();
        let old = TlsAcceptor::build(&pki.server, &[]).unwrap();
        let new = TlsAcceptor::build(&pki.server, &[]).unwrap();
        let connector =
            TlsConnector::build(&client_spec(NAME, custom_ca(&pki.ca_pem), &[]), &[]).unwrap();
        assert_eq!(reuses(&old, &[&connector]).await, [(false, false)]);
        let reused = reuses(&new, &[&connector, &connector]).await;
        assert_eq!(reused, [(false, false), (true, true)]);
    }

    #[tokio::test]
    async fn a_connections_first_ticket_is_kept_which_a_stateful_server_resumes() {
        // An OpenSSL server with stateful tickets (trojan-gfw's default)
        // sends two a handshake and, in OpenSSL 3.0, resumes the first of
        // them and never the second (nor, once used, the first again): a
        // connection's first ticket is the one kept.
        let pki = pki();
        let mut builder = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server()).unwrap();
        builder.set_options(ssl::SslOptions::NO_TICKET);
        builder.set_num_tickets(2).unwrap();
        builder
            .set_certificate(&X509::from_pem(&pki.server.cert_pem).unwrap())
            .unwrap();
        builder
            .set_private_key(&PKey::private_key_from_pem(pki.server.key_pem.expose()).unwrap())
            .unwrap();
        let acceptor = builder.build();
        let connector =
            TlsConnector::build(&client_spec(NAME, custom_ca(&pki.ca_pem), &[]), &[]).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut reused = Vec::new();
        for _ in 0..2 {
            let serve = async {
                let (tcp, _) = listener.accept().await.unwrap();
                let ssl = Ssl::new(acceptor.context()).unwrap();
                let mut tls = TlsStream::new(ssl, tcp).unwrap();
                tls.accept().await.unwrap();
                tls.flush().await.unwrap();
                echo_byte(&mut tls).await.unwrap();
            };
            let dial = dial_once(&connector, addr, true, true);
            let ((), client) = tokio::join!(serve, dial);
            reused.push(client);
        }
        assert_eq!(reused, [false, true]);
    }

    #[tokio::test]
    async fn a_session_is_offered_on_one_handshake_only() {
        // The second connection resumes and closes before it reads its
        // own ticket: the third has nothing left to offer.
        let pki = pki();
        let (acceptor, connector) = ends(&pki);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut reused = Vec::new();
        for reads_its_ticket in [true, false, true] {
            let serve = async {
                let (tcp, _) = listener.accept().await.unwrap();
                let mut tls = acceptor.accept(tcp).await.unwrap();
                // A client that never reads our ticket resets the
                // connection when it closes, anywhere from here on.
                let echoed = echo_byte(&mut tls).await;
                if reads_its_ticket {
                    echoed.unwrap();
                }
            };
            let dial = dial_once(&connector, addr, reads_its_ticket, true);
            let ((), client) = tokio::join!(serve, dial);
            reused.push(client);
        }
        assert_eq!(reused, [false, true, false]);
    }

    #[tokio::test]
    async fn a_session_outlives_a_connection_dropped_without_close_notify() {
        // OpenSSL marks the session of a connection freed before it sent
        // its close_notify as bad; what the connector keeps is a copy of
        // its own, still resumable.
        let pki = pki();
        let (acceptor, connector) = ends(&pki);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut reused = Vec::new();
        for _ in 0..3 {
            let serve = async {
                let (tcp, _) = listener.accept().await.unwrap();
                let mut tls = acceptor.accept(tcp).await.unwrap();
                // The client goes without a close_notify: its end may be
                // a reset.
                let _ = echo_byte(&mut tls).await;
            };
            let dial = dial_once(&connector, addr, true, false);
            let ((), client) = tokio::join!(serve, dial);
            reused.push(client);
        }
        assert_eq!(reused, [false, true, true]);
    }

    #[tokio::test]
    async fn a_custom_ca_is_trusted_and_the_name_checked() {
        let pki = pki();
        let spec = client_spec(NAME, custom_ca(&pki.ca_pem), &[]);
        let (server, client) = handshake(&pki.server, &spec, &[]).await;
        assert_eq!(server.unwrap(), None);
        assert_eq!(client.unwrap(), None);
    }

    #[tokio::test]
    async fn a_custom_ca_bundle_trusts_every_certificate_in_it() {
        let pki = pki();
        let other = another_ca_pem();
        let bundle = [other.as_slice(), pki.ca_pem.as_slice()].concat();
        let spec = client_spec(NAME, custom_ca(&bundle), &[]);
        let (_, client) = handshake(&pki.server, &spec, &[]).await;
        client.unwrap();
    }

    #[tokio::test]
    async fn a_wrong_name_is_refused_and_said_so() {
        let pki = pki();
        let spec = client_spec("other.etemenanki.test", custom_ca(&pki.ca_pem), &[]);
        let (server, client) = handshake(&pki.server, &spec, &[]).await;
        let error = client.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::Other);
        assert_eq!(
            error.to_string(),
            "tls handshake with other.etemenanki.test failed: \
             certificate verify failed: hostname mismatch"
        );
        let error = server.unwrap_err().to_string();
        assert!(error.starts_with("tls handshake failed: "), "{error}");
    }

    #[tokio::test]
    async fn an_untrusted_certificate_is_refused_and_said_so() {
        let pki = pki();
        for verify in [Verify::System, custom_ca(&another_ca_pem())] {
            let spec = client_spec(NAME, verify, &[]);
            let (_, client) = handshake(&pki.server, &spec, &[]).await;
            let error = client.unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::Other);
            assert_eq!(
                error.to_string(),
                "tls handshake with proxy.etemenanki.test failed: \
                 certificate verify failed: unable to get local issuer certificate"
            );
        }
    }

    #[tokio::test]
    async fn insecure_accepts_an_untrusted_certificate_for_another_name() {
        let pki = pki();
        let spec = client_spec("other.etemenanki.test", Verify::Insecure, &[]);
        let (server, client) = handshake(&pki.server, &spec, &[]).await;
        server.unwrap();
        client.unwrap();
    }

    #[tokio::test]
    async fn alpn_is_negotiated_from_the_default_or_the_spec() {
        let mut pki = pki();
        pki.server.alpn = vec!["h2".into(), "http/1.1".into()];
        let spec = client_spec(NAME, custom_ca(&pki.ca_pem), &[]);
        let (server, client) = handshake(&pki.server, &spec, &["http/1.1"]).await;
        assert_eq!(server.unwrap().as_deref(), Some(&b"http/1.1"[..]));
        assert_eq!(client.unwrap().as_deref(), Some(&b"http/1.1"[..]));

        // The spec's own list replaces the transport's default.
        let spec = client_spec(NAME, custom_ca(&pki.ca_pem), &["h2"]);
        let (_, client) = handshake(&pki.server, &spec, &["http/1.1"]).await;
        assert_eq!(client.unwrap().as_deref(), Some(&b"h2"[..]));

        // A client offering none of the server's protocols is served without.
        let spec = client_spec(NAME, custom_ca(&pki.ca_pem), &["imap"]);
        let (_, client) = handshake(&pki.server, &spec, &[]).await;
        assert_eq!(client.unwrap(), None);
    }

    #[test]
    fn a_ca_bundle_that_does_not_parse_fails_with_openssl_text() {
        let pem = b"-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n";
        let spec = client_spec(NAME, custom_ca(pem), &[]);
        let error = TlsConnector::build(&spec, &[]).err().unwrap();
        assert_eq!(error.kind(), io::ErrorKind::Other);
        assert!(error.to_string().contains("PEM routines"), "{error}");
    }

    #[test]
    fn a_ca_bundle_without_a_certificate_is_invalid_input() {
        for pem in [
            &b""[..],
            b"# no certificates here\n",
            pki().server.key_pem.expose(),
        ] {
            let spec = client_spec(NAME, custom_ca(pem), &[]);
            let error = TlsConnector::build(&spec, &[]).err().unwrap();
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
            assert_eq!(error.to_string(), "no certificate in CA PEM bundle");
        }
    }

    #[test]
    fn an_alpn_name_out_of_range_is_refused() {
        let long = "x".repeat(256);
        for alpn in [&[""][..], &[long.as_str()]] {
            let spec = client_spec(NAME, Verify::System, alpn);
            let error = TlsConnector::build(&spec, &[]).err().unwrap();
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
            assert!(error.to_string().ends_with("must be 1 to 255 bytes long"));
        }
    }

    #[test]
    fn an_acceptor_refuses_a_bad_key_or_certificate() {
        let pki = pki();
        let mut garbage = pki.server.clone();
        garbage.key_pem =
            Secret(b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".to_vec());
        let error = TlsAcceptor::build(&garbage, &[]).err().unwrap();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        assert!(
            error
                .to_string()
                .starts_with("the key of server.pem does not parse: "),
            "{error}"
        );

        let mut mismatched = pki.server.clone();
        mismatched.key_pem = Secret(key().private_key_to_pem_pkcs8().unwrap());
        let error = TlsAcceptor::build(&mismatched, &[]).err().unwrap();
        assert_eq!(
            error.to_string(),
            "the key does not match the certificate server.pem: key values mismatch"
        );

        let mut empty = pki.server.clone();
        empty.cert_pem = b"no certificate".to_vec();
        let error = TlsAcceptor::build(&empty, &[]).err().unwrap();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(error.to_string(), "no certificate in server.pem");
    }

    #[tokio::test]
    async fn an_acceptor_serves_a_chain_with_its_intermediate() {
        let root_key = key();
        let root = certificate(&name("etemenanki test root"), &root_key, None, None);
        let mid_key = key();
        let mid = certificate(
            &name("etemenanki test mid"),
            &mid_key,
            Some((&root, &root_key)),
            None,
        );
        let leaf_key = key();
        let leaf = certificate(&name(NAME), &leaf_key, Some((&mid, &mid_key)), Some(NAME));
        let server = ServerTls {
            cert_path: "chain.pem".into(),
            cert_pem: [leaf.to_pem().unwrap(), mid.to_pem().unwrap()].concat(),
            key_pem: Secret(leaf_key.private_key_to_pem_pkcs8().unwrap()),
            alpn: vec![],
        };
        let spec = client_spec(NAME, custom_ca(&root.to_pem().unwrap()), &[]);
        let (_, client) = handshake(&server, &spec, &[]).await;
        client.unwrap();
    }

    #[tokio::test]
    async fn a_plaintext_client_fails_the_accept_with_openssl_reason() {
        let acceptor = TlsAcceptor::build(&pki().server, &[]).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = async {
            let mut tcp = TcpStream::connect(addr).await.unwrap();
            tcp.write_all(b"CONNECT example.com:443 HTTP/1.1\r\n\r\n")
                .await
                .unwrap();
            let mut rest = Vec::new();
            // The server gives up on the handshake; what it sends first (an
            // alert) does not matter.
            let _ = tcp.read_to_end(&mut rest).await;
        };
        let server = async {
            let (tcp, _) = listener.accept().await.unwrap();
            acceptor.accept(tcp).await.err().unwrap()
        };
        let ((), error) = tokio::join!(client, server);
        assert_eq!(error.kind(), io::ErrorKind::Other);
        assert!(
            error.to_string().starts_with("tls handshake failed: "),
            "{error}"
        );
        assert!(
            !error.to_string().contains(".c:"),
            "no file and line noise: {error}"
        );
    }

    #[tokio::test]
    async fn a_peer_closing_mid_handshake_is_unexpected_eof() {
        let connector =
            TlsConnector::build(&client_spec(NAME, Verify::Insecure, &[]), &[]).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = async {
            // A FIN before any reply; the ClientHello is read to the end, so
            // that closing sends no reset.
            let (mut tcp, _) = listener.accept().await.unwrap();
            tcp.shutdown().await.unwrap();
            let mut hello = Vec::new();
            tcp.read_to_end(&mut hello).await.unwrap();
        };
        let dial = async {
            let tcp = TcpStream::connect(addr).await.unwrap();
            connector.connect(tcp).await.err().unwrap()
        };
        let ((), error) = tokio::join!(server, dial);
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof, "{error}");
        assert_eq!(
            error.to_string(),
            "tls handshake with proxy.etemenanki.test failed: the peer closed the connection"
        );
    }
}
