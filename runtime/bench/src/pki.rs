//! Throwaway certificates for the TLS chains, made at bench time with the
//! `openssl` CLI in a scratch directory: a CA, and a leaf it signs for
//! 127.0.0.1, the address every chain dials. P-256 keys, valid for two
//! days; nothing here is secret and nothing is kept.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The openssl CLI, as Debian installs it.
const OPENSSL: &str = "/usr/bin/openssl";

/// The CA a client trusts, and the leaf a server presents.
pub struct Pki {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Why no certificate can be made here, if none can.
pub fn missing() -> Option<String> {
    (!Path::new(OPENSSL).is_file())
        .then(|| format!("openssl is not installed ({OPENSSL} is missing)"))
}

impl Pki {
    /// Makes the CA and the leaf in `dir`.
    pub fn make(dir: &Path) -> io::Result<Pki> {
        // A configuration of our own, so neither the host's openssl.cnf nor
        // its default extensions shape the certificates.
        let config = dir.join("openssl-bench.cnf");
        std::fs::write(
            &config,
            "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = unused\n",
        )?;
        let ca = dir.join("ca.pem");
        let ca_key = dir.join("ca-key.pem");
        let cert = dir.join("server.pem");
        let key = dir.join("server-key.pem");
        let csr = dir.join("server.csr");
        let ext = dir.join("server.ext");
        std::fs::write(
            &ext,
            "basicConstraints = critical,CA:FALSE\n\
             keyUsage = critical,digitalSignature\n\
             extendedKeyUsage = serverAuth\n\
             subjectAltName = IP:127.0.0.1\n",
        )?;
        let new_key = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ];
        openssl(
            Command::new(OPENSSL)
                .args(["req", "-x509", "-days", "2"])
                .args(new_key)
                .arg("-config")
                .arg(&config)
                .args(["-subj", "/CN=etemenanki-bench CA"])
                .args(["-addext", "basicConstraints=critical,CA:TRUE"])
                .args(["-addext", "keyUsage=critical,keyCertSign,cRLSign"])
                .arg("-keyout")
                .arg(&ca_key)
                .arg("-out")
                .arg(&ca),
        )?;
        openssl(
            Command::new(OPENSSL)
                .arg("req")
                .args(new_key)
                .arg("-config")
                .arg(&config)
                .args(["-subj", "/CN=127.0.0.1"])
                .arg("-keyout")
                .arg(&key)
                .arg("-out")
                .arg(&csr),
        )?;
        openssl(
            Command::new(OPENSSL)
                .args(["x509", "-req", "-days", "2", "-set_serial", "1"])
                .arg("-in")
                .arg(&csr)
                .arg("-CA")
                .arg(&ca)
                .arg("-CAkey")
                .arg(&ca_key)
                .arg("-extfile")
                .arg(&ext)
                .arg("-out")
                .arg(&cert),
        )?;
        Ok(Pki { ca, cert, key })
    }
}

fn openssl(command: &mut Command) -> io::Result<()> {
    let out = command.output()?;
    if out.status.success() {
        return Ok(());
    }
    Err(io::Error::other(format!(
        "openssl failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}
