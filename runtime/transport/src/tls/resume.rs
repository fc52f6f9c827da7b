//! Client session resumption: each connector keeps the sessions its own
//! context was given (TLS 1.3 tickets, TLS 1.2 sessions), the first of
//! each connection and at most [`KEPT`], and offers each on one
//! handshake. A resumed handshake skips the certificate: the server sends
//! none, the client parses and verifies none, and the connection shares
//! the kept session's certificate instead of holding a parsed copy of its
//! own (about 400 us of a client's CPU and 4 KiB of its memory a
//! connection, with OpenSSL 3.0, measured against our acceptor).
//!
//! A session is used once: RFC 8446 (section 4.6.1) asks it of clients,
//! and OpenSSL's client marks a TLS 1.3 session not resumable once it has
//! resumed with it, so a second offer would be a full handshake anyway.
//! Every connection's own ticket refills the connector, and a burst of
//! connects takes what full handshakes left.
//!
//! Bounded by construction: at most [`KEPT`] sessions a connector, the
//! oldest dropped first. A connector has one context, one server name and
//! one verify mode, so a session is never offered to another server name
//! or context. A server that declines a session does a full handshake,
//! whose own ticket then refills the connector.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use foreign_types::{ForeignType, ForeignTypeRef};
use openssl::ex_data::Index;
use openssl::ssl::{
    Ssl, SslContextBuilder, SslRef, SslSession, SslSessionCacheMode, SslSessionRef,
};

/// The most sessions a connector keeps, about 1.2 KiB each (the
/// certificate is shared): 77 KiB at most, and only for a connector that
/// has run that many connections at once. Each connection takes one
/// session and its ticket gives one back, so the store need only hold
/// as many as start their handshakes at once: a burst of up to 64
/// connects resumes whole once a first wave has filled it. With 8, a
/// client running 50 connects at a time (the bench's burst) resumed 40%
/// of them (a session dropped whenever more than 8 tickets came in
/// before the next handshakes started) and spent 1,230 us of CPU a
/// connect instead of 730 (OpenSSL 3.0, against our acceptor).
pub(super) const KEPT: usize = 64;

/// The sessions a connector's context was given and has not used up,
/// newest last.
#[derive(Clone)]
pub(super) struct Sessions {
    kept: Arc<Mutex<VecDeque<SslSession>>>,
}

impl Sessions {
    /// Asks `builder`'s context to hand every new client session to the
    /// connector it returns, and to keep none in its own cache (which
    /// would grow with every connection until it is flushed).
    pub(super) fn install(builder: &mut SslContextBuilder) -> Sessions {
        let sessions = Sessions {
            kept: Arc::new(Mutex::new(VecDeque::with_capacity(KEPT))),
        };
        builder
            .set_session_cache_mode(SslSessionCacheMode::CLIENT | SslSessionCacheMode::NO_INTERNAL);
        let kept = sessions.clone();
        let given = given_index();
        builder.set_new_session_callback(move |ssl, session| {
            // Only a connection's first session: an OpenSSL server with
            // stateful tickets (trojan-gfw's default) sends two a
            // handshake and resumes only the first (see the tests).
            if let Some(given) = given {
                if ssl.ex_data(given).is_some() {
                    return;
                }
                ssl.set_ex_data(given, ());
            }
            // A copy: the connection's own session is marked bad if the
            // connection is dropped without its close_notify (a reset, an
            // aborted relay), which would spoil the kept one with it.
            let session = detached(&session).unwrap_or(session);
            let mut kept = kept.lock();
            if kept.len() == KEPT {
                kept.pop_front();
            }
            kept.push_back(session);
        });
        sessions
    }

    /// Offers the newest session kept, and forgets it, on a handshake not
    /// yet started. `ssl` must come from the context these sessions were
    /// installed on.
    pub(super) fn offer(&self, ssl: &mut SslRef) {
        let session = self.lock().pop_back();
        if let Some(session) = session {
            set_session(ssl, &session);
        }
    }

    /// The lock is never held across anything that can panic; a poisoned
    /// one still guards a well-formed list.
    fn lock(&self) -> MutexGuard<'_, VecDeque<SslSession>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The mark of a connection whose first session is kept, made once a
/// process; without one (OpenSSL could not make it), every session is kept.
fn given_index() -> Option<Index<Ssl, ()>> {
    static GIVEN: OnceLock<Option<Index<Ssl, ()>>> = OnceLock::new();
    *GIVEN.get_or_init(|| Ssl::new_ex_index().ok())
}

extern "C" {
    /// libssl's, since 1.1.1 (the openssl crate does not bind it): a new
    /// session with the same contents, certificates shared by reference.
    fn SSL_SESSION_dup(src: *const openssl_sys::SSL_SESSION) -> *mut openssl_sys::SSL_SESSION;
}

/// A session of its own with `session`'s contents, so that what OpenSSL
/// does to the connection's session later (marking it not resumable when
/// the connection is freed without a close_notify) leaves it alone; None
/// if OpenSSL could not allocate it.
#[allow(unsafe_code)]
fn detached(session: &SslSessionRef) -> Option<SslSession> {
    // SAFETY: `session.as_ptr()` is a live SSL_SESSION for the whole call
    // (`session` borrows it), which SSL_SESSION_dup only reads. What it
    // returns is null or a new session with one reference, ours, which
    // `from_ptr` takes over and frees when the `SslSession` is dropped.
    unsafe {
        let copy = SSL_SESSION_dup(session.as_ptr());
        (!copy.is_null()).then(|| SslSession::from_ptr(copy))
    }
}

/// `SSL_set_session`, which the openssl crate marks unsafe: OpenSSL
/// resumes a session only with the context that made it (its certificate
/// checks, ticket keys and session id context are that context's).
#[allow(unsafe_code)]
fn set_session(ssl: &mut SslRef, session: &SslSession) {
    // SAFETY: the only sessions a `Sessions` holds are those handed to the
    // new-session callback that `install` set on one context, and `offer`
    // is only called (by `TlsConnector::connect`) on an `Ssl` made from
    // that same context: the connector owns both, and neither is ever
    // replaced. OpenSSL takes its own reference to the session.
    let offered = unsafe { ssl.set_session(session) };
    // It fails only for a session of another protocol method, which a
    // client context never makes; the handshake is then a full one.
    drop(offered);
}
