use super::*;

fn errors(text: &str) -> Vec<Diagnostic> {
    parse(text).expect_err("the text should not parse")
}

#[test]
fn scratch() {
    for t in [
        "outbond x freedom {}",
        "inbound a socks { listen = 127.0.0.1:1080 udp = true }\noutbound d freedom {}\nbalancer p failover [a, b] { probe_interval = \"30s\" probe_intervall = 5s }",
        "route { cidr 10.0.0.0/8, fd00::/8 -> direct\n port 53, 1000-2000 and network udp -> dns\n default -> proxy }",
        "drain = close after 30s",
        "inbound a socks { listen = 127.0.0.1:1080",
        "inbound a socks { listen: 1 }",
        "}",
        "inbound a socks { password = \"abc }",
        "dns { servers = [1.1.1.1, 8.8.8.8:53, [::1]:53, 2606:4700::1111] }",
        "balancer p [a b]",
        "route { cidr 10.0.0.0/8 direct }",
    ] {
        match parse(t) {
            Ok(c) => println!("{t}\n  OK {c:?}"),
            Err(e) => {
                for d in e {
                    println!("{t}\n  ERR {} {:?} {:?} help={:?}", d.code, d.span, d.message, d.help);
                }
            }
        }
    }
    let _ = errors;
}
