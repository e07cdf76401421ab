//! A probe's target read from its text: the config refuses a bad one where it is written,
//! the broker reads it again (it trusts no request). No name lookup: an IP address or
//! `localhost`, so that a try never blocks on a resolver.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum TargetError {
    #[error(
        "`{0}` is not a plain http:// URL; for https (or anything curl can check) use ready_exec = \"curl -fsS {0}\""
    )]
    NotHttp(String),
    #[error("`{0}` has no host; write it like http://127.0.0.1:8080/health")]
    NoHost(String),
    #[error("`{0}` is not a port (1 to 65535)")]
    BadPort(String),
    #[error(
        "host `{0}` is not an IP address or `localhost`; a probe connects without a name lookup"
    )]
    BadHost(String),
    #[error("`{0}` has a space or a control character in its path; write it percent-encoded (%20)")]
    BadPath(String),
}

/// Where an `http` probe sends its GET: the address, and the request target and `Host`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpTarget {
    /// The addresses tried in turn (see [`ips_of`]).
    pub ips: Vec<IpAddr>,
    pub port: u16,
    /// The `Host` header: the URL's authority as written.
    pub authority: String,
    /// The request target: the path and query, `/` when the URL has none.
    pub path: String,
}

/// Reads `http://HOST[:PORT][/PATH]`; HOST an IP address (`[::1]` for IPv6) or `localhost`.
pub fn http_target(url: &str) -> Result<HttpTarget, TargetError> {
    let Some(rest) = strip_prefix_ignore_case(url, "http://") else {
        return Err(TargetError::NotHttp(url.to_string()));
    };
    let (authority, path) = match rest.find(['/', '?', '#']) {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, "/"),
    };
    let path = path.split('#').next().unwrap_or("/");
    // The path goes into the request line as it is: a space or a line break would end it
    // and start headers of the URL's making.
    if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(TargetError::BadPath(url.to_string()));
    }
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else if path.is_empty() {
        "/".to_string()
    } else {
        path.to_string()
    };
    if authority.is_empty() {
        return Err(TargetError::NoHost(url.to_string()));
    }
    let (host, port) = split_host_port(authority)?;
    Ok(HttpTarget {
        ips: ips_of(host)?,
        port: port.unwrap_or(80),
        authority: authority.to_string(),
        path,
    })
}

/// Reads a `tcp` probe's `"HOST:PORT"` (or `"PORT"`, on 127.0.0.1): the host as written and
/// the port.
pub fn tcp_target(text: &str) -> Result<(String, u16), TargetError> {
    if let Ok(port) = text.parse::<u16>() {
        return valid_port(port, text).map(|p| (Ipv4Addr::LOCALHOST.to_string(), p));
    }
    let (host, port) = split_host_port(text)?;
    let Some(port) = port else {
        return Err(TargetError::BadPort(text.to_string()));
    };
    ips_of(host)?;
    Ok((host.to_string(), port))
}

/// The addresses a probe tries in turn: an IP address, or for `localhost` 127.0.0.1 then
/// ::1 (a server may listen on either; no name lookup).
pub fn ips_of(host: &str) -> Result<Vec<IpAddr>, TargetError> {
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(vec![
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        ]);
    }
    ip_of(host).map(|ip| vec![ip])
}

/// An IP address as written (`[::1]` too): what a probe connects to.
fn ip_of(host: &str) -> Result<IpAddr, TargetError> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse()
        .map_err(|_| TargetError::BadHost(host.to_string()))
}

fn split_host_port(authority: &str) -> Result<(&str, Option<u16>), TargetError> {
    // `[::1]:8080`, `[::1]`, `127.0.0.1:8080`, `localhost`.
    let colon = if authority.starts_with('[') {
        authority.find("]:").map(|at| at + 1)
    } else {
        authority.rfind(':')
    };
    let Some(colon) = colon else {
        return Ok((authority, None));
    };
    let (host, port) = (&authority[..colon], &authority[colon + 1..]);
    let parsed = port
        .parse::<u16>()
        .map_err(|_| TargetError::BadPort(port.to_string()))?;
    Ok((host, Some(valid_port(parsed, port)?)))
}

fn valid_port(port: u16, text: &str) -> Result<u16, TargetError> {
    if port == 0 {
        return Err(TargetError::BadPort(text.to_string()));
    }
    Ok(port)
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http_url_gives_address_host_and_path() {
        let t = http_target("http://127.0.0.1:8080/health?full=1").unwrap();
        assert_eq!(t.ips, [IpAddr::V4(Ipv4Addr::LOCALHOST)]);
        assert_eq!((t.port, t.authority.as_str()), (8080, "127.0.0.1:8080"));
        assert_eq!(t.path, "/health?full=1");
        let t = http_target("HTTP://localhost").unwrap();
        assert_eq!((t.port, t.path.as_str()), (80, "/"));
        let t = http_target("http://[::1]:9000").unwrap();
        assert_eq!((t.ips[0].to_string(), t.port), ("::1".into(), 9000));
    }

    #[test]
    fn https_names_and_bad_ports_are_refused_with_what_to_do() {
        let err = http_target("https://example.com/").unwrap_err();
        assert!(err.to_string().contains("ready_exec"), "{err}");
        assert!(matches!(
            http_target("http://example.com/"),
            Err(TargetError::BadHost(_))
        ));
        assert!(matches!(
            http_target("http://127.0.0.1:99999/"),
            Err(TargetError::BadPort(_))
        ));
        assert!(matches!(
            http_target("http:///x"),
            Err(TargetError::NoHost(_))
        ));
    }

    #[test]
    fn a_tcp_target_is_a_port_or_host_and_port() {
        assert_eq!(tcp_target("8080").unwrap(), ("127.0.0.1".into(), 8080));
        assert_eq!(
            tcp_target("10.0.0.2:5432").unwrap(),
            ("10.0.0.2".into(), 5432)
        );
        assert_eq!(tcp_target("[::1]:5432").unwrap(), ("[::1]".into(), 5432));
        assert!(tcp_target("0").is_err());
        assert!(tcp_target("db:5432").is_err());
        assert!(tcp_target("127.0.0.1").is_err());
    }

    #[test]
    fn localhost_is_tried_on_both_loopbacks_and_nothing_is_looked_up() {
        let both = [
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        ];
        assert_eq!(ips_of("localhost").unwrap(), both);
        assert_eq!(http_target("http://LocalHost:3000/").unwrap().ips, both);
        assert_eq!(ips_of("::1").unwrap(), [IpAddr::V6(Ipv6Addr::LOCALHOST)]);
        assert!(ips_of("example.com").is_err());
    }

    #[test]
    fn a_path_with_a_space_or_a_line_break_is_refused() {
        for url in [
            "http://127.0.0.1:8080/a b",
            "http://127.0.0.1:8080/health\r\nX-Injected: 1",
            "http://127.0.0.1:8080/?q=\t",
            "http://127.0.0.1:8080/\u{7f}",
        ] {
            assert!(
                matches!(http_target(url), Err(TargetError::BadPath(_))),
                "{url:?}"
            );
        }
        assert_eq!(
            http_target("http://127.0.0.1:8080/a%20b").unwrap().path,
            "/a%20b"
        );
    }
}
