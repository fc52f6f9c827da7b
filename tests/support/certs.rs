//! Throwaway certificates for the TLS tests, made at test time with the
//! `openssl` CLI in the test's scratch directory: a CA, leaves it signs
//! directly or through an intermediate, and a self-signed leaf nobody
//! trusts. Keys are P-256, generated in milliseconds; everything is valid
//! for two days. Nothing here is secret and nothing is committed.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What the leaves are issued for: the address every test dials, and the
/// name a client may send as SNI.
pub const SAN: &str = "IP:127.0.0.1,DNS:localhost";

/// A name no test dials, for a certificate that names another host.
pub const OTHER_NAME: &str = "other.etemenanki.test";

/// A certificate and its key, as PEM files.
pub struct Pair {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The certificates of one test, all under its scratch directory.
pub struct Pki {
    /// The test CA's certificate: what a client is told to trust.
    pub ca: PathBuf,
    /// Signed by the CA for [`SAN`]: the good server.
    pub server: Pair,
    /// Signed by the CA for [`OTHER_NAME`] only: trusted, but for another
    /// host.
    pub other_name: Pair,
    /// Self-signed for [`SAN`]: the right name, from no trusted issuer.
    pub untrusted: Pair,
    /// For [`SAN`], signed by an intermediate CA that the CA signed: its
    /// `cert` file holds the leaf and then the intermediate, so a client
    /// that trusts only the CA can verify it when the server sends both.
    pub chained: Pair,
}

impl Pki {
    /// Makes the CA and the three leaves in `dir` with `openssl`.
    pub fn make(openssl: &Path, dir: &Path) -> Pki {
        // A config of our own, so neither the host's openssl.cnf nor its
        // default extensions (v3_ca on every `req -x509`) shape the
        // certificates.
        let config = dir.join("openssl-test.cnf");
        std::fs::write(
            &config,
            "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = unused\n",
        )
        .expect("writing the openssl config");
        let openssl = Openssl {
            openssl,
            dir,
            config: &config,
        };
        let ca = openssl.req(
            "ca",
            "Etemenanki interop CA",
            None,
            &[
                "basicConstraints=critical,CA:TRUE",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
        );
        let leaf = |name: &str, cn: &str, san: &str, issuer: Option<&Pair>| {
            let san = format!("subjectAltName={san}");
            openssl.req(
                name,
                cn,
                issuer,
                &[
                    "basicConstraints=critical,CA:FALSE",
                    "extendedKeyUsage=serverAuth",
                    &san,
                ],
            )
        };
        let server = leaf("server", "localhost", SAN, Some(&ca));
        let other_name = leaf(
            "other-name",
            OTHER_NAME,
            &format!("DNS:{OTHER_NAME}"),
            Some(&ca),
        );
        let untrusted = leaf("untrusted", "localhost", SAN, None);
        let intermediate = openssl.req(
            "intermediate",
            "Etemenanki interop intermediate CA",
            Some(&ca),
            &[
                "basicConstraints=critical,CA:TRUE,pathlen:0",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
        );
        let leaf_only = leaf("chained-leaf", "localhost", SAN, Some(&intermediate));
        let chained = Pair {
            cert: dir.join("chained.pem"),
            key: leaf_only.key,
        };
        let mut chain = std::fs::read(&leaf_only.cert).expect("reading the leaf");
        chain.extend(std::fs::read(&intermediate.cert).expect("reading the intermediate"));
        std::fs::write(&chained.cert, chain).expect("writing the chain");
        Pki {
            ca: ca.cert,
            server,
            other_name,
            untrusted,
            chained,
        }
    }
}

struct Openssl<'a> {
    openssl: &'a Path,
    dir: &'a Path,
    config: &'a Path,
}

impl Openssl<'_> {
    /// `openssl req -x509`: a new key and a certificate for `cn` with
    /// `extensions`, signed by `issuer` or by itself. Written to
    /// `<name>.pem` and `<name>.key`.
    fn req(&self, name: &str, cn: &str, issuer: Option<&Pair>, extensions: &[&str]) -> Pair {
        let pair = Pair {
            cert: self.dir.join(format!("{name}.pem")),
            key: self.dir.join(format!("{name}.key")),
        };
        let mut command = Command::new(self.openssl);
        command
            .arg("req")
            .arg("-config")
            .arg(self.config)
            .args([
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
            ])
            .args(["-nodes", "-days", "2", "-subj", &format!("/CN={cn}")])
            .arg("-keyout")
            .arg(&pair.key)
            .arg("-out")
            .arg(&pair.cert);
        if let Some(issuer) = issuer {
            command
                .arg("-CA")
                .arg(&issuer.cert)
                .arg("-CAkey")
                .arg(&issuer.key);
        }
        for extension in extensions {
            command.args(["-addext", extension]);
        }
        let out = command.output().expect("running openssl req");
        assert!(
            out.status.success(),
            "openssl req for {name} failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        pair
    }
}
