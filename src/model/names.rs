//! Names checked once at the edge: peer hosts (host names and IP addresses) and port
//! (interface) names.

/// Whether `h` looks like a host name or an IP address (no spaces, URL parts or options).
pub(crate) fn valid_host(h: &str) -> bool {
    if h.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    // An IPv6 link-local address with its interface: fe80::1%eth0.
    if let Some((ip, dev)) = h.split_once('%') {
        return ip.parse::<std::net::Ipv6Addr>().is_ok()
            && !dev.is_empty()
            && dev.len() < 16
            && dev
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b));
    }
    !h.is_empty()
        && h.len() <= 253
        && !h.starts_with('-')
        && h.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// Whether `name` is a valid Linux interface name (1–15 bytes, no '/', no whitespace, not
/// "." or "..").
pub(crate) fn valid_ifname(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 15
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'/' && b != b':')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names() {
        assert!(valid_ifname("eth0"));
        assert!(valid_ifname("fm1-mac9"));
        assert!(!valid_ifname(""));
        assert!(!valid_ifname("a/b"));
        assert!(!valid_ifname("sixteen-chars-xx"));
        assert!(!valid_ifname("eth 0"));
    }
}
