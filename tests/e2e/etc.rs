//! `etc run CONFIG`: a source configuration compiled and served.

use std::process::Command;

use crate::support::binaries::ours;
use crate::support::process::{scratch_dir, Process};
use crate::support::servers::{free_port, http_origin};

#[test]
fn etc_run_serves_a_compiled_configuration() {
    let web = http_origin(b"served from a compiled config");
    // `etc` refuses port 0 in a configuration (E0308), so this one names
    // ports probed free; the runtime's log still says where each inbound
    // listens.
    let (socks, http) = (free_port(), free_port());
    let dir = scratch_dir("etc_run_serves_a_compiled_configuration");
    let config = dir.join("config.et");
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
    let mut command = Command::new(ours("etc"));
    command.arg("run").arg(&config);
    let etc_run = Process::spawn("etc-run", command, &dir);
    let url = format!("http://127.0.0.1:{}/", web.port());
    for proxy in [
        format!("socks5h://{}", etc_run.listening("socks-in")),
        format!("http://{}", etc_run.listening("http-in")),
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
}
