//! Every diagnostic code, with the long explanation `etc explain CODE` prints.
//!
//! Each code has a fixture under `compiler/tests/fixtures/` named after it and
//! a snapshot under `snapshots/`.

pub struct Code {
    pub code: &'static str,
    pub title: &'static str,
    pub explanation: &'static str,
}

pub fn lookup(code: &str) -> Option<&'static Code> {
    ALL.iter().find(|c| c.code.eq_ignore_ascii_case(code))
}

pub const SYNTAX: &str = "E0001";
pub const UNKNOWN_KEY: &str = "E0002";
pub const WRONG_TYPE: &str = "E0003";
pub const MISSING_FIELD: &str = "E0004";
pub const DUPLICATE_KEY: &str = "E0005";
pub const EMPTY_TAG: &str = "E0101";
pub const DUPLICATE_TAG: &str = "E0102";
pub const UNKNOWN_TARGET: &str = "E0103";
pub const NO_OUTBOUNDS: &str = "E0104";
pub const RESERVED_TAG: &str = "E0105";
pub const BALANCER_COLLIDES: &str = "E0201";
pub const BALANCER_UNKNOWN_MEMBER: &str = "E0202";
pub const BALANCER_UNPROBEABLE: &str = "E0203";
pub const BALANCER_EMPTY: &str = "E0204";
pub const BALANCER_STRATEGY: &str = "E0205";
pub const UNKNOWN_PROTOCOL: &str = "E0301";
pub const NOT_APPLICABLE: &str = "E0302";
pub const MISSING_SETTING: &str = "E0303";
pub const INVALID_UUID: &str = "E0304";
pub const UNKNOWN_METHOD: &str = "E0305";
pub const INVALID_KEY: &str = "E0306";
pub const INVALID_ADDRESS: &str = "E0307";
pub const INVALID_PORT: &str = "E0308";
pub const INVALID_VALUE: &str = "E0309";
pub const TRANSPORT_MISMATCH: &str = "E0401";
pub const CA_FILE: &str = "E0402";
pub const TLS_FILE: &str = "E0403";
pub const LISTEN_CONFLICT: &str = "E0501";
pub const SECRET_UNREADABLE: &str = "E0601";
pub const INVALID_CIDR: &str = "E0701";
pub const UNKNOWN_CATEGORY: &str = "E0702";
pub const EMPTY_RULE: &str = "E0703";
pub const INVALID_DNS: &str = "E0801";
pub const SHADOWED_RULE: &str = "W0001";
pub const UNROUTED_OUTBOUND: &str = "W0002";
pub const UDP_TO_TCP_ONLY: &str = "W0003";
pub const MIXED_BALANCER: &str = "W0004";
pub const ZERO_PROBE_TIMEOUT: &str = "W0005";

pub const ALL: &[Code] = &[
    Code {
        code: SYNTAX,
        title: "syntax error",
        explanation: "The file does not parse. The span points at the first place the parser could not \
continue, and the message lists what it expected there. In .et files every statement starts with a \
keyword (inbound, outbound, balancer, route, dns, socket, limits, drain); in TOML files the usual TOML \
rules apply.",
    },
    Code {
        code: UNKNOWN_KEY,
        title: "unknown key",
        explanation: "A key that the table or block does not accept, usually a misspelling. Unknown keys are \
errors rather than being ignored, so a typo such as `probe_intervall` cannot silently leave a default in \
place. The message lists every key that is accepted.",
    },
    Code {
        code: WRONG_TYPE,
        title: "value of the wrong type",
        explanation: "A value whose type does not match the key: a string where an integer is expected \
(`probe_interval = \"30s\"` in TOML, where durations are whole seconds), a negative number for an \
unsigned field, or a number too large for the field.",
    },
    Code {
        code: MISSING_FIELD,
        title: "missing required key",
        explanation: "A required key is absent: every inbound needs tag, protocol and port; every outbound \
tag and protocol; every balancer tag and outbounds; every route rule an outbound.",
    },
    Code {
        code: DUPLICATE_KEY,
        title: "key given twice",
        explanation: "The same key is set twice in one block. Remove one of them.",
    },
    Code {
        code: EMPTY_TAG,
        title: "empty tag",
        explanation: "Tags name inbounds, outbounds and balancers so that routes can refer to them. An \
empty tag cannot be referred to, and the empty tag is reserved for the internal DNS target.",
    },
    Code {
        code: DUPLICATE_TAG,
        title: "duplicate tag",
        explanation: "Two outbounds, two inbounds or two balancers share a tag. Outbound and balancer tags \
share one namespace because a route may name either; inbound tags have their own.",
    },
    Code {
        code: UNKNOWN_TARGET,
        title: "route references an unknown tag",
        explanation: "[route].default or a rule names a tag that is neither an outbound nor a balancer. \
Fix the tag, or define the outbound or balancer it names.",
    },
    Code {
        code: NO_OUTBOUNDS,
        title: "no outbound",
        explanation: "A configuration needs at least one outbound: without one, no flow can leave and the \
route table has no default.",
    },
    Code {
        code: RESERVED_TAG,
        title: "reserved tag",
        explanation: "The tag `dns` names the internal DNS service as a route target (`port 53 -> dns` \
answers every client's plain DNS queries from the destinations resolver). No outbound or balancer may take \
it, or a route naming `dns` would be ambiguous. Give the outbound or balancer another tag.",
    },
    Code {
        code: BALANCER_COLLIDES,
        title: "balancer tag collides",
        explanation: "A balancer's tag repeats an outbound's tag or another balancer's. Routes refer to both \
by tag, so each tag must name exactly one thing. Give the balancer a unique name.",
    },
    Code {
        code: BALANCER_UNKNOWN_MEMBER,
        title: "balancer member is not an outbound",
        explanation: "A balancer lists a member that is misspelt, not defined, or is itself a balancer. \
Balancers do not nest: list only outbound tags.",
    },
    Code {
        code: BALANCER_UNPROBEABLE,
        title: "balancer member cannot be probed",
        explanation: "A balancer checks each member with a TCP connect to its server and port. freedom, \
blackhole and wireguard outbounds have no such upstream, and hysteria2 listens on UDP only, so a TCP \
probe would mark it down for ever. Remove the member and route to it directly instead.",
    },
    Code {
        code: BALANCER_EMPTY,
        title: "balancer without members",
        explanation: "A balancer needs at least one outbound to choose from.",
    },
    Code {
        code: BALANCER_STRATEGY,
        title: "unknown balancer strategy",
        explanation: "The strategy is matched exactly and case-sensitively: write failover (the first \
healthy member in order) or round_robin (each healthy member in turn).",
    },
    Code {
        code: UNKNOWN_PROTOCOL,
        title: "unknown protocol",
        explanation: "Inbounds speak socks, http, trojan, vless, vmess, shadowsocks, shadowsocks-2022 and \
hysteria2. Outbounds speak freedom, blackhole, socks, http, trojan, vless, vmess, shadowsocks, \
shadowsocks-2022, hysteria2 and wireguard.",
    },
    Code {
        code: NOT_APPLICABLE,
        title: "setting does not apply to this protocol",
        explanation: "The key exists, but not for this protocol: for example `id` on a trojan outbound, a \
stream transport on a freedom outbound, or a ws or grpc transport on a socks or http inbound (which \
serve over TCP, with or without TLS). Such a key would be silently ignored, so it is refused.",
    },
    Code {
        code: MISSING_SETTING,
        title: "required setting missing",
        explanation: "The protocol needs this setting: trojan a password, vless and vmess an id, shadowsocks \
a method and password, shadowsocks-2022 a method and psk, wireguard its keys, endpoint and addresses, and \
every proxy client a server and port.",
    },
    Code {
        code: INVALID_UUID,
        title: "invalid UUID",
        explanation: "VLESS and VMess user ids are UUIDs written as 32 hexadecimal digits in groups of \
8-4-4-4-12, such as 11111111-2222-3333-4444-555555555555.",
    },
    Code {
        code: UNKNOWN_METHOD,
        title: "unknown cipher or method",
        explanation: "Shadowsocks accepts aes-128-gcm, aes-256-gcm and chacha20-ietf-poly1305; \
Shadowsocks 2022 accepts 2022-blake3-aes-128-gcm, 2022-blake3-aes-256-gcm and \
2022-blake3-chacha20-poly1305; VMess security accepts aes-128-gcm, chacha20-poly1305, none, zero and auto.",
    },
    Code {
        code: INVALID_KEY,
        title: "invalid key",
        explanation: "Shadowsocks 2022 PSKs and WireGuard keys are base64 of a fixed number of bytes: 16 for \
2022-blake3-aes-128-gcm, 32 for the other 2022 methods and for every WireGuard key. Generate one with \
`openssl rand -base64 32` (or `wg genkey`).",
    },
    Code {
        code: INVALID_ADDRESS,
        title: "invalid address",
        explanation: "A listen address must be an IP address; a server a host name or IP address; a \
WireGuard endpoint host:port; a tunnel address an IP address.",
    },
    Code {
        code: INVALID_PORT,
        title: "invalid port",
        explanation: "Ports are integers from 1 to 65535; 0 is refused because it would pick a random port.",
    },
    Code {
        code: INVALID_VALUE,
        title: "invalid value",
        explanation: "The value has the right type but is not one the key accepts, such as an unknown \
address family, network or obfuscation type. The message lists the accepted values.",
    },
    Code {
        code: TRANSPORT_MISMATCH,
        title: "inconsistent transport",
        explanation: "TLS settings are present exactly when the transport uses TLS: network = \"tls\", or \
security = \"tls\" under ws or grpc. TLS settings without TLS, ws settings without network = \"ws\" and \
grpc settings without network = \"grpc\" would be ignored, so they are refused.",
    },
    Code {
        code: CA_FILE,
        title: "unusable CA file",
        explanation: "The ca_file of a TLS client must exist and hold at least one PEM certificate. It is read \
when the configuration is compiled, so a plan never depends on a file on the host.",
    },
    Code {
        code: TLS_FILE,
        title: "unusable certificate or key file",
        explanation: "A TLS server needs a readable PEM certificate chain and private key. Both are read \
when the configuration is compiled.",
    },
    Code {
        code: LISTEN_CONFLICT,
        title: "two inbounds on one address",
        explanation: "Two inbounds listen on the same address and port; the second could never bind. A \
wildcard address (0.0.0.0 or ::) conflicts with every address of its family on the same port.",
    },
    Code {
        code: SECRET_UNREADABLE,
        title: "secret reference cannot be read",
        explanation: "env(\"NAME\") reads an environment variable and file(\"path\") a file when the \
configuration is compiled. The variable must be set and the file readable; a trailing newline of a file \
is removed.",
    },
    Code {
        code: INVALID_CIDR,
        title: "invalid CIDR or port range",
        explanation: "A CIDR is an address and a prefix length, such as 10.0.0.0/8, with no host bits set \
below the prefix. A port range is two ports separated by a dash, the first not above the second.",
    },
    Code {
        code: UNKNOWN_CATEGORY,
        title: "unknown geoip or geosite category",
        explanation: "geoip and geosite rules name built-in categories. The list of known categories is in \
the message.",
    },
    Code {
        code: EMPTY_RULE,
        title: "empty rule",
        explanation: "A rule with an empty list of domains, CIDRs or ports can never match. Remove the rule \
or fill the list.",
    },
    Code {
        code: INVALID_DNS,
        title: "invalid DNS configuration",
        explanation: "[dns] holds either servers (one resolver for everything) or both pre_proxy and \
through_proxy (a split resolver), never a mix. Each server is an IP address with an optional port \
(53 by default).",
    },
    Code {
        code: SHADOWED_RULE,
        title: "rule can never match",
        explanation: "An earlier rule matches every flow this rule would, so this rule is dead. Move it \
above the rule that covers it, or remove it.",
    },
    Code {
        code: UNROUTED_OUTBOUND,
        title: "outbound nothing routes to",
        explanation: "No rule, default or balancer sends traffic to this outbound. It is still built, and \
its resolvers and connections cost resources.",
    },
    Code {
        code: UDP_TO_TCP_ONLY,
        title: "UDP routed to a TCP-only outbound",
        explanation: "http outbounds carry only TCP, so UDP packets routed to them are dropped. Route UDP \
elsewhere with a network = \"udp\" rule placed earlier.",
    },
    Code {
        code: MIXED_BALANCER,
        title: "balancer mixes UDP-capable and TCP-only members",
        explanation: "A balancer does not know which members carry UDP; a UDP flow handed to an http \
member is dropped. Balance only members that carry UDP, or route UDP elsewhere first.",
    },
    Code {
        code: ZERO_PROBE_TIMEOUT,
        title: "probe timeout of zero",
        explanation: "probe_timeout = 0 leaves a probe only until the next timer tick, so a member is marked \
down unless its connect completes almost at once. Use at least 1.",
    },
];
