//! `etc run CONFIG`: a source configuration compiled and served.

#[allow(dead_code)]
mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;

use support::*;

#[test]
fn etc_run_serves_a_compiled_configuration() {
    let etc = etc_binary();
    let web = http_server("served from a compiled config");
    let (socks, http) = (free_port(), free_port());
    let config = std::env::temp_dir().join(format!("etemenanki-run-etc-{}.et", std::process::id()));
    std::fs::write(
        &config,
        format!(
            "inbound socks-in socks {{ listen = 127.0.0.1:{socks}  udp = true }}
inbound http-in http {{ listen = 127.0.0.1:{http} }}

outbound direct freedom {{}}
outbound block blackhole {{}}

route {{
  cidr 10.0.0.0/8 -> block
  default -> direct
}}
"
        ),
    )
    .unwrap();
    let mut child = Command::new(&etc)
        .arg("run")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait (bounded) until both inbounds listen.
    let (lines, seen) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut listening = 0;
    while listening < 2 {
        let line = seen
            .recv_timeout(WAIT)
            .expect("etc run never listened on both inbounds");
        if line.contains("listening on") {
            listening += 1;
        }
    }
    let url = format!("http://127.0.0.1:{}/", web.port());
    for proxy in [
        format!("socks5h://127.0.0.1:{socks}"),
        format!("http://127.0.0.1:{http}"),
    ] {
        let out = Command::new("curl")
            .args(["-sS", "--max-time", "10", "--proxy", &proxy, &url])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "served from a compiled config",
            "{proxy}"
        );
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_file(&config);
}
