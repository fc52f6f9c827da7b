//! The rustls configuration of a client connection: the system roots, the
//! system roots plus a CA bundle, or no verification; TLS 1.3 only, as QUIC
//! requires.

use std::io;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

/// How the server's certificate is checked.
#[derive(Clone, Debug)]
pub enum Verify {
    System,
    /// The system roots and every certificate of this PEM bundle.
    CustomCa(Vec<u8>),
    Insecure,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn invalid(text: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, text)
}

fn system_roots() -> RootCertStore {
    let mut roots = RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(found.certs);
    roots
}

/// The roots of `verify`; a CA bundle is parsed here, each time a
/// connection is dialed, with its three errors.
fn roots(pem: &[u8]) -> io::Result<RootCertStore> {
    let mut roots = system_roots();
    let mut added = 0;
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert =
            cert.map_err(|e| invalid(format!("hysteria2: could not read the CA file: {e}")))?;
        roots.add(cert).map_err(|e| {
            invalid(format!(
                "hysteria2: the CA file holds an unusable certificate: {e}"
            ))
        })?;
        added += 1;
    }
    if added == 0 {
        return Err(invalid(
            "hysteria2: the CA file contains no certificates".into(),
        ));
    }
    Ok(roots)
}

/// A client configuration offering `alpn`.
pub fn client_config(verify: &Verify, alpn: &[String]) -> io::Result<rustls::ClientConfig> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| io::Error::other(format!("hysteria2: {e}")))?;
    let mut config = match verify {
        Verify::System => builder
            .with_root_certificates(system_roots())
            .with_no_client_auth(),
        Verify::CustomCa(pem) => builder
            .with_root_certificates(roots(pem)?)
            .with_no_client_auth(),
        Verify::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider())))
            .with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|a| a.as_bytes().to_vec()).collect();
    Ok(config)
}

/// A server configuration with `cert_pem` and `key_pem`, offering `alpn`.
pub fn server_config(
    cert_pem: &[u8],
    key_pem: &[u8],
    alpn: &[String],
) -> io::Result<rustls::ServerConfig> {
    let certs = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("hysteria2: could not read the certificate: {e}")))?;
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| invalid(format!("hysteria2: could not read the private key: {e}")))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| io::Error::other(format!("hysteria2: {e}")))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            invalid(format!(
                "hysteria2: the certificate and key are unusable: {e}"
            ))
        })?;
    config.alpn_protocols = alpn.iter().map(|a| a.as_bytes().to_vec()).collect();
    Ok(config)
}

/// `Verify::Insecure`: any certificate, but the handshake's signature is
/// still checked, so the peer holds the key of what it showed.
#[derive(Debug)]
struct NoVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("tls 1.2 is not used by quic".into()))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_bundle_without_certificates_or_with_a_broken_one_is_refused() {
        let none = client_config(&Verify::CustomCa(b"just text\n".to_vec()), &[]).unwrap_err();
        assert_eq!(none.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(
            none.to_string(),
            "hysteria2: the CA file contains no certificates"
        );
        let broken = b"-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n";
        let err = client_config(&Verify::CustomCa(broken.to_vec()), &[]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("hysteria2: could not read the CA file: "),
            "{err}"
        );
        let junk = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let err = client_config(&Verify::CustomCa(junk.to_vec()), &[]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("hysteria2: the CA file holds an unusable certificate: "),
            "{err}"
        );
    }

    #[test]
    fn alpn_is_offered_as_given() {
        let config = client_config(&Verify::Insecure, &["h3".into()]).unwrap();
        assert_eq!(config.alpn_protocols, [b"h3".to_vec()]);
    }
}
